package store

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLayouts(t *testing.T) {
	db := open(t)
	created := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	a := Layout{Name: "gpu-bond", JSON: `{"interfaces": []}`, Comment: "GPU nodes", Created: created}
	b := Layout{Name: "boot-only", JSON: `{}`, Created: created}
	if err := write(t, db, 5, func(tx *Tx) error {
		if err := tx.PutLayout(a); err != nil {
			return err
		}
		return tx.PutLayout(b)
	}); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *Tx) error {
		got, err := tx.Layout("gpu-bond")
		a.Index = 5
		if err != nil || !cmp.Equal(got, a) {
			t.Errorf("Layout = %+v, %v; want %+v", got, err, a)
		}
		all, _ := tx.Layouts()
		if len(all) != 2 || all[0].Name != "boot-only" || all[1].Name != "gpu-bond" {
			t.Errorf("Layouts = %+v, want both by name", all)
		}
		if tx.TableIndex(TableLayouts) != 5 {
			t.Errorf("table index %d, want 5", tx.TableIndex(TableLayouts))
		}
		ch, _ := tx.Changes(0, 10)
		if len(ch) != 2 || ch[0].Table != TableLayouts || ch[0].Key != "gpu-bond" || ch[0].Op != OpPut {
			t.Errorf("changes %+v", ch)
		}
		return nil
	})
	if err := write(t, db, 6, func(tx *Tx) error { return tx.DeleteLayout("gpu-bond") }); err != nil {
		t.Fatal(err)
	}
	err := write(t, db, 7, func(tx *Tx) error { return tx.DeleteLayout("gpu-bond") })
	if !errors.Is(err, ErrNotFound) || Public(err) != `layout "gpu-bond": not found` {
		t.Errorf("deleting a missing layout: %v (public %q)", err, Public(err))
	}
}
