package raftfsm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/rollcall/rollcall/store"
)

// Result is what Apply returns for one log entry. Err is the command's
// business error (a conflict, an illegal transition); Errs holds one result
// per entry of a Batch.
type Result struct {
	Err  error
	Errs []error
}

// FSM applies committed commands to the store.
type FSM struct {
	db  *store.DB
	log *slog.Logger

	applied atomic.Uint64
	advance store.Notifier

	// applyMu is held across each batch, so a repair swaps the store in
	// between two (swapIfAhead).
	applyMu sync.Mutex
	hashes  stateHashes

	// known is what this node reads (nil: the binary's, KnownVersions);
	// gate caches the open gate (nil: read it from the store).
	known atomic.Pointer[Versions]
	gate  atomic.Pointer[gateState]
}

var _ raft.BatchingFSM = (*FSM)(nil)

// NewFSM wraps a store. The applied index starts at what the store recorded,
// so entries raft re-feeds after a restart are skipped.
func NewFSM(db *store.DB, log *slog.Logger) (*FSM, error) {
	idx, _, err := db.Applied()
	if err != nil {
		return nil, err
	}
	f := &FSM{db: db, log: log}
	f.applied.Store(idx)
	return f, nil
}

// AppliedIndex is the index of the last entry applied to the local store.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// Apply applies one entry.
func (f *FSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies entries in one bbolt transaction that also records the
// last index and term. A failure of the transaction itself (disk, a command
// that cannot be decoded) stops the node: going on would let this copy
// diverge from the others.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	results := make([]any, len(logs))
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	// A StateCheck ends its transaction: the store is hashed as of exactly
	// its index, the same on every node however raft batched the entries.
	for start := 0; start < len(logs); {
		end := start + 1
		for end < len(logs) && !isStateCheck(logs[end-1]) {
			end++
		}
		f.applyLogs(logs[start:end], results[start:end])
		if last := logs[end-1]; isStateCheck(last) && last.Index == f.applied.Load() {
			f.hashAt(last.Index)
		}
		start = end
	}
	return results
}

func (f *FSM) applyLogs(logs []*raft.Log, results []any) {
	if len(logs) == 0 {
		return
	}
	last := logs[len(logs)-1]
	err := f.db.Update(func(tx *store.Tx) error {
		done, _ := tx.Applied()
		for i, l := range logs {
			if l.Index <= done {
				results[i] = &Result{} // re-fed after a restart: already in the store
				continue
			}
			if l.Type != raft.LogCommand {
				results[i] = &Result{}
				continue
			}
			tx.Index = l.Index
			results[i] = f.applyEntry(tx, l.Data)
		}
		if last.Index <= done {
			return nil
		}
		return tx.SetApplied(last.Index, last.Term)
	})
	if err != nil {
		panic(fmt.Sprintf("raftfsm: apply entries up to %d: %v", last.Index, err))
	}
	if last.Index > f.applied.Load() {
		f.applied.Store(last.Index)
		f.advance.Notify()
	}
}

func (f *FSM) applyEntry(tx *store.Tx, data []byte) *Result {
	if r := f.checkGate(tx, data); r != nil {
		return r
	}
	c, err := Decode(data)
	if errors.Is(err, errUnknownIgnorable) {
		f.log.Warn("skipping a command this node does not know (marked ignorable)", "type", data[0])
		return &Result{}
	}
	if err != nil {
		panic(fmt.Sprintf("raftfsm: %v", err))
	}
	if b, ok := c.(*Batch); ok {
		r := &Result{Errs: make([]error, len(b.Entries))}
		for i, e := range b.Entries {
			r.Errs[i] = f.applyEntry(tx, e).Err
		}
		return r
	}
	if g, ok := c.(*GateOpen); ok {
		return &Result{Err: g.applyFor(f, tx)}
	}
	if a, ok := c.(*Audited); ok {
		if len(a.Entry) < headerLen || Type(a.Entry[0]) == TypeAudited {
			return &Result{Err: store.Errorf(store.ErrInvalid, "an audited entry holds no command")}
		}
		r := f.applyEntry(tx, a.Entry)
		if err := a.record(tx, r); err != nil {
			panic(fmt.Sprintf("raftfsm: record audit event: %v", err))
		}
		return r
	}
	return &Result{Err: c.apply(tx)}
}

// Snapshot captures the store as of now; Persist streams it while applies go on.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := f.db.BeginSnapshot()
	if err != nil {
		return nil, err
	}
	return &fsmSnapshot{s: s}, nil
}

// Restore replaces the store with a snapshot. A damaged stream is refused
// and the current store stays.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	if err := f.db.Restore(rc); err != nil {
		return err
	}
	f.gate.Store(nil)
	idx, _, err := f.db.Applied()
	if err != nil {
		return err
	}
	f.applied.Store(idx)
	f.advance.Notify()
	return nil
}

type fsmSnapshot struct{ s *store.Snapshot }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.s.WriteTo(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() { s.s.Release() }

// WaitApplied blocks until the local store has applied index, or ctx ends.
func (f *FSM) WaitApplied(ctx context.Context, index uint64) error {
	for {
		ch := f.advance.Watch()
		if f.applied.Load() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for index %d (applied %d): %w", index, f.applied.Load(), ctx.Err())
		}
	}
}
