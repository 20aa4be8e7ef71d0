package httpapi

import (
	"context"
	"sync"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// seenWriter coalesces stateless nodes' fetches into StatelessSeen
// commands: a node's first fetch after its assign (booted) goes out at the
// next flush, a heartbeat at most once an interval per node, and a flush
// carries at most seenBatch nodes per command. A fetch never waits for
// Raft: a write that fails is retried at the next flush.
type seenWriter struct {
	interval time.Duration

	mu      sync.Mutex
	pending map[string]raftfsm.NodeSeen // by machine
	written map[string]time.Time        // when each node's seen time last went out
}

// seenBatch bounds one command's nodes (the state machine's own bound
// for a command naming machines is larger).
const seenBatch = 500

// seenFlush is how often pending seen times are proposed.
const seenFlush = 2 * time.Second

func newSeenWriter(interval time.Duration) *seenWriter {
	return &seenWriter{interval: interval, pending: map[string]raftfsm.NodeSeen{}, written: map[string]time.Time{}}
}

// note records a fetch by node n at now.
func (w *seenWriter) note(n store.StatelessNode, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	booted := n.Booted.IsZero()
	if p, ok := w.pending[n.Machine]; ok && p.Booted && p.Generation == n.Generation {
		booted = true // not written yet: keep asking for booted
	}
	if !booted {
		last := n.LastSeen
		if t := w.written[n.Machine]; t.After(last) {
			last = t
		}
		if now.Sub(last) < w.interval {
			return
		}
	}
	w.pending[n.Machine] = raftfsm.NodeSeen{Machine: n.Machine, Generation: n.Generation, Time: now, Booted: booted}
}

// take empties up to seenBatch pending items.
func (w *seenWriter) take() []raftfsm.NodeSeen {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []raftfsm.NodeSeen
	for id, s := range w.pending {
		if len(out) == seenBatch {
			break
		}
		out = append(out, s)
		delete(w.pending, id)
	}
	return out
}

// done marks items written, or puts them back (unless newer ones came).
func (w *seenWriter) done(items []raftfsm.NodeSeen, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range items {
		if ok {
			w.written[s.Machine] = s.Time
			continue
		}
		if _, newer := w.pending[s.Machine]; !newer {
			w.pending[s.Machine] = s
		}
	}
	// Forget nodes not seen for long, so the map follows the fleet.
	if len(w.written) > 4*seenBatch {
		for id, t := range w.written {
			if time.Since(t) > 10*w.interval {
				delete(w.written, id)
			}
		}
	}
}

// RunSeen proposes the nodes' seen times until ctx ends (a supervised
// part of the node: stateless-seen).
func (s *Server) RunSeen(ctx context.Context) error {
	t := time.NewTicker(seenFlush)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for {
			items := s.seen.take()
			if len(items) == 0 {
				break
			}
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := s.cfg.Cluster.Apply(actx, &raftfsm.StatelessSeen{Nodes: items})
			cancel()
			s.seen.done(items, err == nil)
			if err != nil {
				s.log.Debug("stateless nodes' seen times not written; retrying", "nodes", len(items), "err", err)
				break
			}
		}
	}
}
