package raftfsm

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rollcall/rollcall/store"
)

// The state machine's side of the cluster consistency check (the cluster
// side, which proposes the checks, compares the hashes across nodes and
// repairs a damaged copy, is raftfsm/cluster's statecheck.go). Every node
// applies the same commands, so every node's store must hash the same at the
// same index: the FSM ends its transaction at each StateCheck and hashes the
// store as of exactly that index, however raft batched the entries.

// TypeStateCheck is ignorable: a node that does not know it skips it.
const TypeStateCheck Type = FlagIgnorable | 10

// StateCheck asks every node to hash its store at this entry's index.
type StateCheck struct {
	Now time.Time `json:"now"`
}

func (*StateCheck) Type() Type            { return TypeStateCheck }
func (*StateCheck) Version() uint8        { return 1 }
func (*StateCheck) apply(*store.Tx) error { return nil }
func isStateCheck(l *raft.Log) bool {
	return l.Type == raft.LogCommand && len(l.Data) > 0 && Type(l.Data[0]) == TypeStateCheck
}

// keptHashes is how many recent checks' hashes a node keeps to answer
// the others with.
const keptHashes = 16

// stateHashes holds this node's hashes at recent checks.
type stateHashes struct {
	mu     sync.Mutex
	byIdx  map[uint64]store.StateHash
	order  []uint64
	notify store.Notifier
	// onHash runs, off the apply path, for each hash computed.
	onHash func(store.StateHash)
}

func (h *stateHashes) put(s store.StateHash) {
	h.mu.Lock()
	if h.byIdx == nil {
		h.byIdx = map[uint64]store.StateHash{}
	}
	h.byIdx[s.Index] = s
	h.order = append(h.order, s.Index)
	if len(h.order) > keptHashes {
		delete(h.byIdx, h.order[0])
		h.order = h.order[1:]
	}
	cb := h.onHash
	h.mu.Unlock()
	h.notify.Notify()
	if cb != nil {
		cb(s)
	}
}

// wait returns the hash at idx once it is known, or an error at ctx's end.
func (h *stateHashes) wait(ctx context.Context, idx uint64) (store.StateHash, error) {
	for {
		ch := h.notify.Watch()
		h.mu.Lock()
		s, ok := h.byIdx[idx]
		h.mu.Unlock()
		if ok {
			return s, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return store.StateHash{}, fmt.Errorf("no state hash at index %d here: %w", idx, ctx.Err())
		}
	}
}

// hashAt starts hashing the store as it is now (right after the entry at
// idx committed): a snapshot is taken here, the hash computed in the
// background, so applies go on.
func (f *FSM) hashAt(idx uint64) {
	s, err := f.db.BeginSnapshot()
	if err != nil {
		f.log.Error("state check: cannot read the store", "index", idx, "err", err)
		return
	}
	go func() {
		defer s.Release()
		h, err := s.Hash()
		if err != nil {
			f.log.Error("state check: cannot hash the store", "index", idx, "err", err)
			return
		}
		f.hashes.put(h)
	}()
}

// StateHash is this node's hash at a checked index, waiting until it is
// computed or ctx ends.
func (f *FSM) StateHash(ctx context.Context, idx uint64) (store.StateHash, error) {
	return f.hashes.wait(ctx, idx)
}

// OnHash sets what runs, off the apply path, for each hash computed (the
// cluster compares it with the other nodes').
func (f *FSM) OnHash(fn func(store.StateHash)) {
	f.hashes.mu.Lock()
	f.hashes.onHash = fn
	f.hashes.mu.Unlock()
}

// SwapIfAhead replaces the store with the file at path, which holds the
// state as of index at, between two applies; it does nothing (false) when
// this node has applied past at meanwhile.
func (f *FSM) SwapIfAhead(path string, at uint64) (bool, error) {
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	if at < f.applied.Load() {
		return false, nil
	}
	r, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer r.Close()
	if err := f.db.Restore(r); err != nil {
		return false, err
	}
	idx, _, err := f.db.Applied()
	if err != nil {
		return false, err
	}
	f.applied.Store(idx)
	f.advance.Notify()
	return true, nil
}
