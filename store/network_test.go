package store

import (
	"errors"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func openNetDB(t *testing.T) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// write runs fn in a write transaction stamped with index.
func netWrite(t *testing.T, db *DB, index uint64, fn func(tx *Tx) error) {
	t.Helper()
	if err := db.Update(func(tx *Tx) error { tx.Index = index; return fn(tx) }); err != nil {
		t.Fatal(err)
	}
}

func netAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestAddressRecords(t *testing.T) {
	db := openNetDB(t)
	p := netip.MustParsePrefix("10.50.0.0/24")
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	netWrite(t, db, 7, func(tx *Tx) error {
		for _, a := range []Address{
			{IP: netAddr("10.50.0.10"), Subnet: p, How: HowAuto, Machine: "m-1", Created: now},
			{IP: netAddr("10.50.0.11"), Subnet: p, How: HowAuto, Machine: "m-1", Created: now},
			{IP: netAddr("10.50.0.5"), Subnet: p, How: HowReserved, Name: "switch-1", Created: now},
			{IP: netAddr("10.51.0.1"), How: HowStatic, Machine: "m-2", Created: now},
			{IP: netAddr("fd00::1"), How: HowStatic, Machine: "m-1", Created: now},
		} {
			if err := tx.PutAddress(a); err != nil {
				return err
			}
		}
		return nil
	})
	netWrite(t, db, 8, func(tx *Tx) error {
		err := tx.PutAddress(Address{IP: netAddr("10.50.0.5"), How: HowStatic, Machine: "m-3"})
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "10.50.0.5") || !strings.Contains(err.Error(), "reserved switch-1") {
			t.Errorf("second claim of 10.50.0.5: %v", err)
		}
		return nil
	})
	db.View(func(tx *Tx) error {
		if tx.TableIndex(TableNetwork) != 7 {
			t.Errorf("network table index %d, want 7 (a refused write changes nothing)", tx.TableIndex(TableNetwork))
		}
		rec, err := tx.Address(netAddr("10.50.0.10"))
		if err != nil || rec.Index != 7 || rec.Machine != "m-1" || !rec.Created.Equal(now) {
			t.Errorf("record = %+v, %v", rec, err)
		}
		if _, err := tx.Address(netAddr("10.50.0.99")); !errors.Is(err, ErrNotFound) {
			t.Errorf("free address: %v", err)
		}
		in, _ := tx.Addresses(p, 0)
		if got := netIPs(in); !slices.Equal(got, []string{"10.50.0.5", "10.50.0.10", "10.50.0.11"}) {
			t.Errorf("Addresses(%s) = %v", p, got)
		}
		if two, _ := tx.Addresses(p, 2); len(two) != 2 {
			t.Errorf("limit 2: %d", len(two))
		}
		all, _ := tx.Addresses(netip.Prefix{}, 0)
		if got := netIPs(all); !slices.Equal(got, []string{"10.50.0.5", "10.50.0.10", "10.50.0.11", "10.51.0.1", "fd00::1"}) {
			t.Errorf("every address = %v", got)
		}
		m1, _ := tx.MachineAddresses("m-1")
		if got := netIPs(m1); !slices.Equal(got, []string{"10.50.0.10", "10.50.0.11", "fd00::1"}) {
			t.Errorf("m-1 holds %v", got)
		}
		var between []string
		tx.AddressesBetween(netAddr("10.50.0.6"), netAddr("10.51.0.1"), func(a Address) bool { between = append(between, a.IP.String()); return true })
		if !slices.Equal(between, []string{"10.50.0.10", "10.50.0.11", "10.51.0.1"}) {
			t.Errorf("between = %v", between)
		}
		return nil
	})
	netWrite(t, db, 9, func(tx *Tx) error { return tx.DeleteAddress(netAddr("10.50.0.10")) })
	db.View(func(tx *Tx) error {
		if tx.AddressUsed(netAddr("10.50.0.10")) {
			t.Error("released address still used")
		}
		m1, _ := tx.MachineAddresses("m-1")
		if got := netIPs(m1); !slices.Equal(got, []string{"10.50.0.11", "fd00::1"}) {
			t.Errorf("m-1 holds %v after release", got)
		}
		if err := tx.PutAddress(Address{IP: netAddr("10.50.0.12")}); !errors.Is(err, ErrReadOnly) {
			t.Errorf("write in a read transaction: %v", err)
		}
		return nil
	})
}

