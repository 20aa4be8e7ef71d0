package raftfsm

import (
	"fmt"
	"time"

	"github.com/rollcall/rollcall/store"
)

// MachineCreate adds a machine in state new. The proposer picks the ID and
// the time.
type MachineCreate struct {
	ID   string    `json:"id"`
	Name string    `json:"name,omitempty"`
	MACs []string  `json:"macs,omitempty"`
	Now  time.Time `json:"now"`
}

// MachineDelete forgets a machine and its history.
type MachineDelete struct {
	ID string `json:"id"`
}

// MachineEvent appends to a machine's history.
type MachineEvent struct {
	Event store.Event `json:"event"`
}

func (*MachineCreate) Type() Type { return TypeMachineCreate }
func (*MachineDelete) Type() Type { return TypeMachineDelete }
func (*MachineEvent) Type() Type  { return TypeMachineEvent }

func (*MachineCreate) Version() uint8 { return 1 }
func (*MachineDelete) Version() uint8 { return 1 }
func (*MachineEvent) Version() uint8  { return 1 }

func (c *MachineCreate) apply(tx *store.Tx) error {
	if c.Name != "" {
		if err := store.ValidName(c.Name); err != nil {
			return err
		}
	}
	for _, mac := range c.MACs {
		if n, err := store.NormalizeMAC(mac); err != nil || n != mac {
			return fmt.Errorf("mac %q is not in normal form: %w", mac, store.ErrInvalid)
		}
	}
	if _, err := tx.Machine(c.ID); err == nil {
		return fmt.Errorf("machine %s already exists: %w", c.ID, store.ErrConflict)
	}
	m := store.Machine{
		ID: c.ID, Name: c.Name, State: store.StateNew, MACs: c.MACs,
		CreatedAt: c.Now, UpdatedAt: c.Now,
	}
	if len(c.MACs) > 0 {
		m.BootMAC = c.MACs[0]
	}
	if err := tx.PutMachine(m); err != nil {
		return err
	}
	return tx.AddEvent(store.Event{Machine: c.ID, Time: c.Now, Kind: "created", Message: "machine created"})
}

func (c *MachineDelete) apply(tx *store.Tx) error { return tx.DeleteMachine(c.ID) }

func (c *MachineEvent) apply(tx *store.Tx) error {
	if _, err := tx.Machine(c.Event.Machine); err != nil {
		return err
	}
	return tx.AddEvent(c.Event)
}

func machineCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeMachineCreate: {"machine-create", 1, func() Command { return &MachineCreate{} }},
		TypeMachineDelete: {"machine-delete", 1, func() Command { return &MachineDelete{} }},
		TypeMachineEvent:  {"machine-event", 1, func() Command { return &MachineEvent{} }},
	}
}
