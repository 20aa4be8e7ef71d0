package raftfsm

import (
	"encoding/json"
	"fmt"

	"github.com/rollcall/rollcall/ipam/layout"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// A machine's network plan: the one resolution of "which layout, against
// which inventory, with which pins" that both rollcall net show (a
// preview) and deployment (which claims the plan's addresses) use, so the
// two never disagree. It only reads tx.

// Where a machine's layout comes from (LayoutSource.Kind).
const (
	SourceMachine = "machine" // the machine's own (net set -layout)
	SourceTag     = "tag"     // a tag it carries names one
	SourceDefault = "default" // neither: the boot NIC, auto or DHCP
)

// LayoutSource says which layout applies to a machine and why.
type LayoutSource struct {
	Kind   string // SourceMachine, SourceTag or SourceDefault
	Layout string // the layout's name; "" for the default
	Tag    string // the tag, for SourceTag
	Auto   bool   // the tag is one its rule gave (SourceTag)
}

func (s LayoutSource) String() string {
	switch s.Kind {
	case SourceMachine:
		return "layout " + s.Layout + ": the machine's own (net set -layout)"
	case SourceTag:
		how := "manual"
		if s.Auto {
			how = "automatic"
		}
		return fmt.Sprintf("layout %s: named by tag %s (%s), the first of the machine's tags that names a layout", s.Layout, s.Tag, how)
	}
	return "no layout: the machine's own, and none of its tags names one"
}

// LayoutOf says which layout applies to m: its own, else the first of its
// manual tags, then of its automatic tags (each list sorted), whose tag
// names a layout, else none (layout.Default).
func LayoutOf(tx *store.Tx, m store.Machine) (LayoutSource, error) {
	if m.Layout != "" {
		return LayoutSource{Kind: SourceMachine, Layout: m.Layout}, nil
	}
	for _, list := range []struct {
		tags []string
		auto bool
	}{{m.Tags, false}, {m.AutoTags, true}} {
		for _, name := range list.tags {
			t, err := tx.Tag(name)
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return LayoutSource{}, err
			}
			if t.Layout != "" {
				return LayoutSource{Kind: SourceTag, Layout: t.Layout, Tag: name, Auto: list.auto}, nil
			}
		}
	}
	return LayoutSource{Kind: SourceDefault}, nil
}

// MachinePlan resolves the network plan of a machine as tx holds it: the
// layout LayoutOf chooses, against the machine's stored inventory, with
// the addresses pinned to it. Nothing is claimed: a deployment claims
// plan.Claims() (ipam.ClaimAll in its command, after plan.Check) and
// writes plan.NetworkConfig() and plan.UdevRules(). A plan that cannot be
// made (no inventory, a selector that finds nothing, a bond with one
// member, a VLAN on a missing parent, a static address outside its subnet
// or taken) is a refusal (store.ErrInvalid or ErrConflict) that says
// which interface and why.
func MachinePlan(tx *store.Tx, machineID string) (*layout.Plan, LayoutSource, error) {
	m, err := tx.Machine(machineID)
	if err != nil {
		return nil, LayoutSource{}, err
	}
	return PlanFor(tx, m, nil)
}

// PlanFor is MachinePlan for a machine record as it would be (a layout
// being set), with pins in place of the recorded ones (nil: the recorded
// ones): the proposer of a MachineNetSet asks it whether the change
// leaves the machine with a plan.
func PlanFor(tx *store.Tx, m store.Machine, pins []layout.Pin) (*layout.Plan, LayoutSource, error) {
	src, err := LayoutOf(tx, m)
	if err != nil {
		return nil, src, err
	}
	var l *layout.Layout
	if src.Layout != "" {
		rec, err := tx.Layout(src.Layout)
		if err != nil {
			return nil, src, err
		}
		if l, err = layout.Parse([]byte(rec.JSON)); err != nil {
			return nil, src, store.Errorf(store.ErrInvalid, "layout %s, stored, no longer parses: %s (rollcall layout set %s FILE.json)", src.Layout, store.Public(err), src.Layout)
		}
	}
	in := layout.Input{Machine: m}
	doc, err := tx.Inventory(m.ID)
	switch {
	case isNotFound(err):
		// Resolve refuses a machine without an inventory, saying why.
	case err != nil:
		return nil, src, err
	default:
		var rep inventory.Report
		if err := json.Unmarshal(doc, &rep); err != nil {
			return nil, src, fmt.Errorf("machine %s: read its inventory: %w", m.ID, err)
		}
		in.Inventory = &rep
	}
	if pins == nil {
		held, err := tx.MachineAddresses(m.ID)
		if err != nil {
			return nil, src, err
		}
		pins = layout.PinsOf(held)
	}
	in.Pins = pins
	p, err := layout.Resolve(tx, in, src.Layout, l)
	if err != nil {
		return nil, src, err
	}
	return p, src, nil
}
