package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func open(t *testing.T) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// write runs fn as the state machine would, at a Raft index.
func write(t *testing.T, db *DB, index uint64, fn func(tx *Tx) error) error {
	t.Helper()
	return db.Update(func(tx *Tx) error {
		tx.Index = index
		if err := fn(tx); err != nil {
			return err
		}
		return tx.SetApplied(index, 1)
	})
}

func TestMachineIndexesFollowUpdates(t *testing.T) {
	db := open(t)
	m := Machine{ID: "m-00000000000a", Name: "a", State: StateNew, Serial: "S1", SystemUUID: "4C4C4544-0042-3510-8043-B2C04F313234", MACs: []string{"52:54:00:00:00:01"}, IdentityKey: "uuid:x", IPs: []string{"10.0.0.1"}}
	if err := write(t, db, 1, func(tx *Tx) error { return tx.PutMachine(m) }); err != nil {
		t.Fatal(err)
	}
	// Change every indexed field.
	m2 := m
	m2.Name, m2.State, m2.Serial, m2.MACs, m2.IdentityKey, m2.IPs = "b", StateReady, "S2", []string{"52:54:00:00:00:02"}, "uuid:y", []string{"10.0.0.2"}
	if err := write(t, db, 2, func(tx *Tx) error { return tx.PutMachine(m2) }); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *Tx) error {
		checks := map[string]struct {
			got, want []string
		}{
			"old mac":    {tx.MachineIDsByMAC("52:54:00:00:00:01"), nil},
			"new mac":    {tx.MachineIDsByMAC("52:54:00:00:00:02"), []string{m.ID}},
			"old state":  {tx.MachineIDsByState(StateNew), nil},
			"new state":  {tx.MachineIDsByState(StateReady), []string{m.ID}},
			"old serial": {tx.MachineIDsBySerial("S1"), nil},
			"new serial": {tx.MachineIDsBySerial("S2"), []string{m.ID}},
			"uuid case":  {tx.MachineIDsByUUID("4c4c4544-0042-3510-8043-b2c04f313234"), []string{m.ID}},
			"old key":    {tx.MachineIDsByKey("uuid:x"), nil},
			"new key":    {tx.MachineIDsByKey("uuid:y"), []string{m.ID}},
			"old ip":     {tx.MachineIDsByIP("10.0.0.1"), nil},
			"new ip":     {tx.MachineIDsByIP("10.0.0.2"), []string{m.ID}},
		}
		for name, c := range checks {
			if diff := cmp.Diff(c.want, c.got); diff != "" {
				t.Errorf("%s: %s", name, diff)
			}
		}
		if got, err := tx.MachineByRef("b"); err != nil || got.ID != m.ID {
			t.Errorf("by new name: %v %v", got.ID, err)
		}
		if _, err := tx.MachineByRef("a"); !errors.Is(err, ErrNotFound) {
			t.Errorf("old name still resolves: %v", err)
		}
		return nil
	})
	// Delete removes every index entry, its events and inventory.
	if err := write(t, db, 3, func(tx *Tx) error {
		if err := tx.AddEvent(Event{Machine: m.ID, Time: t0, Kind: "x"}); err != nil {
			return err
		}
		return tx.PutInventory(m.ID, []byte(`{}`))
	}); err != nil {
		t.Fatal(err)
	}
	if err := write(t, db, 4, func(tx *Tx) error { return tx.DeleteMachine(m.ID) }); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *Tx) error {
		for _, b := range allBuckets {
			if bytes.Equal(b, bucketMeta) || bytes.Equal(b, bucketChanges) {
				continue
			}
			if n := tx.tx.Bucket(b).Stats().KeyN; n != 0 {
				t.Errorf("bucket %s keeps %d keys after delete", b, n)
			}
		}
		return nil
	})
}

func TestUniqueNameAndMAC(t *testing.T) {
	db := open(t)
	a := Machine{ID: "m-00000000000a", Name: "a", State: StateNew, MACs: []string{"52:54:00:00:00:01"}}
	write(t, db, 1, func(tx *Tx) error { return tx.PutMachine(a) })
	for name, m := range map[string]Machine{
		"name": {ID: "m-00000000000b", Name: "a", State: StateNew},
		"mac":  {ID: "m-00000000000b", State: StateNew, MACs: []string{"52:54:00:00:00:01"}},
	} {
		err := write(t, db, 2, func(tx *Tx) error { return tx.PutMachine(m) })
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), a.ID) {
			t.Errorf("%s clash: %v (want a conflict naming %s)", name, err, a.ID)
		}
	}
}

func TestTransitions(t *testing.T) {
	cases := []struct {
		from, to string
		ok       bool
	}{
		{StateNew, StateCommissioning, true},
		{StateCommissioning, StateReady, true},
		{StateReady, StateNew, true},
		{StateReady, StateCommissioning, false},
		{StateNew, StateNew, false},
		{"bogus", StateNew, false},
		{StateReady, StateDeploying, true},
		{StateNew, StateDeploying, false},
		{StateDeploying, StateDeployed, true},
		{StateDeploying, StateDeployFailed, true},
		{StateDeploying, StateReady, true}, // cancelled before it wrote
		{StateDeployed, StateReleasing, true},
		{StateDeployed, StateReady, false}, // only through a release, which wipes
		{StateDeployed, StateNew, true},    // re-commission
		{StateDeployFailed, StateReleasing, true},
		{StateDeployFailed, StateDeploying, false},
		{StateReleasing, StateReady, true},
		{StateReleasing, StateDeployFailed, true},
	}
	for _, c := range cases {
		err := CheckTransition(c.from, c.to)
		if (err == nil) != c.ok {
			t.Errorf("%s → %s: %v", c.from, c.to, err)
		}
		if err != nil && c.from == StateReady && !strings.Contains(err.Error(), "allowed from ready: new") {
			t.Errorf("message must name the current and the allowed states: %v", err)
		}
	}
}

func TestCorruptFileRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, 1, func(tx *Tx) error { return tx.PutMachine(Machine{ID: "m-00000000000a", State: StateNew}) })
	db.Close()
	f, _ := os.OpenFile(path, os.O_WRONLY, 0)
	f.WriteAt(bytes.Repeat([]byte{0x5a}, 8192), 0)
	f.Close()
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("corrupt file opened: %v", err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Update(func(tx *bolt.Tx) error {
		m, _ := tx.CreateBucket(bucketMeta)
		return m.Put(keySchema, u64(SchemaVersion+1))
	})
	b.Close()
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("newer schema: %v", err)
	}
}

func TestChangeLog(t *testing.T) {
	db := open(t)
	write(t, db, 5, func(tx *Tx) error { return tx.PutMachine(Machine{ID: "m-00000000000a", State: StateNew}) })
	write(t, db, 6, func(tx *Tx) error { return tx.AddEvent(Event{Machine: "m-00000000000a", Kind: "k"}) })
	write(t, db, 7, func(tx *Tx) error { return tx.DeleteMachine("m-00000000000a") })
	db.View(func(tx *Tx) error {
		ch, err := tx.Changes(5, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ch) != 2 || ch[0].Table != "events" || ch[1].Op != OpDelete || ch[1].Index != 7 {
			t.Fatalf("changes after 5: %+v", ch)
		}
		all, _ := tx.Changes(0, 0)
		if len(all) != 3 || all[0].Op != OpPut || all[0].Key != "m-00000000000a" {
			t.Fatalf("all changes: %+v", all)
		}
		if _, err := tx.EventByChangeKey(ch[0].Key); !errors.Is(err, ErrNotFound) {
			t.Fatalf("event of a deleted machine: %v", err)
		}
		return nil
	})
	// Past the window the oldest entries go and readers are told.
	write(t, db, 5+changeWindow+10, func(tx *Tx) error { return tx.PutMachine(Machine{ID: "m-00000000000b", State: StateNew}) })
	db.View(func(tx *Tx) error {
		if _, err := tx.Changes(4, 0); !errors.Is(err, ErrChangesTruncated) {
			t.Fatalf("truncated log not reported: %v", err)
		}
		return nil
	})
}

func TestWritesNeedTheStateMachine(t *testing.T) {
	db := open(t)
	err := db.View(func(tx *Tx) error { return tx.PutMachine(Machine{ID: "m-00000000000a", State: StateNew}) })
	if !errors.Is(err, ErrReadOnly) {
		t.Fatalf("write in a read transaction: %v", err)
	}
}

// Index keys are value + NUL + ID: a value that itself holds a NUL must not
// make a lookup of its prefix return a bogus ID.
func TestLookupIgnoresValuesWithNUL(t *testing.T) {
	db := open(t)
	write(t, db, 1, func(tx *Tx) error {
		return tx.PutMachine(Machine{ID: "m-00000000000a", State: StateNew, Serial: "S1\x00m-00000000000b"})
	})
	write(t, db, 2, func(tx *Tx) error { return tx.PutMachine(Machine{ID: "m-00000000000c", State: StateNew, Serial: "S1"}) })
	db.View(func(tx *Tx) error {
		if got := tx.MachineIDsBySerial("S1"); len(got) != 1 || got[0] != "m-00000000000c" {
			t.Fatalf("lookup of S1: %q", got)
		}
		return nil
	})
}

func TestCompressedDocuments(t *testing.T) {
	doc := []byte(`{"version":1,"pci":[` + strings.Repeat(`{"address":"0000:00:00.0","vendor_id":"8086"},`, 500) + `{}]}`)
	z, err := CompressDocument(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(z) >= len(doc)/4 {
		t.Fatalf("compressed %d → %d bytes", len(doc), len(z))
	}
	db := open(t)
	write(t, db, 1, func(tx *Tx) error { return tx.PutInventory("m-00000000000a", z) })
	write(t, db, 2, func(tx *Tx) error { return tx.PutInventory("m-00000000000b", doc) }) // older entries: plain JSON
	db.View(func(tx *Tx) error {
		for _, id := range []string{"m-00000000000a", "m-00000000000b"} {
			got, err := tx.Inventory(id)
			if err != nil || !bytes.Equal(got, doc) {
				t.Fatalf("%s: %v, %d bytes", id, err, len(got))
			}
		}
		return nil
	})
	if _, err := ExpandDocument(append(append([]byte{}, docMagic...), 0xff, 0xfe)); err == nil {
		t.Fatal("a damaged document expanded")
	}
}
