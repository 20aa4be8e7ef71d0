package layout_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/ipam"
	"github.com/rollcall/rollcall/ipam/layout"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// planCase is a machine, a network model and a layout whose plan is
// golden: NAME.network-config.yaml, NAME.udev.rules and NAME.plan.json
// (the NICs chosen and why, the addresses, the notes).
type planCase struct {
	name   string // the layout's name; "" resolves without one (Default)
	layout string
	setup  func(s *site)
	inv    func() *inventory.Report
	pins   []string
	empty  bool // no network model at all
	want   []string
}

var planCases = map[string]planCase{
	// The reference's example: boot NIC on its subnet with the default
	// route, a bond of the two fastest other NICs carrying VLAN 200, and
	// the first InfiniBand port on the subnet named ib0.
	"example": {name: "gpu-bond", layout: exampleLayout,
		want: []string{"10.50.0.50/24", "10.60.0.1/24", "10.70.0.1/24"}},
	// A pin recorded with net set -static takes the boot link's auto
	// address; a pin not recorded yet (being set) is claimed with the rest.
	"pinned": {name: "gpu-bond", layout: exampleLayout,
		setup: func(s *site) { s.must(claim(store.HowPinned, "10.50.0.60", machineID, "eno1")) },
		pins:  []string{"eno1=10.50.0.60", "bond0.200=10.60.0.77"},
		want:  []string{"10.50.0.60/24", "10.60.0.77/24", "10.70.0.1/24"}},
	// No layout and no network model: DHCP on the boot NIC, as before.
	"dhcp-fallback": {empty: true},
	// No layout: an auto address on the boot subnet.
	"default": {want: []string{"10.50.0.50/24"}},
	// No layout, a pin being set on the boot NIC: it takes the pin.
	"default-pinned": {pins: []string{"eno1=10.50.0.99"}, want: []string{"10.50.0.99/24"}},
	// No layout on a dual-stack VLAN: the boot NIC takes an address on
	// the IPv4 subnet it booted from and on the IPv6 subnet beside it, with
	// a default route for each family.
	"dual-stack": {
		setup: func(s *site) {
			s.must(
				subnet(store.Subnet{CIDR: pfx("fd00:50::/64"), Fabric: "hall-a", Purpose: "provisioning",
					Gateway: ip("fd00:50::1"), DNS: []netip.Addr{ip("fd00:50::53")}, Domain: "dc.example"}),
				rng("fd00:50::/64", store.RangeReserved, "fd00:50::1", "fd00:50::ff"),
			)
		},
		want: []string{"10.50.0.50/24", "fd00:50::100/64"}},
	// Selectors by name and MAC, a static address, an active-backup bond
	// with its options, DHCP on a bond, a named VLAN on a physical
	// interface, a subnet by name, an MTU from the network model.
	"static-active-backup": {name: "storage-ab",
		setup: func(s *site) {
			s.must(&raftfsm.VLANPut{VLAN: raftfsm.VLAN{Fabric: "hall-a", VID: 200, MTU: 9000, DHCP: store.DHCPOff, Created: t0}, Replace: true})
		},
		layout: `{"interfaces": [
  {"type": "physical", "select": "name:eno1", "name": "prov0", "mtu": 9000,
   "links": [{"subnet": "10.50.0.0/24", "mode": "static", "address": "10.50.0.77", "default_gateway": true}]},
  {"type": "vlan", "parent": "prov0", "vid": 200, "name": "storage0", "links": [{"subnet": "storage", "mode": "auto"}]},
  {"type": "bond", "name": "bond1", "members": ["mac:B4:96:91:00:00:10", "mac:b4-96-91-00-00-11"],
   "bond": {"mode": "active-backup", "mii_monitor_interval": 50, "up_delay": 200, "down_delay": 200},
   "links": [{"mode": "dhcp"}]}
]}`,
		want: []string{"10.50.0.77/24", "10.60.0.1/24"}},
}

func TestPlanGoldens(t *testing.T) {
	for name, c := range planCases {
		t.Run(name, func(t *testing.T) {
			p := c.plan(t)
			golden(t, name+".network-config.yaml", p.NetworkConfig())
			golden(t, name+".udev.rules", p.UdevRules())
			golden(t, name+".plan.json", explain(p))
			var got []string
			for _, a := range p.Addresses {
				got = append(got, netip.PrefixFrom(a.IP, a.Subnet.Bits()).String())
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("addresses (-want +got):\n%s", d)
			}
		})
	}
}

