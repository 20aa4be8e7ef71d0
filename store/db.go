package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the layout this code reads and writes. Open migrates older
// files forward and refuses newer ones.
const SchemaVersion = 1

var (
	bucketMeta = []byte("meta")

	keySchema  = []byte("schema")
	keyApplied = []byte("applied")
)

// tablePrefix keys in the meta bucket hold the Raft index at which a table
// last changed; blocking queries wait on them.
const tablePrefix = "table/"

// DB is the node's local copy of the replicated state.
//
// The bbolt handle sits behind a lock only so that Restore can swap the whole
// file; ordinary reads and writes share the read side.
type DB struct {
	path string

	mu sync.RWMutex
	db *bolt.DB

	changed Notifier
	tables  tableNotifier

	machines *machineCache
}

// Open opens (or creates) the store file at path, checks that it is a
// readable bbolt file of a schema this code knows, and migrates it.
// A damaged file is refused with the reason (ErrDamaged): a node must not
// serve or replicate from a state it cannot trust. The checks: the file's
// structure (checkFile, then bbolt's tx.Check) and, when the store was
// closed cleanly, its content against the state hash Close recorded. A
// file another process holds fails with ErrInUse, naming that process.
func Open(path string) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	db, err := openBolt(path, true)
	if err != nil {
		return nil, err
	}
	if err := checkHashFile(db, path); err != nil {
		db.Close()
		return nil, err
	}
	if err := initSchema(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return &DB{path: path, db: db, machines: newMachineCache()}, nil
}

func boltOptions() *bolt.Options {
	return &bolt.Options{
		Timeout:         time.Second,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: 256 << 20, // long snapshot reads must not block writers on re-mmap
	}
}

func initSchema(db *bolt.DB) error {
	// A file of this schema with every bucket is left as it is: opening a
	// store writes nothing.
	current := false
	db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil || !bytes.Equal(meta.Get(keySchema), u64(SchemaVersion)) {
			return nil
		}
		for _, name := range allBuckets {
			if tx.Bucket(name) == nil {
				return nil
			}
		}
		current = true
		return nil
	})
	if current {
		return nil
	}
	return db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		v := uint64(0)
		if b := meta.Get(keySchema); b != nil {
			if len(b) != 8 {
				return errors.New("schema version record is damaged")
			}
			v = binary.BigEndian.Uint64(b)
		}
		if v > SchemaVersion {
			return fmt.Errorf("schema version %d is newer than this binary's %d: upgrade rollcall", v, SchemaVersion)
		}
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		// Migrations from v to SchemaVersion go here, one step per version.
		return meta.Put(keySchema, u64(SchemaVersion))
	})
}

// Close records the state hash beside the file (for Open to compare) and
// closes the file.
func (d *DB) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.db == nil {
		return nil
	}
	herr := writeHashFile(d.db, d.path)
	err := d.db.Close()
	d.db = nil
	return errors.Join(herr, err)
}

// Path is the file the store lives in.
func (d *DB) Path() string { return d.path }

// View runs fn in a read-only transaction on the local copy.
func (d *DB) View(fn func(*Tx) error) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.db == nil {
		return errors.New("store is closed")
	}
	return d.db.View(func(btx *bolt.Tx) error { return fn(&Tx{tx: btx, machines: d.machines}) })
}

// Update runs fn in one read-write transaction. Only the state machine calls
// it: every other change goes through Raft. Watchers are woken after commit.
func (d *DB) Update(fn func(*Tx) error) error {
	changed, err := d.update(fn)
	d.notify()
	if err == nil {
		d.tables.notify(changed)
	}
	return err
}

// update returns the mask of the tables the committed transaction changed.
func (d *DB) update(fn func(*Tx) error) (uint32, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.db == nil {
		return 0, errors.New("store is closed")
	}
	var changed uint32
	err := d.db.Update(func(btx *bolt.Tx) error {
		tx := &Tx{tx: btx, write: true, machines: d.machines}
		err := fn(tx)
		changed = tx.touched
		return err
	})
	return changed, err
}

// Watch returns a channel that is closed after the next committed change,
// whatever it changed: every lease batch too. Loops that care about some
// tables only wait with WatchTables.
func (d *DB) Watch() <-chan struct{} { return d.changed.Watch() }

// WatchTables returns a channel that is closed after the next committed
// change to one of the tables (TableNetwork, TableJobs…: the ones
// TableIndex names). A DHCP node commits a lease batch every few
// milliseconds under load; loops woken by each of those (jobs, images,
// the DHCP service's network model) cost replies their latency.
func (d *DB) WatchTables(tables ...string) <-chan struct{} {
	var mask uint32
	for _, t := range tables {
		mask |= tableBit(t)
	}
	return d.tables.watch(mask)
}

func (d *DB) notify() { d.changed.Notify() }

