package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckLocation(t *testing.T) {
	for _, l := range []Location{
		{},
		{Building: "DC1", Room: "Hall A", Rack: "R12", Unit: 24, Height: 2, AssetTag: "A-0042"},
		{Building: "Zürich Süd", Rack: "hall-b.r7"},
		{Rack: "R1", Height: 4}, // in the rack, unit not known yet
	} {
		if err := CheckLocation(l); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
	for name, c := range map[string]struct {
		l    Location
		want string
	}{
		"unit without rack": {Location{Unit: 3}, "unit 3 needs a rack"},
		"negative unit":     {Location{Rack: "R1", Unit: -1}, "unit -1 is not between 1 and 100"},
		"huge height":       {Location{Rack: "R1", Height: 101}, "height 101"},
		"rack with a space": {Location{Rack: "R 12"}, `rack name "R 12"`},
		"rack with a slash": {Location{Rack: "a/b"}, `rack name "a/b"`},
		"long building":     {Location{Building: strings.Repeat("b", 65)}, "at most 64 bytes"},
		"padded room":       {Location{Room: " Hall A"}, "leading or trailing spaces"},
		"control character": {Location{AssetTag: "A\x00"}, "control character"},
		"bad utf-8":         {Location{Building: "\xff"}, "UTF-8"},
	} {
		err := CheckLocation(c.l)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(Public(err), c.want) {
			t.Errorf("%s: %v, want invalid saying %q", name, err, c.want)
		}
	}
}

// Racks from the fleet simulator's shapes: 1U servers, 2U storage boxes
// and 4U/6U GPU nodes (an XE9680 is 6U).
func TestCheckRack(t *testing.T) {
	for name, c := range map[string]struct {
		height int
		slots  []Slot
		want   string // "" when they fit
	}{
		"empty":          {42, nil, ""},
		"stacked":        {42, []Slot{{"m-a", 1, 1}, {"m-b", 2, 2}, {"m-c", 4, 6}, {"m-d", 10, 0}}, ""},
		"top unit":       {42, []Slot{{"m-a", 41, 2}}, ""},
		"no unit":        {42, []Slot{{"m-a", 0, 2}, {"m-b", 0, 2}}, ""},
		"one unit twice": {42, []Slot{{"m-a", 24, 0}, {"m-b", 24, 1}}, "m-a at U24 and m-b at U24 in rack R12 share a unit (give each machine its height"},
		"2U over 1U":     {42, []Slot{{"m-b", 25, 1}, {"m-a", 24, 2}}, "m-a at U24-25 and m-b at U25 in rack R12 share a unit"},
		"inside a tall":  {42, []Slot{{"m-gpu", 10, 6}, {"m-x", 12, 1}, {"m-y", 13, 1}}, "m-gpu at U10-15 and m-x at U12"},
		"reach past one": {42, []Slot{{"m-gpu", 10, 6}, {"m-x", 11, 1}, {"m-y", 14, 1}}, "m-gpu at U10-15 and m-x at U11"},
		"over the top":   {42, []Slot{{"m-a", 42, 2}}, "m-a at U42-43 in rack R12 goes past its 42U"},
		"short rack":     {12, []Slot{{"m-a", 1, 1}, {"m-gpu", 8, 6}}, "m-gpu at U8-13 in rack R12 goes past its 12U"},
	} {
		err := CheckRack("R12", c.height, c.slots)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case c.want != "" && (err == nil || !strings.Contains(Public(err), c.want)):
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

func TestRacksAndTheRackIndex(t *testing.T) {
	db := open(t)
	r := Rack{Name: "R12", Building: "DC1", Room: "Hall A", Height: 48, Created: t0}
	a := Machine{ID: "m-00000000000a", State: StateReady, Location: Location{Building: "DC1", Room: "Hall A", Rack: "R12", Unit: 1, Height: 2}}
	b := Machine{ID: "m-00000000000b", State: StateReady, Location: Location{Rack: "R12"}}
	if err := write(t, db, 1, func(tx *Tx) error {
		for _, err := range []error{CheckRackRecord(r), tx.PutRack(r), tx.PutMachine(a), tx.PutMachine(b)} {
			if err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.Location.Rack = "R13"
	if err := write(t, db, 2, func(tx *Tx) error { return tx.PutMachine(b) }); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *Tx) error {
		got, err := tx.Rack("R12")
		r.Index = 1
		if err != nil || got != r {
			t.Errorf("rack = %+v, %v", got, err)
		}
		if d := cmp.Diff([]string{a.ID}, tx.MachineIDsInRack("R12")); d != "" {
			t.Errorf("R12: %s", d)
		}
		ms, err := tx.MachinesInRack("R13")
		if err != nil || len(ms) != 1 || ms[0].ID != b.ID {
			t.Errorf("R13: %v, %v", ms, err)
		}
		ms, err = tx.Machines(MachineFilter{Rack: "R12", State: StateReady})
		if err != nil || len(ms) != 1 || ms[0].Location != a.Location {
			t.Errorf("filter by rack: %+v, %v", ms, err)
		}
		return nil
	})
	if err := write(t, db, 3, func(tx *Tx) error { return tx.DeleteRack("R12") }); err != nil {
		t.Fatal(err)
	}
	if err := write(t, db, 4, func(tx *Tx) error { return tx.DeleteRack("R12") }); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting a missing rack: %v", err)
	}
	for name, c := range map[string]Rack{
		"too tall": {Name: "R1", Height: 101},
		"no units": {Name: "R1"},
		"bad name": {Name: "-R1", Height: 42},
	} {
		if err := CheckRackRecord(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
