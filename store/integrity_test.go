package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// marker is a value written once, in the last command, so that it sits in
// exactly one place in the file (an index or an earlier page copy would
// hold it twice).
const marker = "flip-marker-7f3a9c"

// command is one replicated command: what the state machine applies at an
// index.
type command func(tx *Tx) error

// commands are enough records to give the machines bucket and its indexes
// branch pages, across most buckets.
func commands() []command {
	var cmds []command
	subnet := netip.MustParsePrefix("10.7.0.0/16")
	cmds = append(cmds, func(tx *Tx) error {
		return tx.PutSubnet(Subnet{CIDR: subnet, Fabric: "f", VID: 10, Purpose: "provisioning", Created: t0})
	})
	for i := range 150 {
		id := fmt.Sprintf("m-%012x", i+1)
		cmds = append(cmds, func(tx *Tx) error {
			m := Machine{ID: id, Name: fmt.Sprintf("node-%03d", i), State: StateNew, Serial: fmt.Sprintf("SER%06d", i),
				SystemUUID: fmt.Sprintf("4c4c4544-0000-0000-0000-%012x", i), MACs: []string{fmt.Sprintf("52:54:00:00:%02x:%02x", i/256, i%256)},
				IdentityKey: fmt.Sprintf("uuid:%d", i), CreatedAt: t0, UpdatedAt: t0}
			if err := tx.PutMachine(m); err != nil {
				return err
			}
			if err := tx.AddEvent(Event{Machine: id, Time: t0, Kind: "created", Message: "seen on the provisioning VLAN"}); err != nil {
				return err
			}
			ip := netip.AddrFrom4([4]byte{10, 7, byte(i / 250), byte(i%250 + 2)})
			return tx.PutLease(Lease{IP: ip, Subnet: subnet, MAC: m.MACs[0], Node: "n1", Granted: t0, Expires: t0.Add(time.Hour)})
		})
	}
	cmds = append(cmds, func(tx *Tx) error {
		return tx.PutInventory("m-000000000001", []byte(`{"version":1,"cpus":[{"model":"EPYC"}]}`))
	}, func(tx *Tx) error {
		return tx.PutJob(Job{ID: "j-0001", Machine: "m-000000000001", Kind: JobPower, Arg: "on", Created: t0, Done: true, Result: marker})
	})
	return cmds
}

// applyEach applies every command in a transaction of its own, at indexes
// 1, 2, …
func applyEach(t *testing.T, db *DB, cmds []command) {
	t.Helper()
	for i, c := range cmds {
		if err := write(t, db, uint64(i+1), c); err != nil {
			t.Fatal(err)
		}
	}
}

