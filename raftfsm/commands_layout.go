package raftfsm

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rollcall/rollcall/ipam/layout"
	"github.com/rollcall/rollcall/store"
)

// Interface layout commands. A layout is checked by ipam/layout's parser
// here, against nothing but itself: whether it fits a machine is a
// question of that machine's inventory and the network model at the time
// it is resolved (rollcall net show, deployment), not of the day it was
// saved. The parser's rules are part of what Apply does, as ipam's are:
// loosening one is safe, tightening one would refuse, on replay, a layout
// an older node accepted, so a tighter rule comes with a new body version.

// LayoutPut adds an interface layout, or replaces one when Replace is set
// (it keeps the day it was first added).
type LayoutPut struct {
	Layout  Layout `json:"layout"`
	Replace bool   `json:"replace,omitempty"`
}

// LayoutDelete removes a layout no machine or tag uses.
type LayoutDelete struct {
	Name string `json:"name"`
}

func (*LayoutPut) Type() Type        { return TypeLayoutPut }
func (*LayoutDelete) Type() Type     { return TypeLayoutDelete }
func (*LayoutPut) Version() uint8    { return 1 }
func (*LayoutDelete) Version() uint8 { return 1 }

// maxLayoutComment bounds a layout's comment: a line or two for a list.
const maxLayoutComment = 1024

func (c *LayoutPut) apply(tx *store.Tx) error {
	l := c.Layout.record()
	if err := layout.CheckName(l.Name); err != nil {
		return err
	}
	if _, err := layout.Parse([]byte(l.JSON)); err != nil {
		return err
	}
	if len(l.Comment) > maxLayoutComment || !utf8.ValidString(l.Comment) ||
		strings.IndexFunc(l.Comment, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) >= 0 {
		return store.Errorf(store.ErrInvalid, "layout %s: the comment must be one line of printable text, at most %d bytes", l.Name, maxLayoutComment)
	}
	old, err := tx.Layout(l.Name)
	switch {
	case err == nil && !c.Replace:
		return store.Errorf(store.ErrConflict, "layout %s exists already (rollcall layout set replaces it)", l.Name)
	case err == nil:
		l.Created = old.Created
	case !errors.Is(err, store.ErrNotFound) || c.Replace:
		return err
	}
	return tx.PutLayout(l)
}

func (c *LayoutDelete) apply(tx *store.Tx) error {
	if _, err := tx.Layout(c.Name); err != nil {
		return err
	}
	if user, err := layoutUser(tx, c.Name); err != nil {
		return err
	} else if user != "" {
		return store.Errorf(store.ErrConflict, "layout %s is used by %s; give it another layout first", c.Name, user)
	}
	return tx.DeleteLayout(c.Name)
}

// layoutUser names the first machine (by ID) or tag (by name) that uses a
// layout, or "": LayoutDelete then refuses, and the API's precheck, which
// runs this apply, answers before a Raft entry is taken. Machines are
// found through their layout index, not by reading the fleet.
func layoutUser(tx *store.Tx, name string) (string, error) {
	if ids := tx.MachineIDsByLayout(name); len(ids) > 0 {
		who := "machine " + ids[0]
		if len(ids) > 1 {
			who += fmt.Sprintf(" and %d other machines", len(ids)-1)
		}
		return who, nil
	}
	tags, err := tx.Tags()
	if err != nil {
		return "", err
	}
	for _, t := range tags {
		if t.Layout == name {
			return "tag " + t.Name, nil
		}
	}
	return "", nil
}

func layoutCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeLayoutPut:    {"layout-put", 1, func() Command { return &LayoutPut{} }},
		TypeLayoutDelete: {"layout-delete", 1, func() Command { return &LayoutDelete{} }},
	}
}
