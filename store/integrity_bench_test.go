package store

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkOpenChecks times the checks Open runs, and Hash, on a store the
// size of a large site: 10,000 machines with compressed inventory documents,
// events, leases, sightings, jobs and addresses.
//
//	go test -run '^$' -bench OpenChecks -benchtime 3x ./store/
func BenchmarkOpenChecks(b *testing.B) {
	path := largeStore(b, 10_000)
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("store of %d machines: %.1f MB", 10_000, float64(st.Size())/1e6)
	b.Run("checkFile", func(b *testing.B) {
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := checkOpenFile(f); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("bolt open+tx.Check", func(b *testing.B) {
		for b.Loop() {
			db, err := bolt.Open(path, 0o600, boltOptions())
			if err != nil {
				b.Fatal(err)
			}
			if err := boltCheck(db); err != nil {
				b.Fatal(err)
			}
			db.Close()
		}
	})
	b.Run("Hash", func(b *testing.B) {
		db, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		for b.Loop() {
			if _, err := db.Hash(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The whole of Open after a clean Close (the hash file compared) and the
	// Close that writes it again.
	b.Run("Open+Close", func(b *testing.B) {
		for b.Loop() {
			db, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// largeStore builds a store of n machines, a few hundred per transaction.
func largeStore(b *testing.B, n int) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "state.db")
	db, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	subnet := netip.MustParsePrefix("10.128.0.0/16")
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	index := uint64(0)
	const perTx = 250
	for first := 0; first < n; first += perTx {
		err := db.Update(func(tx *Tx) error {
			for i := first; i < min(first+perTx, n); i++ {
				index++
				tx.Index = index
				if err := largeMachine(tx, i, subnet, now); err != nil {
					return err
				}
			}
			return tx.SetApplied(index, 1)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

func largeMachine(tx *Tx, i int, subnet netip.Prefix, now time.Time) error {
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	id := fmt.Sprintf("m-%012x", i+1)
	mac := func(n int) string { return fmt.Sprintf("3c:ec:ef:%02x:%02x:%02x", i>>8&0xff, i&0xff, n) }
	ip := netip.AddrFrom4([4]byte{10, 128, byte(i >> 8), byte(i)})
	m := Machine{ID: id, Name: fmt.Sprintf("r%02d-u%02d-node%05d", i/40, i%40, i), State: StateReady,
		SystemUUID: fmt.Sprintf("4c4c4544-%04x-%04x-%04x-%012x", rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff),
		Serial:     fmt.Sprintf("SN%08X", rng.Uint32()), MACs: []string{mac(0), mac(1), mac(2), mac(3)}, BootMAC: mac(0),
		IdentityKey: "serial:" + fmt.Sprint(i), IPs: []string{ip.String()},
		CreatedAt: now, UpdatedAt: now, LastSeen: now, Commissioned: now}
	if err := tx.PutMachine(m); err != nil {
		return err
	}
	doc, err := CompressDocument(inventoryDoc(rng, i))
	if err != nil {
		return err
	}
	if err := tx.PutInventory(id, doc); err != nil {
		return err
	}
	for k, kind := range []string{"created", "commissioning", "inventory", "bmc", "ready"} {
		if err := tx.AddEvent(Event{Machine: id, Time: now.Add(time.Duration(k) * time.Minute), Kind: kind, Message: kind + " on the provisioning VLAN"}); err != nil {
			return err
		}
	}
	if err := tx.PutLease(Lease{IP: ip, Subnet: subnet, MAC: mac(0), Hostname: m.Name, Node: "n1", Granted: now, Expires: now.Add(time.Hour)}); err != nil {
		return err
	}
	if err := tx.PutSeen(Seen{MAC: mac(0), Node: "n1", Interface: "eth1", VLAN: "fabric-0/10", Arch: 7, UserClass: "iPXE", Last: now}); err != nil {
		return err
	}
	for k, arg := range []string{"status", "on"} {
		j := Job{ID: fmt.Sprintf("j-%08d-%d", i, k), Machine: id, Kind: JobPower, Arg: arg, Created: now, Done: true, Finished: now, Result: "on"}
		if err := tx.PutJob(j); err != nil {
			return err
		}
	}
	return nil
}

// inventoryDoc is about 50 KB of inventory JSON that compresses about
// fivefold, like a real server's.
func inventoryDoc(rng *rand.Rand, i int) []byte {
	var sb strings.Builder
	fmt.Fprintf(&sb, `{"version":1,"system":{"vendor":"Dell Inc.","product":"PowerEdge R650","serial":"SN%08X"},"cpus":[`, rng.Uint32())
	for c := range 2 {
		fmt.Fprintf(&sb, `{"socket":%d,"model":"Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz","cores":32,"threads":64,"microcode":"0x%x"},`, c, rng.Uint32())
	}
	sb.WriteString(`{}],"memory":[`)
	for d := range 16 {
		fmt.Fprintf(&sb, `{"locator":"A%d","size_mb":32768,"speed":3200,"vendor":"Samsung","part":"M393A4K40DB3-CWE","serial":"%08X"},`, d, rng.Uint32())
	}
	sb.WriteString(`{}],"disks":[`)
	for d := range 8 {
		fmt.Fprintf(&sb, `{"name":"nvme%dn1","model":"Dell Ent NVMe P5600 MU U.2 1.6TB","size":1600321314816,"serial":"PHAB%010d","wwn":"eui.%016x","rotational":false},`, d, rng.Uint32(), rng.Uint64())
	}
	sb.WriteString(`{}],"nics":[`)
	for n := range 4 {
		fmt.Fprintf(&sb, `{"name":"eno%d","mac":"3c:ec:ef:%02x:%02x:%02x","driver":"ice","speed":25000,"firmware":"4.%d 0x8001%04x"},`, n, i>>8&0xff, i&0xff, n, rng.IntN(40), rng.Uint32()&0xffff)
	}
	sb.WriteString(`{}],"pci":[`)
	for p := 0; sb.Len() < 50_000; p++ {
		fmt.Fprintf(&sb, `{"address":"0000:%02x:%02x.%d","vendor_id":"8086","device_id":"%04x","class":"%06x","driver":"pcieport","numa_node":%d,"revision":"%02x"},`,
			p/32, p%32, p%8, 0x0900+rng.IntN(64), 0x060400+rng.IntN(4), p%2, rng.IntN(16))
	}
	sb.WriteString(`{}]}`)
	return []byte(sb.String())
}