// applyBatched applies them all in one transaction, as ApplyBatch does.
func applyBatched(t *testing.T, db *DB, cmds []command) {
	t.Helper()
	err := db.Update(func(tx *Tx) error {
		for i, c := range cmds {
			tx.Index = uint64(i + 1)
			if err := c(tx); err != nil {
				return err
			}
		}
		return tx.SetApplied(uint64(len(cmds)), 1)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func mustHash(t *testing.T, db *DB) StateHash {
	t.Helper()
	h, err := db.Hash()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Stores that applied the same commands hash equal, however the commands
// were batched (different pages) and when one was copied through a
// snapshot; one more command changes the hash.
func TestHashEqualForSameCommands(t *testing.T) {
	cmds := commands()
	each, batched := open(t), open(t)
	applyEach(t, each, cmds)
	applyBatched(t, batched, cmds)

	snap, err := each.BeginSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err = snap.WriteTo(&buf)
	snap.Release()
	if err != nil {
		t.Fatal(err)
	}
	restored := open(t)
	if err := restored.Restore(&buf); err != nil {
		t.Fatal(err)
	}

	want := mustHash(t, each)
	if want.Index != uint64(len(cmds)) || want.Term != 1 {
		t.Fatalf("hash at index %d term %d, want %d term 1", want.Index, want.Term, len(cmds))
	}
	for name, db := range map[string]*DB{"batched": batched, "restored": restored} {
		if got := mustHash(t, db); got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}

	// Reopened (through the hash file Close writes): still the same.
	path := each.Path()
	if err := each.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if got := mustHash(t, reopened); got != want {
		t.Errorf("reopened: %+v, want %+v", got, want)
	}

	// A snapshot taken before one more command hashes as of its index,
	// while the store moves on.
	pinned, err := batched.BeginSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Release()
	if err := write(t, batched, want.Index+1, func(tx *Tx) error {
		return tx.AddEvent(Event{Machine: "m-000000000002", Time: t0, Kind: "note"})
	}); err != nil {
		t.Fatal(err)
	}
	if got := mustHash(t, batched); got.Sum == want.Sum || got.Index != want.Index+1 {
		t.Errorf("after one more command: %+v, was %+v", got, want)
	}
	if got, err := pinned.Hash(); err != nil || got != want {
		t.Errorf("snapshot: %+v %v, want %+v", got, err, want)
	}
}

// The hash covers every replicated byte: a value, a key of an index bucket,
// a bucket's sequence, a bucket nobody knows; and leaves out what Open
// writes (the schema version) and what it reports beside the sum (the
// applied index).
func TestHashCoverage(t *testing.T) {
	cases := map[string]struct {
		edit    func(btx *bolt.Tx) error
		changed bool
	}{
		"machine value": {func(btx *bolt.Tx) error {
			return btx.Bucket(bucketMachines).Put([]byte("m-000000000001"), []byte(`{"id":"m-000000000001","state":"ready"}`))
		}, true},
		"index entry": {func(btx *bolt.Tx) error {
			return btx.Bucket(bucketMachineBySer).Put([]byte("SERX\x00m-000000000001"), nil)
		}, true},
		"empty value becomes one byte": {func(btx *bolt.Tx) error {
			return btx.Bucket(bucketMachineBySer).Put([]byte("SER000001\x00m-000000000002"), []byte{0})
		}, true},
		"bucket sequence": {func(btx *bolt.Tx) error {
			return btx.Bucket(bucketChanges).SetSequence(btx.Bucket(bucketChanges).Sequence() + 1)
		}, true},
		"unknown bucket": {func(btx *bolt.Tx) error {
			_, err := btx.CreateBucket([]byte("zzz"))
			return err
		}, true},
		"table index": {func(btx *bolt.Tx) error {
			return btx.Bucket(bucketMeta).Put([]byte(tablePrefix+TableJobs), u64(999))
		}, true},
		"schema version": {func(btx *bolt.Tx) error {
			return btx.Bucket(bucketMeta).Put(keySchema, u64(SchemaVersion+7))
		}, false},
		"applied index": {func(btx *bolt.Tx) error {
			return btx.Bucket(bucketMeta).Put(keyApplied, make([]byte, 16))
		}, false},
	}
	cmds := commands()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			applyBatched(t, db, cmds)
			before := mustHash(t, db)
			if err := db.db.Update(c.edit); err != nil {
				t.Fatal(err)
			}
			after := mustHash(t, db)
			if changed := after.Sum != before.Sum; changed != c.changed {
				t.Errorf("sum changed: %v, want %v", changed, c.changed)
			}
		})
	}
}

// In the state machine's transaction the hash sees the writes made so far
// and equals what a read sees once they commit.
func TestHashInWriteTransaction(t *testing.T) {
	db := open(t)
	cmds := commands()
	var inTx StateHash
	err := db.Update(func(tx *Tx) error {
		for i, c := range cmds {
			tx.Index = uint64(i + 1)
			if err := c(tx); err != nil {
				return err
			}
		}
		if err := tx.SetApplied(uint64(len(cmds)), 1); err != nil {
			return err
		}
		var err error
		inTx, err = tx.Hash()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustHash(t, db); got != inTx {
		t.Fatalf("after commit %+v, in the transaction %+v", got, inTx)
	}
}

// fixture writes a closed store built from commands(), with the hash file
// Close leaves, and returns its path and state hash. It is built once (a
// transaction per command, each synced, is slow) and copied.
func fixture(t *testing.T) (string, StateHash) {
	t.Helper()
	built.Do(func() {
		path := filepath.Join(t.TempDir(), "state.db")
		db, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		applyEach(t, db, commands())
		built.hash = mustHash(t, db)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		built.db, _ = os.ReadFile(path)
		built.hashFile, _ = os.ReadFile(hashFilePath(path))
	})
	if built.db == nil || built.hashFile == nil {
		t.Fatal("building the fixture failed")
	}
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, built.db, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hashFilePath(path), built.hashFile, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, built.hash
}

var built struct {
	sync.Once
	db, hashFile []byte
	hash         StateHash
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// markerOffset is where marker sits in the file; it must sit there only.
func markerOffset(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte(marker)); n != 1 {
		t.Fatalf("%s holds the marker %d times, want once", path, n)
	}
	return int64(bytes.Index(b, []byte(marker)))
}

func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func wantDamaged(t *testing.T, path string, err error) {
	t.Helper()
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("open %s: %v, want ErrDamaged", path, err)
	}
	for _, s := range []string{path, "corrupt", "cannot be trusted", "move state.db aside", "rebuild"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message lacks %q: %v", s, err)
		}
	}
}

// One byte flipped inside a record value leaves a file bbolt reads without
// complaint and a record that still decodes. Opened with the hash file
// Close left, the store is refused (and stays refused); without one, it
// opens and its hash differs from an undamaged copy's, whose hash equals
// the original's.
func TestFlippedValueByte(t *testing.T) {
	path, want := fixture(t)
	dir := filepath.Dir(path)
	clean, bare := filepath.Join(dir, "clean.db"), filepath.Join(dir, "bare.db")
	copyFile(t, path, clean)
	copyFile(t, path, bare) // no hash file beside it
	off := markerOffset(t, path)
	flip := []byte{marker[5] ^ 0x01}
	patch(t, path, off+5, flip)
	patch(t, bare, off+5, flip)

	for range 2 { // refused again: the hash file stays
		db, err := Open(path)
		if err == nil {
			db.Close()
		}
		wantDamaged(t, path, err)
		if !strings.Contains(err.Error(), "differs from the state hash recorded") {
			t.Errorf("message does not say what was found: %v", err)
		}
	}

	hashOf := func(p string) (StateHash, Job) {
		db, err := Open(p)
		if err != nil {
			t.Fatalf("open %s: %v", p, err)
		}
		defer db.Close()
		var j Job
		db.View(func(tx *Tx) (err error) { j, err = tx.Job("j-0001"); return err })
		return mustHash(t, db), j
	}
	cleanHash, cleanJob := hashOf(clean)
	bareHash, bareJob := hashOf(bare)
	if cleanHash != want {
		t.Errorf("undamaged copy: %+v, original %+v", cleanHash, want)
	}
	if bareHash.Index != want.Index || bareHash.Sum == want.Sum {
		t.Errorf("damaged copy: %+v, original %+v: want the same index, another sum", bareHash, want)
	}
	if cleanJob.Result != marker || bareJob.Result == marker {
		t.Errorf("job results: undamaged %q, damaged %q (the damage should read back as a valid, wrong record)", cleanJob.Result, bareJob.Result)
	}
}

// pageOf returns the page size and the number of the page holding off.
func pageOf(t *testing.T, path string, off int64) (int64, uint64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	m, err := readMetas(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	ps := int64(m.pageSize)
	return ps, uint64(off / ps)
}

// pageFlags reads the type flags in page id's header.
func pageFlags(t *testing.T, path string, ps int64, id uint64) uint16 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [2]byte
	if _, err := f.ReadAt(b[:], int64(id)*ps+8); err != nil {
		t.Fatal(err)
	}
	return binary.NativeEndian.Uint16(b[:])
}

// branchPage finds a branch page: the root of the machines bucket.
func branchPage(t *testing.T, path string, ps int64) uint64 {
	t.Helper()
	b, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var id uint64
	b.View(func(tx *bolt.Tx) error {
		id = uint64(tx.Bucket(bucketMachines).RootPage())
		return nil
	})
	b.Close()
	if id == 0 || pageFlags(t, path, ps, id) != flagBranch {
		t.Fatal("the machines bucket has no branch root: the fixture is too small")
	}
	return id
}

// usedPages lists the pages reachable in a sound file (the others are
// free: damage there changes nothing).
func usedPages(t *testing.T, path string) []uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	m, err := readMetas(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	w := &fileWalker{r: f, ps: int64(m.pageSize), hwm: m.pgid, seen: make([]uint64, (m.pgid+63)/64)}
	if _, err := w.tree(m.root, nil, nil, 0, true); err != nil {
		t.Fatal(err)
	}
	pages := []uint64{0, 1}
	for id := uint64(2); id < m.pgid; id++ {
		if w.seen[id/64]&(1<<(id%64)) != 0 {
			pages = append(pages, id)
		}
	}
	return pages
}

// Damage bbolt would trust (page headers, element offsets, a loop in the
// tree, a truncated file) is refused with a message, never a crash; and the
// failed open lets go of the file's lock.
func TestDamagedStructureRefused(t *testing.T) {
	le := binary.NativeEndian
	u16 := func(v uint16) []byte { return le.AppendUint16(nil, v) }
	u32 := func(v uint32) []byte { return le.AppendUint32(nil, v) }
	u64 := func(v uint64) []byte { return le.AppendUint64(nil, v) }
	type damage struct {
		off  int64 // into the page
		data []byte
	}
	cases := map[string]struct {
		branch bool // damage the machines bucket's branch root, not the marker's leaf
		damage []damage
		trunc  bool
	}{
		"leaf header all 0xff": {damage: []damage{{0, bytes.Repeat([]byte{0xff}, 16)}}},
		"leaf page id":         {damage: []damage{{0, u64(12345)}}},
		"leaf type flags":      {damage: []damage{{8, u16(0x7f)}}},
		"leaf meta flag":       {damage: []damage{{8, u16(0x04)}}},
		"leaf element count":   {damage: []damage{{10, u16(0xffff)}}},
		"leaf overflow":        {damage: []damage{{12, u32(0x0fffffff)}}},
		"leaf key offset":      {damage: []damage{{16 + 4, u32(0xfffffff0)}}},
		"leaf value size":      {damage: []damage{{16 + 12, u32(1 << 30)}}},
		"branch loop":          {branch: true, damage: []damage{{16 + 8, nil}}}, // child 0 → itself
		"branch child id":      {branch: true, damage: []damage{{16 + 8, u64(1 << 40)}}},
		"branch key order":     {branch: true, damage: []damage{{16 + 16 + 4, u32(0)}}}, // key 1 → 0 bytes
		"truncated":            {trunc: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path, _ := fixture(t)
			os.Remove(hashFilePath(path)) // structure alone must catch it
			ps, leaf := pageOf(t, path, markerOffset(t, path))
			if pageFlags(t, path, ps, leaf) != flagLeaf {
				t.Fatalf("the marker's page %d is not a leaf", leaf)
			}
			page := leaf
			if c.branch {
				page = branchPage(t, path, ps)
			}
			for _, d := range c.damage {
				data := d.data
				if data == nil {
					data = u64(page)
				}
				patch(t, path, int64(page)*ps+d.off, data)
			}
			if c.trunc {
				if err := os.Truncate(path, int64(leaf)*ps); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 { // the second open is refused as damaged, not as in use
				db, err := Open(path)
				if err == nil {
					db.Close()
				}
				wantDamaged(t, path, err)
			}
		})
	}
}

// Bytes of the headers and first elements of every page in use, each
// flipped in turn: each open either fails with ErrDamaged or gives a store
// that reads, hashes and closes. None crashes the process.
func TestFlippedStructureBytesNeverCrash(t *testing.T) {
	path, _ := fixture(t)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := pageOf(t, path, 0)
	// Page id, flags, count, overflow; in element 0 a leaf's flags, pos,
	// ksize, vsize (a branch's pos, ksize, child id); in element 1 pos and
	// ksize (ksize and child id).
	within := []int64{0, 8, 10, 11, 12, 16, 20, 24, 28, 36, 40}
	var offs []int64
	for _, p := range usedPages(t, path) {
		for _, i := range within {
			offs = append(offs, int64(p)*ps+i)
		}
	}
	os.Remove(hashFilePath(path))
	damagedN := 0
	for _, off := range offs {
		patch(t, path, off, []byte{orig[off] ^ 0xff})
		db, err := Open(path)
		if err != nil {
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("byte %d: %v, want ErrDamaged", off, err)
			}
			damagedN++
			patch(t, path, off, orig[off:off+1]) // a refused open writes nothing
			continue
		}
		// Damage the walk at open let through may still surface later, as
		// ErrDamaged, never as a crash.
		if _, err := db.Hash(); err != nil && !errors.Is(err, ErrDamaged) {
			t.Errorf("byte %d: hash: %v", off, err)
		}
		db.View(func(tx *Tx) error { // decode errors are fine; a crash is not
			tx.Machines(MachineFilter{})
			tx.Changes(0, 0)
			return nil
		})
		db.Close()
		os.Remove(hashFilePath(path))
		// Open writes only when a bucket is missing (a damaged name).
		if b, _ := os.ReadFile(path); len(b) != len(orig) || !bytes.Equal(b[:off], orig[:off]) || !bytes.Equal(b[off+1:], orig[off+1:]) {
			if err := os.WriteFile(path, orig, 0o600); err != nil {
				t.Fatal(err)
			}
		} else {
			patch(t, path, off, orig[off:off+1])
		}
	}
	if damagedN == 0 {
		t.Fatalf("no damage found in %d flipped bytes", len(offs))
	}
	t.Logf("%d of %d flipped bytes refused as damaged", damagedN, len(offs))
}

