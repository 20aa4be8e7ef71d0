package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rollcall/rollcall/store"
)

// The cluster side of the version gate (raftfsm/gate.go): each node
// reports what its binary reads at start, and again every
// VersionReportEvery while something it reads is not open; the leader
// opens what every member of the Raft configuration (voters and
// non-voters) reads, counting only reports it saw renewed within three
// intervals, so a member whose binary was replaced by one that does not
// report (a downgrade to a build without the gate) holds the gate shut.

// GateStatus is what this node's gate has open and waits for.
type GateStatus struct {
	// Pending lists what this node's binary reads that is not open yet.
	Pending []string `json:"pending,omitempty"`
	// Waiting says, for each pending item, whom the gate waits for (the
	// leader's view is the one that decides).
	Waiting []string `json:"waiting,omitempty"`
}

type gateWatch struct {
	mu   sync.Mutex
	seen map[string]seenReport // node: its report's index when it last changed
}

type seenReport struct {
	index uint64
	at    time.Time
}

func (c *Cluster) reportEvery() time.Duration {
	if c.cfg.VersionReportEvery > 0 {
		return c.cfg.VersionReportEvery
	}
	return 20 * time.Second
}

// runGate reports this node's versions and, on the leader, opens the gate.
func (c *Cluster) runGate(ctx context.Context) {
	every := c.reportEvery()
	reported := false
	for {
		if !reported || len(c.fsm.Pending()) > 0 || c.fsm.ReportsPending() {
			rctx, cancel := context.WithTimeout(ctx, every)
			if _, err := c.Apply(rctx, c.fsm.Report(c.cfg.Name)); err == nil {
				reported = true
			} else if ctx.Err() == nil {
				c.log.Debug("version report not taken yet", "err", err)
			}
			cancel()
		}
		if c.IsLeader() {
			c.openGate(ctx)
		}
		wait := every
		if !reported {
			wait = min(every, 100*time.Millisecond) // no leader yet: try again soon
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// gateReports returns the fresh reports of every configured member, and
// the members whose report is missing or stale.
func (c *Cluster) gateReports() (fresh []store.NodeVersions, missing []string, err error) {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, nil, err
	}
	var all map[string]store.NodeVersions
	if err := c.db.View(func(tx *store.Tx) (err error) { all, err = tx.NodeVersionsAll(); return err }); err != nil {
		return nil, nil, err
	}
	c.gw.mu.Lock()
	defer c.gw.mu.Unlock()
	if c.gw.seen == nil {
		c.gw.seen = map[string]seenReport{}
	}
	now := time.Now()
	for _, s := range f.Configuration().Servers {
		id := string(s.ID)
		r, ok := all[id]
		if !ok {
			missing = append(missing, fmt.Sprintf("node %s (no version report: a build without the gate, or not started since)", id))
			continue
		}
		prev, known := c.gw.seen[id]
		if !known || prev.index != r.Index {
			prev = seenReport{index: r.Index, at: now}
			if !known && id != c.cfg.Name {
				// First sight on this leader: fresh only once renewed.
				prev.at = time.Time{}
			}
			c.gw.seen[id] = prev
		}
		if id != c.cfg.Name && now.Sub(prev.at) > 3*c.reportEvery() {
			missing = append(missing, fmt.Sprintf("node %s (build %s: its report is not renewed; is it up?)", id, r.Build))
			continue
		}
		fresh = append(fresh, r)
	}
	return fresh, missing, nil
}

// openGate proposes a GateOpen for what every member reads.
func (c *Cluster) openGate(ctx context.Context) {
	fresh, missing, err := c.gateReports()
	if err != nil || len(missing) > 0 {
		return
	}
	g := c.fsm.Openable(fresh)
	if g == nil {
		return
	}
	octx, cancel := context.WithTimeout(ctx, c.reportEvery())
	defer cancel()
	if _, err := c.Apply(octx, g); err != nil {
		c.log.Warn("version gate: open", "types", g.Types, "formats", g.Formats, "err", err)
		return
	}
	c.log.Info("version gate opened", "types", g.Types, "formats", g.Formats)
}

// Gate is this node's view of the version gate.
func (c *Cluster) Gate() GateStatus {
	st := GateStatus{Pending: c.fsm.Pending()}
	if len(st.Pending) == 0 {
		return st
	}
	fresh, missing, err := c.gateReports()
	if err != nil {
		st.Waiting = []string{err.Error()}
		return st
	}
	st.Waiting = missing
	k := c.fsm.Known()
	for _, t := range slices.Sorted(maps.Keys(k.Types)) {
		v := k.Types[t]
		if v <= c.fsm.OpenVersion(t) {
			continue
		}
		for _, r := range fresh {
			if have := r.Types[fmt.Sprint(int(t))]; have < v {
				st.Waiting = append(st.Waiting, fmt.Sprintf("node %s (build %s) reads type %d only up to version %d", r.Node, r.Build, t, have))
			}
		}
	}
	if len(st.Waiting) == 0 && !c.IsLeader() {
		st.Waiting = []string{"the leader's next round (every " + c.reportEvery().String() + ")"}
	}
	return st
}
