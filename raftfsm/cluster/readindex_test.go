package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A consistent read's index covers every write acknowledged before it, on
// the leader and through a follower, and again after the leader changes
// (the new leader's first read index waits for an entry of its term); a
// node that cannot reach a quorum gives none.
func TestReadIndex(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	lead := tc.leader(10 * time.Second)
	ctx := context.Background()
	var last uint64
	for i := range 5 {
		last = applyCtx(t, lead.cluster(), create(7000+i))
	}
	for _, n := range []*testNode{lead, tc.follower()} {
		idx, err := n.cluster().ReadIndex(ctx)
		if err != nil {
			t.Fatalf("%s: %v", n.name, err)
		}
		if idx < last {
			t.Errorf("%s: read index %d is before the acknowledged write at %d", n.name, idx, last)
		}
	}

	// A new leader.
	if err := lead.stop(); err != nil {
		t.Fatal(err)
	}
	next := tc.leader(10 * time.Second)
	last = applyCtx(t, next.cluster(), create(7100))
	idx, err := next.cluster().ReadIndex(ctx)
	if err != nil || idx < last {
		t.Fatalf("new leader %s: read index %d, %v; want ≥ %d", next.name, idx, err, last)
	}

	// Alone, the last node has no quorum: no read index.
	if err := tc.follower(next).stop(); err != nil {
		t.Fatal(err)
	}
	tc.eventually(15*time.Second, "the lone node to refuse a consistent read", func() error {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if _, err := next.cluster().ReadIndex(rctx); !errors.Is(err, ErrNoLeader) {
			return errors.New("still answers a read index: " + errString(err))
		}
		return nil
	})
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