// The hash file counts only for the content it was written for.
func TestHashFile(t *testing.T) {
	cases := map[string]struct {
		line    func(h StateHash) string
		damaged bool
	}{
		"matching": {func(h StateHash) string {
			return fmt.Sprintf("rollcall-state-hash %d %d %d %s\n", hashVersion, h.Index, h.Term, h)
		}, false},
		"other sum": {func(h StateHash) string {
			return fmt.Sprintf("rollcall-state-hash %d %d %d %064x\n", hashVersion, h.Index, h.Term, 1)
		}, true},
		"other index (file replaced)": {func(h StateHash) string {
			return fmt.Sprintf("rollcall-state-hash %d %d %d %064x\n", hashVersion, h.Index-1, h.Term, 1)
		}, false},
		"other version": {func(h StateHash) string {
			return fmt.Sprintf("rollcall-state-hash %d %d %d %064x\n", hashVersion+1, h.Index, h.Term, 1)
		}, false},
		"torn": {func(h StateHash) string { return "rollcall-state-hash 1 15" }, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path, h := fixture(t)
			if err := os.WriteFile(hashFilePath(path), []byte(c.line(h)), 0o600); err != nil {
				t.Fatal(err)
			}
			db, err := Open(path)
			if c.damaged {
				wantDamaged(t, path, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			// Open removes it: a crash from here on must not leave a record
			// of a state the file no longer holds.
			if _, err := os.Stat(hashFilePath(path)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("hash file still there after open: %v", err)
			}
		})
	}
}
