package node

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// Deploy job timeouts (issue 18): the leader fails a job whose agent has
// not reported for deploy_timeout (default 30 minutes), or whose machine
// never started the agent within deploy_boot_timeout (default 60
// minutes), with the last step in its error. The timeout is a command
// (JobTimeout) naming the report it counted from, so a report that
// arrives meanwhile voids it, and a new leader simply sweeps again.

const (
	defaultDeployTimeout     = 30 * time.Minute
	defaultDeployBootTimeout = 60 * time.Minute
)

// deployTimeouts are the two timeouts of rollcall.json.
func (c FileConfig) deployTimeouts() (running, queued time.Duration, err error) {
	running, queued = defaultDeployTimeout, defaultDeployBootTimeout
	for _, t := range []struct {
		name string
		v    string
		d    *time.Duration
	}{{"deploy_timeout", c.DeployTimeout, &running}, {"deploy_boot_timeout", c.DeployBootTimeout, &queued}} {
		if t.v == "" {
			continue
		}
		d, err := time.ParseDuration(t.v)
		if err != nil || d < time.Second {
			return 0, 0, fmt.Errorf("%s: %q is not a duration of a second or more (30m, 1h)", t.name, t.v)
		}
		*t.d = d
	}
	return running, queued, nil
}

// runDeployTimeouts sweeps on the leader, a few times per timeout.
func (n *Node) runDeployTimeouts(ctx context.Context, log *slog.Logger) error {
	running, queued, err := n.conf.deployTimeouts()
	if err != nil {
		return err
	}
	tick := min(30*time.Second, running/4, queued/4)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if !n.cluster.IsLeader() {
			continue
		}
		var due []*raftfsm.JobTimeout
		if err := n.db.View(func(tx *store.Tx) (err error) {
			due, err = raftfsm.DueTimeouts(tx, time.Now().UTC(), running, queued)
			return err
		}); err != nil {
			log.Error("deploy timeouts: cannot read jobs", "err", err)
			continue
		}
		for _, c := range due {
			if _, err := n.cluster.Apply(ctx, c); err != nil {
				log.Info("deploy timeout not applied", "job", c.Job, "err", err)
				continue
			}
			log.Warn("deploy job timed out", "job", c.Job, "after", c.After)
		}
	}
}
