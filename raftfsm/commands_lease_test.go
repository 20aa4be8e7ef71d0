package raftfsm

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/rollcall/rollcall/store"
)

var leaseNet = []Command{
	&NodePut{Node: Node{Name: "n1", RaftAddr: "127.0.0.1:8300", Joined: t0}},
	&FabricPut{Fabric: Fabric{Name: "f", Kind: store.FabricEthernet, Created: t0}},
	&VLANPut{VLAN: VLAN{Fabric: "f", VID: 10, MTU: 1500, DHCP: store.DHCPFull, Servers: []VLANServer{{Node: "n1", Iface: "eth1"}}, Created: t0}},
	&SubnetPut{Subnet: Subnet{CIDR: netip.MustParsePrefix("10.9.0.0/16"), Fabric: "f", VID: 10, Purpose: "provisioning", Created: t0}},
	&RangePut{Range: Range{Subnet: netip.MustParsePrefix("10.9.0.0/16"), Kind: store.RangeDynamic,
		First: netip.MustParseAddr("10.9.0.10"), Last: netip.MustParseAddr("10.9.255.250"), Created: t0}},
	&LeaseBlockClaim{Subnet: netip.MustParsePrefix("10.9.0.0/16"), First: netip.MustParseAddr("10.9.0.10"), Last: netip.MustParseAddr("10.9.255.250"),
		Node: "n1", Expires: t0.Add(time.Hour), Now: t0},
}

// leaseFSM is an FSM with a subnet whose dynamic range is one block of n1.
func leaseFSM(t testing.TB) (*FSM, *store.DB, uint64) {
	f, db := testFSM(t)
	var logs []*raft.Log
	for i, c := range leaseNet {
		logs = append(logs, entry(t, uint64(i+1), c))
	}
	for i, r := range f.ApplyBatch(logs) {
		if res := r.(*Result); res.Err != nil {
			t.Fatalf("setup entry %d: %v", i, res.Err)
		}
	}
	return f, db, uint64(len(logs))
}

func grantBatch(from, n int) *LeaseBatch {
	b := &LeaseBatch{Node: "n1", Now: t0}
	for i := from; i < from+n; i++ {
		ip := netip.AddrFrom4([4]byte{10, 9, byte(i / 240), byte(10 + i%240)})
		b.Grants = append(b.Grants, LeaseGrant{IP: ip, MAC: mac(i), ClientID: "01" + fmt.Sprint(i), Granted: t0, Expires: t0.Add(10 * time.Minute)})
		b.Seen = append(b.Seen, Seen{MAC: mac(i), Node: "n1", Interface: "eth1", VLAN: "f/10", Arch: 7, UserClass: "iPXE", Last: t0})
	}
	return b
}

// The binary body (version 2) carries every field, and the JSON body of
// version 1 that older nodes wrote into the log still decodes and applies.
func TestLeaseBatchBodies(t *testing.T) {
	want := grantBatch(0, 3)
	want.Releases = []LeaseRelease{{IP: netip.MustParseAddr("10.9.0.99"), MAC: mac(99), Declined: true, Until: t0.Add(time.Hour)}, {IP: netip.MustParseAddr("10.9.0.98"), MAC: mac(98)}}
	b, err := Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	if b[1] != 2 {
		t.Fatalf("lease batch encodes as version %d, want 2", b[1])
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	opts := cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
	if d := cmp.Diff(want, got, opts); d != "" {
		t.Errorf("v2 round trip (-want +got):\n%s", d)
	}

	js, _ := json.Marshal(want)
	v1 := append([]byte{byte(TypeLeaseBatch), 1}, js...)
	f, db, idx := leaseFSM(t)
	if r := f.Apply(&raft.Log{Index: idx + 1, Type: raft.LogCommand, Data: v1}).(*Result); r.Err != nil {
		t.Fatal(r.Err)
	}
	db.View(func(tx *store.Tx) error {
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
	good, _ := Encode(grantBatch(0, 2))
	for name, data := range map[string][]byte{
		"truncated":       good[:len(good)-4],
		"trailing":        append(append([]byte(nil), good...), 7),
		"huge count":      append([]byte{byte(TypeLeaseBatch), 2, 2, 'n', '1', 0}, 0xff, 0xff, 0xff, 0xff, 0x0f),
		"bad address len": {byte(TypeLeaseBatch), 2, 0, 0, 1, 5, 1, 2, 3, 4, 5},
	} {
		if _, err := Decode(data); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// BenchmarkLeaseBatchApply is one store applying lease batches of 1,000
// grants and sightings, the work every node does at DHCP rates.
func BenchmarkLeaseBatchApply(b *testing.B) {
	f, _, idx := leaseFSM(b)
	const per = 1000
	var logs [][]*raft.Log
	for i := 0; i < 60; i++ {
		logs = append(logs, []*raft.Log{entry(b, 0, grantBatch(i*per%60000, per))})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l := logs[i%len(logs)]
		idx++
		l[0].Index = idx
		if r := f.ApplyBatch(l)[0].(*Result); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	b.ReportMetric(float64(b.N*per)/b.Elapsed().Seconds(), "grants/s")
}