func (c planCase) plan(t *testing.T) *layout.Plan {
	t.Helper()
	s := newSite(t)
	if c.empty {
		s = &site{Log: fsmtest.Open(t), t: t}
	}
	inv := gpuNode()
	if c.inv != nil {
		inv = c.inv()
	}
	in := s.input(inv, c.setup, c.pins)
	before := s.used()
	p, err := s.resolve(in, c.name, c.layout)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, s.used(), addrCmp); d != "" {
		t.Errorf("resolving wrote addresses:\n%s", d)
	}
	return p
}

// TestDeployClaimsThePlan claims a plan as a deployment does, resolves
// again (the machine holds every address now, nothing new is claimed),
// and checks that a plan whose address was taken meanwhile no longer holds.
func TestDeployClaimsThePlan(t *testing.T) {
	s := newSite(t)
	in := s.commission(gpuNode())
	in.Pins = []layout.Pin{{Interface: "bond0.200", Address: ip("10.60.0.77")}}
	p, err := s.resolve(in, "gpu-bond", exampleLayout)
	if err != nil {
		t.Fatal(err)
	}
	claims := p.Claims()
	if len(claims) != 3 {
		t.Fatalf("claims %v, want three", claims)
	}
	if err := s.DB.Update(func(tx *store.Tx) error {
		if err := p.Check(tx); err != nil {
			return err
		}
		for i := range claims {
			claims[i].Created = t0
		}
		return ipam.ClaimAll(tx, claims)
	}); err != nil {
		t.Fatal(err)
	}
	used := s.used()
	for _, c := range claims {
		if got := used[c.IP]; got.Machine != machineID || got.Interface != c.Interface || got.How != c.How {
			t.Errorf("%s is recorded as %+v, want %s on %s (%s)", c.IP, got, machineID, c.Interface, c.How)
		}
	}
	again, err := s.resolve(in, "gpu-bond", exampleLayout)
	if err != nil {
		t.Fatal(err)
	}
	if cl := again.Claims(); len(cl) != 0 {
		t.Errorf("resolved after deployment, the plan claims %v; the machine holds its addresses already", cl)
	}
	if string(again.NetworkConfig()) != string(p.NetworkConfig()) {
		t.Errorf("the network-config changed once the addresses were claimed:\n%s\nvs\n%s", again.NetworkConfig(), p.NetworkConfig())
	}
	if err := s.DB.View(again.Check); err != nil {
		t.Errorf("a plan of held addresses does not check: %v", err)
	}

	// Another machine takes the address a fresh plan would claim.
	s2 := newSite(t)
	in2 := s2.commission(gpuNode())
	fresh, err := s2.resolve(in2, "gpu-bond", exampleLayout)
	if err != nil {
		t.Fatal(err)
	}
	s2.must(&raftfsm.MachineCreate{ID: "m-0000000000ff", Now: t0}, claim(store.HowStatic, "10.50.0.50", "m-0000000000ff", ""))
	err = s2.DB.View(fresh.Check)
	if kindOf(err) != "conflict" || !strings.Contains(store.Public(err), "10.50.0.50 is already in use") {
		t.Errorf("Check after 10.50.0.50 was taken: %v, want a conflict naming it", err)
	}
	err = s2.DB.Update(func(tx *store.Tx) error { return ipam.ClaimAll(tx, fresh.Claims()) })
	if kindOf(err) != "conflict" {
		t.Errorf("ClaimAll of a stale plan: %v, want a conflict", err)
	}
	if used := s2.used(); used[ip("10.60.0.1")].Machine != "" {
		t.Errorf("ClaimAll wrote %v before refusing", used[ip("10.60.0.1")])
	}
}

