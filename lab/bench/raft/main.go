// Command raft measures raftfsm against a plain hashicorp/raft + bbolt
// baseline in one run on this machine: Apply throughput on three in-process
// nodes (sequential, concurrent proposers, and batched records), failover
// time (leader killed under light load → first acknowledged write on the new
// leader) and elections seen on a healthy cluster under full load. Every
// acknowledged write is fsynced on both sides.
//
//	go run ./lab/bench/raft -n 20000
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/rollcall/rollcall/lab/baseline"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/cluster"
)

type config struct {
	n, seq, p, batch, batchP, failovers int
	healthy                             time.Duration
	dir                                 string
}

func main() {
	var cfg config
	flag.IntVar(&cfg.n, "n", 20000, "writes per concurrent run (and records in the batched run)")
	flag.IntVar(&cfg.seq, "seq", 0, "writes per sequential run (default n/20, at least 200)")
	flag.IntVar(&cfg.p, "p", 128, "concurrent proposers")
	flag.IntVar(&cfg.batch, "batch", 64, "records per raftfsm.Batch in the batched run")
	flag.IntVar(&cfg.batchP, "batch-p", 32, "proposers in the batched run")
	flag.IntVar(&cfg.failovers, "failovers", 5, "leader kills per side")
	flag.DurationVar(&cfg.healthy, "healthy", 10*time.Second, "how long to load a healthy cluster while counting elections")
	flag.StringVar(&cfg.dir, "dir", "", "where the nodes keep their files (default: a temporary directory, removed after)")
	flag.Parse()
	if cfg.seq == 0 {
		cfg.seq = max(cfg.n/20, 200)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type row struct {
	metric       string
	ours, theirs float64
	unit         string
	hasTheirs    bool
}

func run(cfg config) error {
	dir := cfg.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "rollcall-raft-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	ctx := context.Background()
	var rows []row
	add := func(metric string, o, t float64, unit string, hasT bool) {
		rows = append(rows, row{metric, o, t, unit, hasT})
		fmt.Fprintf(os.Stderr, "  %-44s ours %10.1f  baseline %10.1f %s\n", metric, o, t, unit)
	}

	fmt.Fprintln(os.Stderr, "starting raftfsm cluster (3 nodes, mTLS, 500 ms timeouts) and baseline (3 nodes, plain TCP, 1 s timeouts)")
	o, err := startOurs(dir+"/ours", 3)
	if err != nil {
		return fmt.Errorf("start ours: %w", err)
	}
	defer o.close()
	b, err := baseline.Start(dir+"/baseline", 3, nil)
	if err != nil {
		return fmt.Errorf("start baseline: %w", err)
	}
	defer b.Close()
	if _, err := b.Leader(ctx); err != nil {
		return err
	}

	id := 0 // next machine number on ours; the baseline uses its own keys
	oursWrite := func(i int) error {
		l, err := o.leader(ctx)
		if err != nil {
			return err
		}
		_, err = l.cluster().Apply(ctx, create(i))
		return err
	}
	// Sequential and concurrent.
	for _, p := range []int{1, cfg.p} {
		n := cfg.n
		if p == 1 {
			n = cfg.seq
		}
		off := id
		ro := baseline.Drive(n, p, func(i int) error { return oursWrite(off + i) })
		id += n
		rb := b.ApplyN(ctx, off, n, p)
		if err := firstErr(ro, rb); err != nil {
			return err
		}
		add(fmt.Sprintf("apply, %d proposer(s), %d writes", p, n), ro.PerSecond(), rb.PerSecond(), "writes/s", true)
	}

	// Batched: records arriving together share one command.
	{
		nb := max(cfg.n/cfg.batch, 1)
		off := id
		l, err := o.leader(ctx)
		if err != nil {
			return err
		}
		ro := baseline.Drive(nb, cfg.batchP, func(i int) error {
			cmds := make([]raftfsm.Command, cfg.batch)
			for k := range cmds {
				cmds[k] = create(off + i*cfg.batch + k)
			}
			bt, err := raftfsm.NewBatch(cmds...)
			if err != nil {
				return err
			}
			_, err = l.cluster().Apply(ctx, bt)
			return err
		})
		id += nb * cfg.batch
		if err := firstErr(ro, baseline.Result{}); err != nil {
			return err
		}
		add(fmt.Sprintf("batched records (%d/command, %d proposers)", cfg.batch, cfg.batchP), ro.PerSecond()*float64(cfg.batch), 0, "records/s", false)
	}

	// Elections on a healthy cluster under full load.
	var oursN, baseN atomic.Int64
	oursN.Store(int64(id))
	baseN.Store(int64(id))
	eo, wo := electionsUnderLoad(cfg.healthy, cfg.p, oursTerms(o), func() error {
		return oursWrite(int(oursN.Add(1)))
	})
	eb, wb := electionsUnderLoad(cfg.healthy, cfg.p, baselineTerms(b), func() error {
		i := int(baseN.Add(1))
		return b.Apply(ctx, baseline.Entry(baseline.Key(i), baseline.Value(i)))
	})
	add(fmt.Sprintf("elections in %s healthy, %d proposers", cfg.healthy, cfg.p), float64(eo), float64(eb), "elections", true)
	add(fmt.Sprintf("  writes/s during those %s", cfg.healthy), wo, wb, "writes/s", true)

	// Failover.
	fo, err := failoverOurs(o, cfg.failovers, &oursN)
	if err != nil {
		return fmt.Errorf("failover ours: %w", err)
	}
	fb, err := failoverBaseline(b, cfg.failovers, &baseN)
	if err != nil {
		return fmt.Errorf("failover baseline: %w", err)
	}
	add(fmt.Sprintf("failover median (%d kills)", cfg.failovers), ms(median(fo)), ms(median(fb)), "ms", true)
	add(fmt.Sprintf("failover max (%d kills)", cfg.failovers), ms(slices.Max(fo)), ms(slices.Max(fb)), "ms", true)

	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "metric\tours\tbaseline\tours/baseline\tunit\t")
	for _, r := range rows {
		t, ratio := "—", "—"
		if r.hasTheirs {
			t = fmt.Sprintf("%.1f", r.theirs)
			if r.theirs != 0 {
				ratio = fmt.Sprintf("%.2f×", r.ours/r.theirs)
			}
		}
		fmt.Fprintf(w, "%s\t%.1f\t%s\t%s\t%s\t\n", r.metric, r.ours, t, ratio, r.unit)
	}
	w.Flush()
	fmt.Printf("\nours: raftfsm, 3 nodes, mutual TLS, BatchApplyCh + batching FSM, 500 ms heartbeat/election timeouts.\n" +
		"baseline: hashicorp/raft v1.7.3 + raft-boltdb/v2 + bbolt, non-batching FSM (one Update per entry), TCP on loopback, raft.DefaultConfig (1 s).\n" +
		"Writes go to the leader (ours: Apply on the leader; baseline: raft.Apply on the leader). Failover: from the start of\n" +
		"Shutdown of the leader to the first acknowledged write proposed after it, under 8 writers.\n")
	return nil
}

func create(i int) *raftfsm.MachineCreate {
	return &raftfsm.MachineCreate{
		ID:   fmt.Sprintf("m-%012x", i),
		MACs: []string{fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", (i>>24)&0xff, (i>>16)&0xff, (i>>8)&0xff, i&0xff)},
		Now:  time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
	}
}

func firstErr(rs ...baseline.Result) error {
	for _, r := range rs {
		if r.Errors > 0 {
			return fmt.Errorf("%d of %d writes failed; first: %w", r.Errors, r.Writes, r.First)
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// electionsUnderLoad runs p writers for d and returns how far the highest
// term moved (each election bumps it; pre-vote keeps failed tries from doing
// so) and the write rate.
func electionsUnderLoad(d time.Duration, p int, terms func() uint64, write func() error) (int, float64) {
	before := terms()
	stop := make(chan struct{})
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if write() == nil {
					ok.Add(1)
				}
			}
		}()
	}
	start := time.Now()
	time.Sleep(d)
	close(stop)
	wg.Wait()
	return int(terms() - before), float64(ok.Load()) / time.Since(start).Seconds()
}

func oursTerms(o *ours) func() uint64 {
	return func() uint64 {
		var t uint64
		for _, n := range o.running() {
			t = max(t, n.cluster().Raft().CurrentTerm())
		}
		return t
	}
}

func baselineTerms(b *baseline.Cluster) func() uint64 {
	return func() uint64 {
		var t uint64
		for _, n := range b.Nodes {
			if r := n.Raft(); r != nil {
				t = max(t, r.CurrentTerm())
			}
		}
		return t
	}
}

// lightLoad runs writers that note the first write acknowledged after
// armed() was called, counting only writes proposed after that moment.
type lightLoad struct {
	armedAt  atomic.Int64 // unix nanos; 0 = not armed
	firstAck atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startLoad(writers int, write func(r *rand.Rand) error) *lightLoad {
	l := &lightLoad{stop: make(chan struct{})}
	for w := range writers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				start := time.Now().UnixNano()
				err := write(r)
				if a := l.armedAt.Load(); err == nil && a != 0 && start >= a {
					l.firstAck.CompareAndSwap(0, time.Now().UnixNano())
				}
				if err != nil {
					time.Sleep(5 * time.Millisecond)
				} else {
					time.Sleep(20 * time.Millisecond) // light load
				}
			}
		}()
	}
	return l
}

