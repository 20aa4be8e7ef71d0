package store

import (
	"encoding/binary"
)

// The change log: every record a command writes or deletes is noted under
// the command's Raft index, in the same transaction. Followers of the store
// (the PostgreSQL mirror, live views) read it to apply just what changed.
// It keeps the last changeWindow indexes; a reader that fell further behind
// sees ErrChangesTruncated and starts over from a full copy.

var bucketChanges = []byte("changes")

// changeWindow is how many Raft indexes of changes are kept.
const changeWindow = 1_000_000

// Change kinds.
const (
	OpPut    = "put"
	OpDelete = "delete"
)

// Change names one record written or deleted at Index.
type Change struct {
	Index uint64 `json:"index"`
	Table string `json:"table"` // machines, events, inventory, net, addresses, nodes, tags, racks, …
	Key   string `json:"key"`
	Op    string `json:"op"`
}

// ErrChangesTruncated means changes after the requested index are no longer
// all in the log.
var ErrChangesTruncated = Errorf(ErrNotFound, "change log no longer reaches that far back")

func (t *Tx) logChange(table, key, op string) error {
	b := t.tx.Bucket(bucketChanges)
	seq := b.Sequence() + 1
	if err := b.SetSequence(seq); err != nil {
		return err
	}
	var k [16]byte
	binary.BigEndian.PutUint64(k[:8], t.Index)
	binary.BigEndian.PutUint64(k[8:], seq)
	if err := b.Put(k[:], encodeChange(Change{Index: t.Index, Table: table, Key: key, Op: op})); err != nil {
		return err
	}
	return t.pruneChanges()
}

// pruneChanges drops entries older than the window; deterministic because it
// depends only on the index being applied.
func (t *Tx) pruneChanges() error {
	if t.Index <= changeWindow || t.prunedAt == t.Index {
		return nil // once per index is enough: the floor depends on it alone
	}
	t.prunedAt = t.Index
	floor := t.Index - changeWindow
	b := t.tx.Bucket(bucketChanges)
	c := b.Cursor()
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k[:8]) < floor; k, _ = c.First() {
		if err := b.Delete(k); err != nil {
			return err
		}
		if err := t.metaBucket().Put([]byte("changes.floor"), u64(floor)); err != nil {
			return err
		}
	}
	return nil
}

// Changes returns changes with an index above after, oldest first, at most
// limit. It fails with ErrChangesTruncated when some were already pruned.
func (t *Tx) Changes(after uint64, limit int) ([]Change, error) {
	if b := t.metaBucket().Get([]byte("changes.floor")); len(b) == 8 && after+1 < binary.BigEndian.Uint64(b) {
		return nil, ErrChangesTruncated
	}
	var out []Change
	var start [8]byte
	binary.BigEndian.PutUint64(start[:], after+1)
	c := t.tx.Bucket(bucketChanges).Cursor()
	for k, v := c.Seek(start[:]); k != nil; k, v = c.Next() {
		var ch Change
		if err := decodeChange(v, &ch); err != nil {
			return nil, err
		}
		out = append(out, ch)
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	return out, nil
}

// RecentEvents returns up to limit events, newest first, from the change
// log (events of deleted machines are skipped).
func (t *Tx) RecentEvents(limit int) ([]Event, error) {
	var out []Event
	c := t.tx.Bucket(bucketChanges).Cursor()
	for k, v := c.Last(); k != nil && len(out) < limit; k, v = c.Prev() {
		var ch Change
		if err := decodeChange(v, &ch); err != nil {
			return nil, err
		}
		if ch.Table != "events" {
			continue
		}
		e, err := t.EventByChangeKey(ch.Key)
		if err != nil {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}
