package raftfsm

import (
	"fmt"
	"strings"
	"time"

	"github.com/rollcall/rollcall/store"
)

// Locations and racks (issue 19). A rack is created by the first machine
// placed in it, 42U tall, where that machine says it stands; a machine in
// a rack stands where the rack does. No two machines share a unit of one
// rack (store.CheckRack).

// LocationSet sets the whole location of each machine it names (the
// proposer merges what the operator changed with what the record holds).
type LocationSet struct {
	Machines []MachineLocation `json:"machines"`
	Now      time.Time         `json:"now"`
}

// MachineLocation is one machine's new location.
type MachineLocation struct {
	ID       string   `json:"id"`
	Location Location `json:"location"`
}

// RackPut creates a rack or changes one: a new height (never below the
// highest unit a machine in it takes), a new building or room (which its
// machines then stand in).
type RackPut struct {
	Rack Rack      `json:"rack"`
	Now  time.Time `json:"now"`
}

// RackDelete forgets an empty rack.
type RackDelete struct {
	Name string `json:"name"`
}

func (*LocationSet) Type() Type     { return TypeLocationSet }
func (*RackPut) Type() Type         { return TypeRackPut }
func (*RackDelete) Type() Type      { return TypeRackDelete }
func (*LocationSet) Version() uint8 { return 1 }
func (*RackPut) Version() uint8     { return 1 }
func (*RackDelete) Version() uint8  { return 1 }

func locationCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeLocationSet: {"location-set", 1, func() Command { return &LocationSet{} }},
		TypeRackPut:     {"rack-put", 1, func() Command { return &RackPut{} }},
		TypeRackDelete:  {"rack-delete", 1, func() Command { return &RackDelete{} }},
	}
}

func (c *LocationSet) apply(tx *store.Tx) error {
	if len(c.Machines) == 0 {
		return store.Errorf(store.ErrInvalid, "name the machines to place")
	}
	ids := make([]string, len(c.Machines))
	for i, ml := range c.Machines {
		ids[i] = ml.ID
	}
	if err := checkMachineIDs("location", ids, false); err != nil {
		return err
	}
	// The racks named: as stored, or as this command creates them (where
	// the first machines that say so stand).
	racks := map[string]store.Rack{}
	created := map[string]bool{}
	locs := make([]store.Location, len(c.Machines))
	for i, ml := range c.Machines {
		loc := ml.Location.record()
		if err := store.CheckLocation(loc); err != nil {
			return store.Errorf(store.ErrInvalid, "machine %s: %s", ml.ID, store.Public(err))
		}
		locs[i] = loc
		if loc.Rack == "" {
			continue
		}
		r, ok := racks[loc.Rack]
		if !ok {
			var err error
			r, err = tx.Rack(loc.Rack)
			switch {
			case isNotFound(err):
				r = store.Rack{Name: loc.Rack, Height: store.DefaultRackHeight, Created: c.Now}
				created[loc.Rack] = true
			case err != nil:
				return err
			}
		}
		if created[loc.Rack] {
			r.AdoptPlace(loc)
		}
		racks[loc.Rack] = r
	}
	read := make([]store.Machine, len(c.Machines))
	placed := make([]store.Machine, len(c.Machines))
	moving := make(map[string]bool, len(c.Machines))
	for i, ml := range c.Machines {
		m, err := tx.Machine(ml.ID)
		if err != nil {
			return err
		}
		read[i] = m
		loc := locs[i]
		if loc.Rack != "" {
			if loc, err = store.PlaceInRack(loc, racks[loc.Rack]); err != nil {
				return store.Errorf(store.ErrConflict, "machine %s: %s", ml.ID, store.Public(err))
			}
		}
		m.Location = loc
		placed[i] = m
		moving[m.ID] = true
	}
	for _, name := range sortedIDs(racks) {
		r := racks[name]
		var slots []store.Slot
		for _, id := range tx.MachineIDsInRack(name) {
			if moving[id] {
				continue
			}
			m, err := tx.Machine(id)
			if err != nil {
				return err
			}
			slots = append(slots, slotOf(m))
		}
		for _, m := range placed {
			if m.Location.Rack == name {
				slots = append(slots, slotOf(m))
			}
		}
		if err := store.CheckRack(name, r.Height, slots); err != nil {
			return err
		}
	}
	for _, name := range sortedIDs(created) {
		if err := tx.PutRack(racks[name]); err != nil {
			return err
		}
	}
	for i, m := range placed {
		if m.Location == read[i].Location {
			continue
		}
		m.UpdatedAt = c.Now
		if err := tx.ReplaceMachine(read[i], m); err != nil {
			return err
		}
	}
	return nil
}

func slotOf(m store.Machine) store.Slot {
	return store.Slot{ID: m.ID, Unit: m.Location.Unit, Height: m.Location.Height}
}

func (c *RackPut) apply(tx *store.Tx) error {
	r := c.Rack.record()
	if err := store.CheckRackRecord(r); err != nil {
		return err
	}
	old, err := tx.Rack(r.Name)
	switch {
	case err == nil:
		r.Created = old.Created
	case isNotFound(err):
		r.Created = c.Now
	default:
		return err
	}
	held, err := tx.MachinesInRack(r.Name)
	if err != nil {
		return err
	}
	slots := make([]store.Slot, len(held))
	for i, m := range held {
		slots[i] = slotOf(m)
	}
	if err := store.CheckRack(r.Name, r.Height, slots); err != nil {
		top := 0
		for _, m := range held {
			top = max(top, m.Location.Top())
		}
		return store.Errorf(store.ErrConflict, "rack %s holds machines up to U%d: it cannot be %dU (%s)", r.Name, top, r.Height, store.Public(err))
	}
	if err := tx.PutRack(r); err != nil {
		return err
	}
	// Its machines stand where it stands.
	for _, m := range held {
		loc := m.Location
		if r.Building != "" {
			loc.Building = r.Building
		}
		if r.Room != "" {
			loc.Room = r.Room
		}
		if loc != m.Location {
			moved := m
			moved.Location, moved.UpdatedAt = loc, c.Now
			if err := tx.ReplaceMachine(m, moved); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *RackDelete) apply(tx *store.Tx) error {
	if _, err := tx.Rack(c.Name); err != nil {
		return err
	}
	if ids := tx.MachineIDsInRack(c.Name); len(ids) > 0 {
		shown := ids[:min(len(ids), 3)]
		more := ""
		if len(ids) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(ids)-len(shown))
		}
		return store.Errorf(store.ErrConflict, "rack %s holds %s%s: move them first", c.Name, strings.Join(shown, ", "), more)
	}
	return tx.DeleteRack(c.Name)
}
