package store

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Read-only accessors for exporters (package pgexport): whole-table scans
// that hand back the same keys the change log uses, and change batches cut
// only at index boundaries.

// ForEachEvent calls fn for every event, by machine then Raft index, with
// the key a change-log entry of table "events" carries for it and the
// event's sequence number within its command.
func (t *Tx) ForEachEvent(fn func(changeKey string, seq uint32, e Event) error) error {
	c := t.tx.Bucket(bucketEvents).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var e Event
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("decode event %x: %w", k, err)
		}
		if err := fn(hex.EncodeToString(k), binary.BigEndian.Uint32(k[len(k)-4:]), e); err != nil {
			return err
		}
	}
	return nil
}

// EventSeq is the sequence number held by the key a change-log entry of
// table "events" carries: events recorded by one command are numbered from 0.
func EventSeq(changeKey string) (uint32, error) {
	k, err := hex.DecodeString(changeKey)
	if err != nil || len(k) < 13 {
		return 0, Errorf(ErrInvalid, "event key %q", changeKey)
	}
	return binary.BigEndian.Uint32(k[len(k)-4:]), nil
}

// ForEachInventory calls fn for every stored inventory report, by machine
// ID. doc is only valid during the call.
func (t *Tx) ForEachInventory(fn func(id string, doc []byte) error) error {
	c := t.tx.Bucket(bucketInventory).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		doc, err := ExpandDocument(v)
		if err != nil {
			return fmt.Errorf("inventory of %s: %w", k, err)
		}
		if err := fn(string(k), doc); err != nil {
			return err
		}
	}
	return nil
}

// ChangeBatch returns the changes after index after, whole Raft indexes at a
// time: about limit changes, more when one index alone holds more, never
// part of an index. through is the index up to which the list is complete
// (the applied index when the log was read to its end), so a reader that
// applied the list may resume from through. It fails with
// ErrChangesTruncated when some changes after after were already pruned.
func (t *Tx) ChangeBatch(after uint64, limit int) (changes []Change, through uint64, err error) {
	if b := t.metaBucket().Get([]byte("changes.floor")); len(b) == 8 && after+1 < binary.BigEndian.Uint64(b) {
		return nil, 0, ErrChangesTruncated
	}
	var start [8]byte
	binary.BigEndian.PutUint64(start[:], after+1)
	c := t.tx.Bucket(bucketChanges).Cursor()
	for k, v := c.Seek(start[:]); k != nil; k, v = c.Next() {
		idx := binary.BigEndian.Uint64(k[:8])
		if limit > 0 && len(changes) >= limit && idx != changes[len(changes)-1].Index {
			return changes, changes[len(changes)-1].Index, nil
		}
		var ch Change
		if err := decodeChange(v, &ch); err != nil {
			return nil, 0, err
		}
		changes = append(changes, ch)
	}
	through, _ = t.Applied()
	if through < after {
		through = after
	}
	return changes, through, nil
}

// ForEachJob calls fn for every BMC job, done or not, by job ID (the key a
// change-log entry of table "jobs" carries).
func (t *Tx) ForEachJob(fn func(j Job) error) error {
	return forEachJSON(t, bucketJobs, "", func(_ string, j *Job) error { return fn(*j) })
}

// ForEachLease calls fn for every lease, in address order (a change-log
// entry of table "leases" carries the address as text).
func (t *Tx) ForEachLease(fn func(l Lease) error) error {
	c := t.tx.Bucket(bucketLeases).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var l Lease
		if err := decodeLease(v, &l); err != nil {
			return fmt.Errorf("lease %x: %w", k, err)
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	return nil
}
