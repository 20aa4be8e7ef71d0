package layout_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rollcall/rollcall/ipam/layout"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// addrCmp compares addresses and prefixes by value.
var addrCmp = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }

// site is a network model built through the real state machine, as the
// cluster builds it: the reference's hall-a (provisioning 10.50.0.0/24
// with reserved, static and dynamic ranges, storage 10.60.0.0/24 on VID
// 200) and an InfiniBand fabric with the subnet named ib0.
type site struct {
	*fsmtest.Log
	t testing.TB
}

func newSite(t testing.TB) *site {
	s := &site{Log: fsmtest.Open(t), t: t}
	s.must(
		&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "hall-a", Kind: store.FabricEthernet, Created: t0}},
		&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "ib-a", Kind: store.FabricInfiniband, Created: t0}},
		subnet(store.Subnet{CIDR: pfx("10.50.0.0/24"), Fabric: "hall-a", Purpose: "provisioning",
			Gateway: ip("10.50.0.1"), DNS: []netip.Addr{ip("10.50.0.1")}, Domain: "dc.example"}),
		rng("10.50.0.0/24", store.RangeReserved, "10.50.0.1", "10.50.0.20"),
		rng("10.50.0.0/24", store.RangeStatic, "10.50.0.50", "10.50.0.199"),
		rng("10.50.0.0/24", store.RangeDynamic, "10.50.0.200", "10.50.0.250"),
		subnet(store.Subnet{CIDR: pfx("10.60.0.0/24"), Name: "storage", Fabric: "hall-a", VID: 200, Purpose: "storage"}),
		subnet(store.Subnet{CIDR: pfx("10.70.0.0/24"), Name: "ib0", Fabric: "ib-a", Purpose: "ib"}),
	)
	return s
}

func (s *site) must(cmds ...raftfsm.Command) {
	s.t.Helper()
	s.Must(s.t, cmds...)
}

func subnet(sub store.Subnet) raftfsm.Command {
	sub.Created = t0
	return &raftfsm.SubnetPut{Subnet: raftfsm.SubnetBody(sub)}
}

func rng(cidr, kind, first, last string) raftfsm.Command {
	return &raftfsm.RangePut{Range: raftfsm.Range{Subnet: pfx(cidr), Kind: kind, First: ip(first), Last: ip(last), Created: t0}}
}

func claim(how, addr, machine, iface string) raftfsm.Command {
	return &raftfsm.AddressClaim{Address: raftfsm.Address{IP: ip(addr), How: how, Machine: machine, Interface: iface, Created: t0}}
}

const machineID = "m-00000000c0de"

// gpuNode is the reference example's machine: a 1G boot NIC, a second 1G
// NIC without carrier, two 25G ports and one InfiniBand HCA. It
// commissioned over the boot NIC with a DHCP address from the dynamic
// range.
func gpuNode() *inventory.Report {
	return &inventory.Report{
		Version: inventory.SchemaVersion,
		BootMAC: "52:54:00:00:c0:01",
		System:  inventory.System{Manufacturer: "Supermicro", Product: "SYS-420GP", Serial: "S1234"},
		NICs: []inventory.NIC{
			{Name: "eno1", MAC: "52:54:00:00:c0:01", SpeedMbps: 1000, Link: true, IPs: []string{"10.50.0.201"}},
			{Name: "eno2", MAC: "52:54:00:00:c0:02", Link: false},
			{Name: "ens1f0", MAC: "b4:96:91:00:00:10", SpeedMbps: 25000, Link: true},
			{Name: "ens1f1", MAC: "b4:96:91:00:00:11", SpeedMbps: 25000, Link: true},
		},
		IB: []inventory.IBHCA{{Name: "mlx5_0", NodeGUID: "b8ce:f603:0012:3456", Ports: []inventory.IBPort{
			{Number: 1, GUID: "b8ce:f603:0012:3456", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)", LinkLayer: "InfiniBand"},
		}}},
	}
}

