// Command export measures the PostgreSQL export on this machine, against a
// PostgreSQL server it starts in a temporary directory (Debian's
// postgresql package):
//
//   - a full export of -n machines with realistic inventories (one store
//     snapshot, COPY, one transaction), first into an empty schema and then
//     replacing it;
//
//   - the continuous mirror's lag while the store takes -rate change-log
//     entries per second for -for: for each committed command, the time from
//     its commit in the store to the commit of the PostgreSQL transaction
//     that carries it (p50, p99, max).
//
//     go run ./lab/bench/export -n 10000 -rate 500 -for 20s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/pgexport"
	"github.com/rollcall/rollcall/store/pgexport/pgtest"
)

func main() {
	n := flag.Int("n", 10000, "machines in the fleet")
	rate := flag.Int("rate", 500, "change-log entries per second during the mirror run")
	dur := flag.Duration("for", 20*time.Second, "length of the mirror run")
	flag.Parse()
	if err := run(*n, *rate, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "export bench:", err)
		os.Exit(1)
	}
}

func run(n, rate int, dur time.Duration) error {
	bin := pgtest.Bin()
	if bin == "" {
		return fmt.Errorf("PostgreSQL is not installed (apt-get install postgresql)")
	}
	pg, err := pgtest.New(bin)
	if err != nil {
		return err
	}
	defer pg.Close()
	dir, err := os.MkdirTemp("", "exportbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	log, err := fsmtest.New(db)
	if err != nil {
		return err
	}
	fmt.Printf("PostgreSQL %s, %d CPUs, GOMAXPROCS %d\n", filepath.Base(filepath.Dir(bin)), runtime.NumCPU(), runtime.GOMAXPROCS(0))

	start := time.Now()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	var cmds []raftfsm.Command
	for i := 0; i < n; i++ {
		c, err := pgtest.Commission(pgtest.Machine(1, i), i, now.Add(time.Duration(i)*time.Second))
		if err != nil {
			return err
		}
		cmds = append(cmds, c)
		if len(cmds) == 200 || i == n-1 {
			if err := log.ApplyBatch(cmds...); err != nil {
				return err
			}
			cmds = nil
		}
	}
	fmt.Printf("store: %d machines commissioned through the FSM in %s\n", n, time.Since(start).Round(time.Millisecond))

	ctx := context.Background()
	for _, label := range []string{"into an empty schema", "replacing it"} {
		st, err := pgexport.Export(ctx, db, pg.DSN(), "bench")
		if err != nil {
			return err
		}
		rows := 0
		for _, r := range st.Rows {
			rows += r
		}
		fmt.Printf("full export %s: %d machines, %d rows in %d tables, %.2fs (%.0f machines/s, %.0f rows/s)\n",
			label, st.Machines, rows, len(st.Rows), st.Duration.Seconds(),
			float64(st.Machines)/st.Duration.Seconds(), float64(rows)/st.Duration.Seconds())
	}
	return mirrorLag(ctx, db, log, pg, n, rate, dur)
}

// mirrorLag drives a steady stream of commands (events on machines,
// re-commissioning: 7 change-log entries per machine cycle) and measures,
// per command, commit-to-PostgreSQL lag.
func mirrorLag(ctx context.Context, db *store.DB, log *fsmtest.Log, pg *pgtest.Server, n, rate int, dur time.Duration) error {
	var mu sync.Mutex
	committed := map[uint64]time.Time{} // index → when the store committed it
	var lags []time.Duration
	txs := 0
	m, err := pgexport.NewMirror(db, pgexport.MirrorConfig{
		Target: pgexport.Target{DSN: pg.DSN(), Schema: "bench", Node: "bench"},
		Exported: func(idx uint64) {
			at := time.Now()
			mu.Lock()
			defer mu.Unlock()
			txs++
			for i, t := range committed {
				if i <= idx {
					lags = append(lags, at.Sub(t))
					delete(committed, i)
				}
			}
		},
	})
	if err != nil {
		return err
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Run(mctx) }()
	for m.Status().ExportedIndex < log.Index {
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	lags, txs = nil, 0
	mu.Unlock()
	startIndex := log.Index

	// One machine cycle: two events (1 entry each), re-commission (machine
	// + event), commission again (machine, event, inventory) = 7 entries.
	type step struct {
		cost int
		cmd  func(i int, now time.Time) (raftfsm.Command, error)
	}
	cycle := []step{
		{1, func(i int, now time.Time) (raftfsm.Command, error) {
			return &raftfsm.MachineEvent{Event: raftfsm.Event{Machine: pgtest.ID(i), Time: now, Kind: "note", Message: "burn-in pass 1"}}, nil
		}},
		{1, func(i int, now time.Time) (raftfsm.Command, error) {
			return &raftfsm.MachineEvent{Event: raftfsm.Event{Machine: pgtest.ID(i), Time: now, Kind: "note", Message: "burn-in pass 2"}}, nil
		}},
		{2, func(i int, now time.Time) (raftfsm.Command, error) {
			return &raftfsm.Recommission{ID: pgtest.ID(i), Reason: "bench", Now: now}, nil
		}},
		{3, func(i int, now time.Time) (raftfsm.Command, error) {
			rep := pgtest.Machine(1, i) // same machine, firmware updated
			rep.BIOS.Version = "2." + now.Format("150405")
			return pgtest.Commission(rep, i, now)
		}},
	}
	begin := time.Now()
	sent, k := 0, 0
	for time.Since(begin) < dur {
		due := int(time.Since(begin).Seconds() * float64(rate))
		if sent >= due {
			time.Sleep(time.Millisecond)
			continue
		}
		s := cycle[k%len(cycle)]
		machine := (k / len(cycle)) % n
		c, err := s.cmd(machine, time.Now().UTC())
		if err != nil {
			return err
		}
		if err := log.Apply(c); err != nil {
			return err
		}
		mu.Lock()
		committed[log.Index] = time.Now()
		mu.Unlock()
		sent += s.cost
		k++
	}
	elapsed := time.Since(begin)
	for m.Status().ExportedIndex < log.Index {
		time.Sleep(5 * time.Millisecond)
	}
	st := m.Status()
	cancel()
	if err := <-done; err != nil {
		return err
	}
	var entries int
	db.View(func(tx *store.Tx) error {
		ch, _, err := tx.ChangeBatch(startIndex, 0)
		entries = len(ch)
		return err
	})
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lags)
	pct := func(p float64) time.Duration { return lags[min(len(lags)-1, int(p*float64(len(lags))))] }
	fmt.Printf("mirror: %d commands, %d change-log entries in %.1fs (%.0f entries/s), %d PostgreSQL transactions, %d full exports\n",
		k, entries, elapsed.Seconds(), float64(entries)/elapsed.Seconds(), txs, st.FullExports)
	fmt.Printf("mirror lag, store commit → PostgreSQL commit: p50 %s, p99 %s, max %s\n",
		pct(0.50).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), lags[len(lags)-1].Round(10*time.Microsecond))
	return nil
}