// TestRefusals: every way a layout does not fit a machine or the network
// model is refused with its reason, and nothing is written.
func TestRefusals(t *testing.T) {
	phys := func(sel string, links string) string {
		return `{"type": "physical", "select": "` + sel + `", "links": [` + links + `]}`
	}
	lay := func(ifaces ...string) string { return `{"interfaces": [` + strings.Join(ifaces, ",") + `]}` }
	boot := phys("boot", `{"subnet": "boot", "mode": "auto", "default_gateway": true}`)
	for name, c := range map[string]struct {
		layout string
		setup  func(s *site)
		inv    func(*inventory.Report)
		noInv  bool
		pins   []string
		kind   string
		says   string
	}{
		"name selector matches nothing": {layout: lay(phys("name:eth9", "")), kind: "invalid",
			says: "interfaces[0] (physical name:eth9): name:eth9 matches no NIC (the machine has eno1 52:54:00:00:c0:01, eno2"},
		"mac selector matches nothing": {layout: lay(phys("mac:52:54:00:00:00:99", "")), kind: "invalid",
			says: "mac:52:54:00:00:00:99 matches no NIC"},
		"ib selector matches nothing": {layout: lay(phys("ib:1", "")), kind: "invalid",
			says: "ib:1 matches no NIC: the machine has 1 InfiniBand port(s)"},
		"boot selector without a boot NIC": {layout: lay(boot), kind: "invalid",
			inv:  func(r *inventory.Report) { r.NICs = r.NICs[1:] },
			says: "boot matches no NIC: no NIC of the inventory has the boot MAC 52:54:00:00:c0:01"},
		"fastest wants more than is left": {layout: lay(boot, `{"type": "bond", "name": "bond0", "members": ["fastest:4"]}`), kind: "invalid",
			says: "interfaces[1] (bond bond0): fastest:4 matches 3 NIC(s) that no other interface claims, not 4"},
		"bond with one member": {
			layout: lay(boot, phys("name:eno2", ""), phys("name:ens1f0", ""), `{"type": "bond", "name": "bond0", "members": ["all"]}`),
			kind:   "invalid", says: "interfaces[3] (bond bond0): a bond with one member (ens1f1) is no bond"},
		"two interfaces claim one NIC": {layout: lay(boot, phys("name:eno1", "")), kind: "invalid",
			says: "interfaces[1] (physical name:eno1): name:eno1 chooses eno1, which interfaces[0] (physical boot) has already"},
		"a bond member claimed by a physical interface": {
			layout: lay(phys("mac:b4:96:91:00:00:10", ""), `{"type": "bond", "name": "bond0", "members": ["name:ens1f0", "name:ens1f1"]}`),
			kind:   "invalid", says: "name:ens1f0 chooses ens1f0, which interfaces[0] (physical mac:b4:96:91:00:00:10) has already"},
		"VLAN on a missing parent": {layout: lay(boot, `{"type": "vlan", "parent": "bond9", "vid": 200}`), kind: "invalid",
			says: "interfaces[1] (vlan bond9.200): parent bond9 is not an interface of the layout (it has eno1)"},
		"VLAN on an InfiniBand port": {layout: lay(phys("ib:0", ""), `{"type": "vlan", "parent": "ib0", "vid": 200}`), kind: "invalid",
			says: "interfaces[1] (vlan ib0.200): parent ib0 is an InfiniBand port, which has partitions, not VLANs"},
		"static address outside its subnet": {
			layout: lay(phys("boot", `{"subnet": "storage", "mode": "static", "address": "10.50.0.77"}`)), kind: "invalid",
			says: "interfaces[0] (physical boot) links[0]: static address 10.50.0.77 is outside its subnet 10.60.0.0/24"},
		"static address taken": {
			setup:  func(s *site) { s.must(reserve("10.50.0.77", "switch-1")) },
			layout: lay(phys("boot", `{"subnet": "boot", "mode": "static", "address": "10.50.0.77"}`)), kind: "conflict",
			says: "interfaces[0] (physical boot) links[0]: static 10.50.0.77: address 10.50.0.77 is already in use (reserved switch-1)"},
		"static address in the dynamic range": {
			layout: lay(phys("boot", `{"mode": "static", "address": "10.50.0.210"}`)), kind: "conflict",
			says: "static 10.50.0.210: 10.50.0.210 is inside dynamic range 10.50.0.200–10.50.0.250"},
		"static address is the gateway": {
			layout: lay(phys("boot", `{"mode": "static", "address": "10.50.0.1"}`)), kind: "conflict",
			says: "10.50.0.1 is the gateway of 10.50.0.0/24"},
		"static address in no subnet": {
			layout: lay(phys("boot", `{"mode": "static", "address": "192.168.9.9"}`)), kind: "invalid",
			says: "static address 192.168.9.9 is in no subnet of the model"},
		"subnet by CIDR that does not exist": {
			layout: lay(phys("boot", `{"subnet": "10.99.0.0/24", "mode": "auto"}`)), kind: "invalid",
			says: "interfaces[0] (physical boot) links[0]: subnet 10.99.0.0/24 does not exist"},
		"subnet by name that does not exist": {
			layout: lay(phys("boot", `{"subnet": "backup", "mode": "auto"}`)), kind: "invalid",
			says: "no subnet is named backup"},
		"boot subnet unknown": {layout: lay(boot), kind: "invalid",
			inv:  func(r *inventory.Report) { r.NICs[0].IPs = []string{"192.168.1.5/24"} },
			says: "subnet boot: the machine's boot subnet is not known"},
		"default gateway without a gateway": {
			layout: lay(phys("boot", `{"subnet": "storage", "mode": "auto", "default_gateway": true}`)), kind: "invalid",
			says: "default_gateway, but subnet 10.60.0.0/24 has no gateway"},
		"second default gateway through a subnet name": {
			setup: func(s *site) {
				s.must(subnet(store.Subnet{CIDR: pfx("10.80.0.0/24"), Name: "mgmt", Fabric: "hall-a", Purpose: "mgmt", Gateway: ip("10.80.0.1")}))
			},
			layout: lay(boot, phys("name:eno2", `{"subnet": "mgmt", "mode": "auto", "default_gateway": true}`)), kind: "invalid",
			says: "interfaces[1] (physical name:eno2) links[0]: a second default gateway (the first is interfaces[0] (physical boot) links[0])"},
		"VLAN subnet on another VID": {
			layout: lay(boot, `{"type": "vlan", "parent": "eno1", "vid": 300, "links": [{"subnet": "storage", "mode": "auto"}]}`), kind: "invalid",
			says: "subnet 10.60.0.0/24 is on VID 200 of fabric hall-a, but eno1.300 tags 300"},
		"VLAN MTU above its parent's": {
			layout: lay(boot, `{"type": "vlan", "parent": "eno1", "vid": 200, "mtu": 9000}`), kind: "invalid",
			says: "interfaces[1] (vlan eno1.200): MTU 9000 is more than its parent eno1's 1500"},
		"rename onto another NIC's name": {
			layout: lay(`{"type": "physical", "select": "boot", "name": "eno2"}`), kind: "invalid",
			says: "the name eno2 is the inventory's name of another NIC (52:54:00:00:c0:02), which keeps it"},
		"subnet full": {
			setup: func(s *site) {
				s.must(subnet(store.Subnet{CIDR: pfx("10.90.0.0/30"), Name: "tiny", Fabric: "hall-a", Purpose: "other"}),
					&raftfsm.MachineCreate{ID: "m-0000000000ff", Now: t0},
					claim(store.HowStatic, "10.90.0.1", "m-0000000000ff", ""), claim(store.HowStatic, "10.90.0.2", "m-0000000000ff", ""))
			},
			layout: lay(phys("boot", `{"subnet": "tiny", "mode": "auto"}`)), kind: "conflict",
			says: "interfaces[0] (physical boot) links[0]: auto: subnet 10.90.0.0/30: no free address"},
		"pin on an interface the layout lacks": {layout: lay(boot), pins: []string{"eth7=10.50.0.60"}, kind: "invalid",
			says: "pin eth7=10.50.0.60: the layout has no interface eth7 (it has eno1)"},
		"pin in no subnet": {layout: lay(boot), pins: []string{"eno1=192.168.9.9"}, kind: "invalid",
			says: "pin eno1=192.168.9.9: 192.168.9.9 is in no subnet of the model"},
		"pin on a subnet without a link": {layout: lay(boot), pins: []string{"eno1=10.60.0.9"}, kind: "invalid",
			says: "pin eno1=10.60.0.9: the layout gives eno1 no link on 10.60.0.0/24"},
		"pin against a static address": {
			layout: lay(phys("boot", `{"subnet": "boot", "mode": "static", "address": "10.50.0.77"}`)), pins: []string{"eno1=10.50.0.60"}, kind: "invalid",
			says: "pin eno1=10.50.0.60: the layout gives eno1 the static address 10.50.0.77 on 10.50.0.0/24"},
		"pin taken": {layout: lay(boot), pins: []string{"eno1=10.50.0.5"}, kind: "conflict",
			says: "pinned 10.50.0.5: 10.50.0.5 is inside reserved range 10.50.0.1–10.50.0.20"},
		"pin on a DHCP link": {layout: lay(phys("boot", `{"subnet": "boot", "mode": "dhcp"}`)), pins: []string{"eno1=10.50.0.60"}, kind: "invalid",
			says: "eno1's link on 10.50.0.0/24 is dhcp, which takes no address"},
		"no inventory": {layout: lay(boot), noInv: true, kind: "invalid",
			says: "machine m-00000000c0de has no inventory: commission it first"},
		"default without a boot NIC": {noInv: false, inv: func(r *inventory.Report) { r.NICs = r.NICs[1:] }, kind: "invalid",
			says: "interfaces[0] (physical boot): boot matches no NIC"},
	} {
		t.Run(name, func(t *testing.T) {
			s := newSite(t)
			inv := gpuNode()
			if c.inv != nil {
				c.inv(inv)
			}
			in := s.input(inv, c.setup, c.pins)
			if c.noInv {
				in.Inventory = nil
			}
			before := s.used()
			_, err := s.resolve(in, "x", c.layout)
			if kindOf(err) != c.kind || !strings.Contains(store.Public(err), c.says) {
				t.Errorf("got %s: %v\nwant %s saying %q", kindOf(err), err, c.kind, c.says)
			}
			if d := cmp.Diff(before, s.used(), addrCmp); d != "" {
				t.Errorf("a refused layout wrote addresses:\n%s", d)
			}
		})
	}
}

