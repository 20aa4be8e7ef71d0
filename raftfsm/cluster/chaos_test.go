package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestClusterChaos runs writers against a cluster whose nodes are stopped
// and restarted at random, one at a time, then heals it and checks that
// every acknowledged write is on every node and that all copies agree.
func TestClusterChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test skipped in -short mode")
	}
	tc := newTestCluster(t, 3, func(c *Config) {
		c.SnapshotThreshold = 256 // snapshots and log compaction happen during the chaos too
		c.TrailingLogs = 128
	})
	const chaos = 10 * time.Second
	stop := make(chan struct{})
	var (
		mu       sync.Mutex
		acked    []string
		unknown  int
		refused  int
		bad      []string
		next     atomic.Int64
		restarts int
		wg       sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				up := tc.running()
				if len(up) == 0 {
					continue
				}
				c := up[r.IntN(len(up))].cluster()
				if c == nil {
					continue
				}
				i := int(next.Add(1))
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				_, err := c.Apply(ctx, create(i))
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, machineID(i))
				case errors.Is(err, ErrUnknownOutcome):
					unknown++
				case errors.Is(err, ErrNoLeader), errors.Is(err, raft.ErrRaftShutdown):
					refused++
				default:
					bad = append(bad, fmt.Sprintf("%s: %v", machineID(i), err))
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	nemesis := rand.New(rand.NewPCG(42, 7))
	end := time.Now().Add(chaos)
	for time.Now().Before(end) {
		nd := tc.nodes[nemesis.IntN(len(tc.nodes))]
		if err := nd.stop(); err != nil && !errors.Is(err, raft.ErrRaftShutdown) {
			t.Errorf("nemesis: stop %s: %v", nd.name, err)
		}
		time.Sleep(time.Duration(300+nemesis.IntN(400)) * time.Millisecond)
		if err := nd.start(); err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("nemesis: restart %s: %v", nd.name, err)
		}
		restarts++
		time.Sleep(time.Duration(500+nemesis.IntN(500)) * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	tc.converge(30 * time.Second)
	t.Logf("%d restarts; %d writes acknowledged, %d unknown outcomes, %d refused", restarts, len(acked), unknown, refused)
	for _, b := range bad {
		t.Errorf("write failed with an unexpected error (a unique ID cannot conflict unless applied twice): %s", b)
	}
	if len(acked) < 50 {
		t.Errorf("only %d writes acknowledged in %s of chaos: the cluster hardly made progress", len(acked), chaos)
	}
	var ref []string
	for k, nd := range tc.nodes {
		got := machineIDs(t, nd.store())
		missing := 0
		for _, id := range acked {
			if !slices.Contains(got, id) {
				missing++
				if missing <= 5 {
					t.Errorf("%s lost acknowledged write %s", nd.name, id)
				}
			}
		}
		if missing > 0 {
			t.Errorf("%s lost %d of %d acknowledged writes", nd.name, missing, len(acked))
		}
		if k == 0 {
			ref = got
		} else if !slices.Equal(got, ref) {
			t.Errorf("%s has %d machines, %s has %d: copies diverge", nd.name, len(got), tc.nodes[0].name, len(ref))
		}
	}
}
