package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rollcall/rollcall/raftfsm"
)

// Apply proposes a command and returns the index it was applied at, with the
// command's own (business) error. On a follower it forwards the entry to the
// leader; either way it returns only once the local store has applied that
// index, so a read on this node sees the write.
func (c *Cluster) Apply(ctx context.Context, cmd raftfsm.Command) (uint64, error) {
	// The version gate picks the body version: the newest one every
	// member reads (raftfsm/gate.go).
	cmd, err := c.fsm.ForGate(cmd)
	if err != nil {
		return 0, err
	}
	data, err := raftfsm.Encode(cmd)
	if err != nil {
		return 0, err
	}
	// Encoded here from a typed command: no need to decode it again (a
	// 50 KB inventory costs as much to decode as to apply).
	return c.propose(ctx, data, cmd)
}

// ApplyRaw is Apply for an already encoded entry from elsewhere. The entry is
// decoded here first, so a malformed one never enters the log (decoding
// failures in the state machine stop a node).
func (c *Cluster) ApplyRaw(ctx context.Context, data []byte) (uint64, error) {
	cmd, err := raftfsm.Decode(data)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errBadCommand, err)
	}
	return c.propose(ctx, data, cmd)
}

func (c *Cluster) propose(ctx context.Context, data []byte, cmd raftfsm.Command) (uint64, error) {
	start := time.Now()
	var idx uint64
	var err error
	if c.raft.State() == raft.Leader {
		if err := c.fsm.Precheck(cmd); err != nil {
			c.Metrics.observeApply(start, err)
			return 0, err
		}
		idx, err = c.applyLocal(ctx, data)
	} else {
		idx, err = c.forward(ctx, data)
	}
	c.Metrics.observeApply(start, err)
	if idx == 0 {
		return 0, err
	}
	if werr := c.fsm.WaitApplied(ctx, idx); werr != nil {
		return idx, fmt.Errorf("%w: applied at %d on the leader, not yet here: %v", ErrUnknownOutcome, idx, werr)
	}
	return idx, err
}

var errBadCommand = errors.New("malformed command")

func (c *Cluster) applyLocal(ctx context.Context, data []byte) (uint64, error) {
	timeout := c.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	f := c.raft.Apply(data, timeout)
	// A future may never be answered if raft shuts down with it still in
	// the batch buffer (hashicorp/raft#498): wait with our own bound.
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err != nil {
			switch {
			case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
				errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrRaftShutdown):
				// Lost leadership before commit: the entry may still commit
				// under the next leader.
				if errors.Is(err, raft.ErrNotLeader) {
					return 0, ErrNoLeader
				}
				return 0, fmt.Errorf("%w (%v)", ErrUnknownOutcome, err)
			case errors.Is(err, raft.ErrEnqueueTimeout):
				return 0, ErrNoLeader
			}
			return 0, fmt.Errorf("apply: %w", err)
		}
	case <-ctx.Done():
		return 0, ErrUnknownOutcome
	case <-time.After(timeout + time.Second):
		return 0, ErrUnknownOutcome
	}
	res, _ := f.Response().(*raftfsm.Result)
	if res == nil {
		return f.Index(), nil
	}
	for _, e := range res.Errs {
		if e != nil {
			return f.Index(), &BatchError{Errs: res.Errs}
		}
	}
	return f.Index(), res.Err
}

// BatchError carries the per-entry results of a Batch. Entries that
// succeeded have a nil error.
type BatchError struct{ Errs []error }

func (e *BatchError) Error() string {
	n := 0
	for _, err := range e.Errs {
		if err != nil {
			n++
		}
	}
	return fmt.Sprintf("batch: %d of %d entries failed", n, len(e.Errs))
}
