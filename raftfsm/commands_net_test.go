package raftfsm_test

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/ipam/layout"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

const netMachine = "m-00000000c0de"

// netSite is a provisioning subnet 10.50.0.0/24 (reserved .1–.20, static
// .50–.199, dynamic .200–.250, gateway .1) and a storage subnet on VID
// 200, with one machine commissioned over its boot NIC eno1 and the
// layouts boot-only and bonded.
func netSite(t *testing.T) *fsmtest.Log {
	t.Helper()
	l := fsmtest.Open(t)
	sub := func(s store.Subnet) raftfsm.Command {
		s.Created = t0
		return &raftfsm.SubnetPut{Subnet: raftfsm.SubnetBody(s)}
	}
	rng := func(kind, first, last string) raftfsm.Command {
		return &raftfsm.RangePut{Range: raftfsm.Range{Subnet: netip.MustParsePrefix("10.50.0.0/24"), Kind: kind,
			First: netip.MustParseAddr(first), Last: netip.MustParseAddr(last), Created: t0}}
	}
	rep := &inventory.Report{
		Version: inventory.SchemaVersion, BootMAC: "52:54:00:00:c0:01",
		System: inventory.System{Manufacturer: "Supermicro", Product: "SYS-420GP", Serial: "S1234"},
		NICs: []inventory.NIC{
			{Name: "eno1", MAC: "52:54:00:00:c0:01", SpeedMbps: 1000, Link: true, IPs: []string{"10.50.0.201"}},
			{Name: "ens1f0", MAC: "b4:96:91:00:00:10", SpeedMbps: 25000, Link: true},
			{Name: "ens1f1", MAC: "b4:96:91:00:00:11", SpeedMbps: 25000, Link: true},
		},
	}
	doc, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	l.Must(t,
		&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "hall-a", Kind: store.FabricEthernet, Created: t0}},
		sub(store.Subnet{CIDR: netip.MustParsePrefix("10.50.0.0/24"), Fabric: "hall-a", Purpose: "provisioning", Gateway: netip.MustParseAddr("10.50.0.1")}),
		rng(store.RangeReserved, "10.50.0.1", "10.50.0.20"),
		rng(store.RangeStatic, "10.50.0.50", "10.50.0.199"),
		rng(store.RangeDynamic, "10.50.0.200", "10.50.0.250"),
		sub(store.Subnet{CIDR: netip.MustParsePrefix("10.60.0.0/24"), Name: "storage", Fabric: "hall-a", VID: 200, Purpose: "storage"}),
		&raftfsm.Commission{
			NewID:     netMachine,
			Identity:  raftfsm.Identity{Key: inventory.Key("", "S1234", rep.BootMAC), Serial: "S1234", BootMAC: rep.BootMAC, MACs: inventory.MACs(rep)},
			IPs:       []string{"10.50.0.201"},
			Inventory: doc,
			Now:       t0,
		},
		&raftfsm.LayoutPut{Layout: raftfsm.Layout{Name: "boot-only", JSON: bootOnly, Created: t0}},
		&raftfsm.LayoutPut{Layout: raftfsm.Layout{Name: "bonded", JSON: exampleish, Created: t0}},
	)
	return l
}

func pinsOf(t *testing.T, pins ...string) []raftfsm.NetPin {
	t.Helper()
	var out []raftfsm.NetPin
	for _, s := range pins {
		p, err := layout.ParsePin(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raftfsm.NetPin{Interface: p.Interface, Address: p.Address})
	}
	return out
}

