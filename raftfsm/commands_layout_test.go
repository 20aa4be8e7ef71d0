package raftfsm_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
)

const bootOnly = `{"interfaces": [{"type": "physical", "select": "boot", "links": [{"subnet": "boot", "mode": "auto"}]}]}`

// TestLayoutCommands: a layout is checked by ipam/layout before it is
// written, add refuses an existing name, set keeps the day it was added,
// and delete removes it.
func TestLayoutCommands(t *testing.T) {
	l := fsmtest.Open(t)
	put := func(name, doc, comment string, replace bool, at int) error {
		return l.Apply(&raftfsm.LayoutPut{Layout: raftfsm.Layout{Name: name, JSON: doc, Comment: comment, Created: t0.Add(time.Duration(at) * time.Hour)}, Replace: replace})
	}
	if err := put("gpu-bond", bootOnly, "GPU nodes", false, 0); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		err     error
		replace bool
		layout  string
		doc     string
		comment string
		says    string
	}{
		"add an existing name":         {store.ErrConflict, false, "gpu-bond", bootOnly, "", "layout gpu-bond exists already (rollcall layout set replaces it)"},
		"set a missing layout":         {store.ErrNotFound, true, "storage", bootOnly, "", `layout "storage": not found`},
		"a layout that does not parse": {store.ErrInvalid, false, "bad", `{"interfaces": [{"type": "bridge"}]}`, "", `type "bridge" is not one of physical, bond, vlan`},
		"an unknown field":             {store.ErrInvalid, false, "bad", `{"interfaces": [], "bonds": {}}`, "", `unknown field "bonds"`},
		"a bad name":                   {store.ErrInvalid, false, "GPU Bond", bootOnly, "", `layout name "GPU Bond" must be lowercase`},
		"a comment of two lines":       {store.ErrInvalid, false, "two", bootOnly, "a\nb", "the comment must be one line of printable text"},
	} {
		t.Run(name, func(t *testing.T) {
			err := put(c.layout, c.doc, c.comment, c.replace, 1)
			if !errors.Is(err, c.err) || !strings.Contains(store.Public(err), c.says) {
				t.Errorf("got %v (public %q), want %v saying %q", err, store.Public(err), c.err, c.says)
			}
		})
	}
	if err := put("gpu-bond", exampleish, "GPU nodes, bonded", true, 2); err != nil {
		t.Fatal(err)
	}
	l.DB.View(func(tx *store.Tx) error {
		got, err := tx.Layout("gpu-bond")
		if err != nil || got.JSON != exampleish || got.Comment != "GPU nodes, bonded" || !got.Created.Equal(t0) {
			t.Errorf("after set: %+v, %v; want the new JSON and comment, created %v", got, err, t0)
		}
		if all, _ := tx.Layouts(); len(all) != 1 {
			t.Errorf("layouts %+v: refused commands wrote", all)
		}
		return nil
	})
	// A tag that names the layout holds it.
	if err := l.Apply(&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "gpu", Layout: "gpu-bond"}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	before := l.Index
	if err := l.Apply(&raftfsm.LayoutDelete{Name: "gpu-bond"}); !errors.Is(err, store.ErrConflict) || !strings.Contains(store.Public(err), "tag gpu") {
		t.Errorf("deleting a layout tag gpu uses: %v, want a conflict naming the tag", err)
	}
	l.DB.View(func(tx *store.Tx) error {
		if _, err := tx.Layout("gpu-bond"); err != nil {
			t.Errorf("the refused delete removed the layout (index %d): %v", before, err)
		}
		return nil
	})
	if err := l.Apply(&raftfsm.TagDelete{Name: "gpu", Now: t0}); err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(&raftfsm.LayoutDelete{Name: "gpu-bond"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(&raftfsm.LayoutDelete{Name: "gpu-bond"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting it again: %v, want not found", err)
	}
	if err := l.Apply(&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "gpu", Layout: "gpu-bond"}, Now: t0}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a tag naming a layout that is gone: %v, want invalid", err)
	}
}

const exampleish = `{"interfaces": [
  {"type": "physical", "select": "boot", "links": [{"subnet": "boot", "mode": "auto", "default_gateway": true}]},
  {"type": "bond", "name": "bond0", "members": ["fastest:2"], "mtu": 9000, "links": [{"mode": "link_up"}]},
  {"type": "vlan", "parent": "bond0", "vid": 200, "links": [{"subnet": "10.60.0.0/24", "mode": "auto"}]}
]}`