// Applied returns the Raft index and term of the last command applied to
// this copy.
func (d *DB) Applied() (index, term uint64, err error) {
	err = d.View(func(tx *Tx) error {
		index, term = tx.Applied()
		return nil
	})
	return index, term, err
}

// Snapshot framing: magic, the bbolt file's length, the file, then the
// SHA-256 of the file. A stream cut short or altered on the way fails the
// length or the checksum before anything replaces the live file.
var snapshotMagic = [8]byte{'R', 'C', 'S', 'N', 'A', 'P', '0', '1'}

// Snapshot is a consistent point-in-time view of the store, held open as a
// read transaction until Release.
type Snapshot struct {
	release func()
	tx      *bolt.Tx
	Index   uint64
}

// BeginSnapshot opens a read transaction that WriteTo streams. Writers keep
// going meanwhile (bbolt is MVCC).
func (d *DB) BeginSnapshot() (*Snapshot, error) {
	d.mu.RLock()
	if d.db == nil {
		d.mu.RUnlock()
		return nil, errors.New("store is closed")
	}
	tx, err := d.db.Begin(false)
	if err != nil {
		d.mu.RUnlock()
		return nil, fmt.Errorf("begin snapshot: %w", err)
	}
	idx, _ := (&Tx{tx: tx}).Applied()
	return &Snapshot{tx: tx, Index: idx, release: func() { tx.Rollback(); d.mu.RUnlock() }}, nil
}

// WriteTo streams the framed file.
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	size := s.tx.Size()
	var hdr [16]byte
	copy(hdr[:8], snapshotMagic[:])
	binary.BigEndian.PutUint64(hdr[8:], uint64(size))
	if _, err := w.Write(hdr[:]); err != nil {
		return 0, fmt.Errorf("write snapshot: %w", err)
	}
	h := sha256.New()
	n, err := s.tx.WriteTo(io.MultiWriter(w, h))
	if err != nil {
		return n + 16, fmt.Errorf("write snapshot: %w", err)
	}
	if n != size {
		return n + 16, fmt.Errorf("write snapshot: wrote %d bytes of %d", n, size)
	}
	if _, err := w.Write(h.Sum(nil)); err != nil {
		return n + 16, fmt.Errorf("write snapshot: %w", err)
	}
	return n + 16 + sha256.Size, nil
}

// Release ends the snapshot's read transaction.
func (s *Snapshot) Release() {
	if s.release != nil {
		s.release()
		s.release = nil
	}
}

// Restore replaces the whole store with a framed snapshot read from r. The
// stream is written to a file beside the live one and checked (length,
// checksum, bbolt consistency, schema) before it is swapped in; on any error
// the live store is untouched.
func (d *DB) Restore(r io.Reader) error {
	tmp := d.path + ".restore"
	if err := receiveSnapshot(r, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore snapshot: %w", err)
	}
	check, err := openBolt(tmp, true)
	if err == nil {
		err = initSchema(check)
		check.Close()
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore snapshot: %w", err)
	}

	d.mu.Lock()
	defer func() {
		d.mu.Unlock()
		d.notify()
		d.tables.notify(^uint32(0)) // a restore may have changed any table
	}()
	if d.db != nil {
		if err := d.db.Close(); err != nil {
			return fmt.Errorf("restore snapshot: close live store: %w", err)
		}
		d.db = nil
	}
	if err := os.Rename(tmp, d.path); err != nil {
		// Reopen what was there so the node keeps a store.
		db, oerr := openBolt(d.path, false)
		d.db = db
		return errors.Join(fmt.Errorf("restore snapshot: %w", err), oerr)
	}
	db, err := openBolt(d.path, false) // checked above as tmp
	if err != nil {
		return fmt.Errorf("restore snapshot: reopen: %w", err)
	}
	d.db = db
	return nil
}

func receiveSnapshot(r io.Reader, path string) error {
	var hdr [16]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return fmt.Errorf("read header: %w", err)
	}
	if [8]byte(hdr[:8]) != snapshotMagic {
		return errors.New("not a rollcall store snapshot (bad magic)")
	}
	size := int64(binary.BigEndian.Uint64(hdr[8:]))
	if size <= 0 || size > 1<<40 {
		return fmt.Errorf("implausible snapshot size %d", size)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, size))
	if err == nil && n != size {
		err = fmt.Errorf("snapshot truncated: got %d of %d bytes", n, size)
	}
	if err == nil {
		err = checkSum(r, h)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func checkSum(r io.Reader, h hash.Hash) error {
	var sum [sha256.Size]byte
	if _, err := io.ReadFull(r, sum[:]); err != nil {
		return fmt.Errorf("snapshot truncated: checksum missing: %w", err)
	}
	if [sha256.Size]byte(h.Sum(nil)) != sum {
		return errors.New("snapshot checksum mismatch")
	}
	return nil
}

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}