func netIPs(as []Address) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.IP.String())
	}
	return out
}

func TestNextFree(t *testing.T) {
	db := openNetDB(t)
	netWrite(t, db, 1, func(tx *Tx) error {
		for _, s := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.5", "10.0.0.255", "10.0.1.0", "fd00::1", "fd00::2"} {
			if err := tx.PutAddress(Address{IP: netAddr(s), How: HowStatic, Machine: "m"}); err != nil {
				return err
			}
		}
		return nil
	})
	tests := []struct {
		from, to string
		want     string // "" when none
	}{
		{"10.0.0.1", "10.0.0.10", "10.0.0.4"},
		{"10.0.0.4", "10.0.0.10", "10.0.0.4"},
		{"10.0.0.5", "10.0.0.10", "10.0.0.6"},
		{"10.0.0.1", "10.0.0.3", ""},
		{"10.0.0.255", "10.0.1.0", ""},
		{"10.0.0.255", "10.0.1.5", "10.0.1.1"},
		{"10.0.2.0", "10.0.2.9", "10.0.2.0"}, // past every record
		{"255.255.255.255", "255.255.255.255", "255.255.255.255"},
		{"fd00::1", "fd00::ff", "fd00::3"},
		{"fd00::3", "fd00::ff", "fd00::3"},
	}
	db.View(func(tx *Tx) error {
		for _, tc := range tests {
			got, ok := tx.NextFree(netAddr(tc.from), netAddr(tc.to))
			if tc.want == "" {
				if ok {
					t.Errorf("NextFree(%s, %s) = %s, want none", tc.from, tc.to, got)
				}
				continue
			}
			if !ok || got != netAddr(tc.want) {
				t.Errorf("NextFree(%s, %s) = %s, %v; want %s", tc.from, tc.to, got, ok, tc.want)
			}
		}
		return nil
	})
}