// machineNet is what a MachineNetSet decides: the machine's layout and
// every address it holds (IFACE=ADDR how).
func machineNet(t *testing.T, l *fsmtest.Log, id string) (string, []string) {
	t.Helper()
	var lay string
	var held []string
	if err := l.DB.View(func(tx *store.Tx) error {
		m, err := tx.Machine(id)
		if err != nil {
			return err
		}
		lay = m.Layout
		as, err := tx.MachineAddresses(id)
		for _, a := range as {
			held = append(held, a.Interface+"="+a.IP.String()+" "+a.How)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return lay, held
}

// TestMachineNetSet: a layout must exist, pins are held in IPAM as soon as
// they are set (and released when they are not named again), and a
// refused command writes nothing.
func TestMachineNetSet(t *testing.T) {
	l := netSite(t)
	set := func(c raftfsm.MachineNetSet) error {
		c.Now = t0
		if c.Machine == "" {
			c.Machine = netMachine
		}
		return l.Apply(&c)
	}
	if err := set(raftfsm.MachineNetSet{SetLayout: true, Layout: "bonded", SetPins: true, Pins: pinsOf(t, "eno1=10.50.0.60", "bond0.200=10.60.0.60")}); err != nil {
		t.Fatal(err)
	}
	lay, held := machineNet(t, l, netMachine)
	if d := cmp.Diff([]string{"eno1=10.50.0.60 pinned", "bond0.200=10.60.0.60 pinned"}, held); lay != "bonded" || d != "" {
		t.Fatalf("after net set: layout %q, addresses (-want +got):\n%s", lay, d)
	}
	l.DB.View(func(tx *store.Tx) error {
		if ids := tx.MachineIDsByLayout("bonded"); len(ids) != 1 || ids[0] != netMachine {
			t.Errorf("by layout: %v", ids)
		}
		return nil
	})

	// Another machine for "taken".
	l.Must(t, &raftfsm.MachineCreate{ID: "m-0000000000ff", Name: "other", Now: t0},
		&raftfsm.AddressClaim{Address: raftfsm.Address{IP: netip.MustParseAddr("10.50.0.70"), How: store.HowStatic, Machine: "m-0000000000ff", Created: t0}})

	for name, c := range map[string]struct {
		cmd  raftfsm.MachineNetSet
		kind error
		says string
	}{
		"nothing to set":           {raftfsm.MachineNetSet{}, store.ErrInvalid, "give a layout"},
		"a layout not said to set": {raftfsm.MachineNetSet{Layout: "bonded", SetPins: true}, store.ErrInvalid, "without saying"},
		"no such machine":          {raftfsm.MachineNetSet{Machine: "m-000000000bad", SetLayout: true}, store.ErrNotFound, "m-000000000bad"},
		"a bad machine id":         {raftfsm.MachineNetSet{Machine: "node1", SetLayout: true}, store.ErrInvalid, `machine id "node1"`},
		"a layout that is missing": {raftfsm.MachineNetSet{SetLayout: true, Layout: "storage"}, store.ErrInvalid, "layout storage does not exist"},
		"a bad layout name":        {raftfsm.MachineNetSet{SetLayout: true, Layout: "Big Bond"}, store.ErrInvalid, "layout name"},
		"a pin in no subnet":       {raftfsm.MachineNetSet{SetPins: true, Pins: pinsOf(t, "eno1=192.0.2.9")}, store.ErrInvalid, "192.0.2.9 is in no subnet"},
		"a pin in a dynamic range": {raftfsm.MachineNetSet{SetPins: true, Pins: pinsOf(t, "eno1=10.50.0.210")}, store.ErrConflict, "inside dynamic range"},
		"a pin on the gateway":     {raftfsm.MachineNetSet{SetPins: true, Pins: pinsOf(t, "eno1=10.50.0.1")}, store.ErrConflict, "gateway"},
		"a pin taken":              {raftfsm.MachineNetSet{SetPins: true, Pins: pinsOf(t, "eno1=10.50.0.70")}, store.ErrConflict, "already in use (static m-0000000000ff)"},
		"an address twice":         {raftfsm.MachineNetSet{SetPins: true, Pins: pinsOf(t, "eno1=10.50.0.61", "eno2=10.50.0.61")}, store.ErrInvalid, "pinned to eno1 too"},
		"two pins on one subnet":   {raftfsm.MachineNetSet{SetPins: true, Pins: pinsOf(t, "eno1=10.50.0.61", "eno1=10.50.0.62")}, store.ErrInvalid, "eno1 has a pin on 10.50.0.0/24 already"},
		"a bad interface":          {raftfsm.MachineNetSet{SetPins: true, Pins: []raftfsm.NetPin{{Interface: "a/b", Address: netip.MustParseAddr("10.50.0.61")}}}, store.ErrInvalid, "static a/b=10.50.0.61"},
		"no interface":             {raftfsm.MachineNetSet{SetPins: true, Pins: []raftfsm.NetPin{{Address: netip.MustParseAddr("10.50.0.61")}}}, store.ErrInvalid, "names an interface"},
		"no address":               {raftfsm.MachineNetSet{SetPins: true, Pins: []raftfsm.NetPin{{Interface: "eno1"}}}, store.ErrInvalid, "not an IP address"},
		"too many pins":            {raftfsm.MachineNetSet{SetPins: true, Pins: make([]raftfsm.NetPin, 65)}, store.ErrInvalid, "more than the 64"},
	} {
		t.Run(name, func(t *testing.T) {
			before := l.Index
			err := set(c.cmd)
			if !errors.Is(err, c.kind) || !strings.Contains(store.Public(err), c.says) {
				t.Errorf("got %v (public %q), want %v saying %q", err, store.Public(err), c.kind, c.says)
			}
			lay2, held2 := machineNet(t, l, netMachine)
			if lay2 != lay || !cmp.Equal(held, held2) {
				t.Errorf("the refused command (index %d) wrote: layout %q, addresses %v", before, lay2, held2)
			}
		})
	}

	// The layout is in use: delete refuses, naming the machine.
	if err := l.Apply(&raftfsm.LayoutDelete{Name: "bonded"}); !errors.Is(err, store.ErrConflict) || !strings.Contains(store.Public(err), "machine "+netMachine) {
		t.Errorf("deleting a layout a machine uses: %v", err)
	}

	// Pins change: eno1's stays, bond0.200's goes, a new one comes; the
	// layout is left as it is.
	if err := set(raftfsm.MachineNetSet{SetPins: true, Pins: pinsOf(t, "eno1=10.50.0.60", "bond0.200=10.60.0.61")}); err != nil {
		t.Fatal(err)
	}
	if lay, held := machineNet(t, l, netMachine); lay != "bonded" || !cmp.Equal(held, []string{"eno1=10.50.0.60 pinned", "bond0.200=10.60.0.61 pinned"}) {
		t.Errorf("after changing pins: %q %v", lay, held)
	}
	// A deployment's auto address becomes a pin; moving a pin to another
	// interface re-records it.
	l.Must(t, &raftfsm.AddressClaim{Address: raftfsm.Address{IP: netip.MustParseAddr("10.50.0.80"), How: store.HowAuto, Machine: netMachine, Interface: "eno1", Created: t0}})
	if err := set(raftfsm.MachineNetSet{SetPins: true, Pins: pinsOf(t, "eno1=10.50.0.80", "bond0=10.60.0.61")}); err != nil {
		t.Fatal(err)
	}
	if _, held := machineNet(t, l, netMachine); !cmp.Equal(held, []string{"eno1=10.50.0.80 pinned", "bond0=10.60.0.61 pinned"}) {
		t.Errorf("after pinning an auto address: %v", held)
	}
	// Clearing: no layout, no pins; the layout can go.
	if err := set(raftfsm.MachineNetSet{SetLayout: true, SetPins: true}); err != nil {
		t.Fatal(err)
	}
	if lay, held := machineNet(t, l, netMachine); lay != "" || held != nil {
		t.Errorf("after clearing: %q %v", lay, held)
	}
	if err := l.Apply(&raftfsm.LayoutDelete{Name: "bonded"}); err != nil {
		t.Errorf("deleting a layout nobody uses: %v", err)
	}
	l.DB.View(func(tx *store.Tx) error {
		ev, _ := tx.Events(netMachine)
		if last := ev[len(ev)-1]; last.Kind != "network" || last.Message != "network: layout cleared, static addresses cleared" {
			t.Errorf("last event %+v", last)
		}
		return nil
	})
}

// TestMachinePlan: the machine's own layout wins over its tags', a manual
// tag over an automatic one, and without either the default applies; the
// plan holds the pins.
func TestMachinePlan(t *testing.T) {
	l := netSite(t)
	plan := func() (*layout.Plan, raftfsm.LayoutSource, error) {
		var p *layout.Plan
		var src raftfsm.LayoutSource
		err := l.DB.View(func(tx *store.Tx) (err error) {
			p, src, err = raftfsm.MachinePlan(tx, netMachine)
			return err
		})
		return p, src, err
	}
	p, src, err := plan()
	if err != nil || src.Kind != raftfsm.SourceDefault || p.Layout != "" || len(p.Addresses) != 1 || p.Addresses[0].Interface != "eno1" {
		t.Fatalf("default: %+v %+v %v", p, src, err)
	}
	l.Must(t,
		&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "a-boot", Layout: "boot-only"}, Now: t0},
		&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "b-bond", Layout: "bonded"}, Now: t0},
		&raftfsm.MachineTags{Machines: []string{netMachine}, Add: []string{"b-bond"}, Now: t0},
	)
	// An automatic tag that names a layout, sorted before the manual one:
	// the manual one still wins.
	var idx uint64
	l.DB.View(func(tx *store.Tx) error { m, _ := tx.Machine(netMachine); idx = m.Index; return nil })
	l.Must(t, &raftfsm.AutoTagsSet{Machines: []raftfsm.MachineRules{{ID: netMachine, Index: idx, Rules: []raftfsm.RuleResult{{Tag: "a-boot", Match: true}}}}, Now: t0})
	if _, src, err := plan(); err != nil || src != (raftfsm.LayoutSource{Kind: raftfsm.SourceTag, Layout: "bonded", Tag: "b-bond"}) {
		t.Errorf("with a manual tag: %+v %v", src, err)
	}
	l.Must(t, &raftfsm.MachineNetSet{Machine: netMachine, SetLayout: true, Layout: "boot-only", SetPins: true, Pins: pinsOf(t, "eno1=10.50.0.60"), Now: t0})
	p, src, err = plan()
	if err != nil || src.Kind != raftfsm.SourceMachine || p.Layout != "boot-only" {
		t.Fatalf("own layout: %+v %v", src, err)
	}
	if len(p.Addresses) != 1 || p.Addresses[0].IP != netip.MustParseAddr("10.50.0.60") || !p.Addresses[0].Held || p.Addresses[0].How != store.HowPinned {
		t.Errorf("the pin is not the plan's held address: %+v", p.Addresses)
	}
	if !strings.Contains(string(p.NetworkConfig()), "10.50.0.60/24") {
		t.Errorf("network-config without the pin:\n%s", p.NetworkConfig())
	}
	// A pin on an interface the layout does not have: no plan.
	l.Must(t, &raftfsm.MachineNetSet{Machine: netMachine, SetPins: true, Pins: pinsOf(t, "eth9=10.50.0.61"), Now: t0})
	if _, _, err := plan(); !errors.Is(err, store.ErrInvalid) || !strings.Contains(store.Public(err), "the layout has no interface eth9") {
		t.Errorf("a pin on no interface: %v", err)
	}
}
