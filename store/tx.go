package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Tx is a transaction on the store. Read methods work in any Tx; write
// methods only in the one the state machine holds, which also carries the
// Raft index of the command being applied.
type Tx struct {
	tx    *bolt.Tx
	write bool

	// Index is the Raft index of the command being applied (write
	// transactions only). Records and per-table change indexes are stamped
	// with it.
	Index uint64

	// machines, when not nil, keeps machine records decoded (see
	// machineCache); the DB's transactions share one.
	machines *machineCache

	meta *bolt.Bucket // bucketMeta, opened once (see metaBucket)

	prunedAt uint64 // the Index the change log was last pruned for
	touched  uint32 // tables changed (tableBit), for DB.WatchTables
}

// metaBucket is the meta bucket, opened on first use: a stateless node's
// fetch reads a dozen table indexes, and bbolt opens a bucket afresh each
// time a read transaction asks for it.
func (t *Tx) metaBucket() *bolt.Bucket {
	if t.meta == nil {
		t.meta = t.tx.Bucket(bucketMeta)
	}
	return t.meta
}

// ErrReadOnly is returned by write methods called in a read transaction.
var ErrReadOnly = errors.New("store: write in a read-only transaction")

// Applied returns the index and term recorded by the last applied command.
func (t *Tx) Applied() (index, term uint64) {
	b := t.metaBucket().Get(keyApplied)
	if len(b) != 16 {
		return 0, 0
	}
	return binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])
}

// SetApplied records the index and term of the command just applied, in the
// same transaction as its effects.
func (t *Tx) SetApplied(index, term uint64) error {
	if !t.write {
		return ErrReadOnly
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:], index)
	binary.BigEndian.PutUint64(b[8:], term)
	return t.metaBucket().Put(keyApplied, b[:])
}

// TableIndex is the Raft index at which the named table last changed.
func (t *Tx) TableIndex(table string) uint64 {
	b := t.metaBucket().Get([]byte(tablePrefix + table))
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func (t *Tx) touch(table string) error {
	t.touched |= tableBit(table)
	return t.metaBucket().Put([]byte(tablePrefix+table), u64(t.Index))
}

// ensureBuckets makes buckets that are created on first use (the tag and
// rack tables and indexes; see bucketMachineByTag) in a write transaction.
func (t *Tx) ensureBuckets(names ...[]byte) error {
	if !t.write {
		return ErrReadOnly
	}
	for _, n := range names {
		if t.tx.Bucket(n) == nil {
			if _, err := t.tx.CreateBucket(n); err != nil {
				return fmt.Errorf("create bucket %s: %w", n, err)
			}
		}
	}
	return nil
}

func (t *Tx) getJSON(bucket []byte, key string, v any) error {
	b := t.tx.Bucket(bucket).Get([]byte(key))
	if b == nil {
		return ErrNotFound
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s/%s: %w", bucket, key, err)
	}
	return nil
}

func (t *Tx) putJSON(bucket []byte, key string, v any) error {
	if !t.write {
		return ErrReadOnly
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s/%s: %w", bucket, key, err)
	}
	return t.tx.Bucket(bucket).Put([]byte(key), b)
}

func (t *Tx) del(bucket []byte, key string) error {
	if !t.write {
		return ErrReadOnly
	}
	return t.tx.Bucket(bucket).Delete([]byte(key))
}

// forEachJSON decodes every value in a bucket whose key starts with prefix.
func forEachJSON[T any](t *Tx, bucket []byte, prefix string, fn func(key string, v *T) error) error {
	c := t.tx.Bucket(bucket).Cursor()
	p := []byte(prefix)
	for k, b := c.Seek(p); k != nil && hasPrefix(k, p); k, b = c.Next() {
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			return fmt.Errorf("decode %s/%s: %w", bucket, k, err)
		}
		if err := fn(string(k), &v); err != nil {
			return err
		}
	}
	return nil
}

func hasPrefix(k, p []byte) bool {
	return len(k) >= len(p) && string(k[:len(p)]) == string(p)
}
