package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rollcall/rollcall/raftfsm"
)

// The Raft log sized by bytes as well as entries. hashicorp/raft snapshots
// after SnapshotThreshold entries and keeps TrailingLogs entries after a
// snapshot: counts, so that under DHCP load, whose lease batches are large
// entries, the log (raft-boltdb) grew to hundreds of MB before it was
// compacted. sizedFSM counts the bytes the state machine applies; when
// they pass SnapshotBytes since the last snapshot, logSizer asks Raft for
// one, first setting TrailingLogs so that what stays behind is about
// TrailingBytes at the entries' recent average size (never fewer than
// minTrailing entries, never more than the configured TrailingLogs).

// Defaults of the byte bounds.
const (
	DefaultSnapshotBytes = 64 << 20
	DefaultTrailingBytes = 32 << 20
	minTrailing          = 256
)

// sizedFSM is the state machine Raft drives, counting what it applies.
type sizedFSM struct {
	*raftfsm.FSM
	bytes, entries atomic.Int64
	kick           chan struct{}
	limit          int64
}

func newSizedFSM(f *raftfsm.FSM, limit int64) *sizedFSM {
	return &sizedFSM{FSM: f, kick: make(chan struct{}, 1), limit: limit}
}

func (f *sizedFSM) count(logs []*raft.Log) {
	var n int64
	for _, l := range logs {
		n += int64(len(l.Data))
	}
	f.entries.Add(int64(len(logs)))
	if f.bytes.Add(n) >= f.limit {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

func (f *sizedFSM) Apply(l *raft.Log) any {
	f.count([]*raft.Log{l})
	return f.FSM.Apply(l)
}

func (f *sizedFSM) ApplyBatch(logs []*raft.Log) []any {
	f.count(logs)
	return f.FSM.ApplyBatch(logs)
}

// trailingFor is how many entries keep about trailingBytes at avg bytes
// an entry, within [minTrailing, max].
func trailingFor(trailingBytes, avg int64, max uint64) uint64 {
	if avg <= 0 {
		return max
	}
	n := uint64(trailingBytes / avg)
	return min(max, maxU(n, minTrailing))
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// sizeLog snapshots whenever the applied bytes pass the bound, until ctx
// ends. A snapshot Raft took on its own (the entry count) resets nothing
// here: the bytes since the last one this loop asked for are a bound on
// what has not been compacted.
func (c *Cluster) sizeLog(ctx context.Context, f *sizedFSM) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.kick:
		}
		bytes, entries := f.bytes.Swap(0), f.entries.Swap(0)
		if entries == 0 {
			continue
		}
		rc := c.raft.ReloadableConfig()
		want := trailingFor(c.cfg.TrailingBytes, bytes/entries, c.cfg.TrailingLogs)
		if rc.TrailingLogs != want {
			rc.TrailingLogs = want
			if err := c.raft.ReloadConfig(rc); err != nil {
				c.log.Warn("raft log: cannot set trailing logs", "entries", want, "err", err)
			}
		}
		began := time.Now()
		err := c.raft.Snapshot().Error()
		switch {
		case err == nil:
			c.Metrics.sizedSnapshots.Inc()
			c.log.Info("raft log: snapshot by size", "applied_bytes", bytes, "entries", entries, "trailing_logs", want, "took", time.Since(began).Round(time.Millisecond))
		case errors.Is(err, raft.ErrNothingNewToSnapshot), errors.Is(err, raft.ErrRaftShutdown):
		default:
			c.log.Warn("raft log: snapshot by size failed", "err", err)
		}
	}
}
