package cluster

import (
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the cluster's Prometheus collectors. The appliance registers
// them (Collectors) on its registry.
type Metrics struct {
	state       *prometheus.GaugeVec
	applied     prometheus.Gauge
	commit      prometheus.Gauge
	term        prometheus.Gauge
	lastContact prometheus.Gauge
	applyDur    *prometheus.HistogramVec
	done        chan struct{}

	stateChecks    prometheus.Counter
	stateDiverged  prometheus.Counter
	sizedSnapshots prometheus.Counter
}

func newMetrics() *Metrics {
	return &Metrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rollcall_raft_state", Help: "1 for the Raft state this node is in.",
		}, []string{"state"}),
		applied: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rollcall_raft_applied_index", Help: "Last Raft index applied to the local store.",
		}),
		commit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rollcall_raft_commit_index", Help: "Last Raft index known committed.",
		}),
		term: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rollcall_raft_term", Help: "Current Raft term.",
		}),
		lastContact: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rollcall_raft_last_contact_seconds", Help: "Seconds since a follower last heard from the leader (0 on the leader).",
		}),
		applyDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rollcall_raft_apply_seconds",
			Help:    "Time from proposing a command to its commit and local apply, by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"outcome"}),
		done: make(chan struct{}),
		stateChecks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rollcall_state_checks_total", Help: "Cluster consistency checks this node took part in (its store hashed and compared).",
		}),
		stateDiverged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rollcall_state_check_mismatches_total", Help: "Consistency checks at which stores differed across nodes.",
		}),
		sizedSnapshots: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rollcall_raft_size_snapshots_total", Help: "Snapshots taken because the applied entries passed snapshot_bytes (the Raft log sized by bytes).",
		}),
	}
}

// Collectors returns every collector to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.state, m.applied, m.commit, m.term, m.lastContact, m.applyDur, m.stateChecks, m.stateDiverged, m.sizedSnapshots}
}

func (m *Metrics) observeApply(start time.Time, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.applyDur.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
}

func (m *Metrics) watch(c *Cluster) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		st := c.raft.State()
		for _, s := range []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown} {
			v := 0.0
			if s == st {
				v = 1
			}
			m.state.WithLabelValues(s.String()).Set(v)
		}
		m.applied.Set(float64(c.fsm.AppliedIndex()))
		m.commit.Set(float64(c.raft.CommitIndex()))
		m.term.Set(float64(c.raft.CurrentTerm()))
		if st == raft.Leader {
			m.lastContact.Set(0)
		} else if lc := c.raft.LastContact(); !lc.IsZero() {
			m.lastContact.Set(time.Since(lc).Seconds())
		}
		select {
		case <-m.done:
			return
		case <-t.C:
		}
	}
}

func (m *Metrics) stop() {
	select {
	case <-m.done:
	default:
		close(m.done)
	}
}