func reserve(addr, name string) raftfsm.Command {
	return &raftfsm.AddressClaim{Address: raftfsm.Address{IP: ip(addr), How: store.HowReserved, Name: name, Created: t0}}
}

// TestSelectorsChooseAndSayWhy: fastest and all choose among what the
// explicit selectors left, whatever their order in the layout; ties go to
// the NIC with carrier, then by name; every choice has its reason.
func TestSelectorsChooseAndSayWhy(t *testing.T) {
	s := newSite(t)
	inv := gpuNode()
	inv.NICs = append(inv.NICs,
		inventory.NIC{Name: "ens2f0", MAC: "b4:96:91:00:00:20", SpeedMbps: 25000, Link: false},
		inventory.NIC{Name: "eno3", MAC: "52:54:00:00:c0:03", SpeedMbps: 1000, Link: true})
	in := s.commission(inv)
	p, err := s.resolve(in, "x", `{"interfaces": [
  {"type": "bond", "name": "bond0", "members": ["fastest:2"]},
  {"type": "physical", "select": "name:ens1f0"},
  {"type": "physical", "select": "boot"},
  {"type": "bond", "name": "bond1", "members": ["all"]}
]}`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range p.Choices {
		got = append(got, c.Interface+" "+c.Selector+" "+c.NIC+" "+c.MAC+": "+c.Reason)
	}
	want := []string{
		"bond0 fastest:2 ens1f1 b4:96:91:00:00:11: ens1f1 (25000 Mb/s): the fastest of the 4 NICs no other interface claims",
		"bond0 fastest:2 ens2f0 b4:96:91:00:00:20: ens2f0 (25000 Mb/s, no carrier at commissioning): the 2nd fastest of the 4 NICs no other interface claims",
		"ens1f0 name:ens1f0 ens1f0 b4:96:91:00:00:10: the inventory names it ens1f0",
		"eno1 boot eno1 52:54:00:00:c0:01: eno1 has the machine's boot MAC 52:54:00:00:c0:01",
		"bond1 all eno3 52:54:00:00:c0:03: eno3 (1000 Mb/s): one of the 2 NICs no other interface claims",
		"bond1 all eno2 52:54:00:00:c0:02: eno2 (speed unknown, no carrier at commissioning): one of the 2 NICs no other interface claims",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("choices (-want +got):\n%s", d)
	}
}

// TestNoDefaultRouteIsNoted: a plan without any default route says so.
func TestNoDefaultRouteIsNoted(t *testing.T) {
	s := newSite(t)
	in := s.commission(gpuNode())
	p, err := s.resolve(in, "x", `{"interfaces": [{"type": "physical", "select": "boot", "links": [{"subnet": "boot", "mode": "auto"}]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, "no default route") }) {
		t.Errorf("notes %q do not say the machine gets no default route", p.Notes)
	}
}
