package raftfsm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/pgexport/pgtest"
)

func at(id string, l raftfsm.Location) raftfsm.MachineLocation {
	return raftfsm.MachineLocation{ID: id, Location: l}
}

func place(ms ...raftfsm.MachineLocation) *raftfsm.LocationSet {
	return &raftfsm.LocationSet{Machines: ms, Now: t0}
}

// Machines of the fleet placed as the spec's examples place them: racks
// made on first use, machines standing where their rack stands, the units
// of one rack taken once.
func TestLocationSet(t *testing.T) {
	a, b, c, gpu := pgtest.ID(0), pgtest.ID(1), pgtest.ID(3), pgtest.ID(2) // 2 is an XE9680: 6U
	setup := func(t *testing.T) *fsmtest.Log {
		l := fsmtest.Open(t)
		commissionFleet(t, l, 4)
		// rollcall location m-… -building DC1 -room "Hall A" -rack R12 -unit 24 -asset A-0042
		l.Must(t, place(
			at(a, raftfsm.Location{Building: "DC1", Room: "Hall A", Rack: "R12", Unit: 24, AssetTag: "A-0042"}),
			at(gpu, raftfsm.Location{Rack: "R12", Unit: 30, Height: 6}),
		))
		return l
	}
	t.Run("placed", func(t *testing.T) {
		l := setup(t)
		r := view(t, l, func(tx *store.Tx) (store.Rack, error) { return tx.Rack("R12") })
		if r.Height != store.DefaultRackHeight || r.Building != "DC1" || r.Room != "Hall A" || !r.Created.Equal(t0) {
			t.Errorf("rack made on first use: %+v", r)
		}
		want := store.Location{Building: "DC1", Room: "Hall A", Rack: "R12", Unit: 30, Height: 6}
		if got := machineOf(t, l, gpu).Location; got != want {
			t.Errorf("the GPU node stands at %+v, want %+v (its building and room the rack's)", got, want)
		}
		ms := view(t, l, func(tx *store.Tx) ([]store.Machine, error) { return tx.MachinesInRack("R12") })
		if len(ms) != 2 || ms[0].ID != a || ms[1].ID != gpu {
			t.Errorf("in R12: %v", ms)
		}
	})
	for name, cmd := range map[string]*raftfsm.LocationSet{
		"next to":          place(at(b, raftfsm.Location{Rack: "R12", Unit: 25}), at(c, raftfsm.Location{Rack: "R12", Unit: 29})),
		"a 2U below":       place(at(b, raftfsm.Location{Rack: "R12", Unit: 22, Height: 2})),
		"swapped":          place(at(a, raftfsm.Location{Rack: "R12", Unit: 36}), at(gpu, raftfsm.Location{Rack: "R12", Unit: 24, Height: 6})),
		"the top unit":     place(at(b, raftfsm.Location{Rack: "R12", Unit: 42})),
		"no unit yet":      place(at(b, raftfsm.Location{Rack: "R12"}), at(c, raftfsm.Location{Rack: "R12"})),
		"another building": place(at(b, raftfsm.Location{Building: "DC2", Room: "Hall B", Rack: "R1", Unit: 24})),
		"cleared":          place(at(a, raftfsm.Location{})),
		"the same place":   place(at(a, raftfsm.Location{Building: "DC1", Room: "Hall A", Rack: "R12", Unit: 24, AssetTag: "A-0042"})),
	} {
		t.Run(name, func(t *testing.T) {
			if err := setup(t).Apply(cmd); err != nil {
				t.Error(err)
			}
		})
	}
	for name, c2 := range map[string]struct {
		cmd  *raftfsm.LocationSet
		kind error
		want string
	}{
		"one unit twice":    {place(at(b, raftfsm.Location{Rack: "R12", Unit: 24})), store.ErrConflict, "m-000000000001 at U24 and m-000000000002 at U24 in rack R12 share a unit (give each machine its height: a 2U server takes two units)"},
		"into the 6U":       {place(at(b, raftfsm.Location{Rack: "R12", Unit: 33})), store.ErrConflict, "m-000000000003 at U30-35 and m-000000000002 at U33 in rack R12 share a unit"},
		"a 2U onto a 1U":    {place(at(b, raftfsm.Location{Rack: "R12", Unit: 23, Height: 2})), store.ErrConflict, "m-000000000002 at U23-24 and m-000000000001 at U24"},
		"two in one go":     {place(at(b, raftfsm.Location{Rack: "R7", Unit: 3}), at(c, raftfsm.Location{Rack: "R7", Unit: 3})), store.ErrConflict, "in rack R7 share a unit"},
		"past the top":      {place(at(b, raftfsm.Location{Rack: "R12", Unit: 42, Height: 2}), at(c, raftfsm.Location{Rack: "R12", Unit: 40})), store.ErrInvalid, "m-000000000002 at U42-43 in rack R12 goes past its 42U"},
		"unit, no rack":     {place(at(b, raftfsm.Location{Unit: 3})), store.ErrInvalid, "machine m-000000000002: unit 3 needs a rack"},
		"wrong building":    {place(at(b, raftfsm.Location{Building: "DC2", Rack: "R12", Unit: 1})), store.ErrConflict, `machine m-000000000002: rack R12 stands in building "DC1", not "DC2" (move the rack with rollcall location rack R12 -building …)`},
		"wrong room":        {place(at(b, raftfsm.Location{Room: "Hall B", Rack: "R12"})), store.ErrConflict, `rack R12 stands in room "Hall A", not "Hall B"`},
		"bad rack name":     {place(at(b, raftfsm.Location{Rack: "R 12"})), store.ErrInvalid, `rack name "R 12"`},
		"unknown machine":   {place(at("m-0000000000ff", raftfsm.Location{Rack: "R1"})), store.ErrNotFound, `machine "m-0000000000ff": not found`},
		"a machine twice":   {place(at(b, raftfsm.Location{Rack: "R1"}), at(b, raftfsm.Location{Rack: "R2"})), store.ErrInvalid, "is named twice"},
		"nothing":           {place(), store.ErrInvalid, "name the machines to place"},
		"new rack, 2 halls": {place(at(b, raftfsm.Location{Building: "DC3", Room: "A", Rack: "R9"}), at(c, raftfsm.Location{Building: "DC3", Room: "B", Rack: "R9"})), store.ErrConflict, `rack R9 stands in room "A", not "B"`},
	} {
		t.Run(name, func(t *testing.T) {
			l := setup(t)
			idx := l.Index
			err := l.Apply(c2.cmd)
			if !errors.Is(err, c2.kind) || !strings.Contains(store.Public(err), c2.want) {
				t.Errorf("%v, want %v saying %q", err, c2.kind, c2.want)
			}
			for _, id := range []string{a, b, c, gpu} {
				if m := machineOf(t, l, id); m.Index > idx {
					t.Errorf("a refused command wrote %s", id)
				}
			}
			if racks := view(t, l, func(tx *store.Tx) ([]store.Rack, error) { return tx.Racks() }); len(racks) != 1 {
				t.Errorf("a refused command left racks %v", racks)
			}
		})
	}
}

