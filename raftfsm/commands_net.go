package raftfsm

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/rollcall/rollcall/ipam"
	"github.com/rollcall/rollcall/ipam/layout"
	"github.com/rollcall/rollcall/store"
)

// A machine's interfaces (issue 19): the layout an operator gives it and
// the addresses pinned to its interfaces (rollcall net set ID -layout L
// -static IFACE=ADDR). The layout is a field of the machine record; a pin
// is an IPAM address of kind pinned, held from the moment it is set, so
// that nothing else is given it before the machine deploys.
//
// Apply checks what does not depend on the machine's inventory: the
// layout exists, every pin is an interface name and an address of a
// subnet that may be pinned there. Whether the layout fits the machine
// (its selectors find NICs, a pin names one of its interfaces) is the
// plan's question, asked by the proposer (the API answers 422) and again
// at deployment (MachinePlan).

// maxPins bounds the pins of one machine: one per link of a layout's
// interfaces is far more than any machine has.
const maxPins = 64

// MachineNetSet sets a machine's layout, its pins, or both.
type MachineNetSet struct {
	Machine string `json:"machine"`
	// SetLayout: Layout is the machine's layout from now on ("" clears
	// it, and its tags' or the default applies).
	SetLayout bool   `json:"set_layout,omitempty"`
	Layout    string `json:"layout,omitempty"`
	// SetPins: Pins are the machine's pinned addresses from now on (none:
	// every pin is released). A pin the machine has already stays as it
	// is; an address the machine holds as another kind (an auto address
	// of a deployment) becomes its pin.
	SetPins bool      `json:"set_pins,omitempty"`
	Pins    []NetPin  `json:"pins,omitempty"`
	Now     time.Time `json:"now"`
}

// NetPin is an address pinned to one interface of a machine.
type NetPin struct {
	Interface string     `json:"interface"`
	Address   netip.Addr `json:"address"`
}

func (p NetPin) String() string { return p.Interface + "=" + p.Address.String() }

// NetPinsBody is the body of pins (layout.Pin).
func NetPinsBody(pins []layout.Pin) []NetPin {
	return convertAll(pins, func(p layout.Pin) NetPin { return NetPin{Interface: p.Interface, Address: p.Address} })
}

func (p NetPin) record() layout.Pin { return layout.Pin{Interface: p.Interface, Address: p.Address} }

func (*MachineNetSet) Type() Type     { return TypeMachineNetSet }
func (*MachineNetSet) Version() uint8 { return 1 }

func netCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeMachineNetSet: {"machine-net-set", 1, func() Command { return &MachineNetSet{} }},
	}
}

// netPlan is what a MachineNetSet writes, every refusal checked first.
type netPlan struct {
	m, old  store.Machine
	release []netip.Addr
	claim   []store.Address
}

