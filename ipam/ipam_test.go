package ipam_test

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/ipam"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// TestRules drives every rule of the "Bad input" list (and the
// neighbouring ones) through the state machine on top of the reference's
// example site. Each refusal must carry its error class and name both sides
// of the conflict, and must change nothing.
func TestRules(t *testing.T) {
	m1 := machineID(1)
	cases := map[string]struct {
		setup   []raftfsm.Command
		cmd     raftfsm.Command
		wantErr error    // nil: accepted
		mention []string // substrings of the message
	}{
		"overlapping subnet, same fabric": {
			cmd:     subnet("10.50.0.0/16", ""),
			wantErr: store.ErrConflict, mention: []string{"10.50.0.0/16", "10.50.0.0/24", "hall-a"},
		},
		"overlapping subnet inside": {
			cmd:     subnet("10.50.0.128/25", ""),
			wantErr: store.ErrConflict, mention: []string{"10.50.0.128/25", "10.50.0.0/24"},
		},
		"overlapping subnet, other fabric": {
			setup: []raftfsm.Command{fabric("hall-b"), vlan("hall-b", 0)},
			cmd: &raftfsm.SubnetPut{Subnet: raftfsm.Subnet{
				CIDR: pfx("10.50.0.0/23"), Fabric: "hall-b", Purpose: "mgmt", Created: t0,
			}},
			wantErr: store.ErrConflict, mention: []string{"10.50.0.0/23", "10.50.0.0/24", "hall-a"},
		},
		"adjacent subnet": {cmd: subnet("10.50.1.0/24", "")},
		"subnet with host bits": {
			cmd:     subnet("10.50.1.7/24", ""),
			wantErr: store.ErrInvalid, mention: []string{"10.50.1.7/24", "10.50.1.0/24"},
		},
		"gateway outside its subnet": {
			cmd:     subnet("10.51.0.0/24", "10.52.0.1"),
			wantErr: store.ErrInvalid, mention: []string{"10.52.0.1", "10.51.0.0/24"},
		},
		"subnet VID outside 0–4094": {
			cmd: &raftfsm.SubnetPut{Subnet: raftfsm.Subnet{
				CIDR: pfx("10.60.0.0/24"), Fabric: "hall-a", VID: 4095, Purpose: "storage", Created: t0,
			}},
			wantErr: store.ErrInvalid, mention: []string{"4095"},
		},
		"unknown purpose": {
			cmd: &raftfsm.SubnetPut{Subnet: raftfsm.Subnet{
				CIDR: pfx("10.60.0.0/24"), Fabric: "hall-a", Purpose: "gpu", Created: t0,
			}},
			wantErr: store.ErrInvalid, mention: []string{`"gpu"`, "provisioning, mgmt, bmc, storage, ib, other"},
		},
		"range outside its subnet": {
			cmd:     rng("10.50.0.0/24", store.RangeStatic, "10.50.0.251", "10.50.1.10"),
			wantErr: store.ErrInvalid, mention: []string{"10.50.0.251–10.50.1.10", "10.50.0.0/24"},
		},
		"range on the broadcast address": {
			cmd:     rng("10.50.0.0/24", store.RangeReserved, "10.50.0.251", "10.50.0.255"),
			wantErr: store.ErrInvalid, mention: []string{"10.50.0.255", "10.50.0.0/24"},
		},
		"range ending before it starts": {
			cmd:     rng("10.50.0.0/24", store.RangeReserved, "10.50.0.30", "10.50.0.25"),
			wantErr: store.ErrInvalid, mention: []string{"10.50.0.30–10.50.0.25"},
		},
		"range of an unknown kind": {
			cmd:     rng("10.50.0.0/24", "pool", "10.50.0.21", "10.50.0.30"),
			wantErr: store.ErrInvalid, mention: []string{`"pool"`, "dynamic, reserved, static"},
		},
		"range in an unknown subnet": {
			cmd:     rng("10.99.0.0/24", store.RangeStatic, "10.99.0.10", "10.99.0.20"),
			wantErr: store.ErrNotFound, mention: []string{"10.99.0.0/24"},
		},
		"overlapping ranges": {
			cmd:     rng("10.50.0.0/24", store.RangeStatic, "10.50.0.240", "10.50.0.252"),
			wantErr: store.ErrConflict, mention: []string{"10.50.0.240–10.50.0.252", "dynamic range 10.50.0.200–10.50.0.250"},
		},
		"range inside another": {
			cmd:     rng("10.50.0.0/24", store.RangeReserved, "10.50.0.60", "10.50.0.61"),
			wantErr: store.ErrConflict, mention: []string{"10.50.0.60–10.50.0.61", "static range 10.50.0.50–10.50.0.199"},
		},
		"range in a gap": {cmd: rng("10.50.0.0/24", store.RangeReserved, "10.50.0.21", "10.50.0.49")},
		"gateway inside a dynamic range": {
			setup:   []raftfsm.Command{subnet("10.51.0.0/24", "10.51.0.1")},
			cmd:     rng("10.51.0.0/24", store.RangeDynamic, "10.51.0.1", "10.51.0.50"),
			wantErr: store.ErrConflict, mention: []string{"10.51.0.1–10.51.0.50", "gateway 10.51.0.1"},
		},
		"reservation inside a dynamic range": {
			cmd:     reserve("10.50.0.210", "switch-1"),
			wantErr: store.ErrConflict, mention: []string{"10.50.0.210", "dynamic range 10.50.0.200–10.50.0.250"},
		},
		"dynamic range over a reservation": {
			setup:   []raftfsm.Command{subnet("10.51.0.0/24", ""), reserve("10.51.0.30", "switch-2")},
			cmd:     rng("10.51.0.0/24", store.RangeDynamic, "10.51.0.20", "10.51.0.40"),
			wantErr: store.ErrConflict, mention: []string{"10.51.0.20–10.51.0.40", "10.51.0.30", "switch-2"},
		},
		"reservation inside a reserved range": {cmd: reserve("10.50.0.5", "switch-1")},
		"reservation inside a static range":   {cmd: reserve("10.50.0.60", "pdu-1")},
		"reservation without a name": {
			cmd:     reserve("10.50.0.5", ""),
			wantErr: store.ErrInvalid, mention: []string{"name"},
		},
		"address taken twice": {
			setup:   []raftfsm.Command{reserve("10.50.0.5", "switch-1")},
			cmd:     reserve("10.50.0.5", "switch-9"),
			wantErr: store.ErrConflict, mention: []string{"10.50.0.5", "reserved switch-1"},
		},
		"static address inside a reserved range": {
			cmd:     claim(store.HowStatic, "10.50.0.6", m1),
			wantErr: store.ErrConflict, mention: []string{"10.50.0.6", "reserved range 10.50.0.1–10.50.0.20"},
		},
		"static address on the gateway": {
			setup:   []raftfsm.Command{subnet("10.51.0.0/24", "10.51.0.1")},
			cmd:     claim(store.HowStatic, "10.51.0.1", m1),
			wantErr: store.ErrConflict, mention: []string{"10.51.0.1", "gateway", "10.51.0.0/24"},
		},
		"address in no subnet": {
			cmd:     claim(store.HowStatic, "10.99.0.5", m1),
			wantErr: store.ErrNotFound, mention: []string{"10.99.0.5"},
		},
		"address for an unknown machine": {
			cmd:     claim(store.HowStatic, "10.50.0.60", machineID(9)),
			wantErr: store.ErrNotFound, mention: []string{machineID(9)},
		},
		"DHCP lease outside the dynamic range": {
			cmd:     claim(store.HowDHCP, "10.50.0.60", m1),
			wantErr: store.ErrInvalid, mention: []string{"10.50.0.60", "10.50.0.0/24"},
		},
		"DHCP lease in the dynamic range": {cmd: claim(store.HowDHCP, "10.50.0.220", m1)},
		"VID above 4094": {
			cmd:     vlan("hall-a", 4095),
			wantErr: store.ErrInvalid, mention: []string{"4095", "0–4094"},
		},
		"VID below 0": {
			cmd:     vlan("hall-a", -1),
			wantErr: store.ErrInvalid, mention: []string{"-1", "0–4094"},
		},
		"VID 4094":       {cmd: vlan("hall-a", 4094)},
		"VLAN twice":     {cmd: vlan("hall-a", 0), wantErr: store.ErrConflict, mention: []string{"VLAN 0", `"hall-a"`}},
		"VLAN of no fab": {cmd: vlan("hall-z", 10), wantErr: store.ErrNotFound, mention: []string{"hall-z"}},
		"VLAN serving DHCP without a node": {
			cmd:     &raftfsm.VLANPut{VLAN: raftfsm.VLAN{Fabric: "hall-a", VID: 10, DHCP: store.DHCPFull}},
			wantErr: store.ErrInvalid, mention: []string{"hall-a/10", "-node"},
		},
		"VLAN DHCP mode unknown": {
			cmd:     &raftfsm.VLANPut{VLAN: raftfsm.VLAN{Fabric: "hall-a", VID: 10, DHCP: "relay"}},
			wantErr: store.ErrInvalid, mention: []string{`"relay"`, "off, full, proxy"},
		},
		"VLAN boot loader unknown": {
			cmd:     &raftfsm.VLANPut{VLAN: raftfsm.VLAN{Fabric: "hall-a", VID: 10, DHCP: store.DHCPOff, BootLoader: "grub"}},
			wantErr: store.ErrInvalid, mention: []string{`"grub"`, "ipxe, pxelinux"},
		},
		"VLAN boot loader pxelinux": {cmd: &raftfsm.VLANPut{VLAN: raftfsm.VLAN{Fabric: "hall-a", VID: 10, DHCP: store.DHCPOff, BootLoader: store.BootLoaderPXELinux}}},
		"VLAN boot loader ipxe":     {cmd: &raftfsm.VLANPut{VLAN: raftfsm.VLAN{Fabric: "hall-a", VID: 10, DHCP: store.DHCPOff, BootLoader: store.BootLoaderIPXE}}},
		"fabric kind unknown": {
			cmd:     &raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "hall-c", Kind: "token-ring"}},
			wantErr: store.ErrInvalid, mention: []string{`"token-ring"`, "ethernet, infiniband"},
		},
		"fabric twice": {cmd: fabric("hall-a"), wantErr: store.ErrConflict, mention: []string{`"hall-a"`}},
		"fabric removed with its VLAN": {
			cmd:     &raftfsm.FabricDelete{Name: "hall-a"},
			wantErr: store.ErrConflict, mention: []string{`"hall-a"`, "VLAN 0"},
		},
		"VLAN removed with its subnet": {
			cmd:     &raftfsm.VLANDelete{Fabric: "hall-a", VID: 0},
			wantErr: store.ErrConflict, mention: []string{"hall-a/0", "10.50.0.0/24"},
		},
		"subnet removed with addresses": {
			setup:   []raftfsm.Command{reserve("10.50.0.5", "switch-1")},
			cmd:     &raftfsm.SubnetDelete{CIDR: pfx("10.50.0.0/24")},
			wantErr: store.ErrConflict, mention: []string{"10.50.0.0/24", "10.50.0.5", "-force"},
		},
		"subnet removed with addresses, forced": {
			setup: []raftfsm.Command{reserve("10.50.0.5", "switch-1")},
			cmd:   &raftfsm.SubnetDelete{CIDR: pfx("10.50.0.0/24"), Force: true},
		},
		"subnet removed without addresses": {cmd: &raftfsm.SubnetDelete{CIDR: pfx("10.50.0.0/24")}},
		"IPv6 dynamic range": {
			setup:   []raftfsm.Command{subnet("fd00:50::/64", "")},
			cmd:     rng("fd00:50::/64", store.RangeDynamic, "fd00:50::100", "fd00:50::1ff"),
			wantErr: store.ErrInvalid, mention: []string{"fd00:50::100–fd00:50::1ff", "DHCPv6 is not served yet"},
		},
		"IPv6 static range": {
			setup: []raftfsm.Command{subnet("fd00:50::/64", "")},
			cmd:   rng("fd00:50::/64", store.RangeStatic, "fd00:50::100", "fd00:50::1ff"),
		},
		"IPv4 range in an IPv6 subnet": {
			setup:   []raftfsm.Command{subnet("fd00:50::/64", "")},
			cmd:     rng("fd00:50::/64", store.RangeStatic, "10.50.0.30", "10.50.0.40"),
			wantErr: store.ErrInvalid, mention: []string{"10.50.0.30–10.50.0.40", "fd00:50::/64"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := site(t)
			c.must(tc.setup...)
			before := c.dump()
			err := c.Apply(tc.cmd)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("message %q does not name %q", err, m)
				}
			}
			if after := c.dump(); after != before {
				t.Errorf("a refused command changed the store:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

func TestParseVID(t *testing.T) {
	for in, want := range map[string]int{"0": 0, "200": 200, "4094": 4094, "4095": -1, "-1": -1, "x": -1, "": -1} {
		got, err := ipam.ParseVID(in)
		if want < 0 {
			if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "0–4094") {
				t.Errorf("ParseVID(%q) = %d, %v; want an invalid error naming 0–4094", in, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("ParseVID(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

// allocate picks on c and claims what it picked, as a proposer does.
func allocate(t testing.TB, c *copyFSM, p netip.Prefix, machine string) netip.Addr {
	t.Helper()
	a, err := c.pick(p)
	if err != nil {
		t.Fatalf("pick in %s: %v", p, err)
	}
	if err := c.Apply(claim(store.HowAuto, a.String(), machine)); err != nil {
		t.Fatalf("claim %s: %v", a, err)
	}
	return a
}

func TestAllocationOrder(t *testing.T) {
	m1 := machineID(1)
	tests := map[string]struct {
		setup []raftfsm.Command
		p     string
		want  []string // the first picks, in order
	}{
		"IPv4 static range from its start": {
			p:    "10.50.0.0/24",
			want: []string{"10.50.0.50", "10.50.0.51", "10.50.0.52"},
		},
		"IPv4 static ranges in order": {
			setup: []raftfsm.Command{
				subnet("10.51.0.0/24", "10.51.0.1"),
				rng("10.51.0.0/24", store.RangeStatic, "10.51.0.100", "10.51.0.101"),
				rng("10.51.0.0/24", store.RangeStatic, "10.51.0.10", "10.51.0.11"),
			},
			p:    "10.51.0.0/24",
			want: []string{"10.51.0.10", "10.51.0.11", "10.51.0.100", "10.51.0.101"},
		},
		"IPv4 without a static range skips the gateway and the ranges": {
			setup: []raftfsm.Command{
				subnet("10.51.0.0/24", "10.51.0.12"),
				rng("10.51.0.0/24", store.RangeReserved, "10.51.0.1", "10.51.0.10"),
				rng("10.51.0.0/24", store.RangeDynamic, "10.51.0.14", "10.51.0.252"),
			},
			p:    "10.51.0.0/24",
			want: []string{"10.51.0.11", "10.51.0.13", "10.51.0.253", "10.51.0.254"},
		},
		"IPv4 without any range": {
			setup: []raftfsm.Command{subnet("10.51.0.0/30", "10.51.0.1")},
			p:     "10.51.0.0/30",
			want:  []string{"10.51.0.2"},
		},
		"IPv6 static range from its start": {
			setup: []raftfsm.Command{
				subnet("fd00:50::/64", "fd00:50::1"),
				rng("fd00:50::/64", store.RangeStatic, "fd00:50::a:0", "fd00:50::a:ffff"),
			},
			p:    "fd00:50::/64",
			want: []string{"fd00:50::a:0", "fd00:50::a:1", "fd00:50::a:2"},
		},
		"IPv6 without a static range skips the gateway and reserved": {
			setup: []raftfsm.Command{
				subnet("fd00:50::/64", "fd00:50::1"),
				rng("fd00:50::/64", store.RangeReserved, "fd00:50::2", "fd00:50::ff"),
			},
			p:    "fd00:50::/64",
			want: []string{"fd00:50::100", "fd00:50::101"},
		},
		"IPv6 at the top of the subnet": {
			setup: []raftfsm.Command{
				subnet("fd00:50::/126", ""),
				rng("fd00:50::/126", store.RangeStatic, "fd00:50::2", "fd00:50::3"),
			},
			p:    "fd00:50::/126",
			want: []string{"fd00:50::2", "fd00:50::3"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := site(t)
			c.must(tc.setup...)
			var got []string
			for range tc.want {
				got = append(got, allocate(t, c, pfx(tc.p), m1).String())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("allocated %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSubnetFull(t *testing.T) {
	c := site(t)
	c.must(subnet("10.51.0.0/24", ""), rng("10.51.0.0/24", store.RangeStatic, "10.51.0.10", "10.51.0.12"))
	for range 3 {
		allocate(t, c, pfx("10.51.0.0/24"), machineID(1))
	}
	_, err := c.pick(pfx("10.51.0.0/24"))
	if !errors.Is(err, ipam.ErrFull) || !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "10.51.0.0/24") {
		t.Fatalf("pick in a full range: %v", err)
	}
	// Freeing an address of a full span must make it visible again.
	c.must(release("10.51.0.11"))
	if a := allocate(t, c, pfx("10.51.0.0/24"), machineID(1)); a != ip("10.51.0.11") {
		t.Fatalf("after release got %s, want 10.51.0.11", a)
	}
}

func TestReleaseReallocates(t *testing.T) {
	c := site(t)
	p := pfx("10.50.0.0/24")
	for range 5 {
		allocate(t, c, p, machineID(1)) // .50 to .54
	}
	c.must(release("10.50.0.52"), release("10.50.0.51"))
	for _, want := range []string{"10.50.0.51", "10.50.0.52", "10.50.0.55"} {
		if a := allocate(t, c, p, machineID(1)); a.String() != want {
			t.Fatalf("allocated %s, want %s", a, want)
		}
	}
	// Releasing an address above the next free one changes nothing below.
	c.must(release("10.50.0.54"))
	if a := allocate(t, c, p, machineID(1)); a.String() != "10.50.0.54" {
		t.Fatalf("allocated %s, want 10.50.0.54", a)
	}
	err := c.Apply(release("10.50.0.99"))
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "10.50.0.99") {
		t.Fatalf("release of a free address: %v", err)
	}
}

func TestAdoption(t *testing.T) {
	c := site(t)
	c.must(
		commissioned(2, "10.60.0.17", "10.60.0.18", "fd00:60::17", "192.0.2.1"),
		commissioned(3, "10.60.0.40"),
		subnet("10.51.0.0/24", ""),
	)
	// A subnet defined after the machines reported: their addresses in it
	// are recorded, nothing else.
	c.must(&raftfsm.SubnetPut{Subnet: raftfsm.Subnet{CIDR: pfx("10.60.0.0/24"), Fabric: "hall-a", Purpose: "storage", Created: t0}})
	got := map[string]string{}
	for _, a := range c.used(pfx("10.60.0.0/24")) {
		if a.How != store.HowAdopted || a.Subnet != pfx("10.60.0.0/24") {
			t.Errorf("adopted %+v", a)
		}
		got[a.IP.String()] = a.Machine
	}
	want := map[string]string{"10.60.0.17": machineID(2), "10.60.0.18": machineID(2), "10.60.0.40": machineID(3)}
	if len(got) != len(want) {
		t.Fatalf("adopted %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("adopted %v, want %v", got, want)
		}
	}
	// Adopted addresses are used: a static range over them does not hand
	// them out, and the IPv6 subnet adopts its own when it comes.
	c.must(rng("10.60.0.0/24", store.RangeStatic, "10.60.0.17", "10.60.0.20"))
	if a := allocate(t, c, pfx("10.60.0.0/24"), machineID(1)); a.String() != "10.60.0.19" {
		t.Fatalf("allocated %s, want 10.60.0.19", a)
	}
	c.must(&raftfsm.SubnetPut{Subnet: raftfsm.Subnet{CIDR: pfx("fd00:60::/64"), Fabric: "hall-a", Purpose: "storage", Created: t0}})
	if u := c.used(pfx("fd00:60::/64")); len(u) != 1 || u[0].IP != ip("fd00:60::17") || u[0].Machine != machineID(2) {
		t.Fatalf("IPv6 adoption: %+v", u)
	}
	// And a dynamic range may not be laid over an adopted address? It may:
	// adoption records what is, the DHCP server skips used addresses.
	if err := c.Apply(rng("10.60.0.0/24", store.RangeDynamic, "10.60.0.30", "10.60.0.50")); err != nil {
		t.Fatalf("dynamic range over an adopted address: %v", err)
	}
}

// lowestFree is the reference answer for Pick, by brute force over the
// subnet: the first address of the static ranges (or, with none, outside
// the dynamic and reserved ranges) that is unused and not the gateway.
func lowestFree(s store.Subnet, ranges []store.Range, used map[netip.Addr]bool) (netip.Addr, bool) {
	hasStatic := slices.ContainsFunc(ranges, func(r store.Range) bool { return r.Kind == store.RangeStatic })
	last := s.CIDR.Masked().Addr()
	for a := s.CIDR.Masked().Addr().Next(); s.CIDR.Contains(a); a = a.Next() {
		last = a
	}
	for a := s.CIDR.Masked().Addr().Next(); a.Less(last); a = a.Next() { // last is the broadcast
		if used[a] || a == s.Gateway {
			continue
		}
		inStatic, inOther := false, false
		for _, r := range ranges {
			if r.Contains(a) {
				inStatic = r.Kind == store.RangeStatic
				inOther = !inStatic
			}
		}
		if hasStatic && inStatic || !hasStatic && !inOther {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// TestHintsFollowRanges checks Pick against the brute-force answer after
// every step of random sequences of claims, releases and range changes:
// the allocation hints never skip a free address.
func TestHintsFollowRanges(t *testing.T) {
	for seed := range uint64(8) {
		t.Run("", func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 1))
			c := site(t)
			p := pfx("10.70.0.0/26") // 62 hosts
			s := store.Subnet{CIDR: p, Fabric: "hall-a", Purpose: "mgmt", Gateway: ip("10.70.0.9"), Created: t0}
			c.must(&raftfsm.SubnetPut{Subnet: raftfsm.SubnetBody(s)})
			used := map[netip.Addr]bool{}
			var ranges []store.Range
			host := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 70, 0, byte(1 + i%62)}) }
			for step := range 400 {
				switch op := r.IntN(10); {
				case op < 5: // allocate
					want, ok := lowestFree(s, ranges, used)
					got, err := c.pick(p)
					if !ok {
						if !errors.Is(err, ipam.ErrFull) {
							t.Fatalf("step %d: pick = %s, %v; want full", step, got, err)
						}
						continue
					}
					if err != nil || got != want {
						t.Fatalf("step %d: pick = %s, %v; want %s (ranges %v)", step, got, err, want, ranges)
					}
					c.must(claim(store.HowAuto, got.String(), machineID(1)))
					used[got] = true
				case op < 7: // release one
					if len(used) == 0 {
						continue
					}
					keys := slices.SortedFunc(func(yield func(netip.Addr) bool) {
						for a := range used {
							if !yield(a) {
								return
							}
						}
					}, netip.Addr.Compare)
					a := keys[r.IntN(len(keys))]
					c.must(&raftfsm.AddressRelease{IP: a})
					delete(used, a)
				case op < 9: // add a range where it fits
					first := host(r.IntN(62))
					last := first
					for range r.IntN(8) {
						if n := last.Next(); n.Less(ip("10.70.0.63")) {
							last = n
						}
					}
					kind := []string{store.RangeStatic, store.RangeReserved, store.RangeDynamic}[r.IntN(3)]
					rg := store.Range{Subnet: p, Kind: kind, First: first, Last: last, Created: t0}
					if err := c.Apply(&raftfsm.RangePut{Range: raftfsm.RangeBody(rg)}); err == nil {
						ranges = append(ranges, rg)
						slices.SortFunc(ranges, func(a, b store.Range) int { return a.First.Compare(b.First) })
					}
				default: // remove a range
					if len(ranges) == 0 {
						continue
					}
					i := r.IntN(len(ranges))
					c.must(&raftfsm.RangeDelete{Subnet: p, First: ranges[i].First})
					ranges = slices.Delete(ranges, i, i+1)
				}
			}
			// Fill what is left: everything auto allocation may hand out
			// gets handed out, and nothing twice.
			for {
				want, ok := lowestFree(s, ranges, used)
				got, err := c.pick(p)
				if !ok {
					if !errors.Is(err, ipam.ErrFull) {
						t.Fatalf("fill: pick = %s, %v; want full", got, err)
					}
					break
				}
				if got != want {
					t.Fatalf("fill: pick = %s, %v; want %s", got, err, want)
				}
				c.must(claim(store.HowAuto, got.String(), machineID(1)))
				used[got] = true
			}
			if n := len(c.used(p)); n != len(used) {
				t.Fatalf("store holds %d addresses, the model %d", n, len(used))
			}
		})
	}
}

// The reference's order: `subnet add … -vid 200` before any `vlan add`
// creates VLAN 200 (DHCP off, implicit), and a later `vlan add` describes it
// instead of failing; a second explicit `vlan add` is a conflict.
func TestSubnetCreatesItsVLAN(t *testing.T) {
	c := newCopy(t)
	c.must(fabric("hall-a"))
	c.must(&raftfsm.NodePut{Node: raftfsm.Node{Name: "rack1", RaftAddr: "127.0.0.1:8300", Joined: t0}})
	c.must(&raftfsm.SubnetPut{Subnet: raftfsm.Subnet{CIDR: pfx("10.60.0.0/24"), Fabric: "hall-a", VID: 200, Purpose: "storage", Created: t0}})
	var v store.VLAN
	c.DB.View(func(tx *store.Tx) error { v, _ = tx.VLAN("hall-a", 200); return nil })
	if !v.Implicit || v.DHCP != store.DHCPOff {
		t.Fatalf("implicit VLAN: %+v", v)
	}
	add := &raftfsm.VLANPut{VLAN: raftfsm.VLAN{Fabric: "hall-a", VID: 200, DHCP: store.DHCPFull, Servers: []raftfsm.VLANServer{{Node: "rack1"}}, Created: t0}}
	if err := c.Apply(add); err != nil {
		t.Fatalf("vlan add over an implicit VLAN: %v", err)
	}
	c.DB.View(func(tx *store.Tx) error { v, _ = tx.VLAN("hall-a", 200); return nil })
	if v.Implicit || v.DHCP != store.DHCPFull {
		t.Fatalf("described VLAN: %+v", v)
	}
	if err := c.Apply(add); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second vlan add: %v", err)
	}
}

// TestCheckClaimAndClaimAll: CheckClaim refuses what Claim refuses, in the
// same words, and writes nothing; ClaimAll writes every address or none.
func TestCheckClaimAndClaimAll(t *testing.T) {
	c := site(t)
	c.must(reserve("10.50.0.60", "switch-1"))
	addr := func(a string) store.Address {
		return store.Address{IP: ip(a), How: store.HowStatic, Machine: machineID(1), Created: t0}
	}
	before := c.dump()
	for a, says := range map[string]string{
		"10.50.0.60":  "address 10.50.0.60 is already in use (reserved switch-1)",
		"10.50.0.210": "10.50.0.210 is inside dynamic range 10.50.0.200–10.50.0.250",
		"10.50.0.1":   "10.50.0.1 is the gateway of 10.50.0.0/24",
		"10.50.0.5":   "10.50.0.5 is inside reserved range 10.50.0.1–10.50.0.20",
		"10.99.0.1":   "address 10.99.0.1 is in no known subnet",
	} {
		var checked, claimed error
		c.DB.View(func(tx *store.Tx) error { checked = ipam.CheckClaim(tx, addr(a)); return nil })
		c.DB.DryRun(func(tx *store.Tx) error { claimed = ipam.Claim(tx, addr(a)); return nil })
		if checked == nil || claimed == nil || checked.Error() != claimed.Error() || !strings.Contains(checked.Error(), says) {
			t.Errorf("%s: CheckClaim %v, Claim %v, want both saying %q", a, checked, claimed, says)
		}
	}
	if err := c.DB.View(func(tx *store.Tx) error { return ipam.CheckClaim(tx, addr("10.50.0.70")) }); err != nil {
		t.Errorf("CheckClaim of a free address: %v", err)
	}
	for name, as := range map[string][]store.Address{
		"one taken":   {addr("10.50.0.70"), addr("10.50.0.60")},
		"named twice": {addr("10.50.0.70"), addr("10.50.0.70")},
	} {
		err := c.DB.Update(func(tx *store.Tx) error { return ipam.ClaimAll(tx, as) })
		if err == nil {
			t.Errorf("ClaimAll %s: accepted", name)
		}
	}
	if after := c.dump(); after != before {
		t.Errorf("refused claims changed the model:\n%s\n%s", before, after)
	}
	if err := c.DB.Update(func(tx *store.Tx) error {
		return ipam.ClaimAll(tx, []store.Address{addr("10.50.0.70"), addr("10.50.0.71")})
	}); err != nil {
		t.Fatal(err)
	}
	if got := len(c.used(pfx("10.50.0.0/24"))); got != 3 {
		t.Errorf("after ClaimAll of two, %d addresses are used, want 3", got)
	}
}
