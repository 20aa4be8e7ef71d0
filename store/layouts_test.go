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

// A machine's own layout is indexed (LayoutDelete asks who uses one); the
// index bucket is made by the first machine given a layout.
func TestMachinesByLayout(t *testing.T) {
	db := open(t)
	a := Machine{ID: "m-00000000000a", State: StateNew}
	b := Machine{ID: "m-00000000000b", State: StateNew, Layout: "gpu-bond"}
	if err := write(t, db, 1, func(tx *Tx) error { return tx.PutMachine(a) }); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *Tx) error {
		if tx.tx.Bucket(bucketMachineByLayout) != nil {
			t.Error("layout index made before any machine has a layout")
		}
		if ids := tx.MachineIDsByLayout("gpu-bond"); ids != nil {
			t.Errorf("MachineIDsByLayout = %v", ids)
		}
		return nil
	})
	a.Layout = "gpu-bond"
	if err := write(t, db, 2, func(tx *Tx) error {
		if err := tx.PutMachine(a); err != nil {
			return err
		}
		return tx.PutMachine(b)
	}); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *Tx) error {
		if d := cmp.Diff([]string{a.ID, b.ID}, tx.MachineIDsByLayout("gpu-bond")); d != "" {
			t.Errorf("by layout: %s", d)
		}
		return nil
	})
	a.Layout = "other"
	if err := write(t, db, 3, func(tx *Tx) error {
		if err := tx.PutMachine(a); err != nil {
			return err
		}
		return tx.DeleteMachine(b.ID)
	}); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *Tx) error {
		if ids := tx.MachineIDsByLayout("gpu-bond"); ids != nil {
			t.Errorf("after a change and a delete, by layout gpu-bond = %v", ids)
		}
		if d := cmp.Diff([]string{a.ID}, tx.MachineIDsByLayout("other")); d != "" {
			t.Errorf("by layout other: %s", d)
		}
		return nil
	})
}
