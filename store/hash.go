package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// StateHash is a digest of the replicated state as of one applied index.
// Two nodes hold the same state exactly when their hashes of the same
// Version at the same Index have the same Sum; hashes at different indexes
// say nothing (etcd's corruption check compares the same way).
type StateHash struct {
	Version int    // of the hash's definition (hashVersion)
	Index   uint64 // the applied index the sum was computed at
	Term    uint64 // the term of that entry
	Sum     [sha256.Size]byte
}

// String is the sum in hex.
func (h StateHash) String() string { return hex.EncodeToString(h.Sum[:]) }

// hashVersion names the encoding hashState feeds SHA-256. Any change to it
// (a bucket or key newly left out, a new framing) takes a new version, so
// that sums computed differently are never compared; a hash file of
// another version is ignored.
//
// 2: the node_versions bucket is left out (store/gate.go says why). A
// cluster in its first rolling upgrade to a gate-aware build holds nodes
// of version 1 and 2, which compare their hashes only with their own kind.
const hashVersion = 2

// Hash computes the state hash in one read transaction.
func (d *DB) Hash() (StateHash, error) {
	var h StateHash
	err := d.View(func(tx *Tx) (err error) {
		h, err = tx.Hash()
		return err
	})
	return h, err
}

// Hash computes the state hash of the snapshot's point in time. To compare
// nodes at one index without stalling the state machine, take a snapshot
// right after applying that index (before the next apply) and hash it in
// the background: writers go on meanwhile.
func (s *Snapshot) Hash() (StateHash, error) { return hashState(s.tx) }

// Hash computes the state hash as this transaction sees it: in the state
// machine's write transaction, with the writes made so far and the applied
// index as last recorded in it.
//
// It covers every bucket, key, value and bucket sequence in the file, in
// key order, except two meta keys that are not replicated state: the
// schema version (Open writes it, not a command) and the applied index and
// term (reported beside the sum instead), and one bucket: node_versions,
// the nodes' version reports, which two correct stores may hold
// differently (store/gate.go). Every other bucket is replicated state.
func (t *Tx) Hash() (StateHash, error) { return hashState(t.tx) }

func hashState(btx *bolt.Tx) (h StateHash, err error) {
	// The transaction reads bbolt's mapping: a page damaged since open
	// faults, and must not take the process down.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("hash store: %v: %w", r, ErrDamaged)
		}
	}()
	h.Version = hashVersion
	if btx.Bucket(bucketMeta) != nil {
		h.Index, h.Term = (&Tx{tx: btx}).Applied()
	}
	s := sha256.New()
	fmt.Fprintf(s, "rollcall state hash %d\n", hashVersion)
	err = btx.ForEach(func(name []byte, b *bolt.Bucket) error {
		if bytes.Equal(name, bucketNodeVersions) {
			return nil
		}
		hashBucket(s, name, b, bytes.Equal(name, bucketMeta))
		return nil
	})
	if err != nil {
		return StateHash{}, fmt.Errorf("hash store: %w", err)
	}
	s.Sum(h.Sum[:0])
	return h, nil
}

// hashBucket writes a bucket as 'b' name sequence, its entries ('k' key
// value, or a nested bucket) in key order, then 'e'. Lengths are uvarints,
// so no two different stores write the same stream.
func hashBucket(s hash.Hash, name []byte, b *bolt.Bucket, meta bool) {
	var buf [binary.MaxVarintLen64]byte
	field := func(p []byte) {
		s.Write(binary.AppendUvarint(buf[:0], uint64(len(p))))
		s.Write(p)
	}
	s.Write([]byte{'b'})
	field(name)
	s.Write(binary.BigEndian.AppendUint64(buf[:0], b.Sequence()))
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil {
			// A nested bucket, or a nil value written in this (write)
			// transaction: a read transaction gives empty values as empty.
			if sub := b.Bucket(k); sub != nil {
				hashBucket(s, k, sub, false)
				continue
			}
		}
		if meta && (bytes.Equal(k, keySchema) || bytes.Equal(k, keyApplied)) {
			continue
		}
		s.Write([]byte{'k'})
		field(k)
		field(v)
	}
	s.Write([]byte{'e'})
}

// The hash file: Close records the state hash beside the store, and Open
// compares it with the file's content. It catches what happens to the file
// while the node is stopped (a flipped bit on disk, an edit), which no
// structural check sees: a damaged value still decodes, and the node would
// serve it. A node that stopped without Close leaves no hash file, and
// then only the comparison with other nodes (Hash) finds such damage.
func hashFilePath(path string) string { return path + ".hash" }

// writeHashFile records db's state hash. It replaces the file in one
// rename, so a reader sees a whole record or none. Writing it is best
// effort: without it the next Open skips only the content check (a data
// directory removed under a running node must not fail its Close). A hash
// that cannot be computed is damage, and reported.
func writeHashFile(db *bolt.DB, path string) error {
	var h StateHash
	err := db.View(func(btx *bolt.Tx) (err error) {
		h, err = hashState(btx)
		return err
	})
	if err != nil {
		return fmt.Errorf("close store %s: %w", path, err)
	}
	line := fmt.Sprintf("rollcall-state-hash %d %d %d %s\n", hashVersion, h.Index, h.Term, h)
	tmp := hashFilePath(path) + ".tmp"
	if err := os.WriteFile(tmp, []byte(line), 0o600); err == nil {
		if err := os.Rename(tmp, hashFilePath(path)); err != nil {
			os.Remove(tmp)
		}
	}
	return nil
}

// checkHashFile compares db with the hash recorded when it was last closed.
// A file of another version, or one recorded at another applied index (the
// store file was replaced since), says nothing and is removed. On a match
// the file is removed too: the store changes from here on, and a crash must
// not leave a stale record behind. On a mismatch it stays, so that the
// store is refused until someone deals with it.
func checkHashFile(db *bolt.DB, path string) error {
	b, err := os.ReadFile(hashFilePath(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open store %s: read hash file: %w", path, err)
	}
	rec, ok := parseHashFile(string(b))
	if ok {
		var h StateHash
		err := db.View(func(btx *bolt.Tx) (err error) {
			h, err = hashState(btx)
			return err
		})
		if err != nil {
			return damaged(path, err)
		}
		if h.Index == rec.Index && h.Term == rec.Term && h.Sum != rec.Sum {
			return damaged(path, fmt.Errorf("its content differs from the state hash recorded in %s when it was closed at index %d (now %.16s…, then %.16s…)",
				filepath.Base(hashFilePath(path)), rec.Index, h, rec))
		}
	}
	if err := os.Remove(hashFilePath(path)); err != nil {
		return fmt.Errorf("open store %s: remove hash file: %w", path, err)
	}
	return nil
}

func parseHashFile(s string) (StateHash, bool) {
	f := strings.Fields(s)
	if len(f) != 5 || f[0] != "rollcall-state-hash" || f[1] != strconv.Itoa(hashVersion) {
		return StateHash{}, false
	}
	h := StateHash{Version: hashVersion}
	var err1, err2 error
	h.Index, err1 = strconv.ParseUint(f[2], 10, 64)
	h.Term, err2 = strconv.ParseUint(f[3], 10, 64)
	sum, err3 := hex.DecodeString(f[4])
	if err1 != nil || err2 != nil || err3 != nil || len(sum) != sha256.Size {
		return StateHash{}, false
	}
	copy(h.Sum[:], sum)
	return h, true
}
