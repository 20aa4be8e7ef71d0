package cluster

import (
	"context"
	"fmt"
	"net/http"

	"github.com/hashicorp/raft"

	"github.com/rollcall/rollcall/raftfsm"
)

// Three ways to read (see docs/consistency.md):
//
//   - local: what this node has applied, as fast as it gets, possibly
//     behind the leader by the replication lag;
//   - at min_index: at least as new as a write the client saw (read your
//     writes, monotonic reads across nodes);
//   - consistent: linearizable, through ReadIndex: no write acknowledged
//     before the read began is missing from it, on any node.

type readIndexReply struct {
	Index uint64     `json:"index"`
	Error *wireError `json:"error,omitempty"`
}

// ReadIndex returns the index a linearizable read must wait for (the
// read-index of the Raft thesis, §6.4, as Consul's consistent mode has
// it): the leader's commit index, taken before the leader confirmed with
// a quorum that it still leads. Applied locally up to it, a read sees
// every write acknowledged before the call. A follower asks the leader.
func (c *Cluster) ReadIndex(ctx context.Context) (uint64, error) {
	if c.raft.State() == raft.Leader {
		return c.leaderReadIndex(ctx)
	}
	_, addr := c.Leader()
	if addr == "" {
		return 0, ErrNoLeader
	}
	var reply readIndexReply
	if err := c.call(ctx, addr, http.MethodGet, "/v1/read-index", nil, &reply); err != nil {
		return 0, fmt.Errorf("%w: read index from leader %s: %v", ErrNoLeader, addr, err)
	}
	if reply.Error != nil {
		return 0, fromWire(reply.Error)
	}
	return reply.Index, nil
}

// leaderReadIndex is ReadIndex on the leader. A new leader's commit index
// can trail what its predecessor committed until an entry of its own term
// commits: one no-op command per term settles that, after which the
// commit index is current and a quorum's heartbeat (VerifyLeader) is
// enough. The no-op is a command, not Raft's barrier, because the state
// machine never sees a barrier (nor Raft's own leadership no-op): a read
// index on one would never be reached by the store's applied index.
func (c *Cluster) leaderReadIndex(ctx context.Context) (uint64, error) {
	term := c.raft.CurrentTerm()
	if c.readTerm.Load() != term {
		data, err := raftfsm.Encode(raftfsm.Noop{})
		if err != nil {
			return 0, err
		}
		if _, err := c.applyLocal(ctx, data); err != nil {
			return 0, fmt.Errorf("%w: no-op of term %d: %v", ErrNoLeader, term, err)
		}
		c.readTerm.Store(term)
	}
	idx := c.raft.CommitIndex()
	if err := c.raft.VerifyLeader().Error(); err != nil {
		return 0, fmt.Errorf("%w: leadership not confirmed: %v", ErrNoLeader, err)
	}
	return idx, nil
}

func (c *Cluster) handleReadIndex(w http.ResponseWriter, r *http.Request) {
	var reply readIndexReply
	if c.raft.State() != raft.Leader {
		reply.Error = toWire(ErrNoLeader) // no second hop, as for an apply
	} else {
		idx, err := c.leaderReadIndex(r.Context())
		reply.Index, reply.Error = idx, toWire(err)
	}
	writeJSON(w, reply)
}

// ReadBarrier returns once this node's store holds every write
// acknowledged before the call (a linearizable read may then read it
// locally): it waits until the node has applied the leader's read index.
func (c *Cluster) ReadBarrier(ctx context.Context) error {
	idx, err := c.ReadIndex(ctx)
	if err != nil {
		return err
	}
	return c.fsm.WaitApplied(ctx, idx)
}