func TestNetworkRecords(t *testing.T) {
	db := openNetDB(t)
	wide := netip.MustParsePrefix("10.0.0.0/8")
	narrow := netip.MustParsePrefix("10.0.0.0/16") // same address, other length: separate keys
	netWrite(t, db, 3, func(tx *Tx) error {
		for _, f := range []Fabric{{Name: "hall-b", Kind: FabricEthernet}, {Name: "hall-a", Kind: FabricInfiniband}} {
			if err := tx.PutFabric(f); err != nil {
				return err
			}
		}
		for _, v := range []VLAN{{Fabric: "hall-a", VID: 200}, {Fabric: "hall-a", VID: 30}, {Fabric: "hall-a", VID: 0}} {
			if err := tx.PutVLAN(v); err != nil {
				return err
			}
		}
		for _, s := range []Subnet{{CIDR: narrow}, {CIDR: wide}, {CIDR: netip.MustParsePrefix("fd00::/64")}} {
			if err := tx.PutSubnet(s); err != nil {
				return err
			}
		}
		for _, r := range []Range{
			{Subnet: wide, Kind: RangeStatic, First: netAddr("10.9.0.1"), Last: netAddr("10.9.0.9")},
			{Subnet: narrow, Kind: RangeStatic, First: netAddr("10.0.0.20"), Last: netAddr("10.0.0.29")},
			{Subnet: narrow, Kind: RangeReserved, First: netAddr("10.0.0.1"), Last: netAddr("10.0.0.9")},
		} {
			if err := tx.PutRange(r); err != nil {
				return err
			}
		}
		if err := tx.SetAllocHint("10.0.0.0/16/a", netAddr("10.0.0.21")); err != nil {
			return err
		}
		return tx.SetAllocHint("10.0.0.0/8/b", netAddr("10.9.0.2"))
	})
	db.View(func(tx *Tx) error {
		fs, _ := tx.Fabrics()
		if len(fs) != 2 || fs[0].Name != "hall-a" || fs[0].Index != 3 {
			t.Errorf("fabrics = %+v", fs)
		}
		vs, _ := tx.VLANs()
		if len(vs) != 3 || vs[0].VID != 0 || vs[1].VID != 30 || vs[2].VID != 200 {
			t.Errorf("VLANs not in VID order: %+v", vs)
		}
		if _, err := tx.VLAN("hall-a", 31); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "hall-a/31") {
			t.Errorf("missing VLAN: %v", err)
		}
		ss, _ := tx.Subnets()
		if len(ss) != 3 {
			t.Errorf("subnets = %+v", ss)
		}
		n, _ := tx.Ranges(narrow)
		w, _ := tx.Ranges(wide)
		all, _ := tx.Ranges(netip.Prefix{})
		if len(n) != 2 || n[0].First != netAddr("10.0.0.1") || len(w) != 1 || len(all) != 3 {
			t.Errorf("ranges: narrow %+v, wide %+v, all %d", n, w, len(all))
		}
		if h, ok := tx.AllocHint("10.0.0.0/16/a"); !ok || h.Unmap() != netAddr("10.0.0.21") {
			t.Errorf("hint = %s, %v", h, ok)
		}
		return nil
	})
	netWrite(t, db, 4, func(tx *Tx) error {
		if err := tx.DeleteRange(narrow, netAddr("10.0.0.5")); !errors.Is(err, ErrNotFound) {
			t.Errorf("delete of a range that does not start there: %v", err)
		}
		if err := tx.DeleteRange(narrow, netAddr("10.0.0.1")); err != nil {
			return err
		}
		return tx.DeleteAllocHints("10.0.0.0/16/")
	})
	db.View(func(tx *Tx) error {
		if n, _ := tx.Ranges(narrow); len(n) != 1 {
			t.Errorf("ranges after delete: %+v", n)
		}
		if _, ok := tx.AllocHint("10.0.0.0/16/a"); ok {
			t.Error("hint of the narrow subnet survived")
		}
		if _, ok := tx.AllocHint("10.0.0.0/8/b"); !ok {
			t.Error("hint of the wide subnet was dropped with the narrow one's")
		}
		if tx.TableIndex(TableNetwork) != 4 {
			t.Errorf("network table index %d, want 4", tx.TableIndex(TableNetwork))
		}
		return nil
	})
}

// A loop waiting on the network table is not woken by lease writes (a DHCP
// node commits those every few milliseconds), is woken by a network change,
// and a write that fails wakes nobody.
func TestWatchTables(t *testing.T) {
	db := openNetDB(t)
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	net := db.WatchTables(TableNetwork)
	either := db.WatchTables(TableJobs, TableLeases)
	all := db.Watch()
	if net2 := db.WatchTables(TableNetwork); net2 != net {
		t.Error("two waiters on the same tables got different channels (a loop that times out would leave one behind each time)")
	}
	netWrite(t, db, 1, func(tx *Tx) error {
		return tx.PutLease(Lease{IP: netAddr("10.50.0.20"), MAC: "52:54:00:00:00:01", Node: "n1"})
	})
	if closed(net) {
		t.Error("a lease write woke a waiter on the network table")
	}
	if !closed(either) || !closed(all) {
		t.Error("a lease write did not wake waiters on leases or on any change")
	}
	err := db.Update(func(tx *Tx) error {
		tx.Index = 2
		if err := tx.PutSubnet(Subnet{CIDR: netip.MustParsePrefix("10.50.0.0/24"), Fabric: "f"}); err != nil {
			return err
		}
		return errors.New("refused")
	})
	if err == nil || closed(net) {
		t.Errorf("a rolled-back network write woke the network waiter (err %v)", err)
	}
	netWrite(t, db, 3, func(tx *Tx) error {
		return tx.PutSubnet(Subnet{CIDR: netip.MustParsePrefix("10.50.0.0/24"), Fabric: "f"})
	})
	if !closed(net) {
		t.Error("a network write did not wake the network waiter")
	}
	if closed(db.WatchTables(TableNetwork)) {
		t.Error("the next network waiter's channel is already closed")
	}
}
