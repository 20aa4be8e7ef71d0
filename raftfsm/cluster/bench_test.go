package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/rollcall/rollcall/lab/baseline"
	"github.com/rollcall/rollcall/raftfsm"
)

// Apply throughput on three in-process nodes, every acknowledged write
// fsynced (raft-boltdb's log and the bbolt store both sync on commit).
// Ours: raftfsm with mutual TLS, BatchApplyCh and a batching FSM. Baseline:
// plain hashicorp/raft + bbolt, one transaction per entry (lab/baseline).
//
//	go test -bench . -run '^$' ./raftfsm/cluster/
//
// Each benchmark builds its cluster outside the timer. writes/s counts
// acknowledged writes only; a run with errors fails.

const proposers = 128

func benchOurs(b *testing.B, p int, batch int) {
	tc := newTestCluster(b, 3, nil)
	c := tc.leader(10 * time.Second).cluster()
	ctx := context.Background()
	b.ResetTimer()
	res := baseline.Drive(b.N, p, func(i int) error {
		if batch <= 1 {
			_, err := c.Apply(ctx, create(i))
			return err
		}
		cmds := make([]raftfsm.Command, batch)
		for k := range cmds {
			cmds[k] = create(i*batch + k)
		}
		bt, err := raftfsm.NewBatch(cmds...)
		if err != nil {
			return err
		}
		_, err = c.Apply(ctx, bt)
		return err
	})
	b.StopTimer()
	report(b, res, batch)
}

func benchBaseline(b *testing.B, p int) {
	c, err := baseline.Start(b.TempDir(), 3, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	ctx := context.Background()
	if _, err := c.Leader(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	res := c.ApplyN(ctx, 0, b.N, p)
	b.StopTimer()
	report(b, res, 1)
}

func report(b *testing.B, res baseline.Result, batch int) {
	b.Helper()
	if res.Errors > 0 {
		b.Fatalf("%d of %d writes failed; first: %v", res.Errors, res.Writes, res.First)
	}
	if batch > 1 {
		b.ReportMetric(res.PerSecond(), "batches/s")
		b.ReportMetric(res.PerSecond()*float64(batch), "records/s")
		return
	}
	b.ReportMetric(res.PerSecond(), "writes/s")
}

func BenchmarkApplySequential(b *testing.B)    { benchOurs(b, 1, 1) }
func BenchmarkApplyConcurrent128(b *testing.B) { benchOurs(b, proposers, 1) }

// BenchmarkApplyBatched proposes Batches of 64 MachineCreate from 32
// proposers: records that arrive together share one log entry.
func BenchmarkApplyBatched(b *testing.B) { benchOurs(b, 32, 64) }

func BenchmarkBaselineSequential(b *testing.B)    { benchBaseline(b, 1) }
func BenchmarkBaselineConcurrent128(b *testing.B) { benchBaseline(b, proposers) }