func (c *MachineNetSet) check(tx *store.Tx) (*netPlan, error) {
	if !store.ValidMachineID(c.Machine) {
		return nil, store.Errorf(store.ErrInvalid, "machine id %q", store.Clip(c.Machine))
	}
	if !c.SetLayout && !c.SetPins {
		return nil, store.Errorf(store.ErrInvalid, "net set: give a layout (-layout, \"\" clears it) or static addresses (-static IFACE=ADDR)")
	}
	if !c.SetLayout && c.Layout != "" || !c.SetPins && len(c.Pins) > 0 {
		return nil, store.Errorf(store.ErrInvalid, "net set: a layout or pins given without saying they are set")
	}
	m, err := tx.Machine(c.Machine)
	if err != nil {
		return nil, err
	}
	p := &netPlan{m: m, old: m}
	if c.SetLayout {
		if c.Layout != "" {
			if err := layout.CheckName(c.Layout); err != nil {
				return nil, err
			}
			if _, err := tx.Layout(c.Layout); isNotFound(err) {
				return nil, store.Errorf(store.ErrInvalid, "layout %s does not exist (rollcall layout add %s FILE.json)", c.Layout, c.Layout)
			} else if err != nil {
				return nil, err
			}
		}
		p.m.Layout = c.Layout
	}
	if !c.SetPins {
		return p, nil
	}
	if len(c.Pins) > maxPins {
		return nil, store.Errorf(store.ErrInvalid, "%d static addresses is more than the %d a machine may have", len(c.Pins), maxPins)
	}
	held, err := tx.MachineAddresses(m.ID)
	if err != nil {
		return nil, err
	}
	heldAt := map[netip.Addr]store.Address{}
	for _, a := range held {
		heldAt[a.IP] = a
	}
	kept := map[netip.Addr]bool{}
	seenAddr := map[netip.Addr]string{}
	seenSlot := map[string]string{} // interface + subnet → the pin there
	for _, pin := range c.Pins {
		pw := "static " + store.Clip(pin.String())
		if pin.Interface == "" {
			return nil, store.Errorf(store.ErrInvalid, "%s: a pin names an interface (IFACE=ADDR)", pw)
		}
		if err := ipam.CheckIface(pin.Interface); err != nil {
			return nil, store.Errorf(store.ErrInvalid, "%s: %s", pw, store.Public(err))
		}
		a := pin.Address
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			return nil, store.Errorf(store.ErrInvalid, "%s: not an IP address (IPv4 in dotted form, no IPv6 zone)", pw)
		}
		if o, dup := seenAddr[a]; dup {
			return nil, store.Errorf(store.ErrInvalid, "%s: %s is pinned to %s too", pw, a, o)
		}
		seenAddr[a] = pin.Interface
		s, err := ipam.SubnetOf(tx, a)
		if err != nil {
			return nil, store.Errorf(store.ErrInvalid, "%s: %s is in no subnet of the network model (rollcall subnet add …)", pw, a)
		}
		slot := pin.Interface + " " + s.CIDR.String()
		if o, dup := seenSlot[slot]; dup {
			return nil, store.Errorf(store.ErrInvalid, "%s: %s has a pin on %s already (%s)", pw, pin.Interface, s.CIDR, o)
		}
		seenSlot[slot] = a.String()
		rec := store.Address{IP: a, Subnet: s.CIDR, How: store.HowPinned, Machine: m.ID, Interface: pin.Interface, Created: c.Now}
		h, own := heldAt[a]
		switch {
		case own && h.How == store.HowPinned && h.Interface == pin.Interface:
			kept[a] = true // pinned as it is
			continue
		case own && (h.How == store.HowPinned || h.How == store.HowAuto || h.How == store.HowStatic):
			// The machine's address becomes this pin: released, claimed
			// again as pinned.
			if err := ipam.CheckReclaim(tx, rec); err != nil {
				return nil, pinRefusal(pw, err)
			}
			p.release = append(p.release, a)
			kept[a] = true
		default:
			if err := ipam.CheckClaim(tx, rec); err != nil {
				return nil, pinRefusal(pw, err)
			}
		}
		p.claim = append(p.claim, rec)
	}
	for _, h := range held {
		if h.How == store.HowPinned && !kept[h.IP] {
			p.release = append(p.release, h.IP)
		}
	}
	slices.SortFunc(p.release, netip.Addr.Compare)
	return p, nil
}

func (c *MachineNetSet) apply(tx *store.Tx) error {
	p, err := c.check(tx)
	if err != nil {
		return err
	}
	if p.m.Layout != p.old.Layout {
		p.m.UpdatedAt = c.Now
		if err := tx.ReplaceMachine(p.old, p.m); err != nil {
			return err
		}
	}
	for _, a := range p.release {
		if err := ipam.Release(tx, a); err != nil {
			return err
		}
	}
	for _, a := range p.claim {
		if err := ipam.Claim(tx, a); err != nil {
			return err
		}
	}
	return tx.AddEvent(store.Event{Machine: c.Machine, Time: c.Now, Kind: "network", Message: c.describe()})
}

// describe is the event a MachineNetSet leaves in the machine's history.
func (c *MachineNetSet) describe() string {
	var parts []string
	if c.SetLayout {
		if c.Layout == "" {
			parts = append(parts, "layout cleared")
		} else {
			parts = append(parts, "layout "+c.Layout)
		}
	}
	if c.SetPins {
		if len(c.Pins) == 0 {
			parts = append(parts, "static addresses cleared")
		} else {
			pins := make([]string, len(c.Pins))
			for i, p := range c.Pins {
				pins[i] = p.String()
			}
			parts = append(parts, fmt.Sprintf("static %s", strings.Join(pins, " ")))
		}
	}
	return "network: " + strings.Join(parts, ", ")
}

// pinRefusal words ipam's refusal of a pin under the pin, keeping its
// kind; a failed read is passed on as it is.
func pinRefusal(pw string, err error) error {
	switch {
	case errors.Is(err, store.ErrConflict):
		return store.Errorf(store.ErrConflict, "%s: %s", pw, store.Public(err))
	case errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrNotFound):
		return store.Errorf(store.ErrInvalid, "%s: %s", pw, store.Public(err))
	}
	return err
}
