package raftfsm_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
)

var leaseNet = []raftfsm.Command{
	&raftfsm.NodePut{Node: raftfsm.Node{Name: "n1", RaftAddr: "127.0.0.1:8300", Joined: t0}},
	&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "f", Kind: store.FabricEthernet, Created: t0}},
	&raftfsm.VLANPut{VLAN: raftfsm.VLAN{Fabric: "f", VID: 10, MTU: 1500, DHCP: store.DHCPFull, Servers: []raftfsm.VLANServer{{Node: "n1", Iface: "eth1"}}, Created: t0}},
	&raftfsm.SubnetPut{Subnet: raftfsm.Subnet{CIDR: netip.MustParsePrefix("10.9.0.0/16"), Fabric: "f", VID: 10, Purpose: "provisioning", Created: t0}},
	&raftfsm.RangePut{Range: raftfsm.Range{Subnet: netip.MustParsePrefix("10.9.0.0/16"), Kind: store.RangeDynamic,
		First: netip.MustParseAddr("10.9.0.10"), Last: netip.MustParseAddr("10.9.255.250"), Created: t0}},
	&raftfsm.LeaseBlockClaim{Subnet: netip.MustParsePrefix("10.9.0.0/16"), First: netip.MustParseAddr("10.9.0.10"), Last: netip.MustParseAddr("10.9.255.250"),
		Node: "n1", Expires: t0.Add(time.Hour), Now: t0},
}

// leaseFSM is a store with a subnet whose dynamic range is one block of n1.
func leaseFSM(t testing.TB) *fsmtest.Log {
	l := fsmtest.Open(t)
	if err := l.ApplyBatch(leaseNet...); err != nil {
		t.Fatalf("setup: %v", err)
	}
	return l
}

func grantBatch(from, n int) *raftfsm.LeaseBatch {
	b := &raftfsm.LeaseBatch{Node: "n1", Now: t0}
	for i := from; i < from+n; i++ {
		ip := netip.AddrFrom4([4]byte{10, 9, byte(i / 240), byte(10 + i%240)})
		b.Grants = append(b.Grants, raftfsm.LeaseGrant{IP: ip, MAC: mac(i), ClientID: "01" + fmt.Sprint(i), Granted: t0, Expires: t0.Add(10 * time.Minute)})
		b.Seen = append(b.Seen, raftfsm.Seen{MAC: mac(i), Node: "n1", Interface: "eth1", VLAN: "f/10", Arch: 7, UserClass: "iPXE", Last: t0})
	}
	return b
}

// The binary body (version 2) carries every field, and the JSON body of
// version 1 that older nodes wrote into the log still decodes and applies.
func TestLeaseBatchBodies(t *testing.T) {
	want := grantBatch(0, 3)
	want.Releases = []raftfsm.LeaseRelease{{IP: netip.MustParseAddr("10.9.0.99"), MAC: mac(99), Declined: true, Until: t0.Add(time.Hour)}, {IP: netip.MustParseAddr("10.9.0.98"), MAC: mac(98)}}
	b, err := raftfsm.Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	if b[1] != 2 {
		t.Fatalf("lease batch encodes as version %d, want 2", b[1])
	}
	got, err := raftfsm.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	opts := cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
	if d := cmp.Diff(want, got, opts); d != "" {
		t.Errorf("v2 round trip (-want +got):\n%s", d)
	}

	js, _ := json.Marshal(want)
	v1 := append([]byte{byte(raftfsm.TypeLeaseBatch), 1}, js...)
	f := leaseFSM(t)
	if err := f.ApplyRaw(v1); err != nil {
		t.Fatal(err)
	}
	f.DB.View(func(tx *store.Tx) error {
		for _, g := range want.Grants {
			l, err := tx.Lease(g.IP)
			if err != nil || l.MAC != g.MAC || l.Subnet != netip.MustParsePrefix("10.9.0.0/16") {
				t.Errorf("lease %s from a v1 body: %+v, %v", g.IP, l, err)
			}
		}
		if s, err := tx.SeenMAC(mac(1)); err != nil || s.UserClass != "iPXE" {
			t.Errorf("sighting from a v1 body: %+v, %v", s, err)
		}
		return nil
	})
}

// A v2 body that lies about its counts or ends early is refused before it
// allocates for the lie.
func TestLeaseBatchBodyRefusesDamage(t *testing.T) {
	good, _ := raftfsm.Encode(grantBatch(0, 2))
	for name, data := range map[string][]byte{
		"truncated":       good[:len(good)-4],
		"trailing":        append(append([]byte(nil), good...), 7),
		"huge count":      append([]byte{byte(raftfsm.TypeLeaseBatch), 2, 2, 'n', '1', 0}, 0xff, 0xff, 0xff, 0xff, 0x0f),
		"bad address len": {byte(raftfsm.TypeLeaseBatch), 2, 0, 0, 1, 5, 1, 2, 3, 4, 5},
	} {
		if _, err := raftfsm.Decode(data); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// BenchmarkLeaseBatchApply is one store applying lease batches of 1,000
// grants and sightings, the work every node does at DHCP rates.
func BenchmarkLeaseBatchApply(b *testing.B) {
	f := leaseFSM(b)
	const per = 1000
	var entries [][]byte
	for i := 0; i < 60; i++ {
		e, err := raftfsm.Encode(grantBatch(i*per%60000, per))
		if err != nil {
			b.Fatal(err)
		}
		entries = append(entries, e)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := f.ApplyRaw(entries[i%len(entries)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*per)/b.Elapsed().Seconds(), "grants/s")
}