func (l *lightLoad) halt() { close(l.stop); l.wg.Wait() }

// waitAck waits for the first acknowledged write after arming.
func (l *lightLoad) waitAck(within time.Duration) (time.Time, error) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if t := l.firstAck.Load(); t != 0 {
			return time.Unix(0, t), nil
		}
		time.Sleep(time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("no write acknowledged within %s of the kill", within)
}

func failoverOurs(o *ours, rounds int, ids *atomic.Int64) ([]time.Duration, error) {
	var out []time.Duration
	for range rounds {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := o.converge(ctx)
		cancel()
		if err != nil {
			return nil, err
		}
		load := startLoad(8, func(r *rand.Rand) error {
			up := o.running()
			if len(up) == 0 {
				return cluster.ErrNoLeader
			}
			c := up[r.IntN(len(up))].cluster()
			if c == nil {
				return cluster.ErrNoLeader
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := c.Apply(ctx, create(int(ids.Add(1))))
			return err
		})
		time.Sleep(time.Second)
		l, err := o.leader(context.Background())
		if err != nil {
			load.halt()
			return nil, err
		}
		kill := time.Now()
		l.stop()
		load.armedAt.Store(time.Now().UnixNano())
		ack, err := load.waitAck(30 * time.Second)
		load.halt()
		if err != nil {
			return nil, err
		}
		out = append(out, ack.Sub(kill))
		if err := l.start(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func failoverBaseline(b *baseline.Cluster, rounds int, ids *atomic.Int64) ([]time.Duration, error) {
	var out []time.Duration
	for range rounds {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		l, err := b.Leader(ctx)
		if err == nil {
			i := int(ids.Add(1))
			err = b.Apply(ctx, baseline.Entry(baseline.Key(i), baseline.Value(i)))
		}
		cancel()
		if err != nil {
			return nil, err
		}
		load := startLoad(8, func(*rand.Rand) error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			i := int(ids.Add(1))
			return b.Apply(ctx, baseline.Entry(baseline.Key(i), baseline.Value(i)))
		})
		time.Sleep(time.Second)
		if l, err = b.Leader(context.Background()); err != nil {
			load.halt()
			return nil, err
		}
		kill := time.Now()
		b.Stop(l)
		load.armedAt.Store(time.Now().UnixNano())
		ack, err := load.waitAck(30 * time.Second)
		load.halt()
		if err != nil {
			return nil, err
		}
		out = append(out, ack.Sub(kill))
		if err := b.Restart(l); err != nil {
			return nil, err
		}
		// Let the restarted node catch up before the next kill.
		time.Sleep(2 * time.Second)
	}
	return out, nil
}