func TestRacks(t *testing.T) {
	l := fsmtest.Open(t)
	commissionFleet(t, l, 3)
	a, gpu := pgtest.ID(0), pgtest.ID(2)
	// rollcall location rack R12 -building DC1 -room "Hall A" -height 48
	l.Must(t,
		&raftfsm.RackPut{Rack: raftfsm.Rack{Name: "R12", Building: "DC1", Room: "Hall A", Height: 48}, Now: t0},
		place(at(a, raftfsm.Location{Rack: "R12", Unit: 1}), at(gpu, raftfsm.Location{Rack: "R12", Unit: 40, Height: 6})),
	)
	if m := machineOf(t, l, gpu); m.Location.Building != "DC1" || m.Location.Top() != 45 {
		t.Errorf("gpu at %+v", m.Location)
	}
	err := l.Apply(&raftfsm.RackPut{Rack: raftfsm.Rack{Name: "R12", Building: "DC1", Room: "Hall A", Height: 42}, Now: t0})
	if !errors.Is(err, store.ErrConflict) || !strings.HasPrefix(store.Public(err), "rack R12 holds machines up to U45: it cannot be 42U (m-000000000003 at U40-45 in rack R12 goes past its 42U)") {
		t.Errorf("shrunk below a machine: %v", err)
	}
	// Down to the top machine, and moved to another hall: its machines go
	// with it.
	l.Must(t, &raftfsm.RackPut{Rack: raftfsm.Rack{Name: "R12", Building: "DC1", Room: "Hall B", Height: 45}, Now: t0.Add(1)})
	r := view(t, l, func(tx *store.Tx) (store.Rack, error) { return tx.Rack("R12") })
	if r.Height != 45 || r.Room != "Hall B" || !r.Created.Equal(t0) {
		t.Errorf("rack = %+v", r)
	}
	for _, id := range []string{a, gpu} {
		if m := machineOf(t, l, id); m.Location.Room != "Hall B" || !m.UpdatedAt.Equal(t0.Add(1)) {
			t.Errorf("%s stands in %+v", id, m.Location)
		}
	}
	for name, c := range map[string]struct {
		cmd  raftfsm.Command
		kind error
		want string
	}{
		"no height":    {&raftfsm.RackPut{Rack: raftfsm.Rack{Name: "R1"}}, store.ErrInvalid, "rack R1: height 0 is not between 1 and 100 units"},
		"too tall":     {&raftfsm.RackPut{Rack: raftfsm.Rack{Name: "R1", Height: 101}}, store.ErrInvalid, "height 101"},
		"bad name":     {&raftfsm.RackPut{Rack: raftfsm.Rack{Name: "R/1", Height: 42}}, store.ErrInvalid, `rack name "R/1"`},
		"not empty":    {&raftfsm.RackDelete{Name: "R12"}, store.ErrConflict, "rack R12 holds m-000000000001, m-000000000003: move them first"},
		"delete none":  {&raftfsm.RackDelete{Name: "R99"}, store.ErrNotFound, `rack "R99": not found`},
		"bad building": {&raftfsm.RackPut{Rack: raftfsm.Rack{Name: "R1", Building: "DC1\n", Height: 42}}, store.ErrInvalid, "building"},
	} {
		if err := l.Apply(c.cmd); !errors.Is(err, c.kind) || !strings.Contains(store.Public(err), c.want) {
			t.Errorf("%s: %v, want %v saying %q", name, err, c.kind, c.want)
		}
	}
	l.Must(t, place(at(a, raftfsm.Location{}), at(gpu, raftfsm.Location{Rack: "R13"})), &raftfsm.RackDelete{Name: "R12"})
	racks := view(t, l, func(tx *store.Tx) ([]store.Rack, error) { return tx.Racks() })
	if d := cmp.Diff([]string{"R13"}, rackNames(racks)); d != "" {
		t.Errorf("racks: %s", d)
	}
}

func rackNames(rs []store.Rack) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}
