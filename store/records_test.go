package store

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Each binary record reads back as written, and the JSON an earlier store
// wrote still reads, through the store's own accessors.
func TestRecordsRoundTripAndReadLegacyJSON(t *testing.T) {
	db := open(t)
	exp := t0.Add(time.Hour)
	lease := Lease{IP: netip.MustParseAddr("10.1.0.7"), Subnet: netip.MustParsePrefix("10.1.0.0/16"), MAC: "52:54:00:00:00:07",
		ClientID: "01525400000007", Hostname: "n7", Node: "n1", Granted: t0, Expires: exp, Index: 3}
	old := Lease{IP: netip.MustParseAddr("10.1.0.8"), Subnet: netip.MustParsePrefix("10.1.0.0/16"), MAC: "52:54:00:00:00:08",
		Node: "n2", Granted: t0, Expires: exp, Declined: true, Index: 2}
	block := LeaseBlock{Subnet: netip.MustParsePrefix("10.1.0.0/16"), First: netip.MustParseAddr("10.1.0.0"), Last: netip.MustParseAddr("10.1.0.255"),
		Node: "n1", Expires: exp, Quarantine: t0, Index: 3}
	seen := Seen{MAC: "52:54:00:00:00:07", Node: "n1", Interface: "eth1", VLAN: "f/10", Arch: 7, UserClass: "iPXE", Last: t0}
	oldSeen := Seen{MAC: "52:54:00:00:00:08", Node: "n2", Arch: -1, Last: t0}
	if err := write(t, db, 3, func(tx *Tx) error {
		for _, err := range []error{tx.PutLease(lease), tx.PutLeaseBlock(block), tx.PutSeen(seen)} {
			if err != nil {
				return err
			}
		}
		// What an earlier store left: JSON values.
		for bucket, kv := range map[string][2][]byte{
			"leases": {addrKey(old.IP), mustJSON(t, old)},
			"seen":   {[]byte(oldSeen.MAC), mustJSON(t, oldSeen)},
		} {
			if err := tx.tx.Bucket([]byte(bucket)).Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *Tx) error {
		for _, want := range []Lease{lease, old} {
			got, err := tx.Lease(want.IP)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got, netipEqual); d != "" {
				t.Errorf("lease %s (-want +got):\n%s", want.IP, d)
			}
		}
		gotBlock, err := tx.LeaseBlock(block.First)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(block, gotBlock, netipEqual); d != "" {
			t.Errorf("block (-want +got):\n%s", d)
		}
		if b, ok := tx.BlockOf(netip.MustParseAddr("10.1.0.9")); !ok || b.First != block.First {
			t.Errorf("BlockOf = %v, %v", b, ok)
		}
		for _, want := range []Seen{seen, oldSeen} {
			got, err := tx.SeenMAC(want.MAC)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got, netipEqual); d != "" {
				t.Errorf("seen %s (-want +got):\n%s", want.MAC, d)
			}
		}
		ch, err := tx.Changes(0, 0)
		if err != nil || len(ch) != 3 || ch[0] != (Change{Index: 3, Table: "leases", Key: "10.1.0.7", Op: OpPut}) {
			t.Errorf("changes = %+v, %v", ch, err)
		}
		return nil
	})
}

// A damaged record is an error naming the record, never a panic or a
// half-filled value taken for good.
func TestRecordsRefuseDamage(t *testing.T) {
	good := encodeLease(Lease{IP: netip.MustParseAddr("10.1.0.7"), MAC: "52:54:00:00:00:07", Expires: t0})
	for name, v := range map[string][]byte{
		"empty":          {},
		"unknown format": {9, 1, 2},
		"truncated":      good[:len(good)-3],
		"trailing bytes": append(append([]byte(nil), good...), 0),
		"bad json":       []byte("{\"ip\":"),
	} {
		var l Lease
		err := decodeLease(v, &l)
		if err == nil || !strings.Contains(err.Error(), "Lease") {
			t.Errorf("%s: err = %v, want an error naming the record", name, err)
		}
	}
}

var netipEqual = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzDecodeRecords feeds arbitrary bytes to every record decoder.
func FuzzDecodeRecords(f *testing.F) {
	f.Add(encodeLease(Lease{IP: netip.MustParseAddr("10.1.0.7"), Subnet: netip.MustParsePrefix("10.1.0.0/16"), MAC: "m", Expires: t0}))
	f.Add(encodeLeaseBlock(LeaseBlock{First: netip.MustParseAddr("::1"), Expires: t0}))
	f.Add(encodeSeen(Seen{MAC: "m", Arch: 7, Last: t0}))
	f.Add(encodeChange(Change{Index: 1, Table: "leases", Key: "k", Op: OpPut}))
	f.Add([]byte(`{"ip":"10.0.0.1"}`))
	f.Fuzz(func(t *testing.T, v []byte) {
		var (
			l  Lease
			b  LeaseBlock
			s  Seen
			ch Change
		)
		_ = decodeLease(v, &l)
		_ = decodeLeaseBlock(v, &b)
		_ = decodeSeen(v, &s)
		if decodeChange(v, &ch) == nil {
			var again Change
			if err := decodeChange(encodeChange(ch), &again); err != nil || again != ch {
				t.Errorf("change %+v read back as %+v, %v", ch, again, err)
			}
		}
	})
}