// commission records the machine with its inventory, as commissioning
// does, and returns the resolver's input.
func (s *site) commission(inv *inventory.Report) layout.Input {
	s.t.Helper()
	doc, err := json.Marshal(inv)
	if err != nil {
		s.t.Fatal(err)
	}
	var ips []string
	for _, n := range inv.NICs {
		ips = append(ips, n.IPs...)
	}
	s.must(&raftfsm.Commission{
		NewID:     machineID,
		Identity:  raftfsm.Identity{Key: inventory.Key("", inv.System.Serial, inv.BootMAC), Serial: inv.System.Serial, BootMAC: inv.BootMAC, MACs: inventory.MACs(inv)},
		IPs:       ips,
		Inventory: doc,
		Now:       t0,
	})
	var in layout.Input
	if err := s.DB.View(func(tx *store.Tx) error {
		m, err := tx.Machine(machineID)
		in = layout.Input{Machine: m, Inventory: inv}
		return err
	}); err != nil {
		s.t.Fatal(err)
	}
	return in
}

// input commissions the machine, then changes the model (setup) and adds
// the pins (IFACE=ADDR).
func (s *site) input(inv *inventory.Report, setup func(*site), pins []string) layout.Input {
	s.t.Helper()
	in := s.commission(inv)
	if setup != nil {
		setup(s)
	}
	for _, raw := range pins {
		pin, err := layout.ParsePin(raw)
		if err != nil {
			s.t.Fatal(err)
		}
		in.Pins = append(in.Pins, pin)
	}
	return in
}

// resolve parses a layout (none: Default) and resolves it in a read-only
// transaction.
func (s *site) resolve(in layout.Input, name, doc string) (*layout.Plan, error) {
	s.t.Helper()
	var l *layout.Layout
	if doc != "" {
		var err error
		if l, err = layout.Parse([]byte(doc)); err != nil {
			return nil, err
		}
	}
	var p *layout.Plan
	err := s.DB.View(func(tx *store.Tx) (err error) {
		p, err = layout.Resolve(tx, in, name, l)
		return err
	})
	return p, err
}

func (s *site) used() map[netip.Addr]store.Address {
	s.t.Helper()
	out := map[netip.Addr]store.Address{}
	if err := s.DB.View(func(tx *store.Tx) error {
		as, err := tx.Addresses(netip.Prefix{}, 0)
		for _, a := range as {
			out[a.IP] = a
		}
		return err
	}); err != nil {
		s.t.Fatal(err)
	}
	return out
}

// exampleLayout is the reference's example, as written there.
const exampleLayout = `{"interfaces": [
  {"type": "physical", "select": "boot", "links": [{"subnet": "boot", "mode": "auto", "default_gateway": true}]},
  {"type": "bond", "name": "bond0", "members": ["fastest:2"], "mtu": 9000, "links": [{"mode": "link_up"}]},
  {"type": "vlan", "parent": "bond0", "vid": 200, "links": [{"subnet": "10.60.0.0/24", "mode": "auto"}]},
  {"type": "physical", "select": "ib:0", "links": [{"subnet": "ib0", "mode": "auto"}]}
]}`

// golden compares got with testdata/golden/name, or writes it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./ipam/layout -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (-golden +now):\n%s", path, cmp.Diff(string(want), string(got)))
	}
}

// explain is what rollcall net show says besides the two files: the NICs
// chosen and why, the addresses, the notes.
func explain(p *layout.Plan) []byte {
	var v struct {
		Choices   []layout.Choice
		Addresses []struct{ Interface, IP, How, Reason string }
		Held      []string `json:",omitempty"`
		Notes     []string
	}
	v.Choices = p.Choices
	for _, a := range p.Addresses {
		v.Addresses = append(v.Addresses, struct{ Interface, IP, How, Reason string }{a.Interface, netip.PrefixFrom(a.IP, a.Subnet.Bits()).String(), a.How, a.Reason})
		if a.Held {
			v.Held = append(v.Held, a.IP.String())
		}
	}
	v.Notes = p.Notes
	b, _ := json.MarshalIndent(v, "", "  ")
	return append(b, '\n')
}

// kindOf names the sentinel an error carries.
func kindOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, store.ErrConflict):
		return "conflict"
	case errors.Is(err, store.ErrInvalid):
		return "invalid"
	case errors.Is(err, store.ErrNotFound):
		return "not found"
	}
	return "internal"
}
