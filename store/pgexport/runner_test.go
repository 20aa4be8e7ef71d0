package pgexport

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
)

// Settings with a password where it must not be, or a password file that
// cannot be read, are refused at start, without echoing the password.
func TestSettingsCheck(t *testing.T) {
	s := Settings{DSN: "postgres://rc:hunter2-secret@db.example/fleet"}
	if err := s.Check(); err == nil || strings.Contains(err.Error(), "hunter2-secret") {
		t.Errorf("postgres_export with a password in the dsn: %v, want a refusal without the password", err)
	}
	s = Settings{DSN: "host=db.example", PasswordFile: filepath.Join(t.TempDir(), "missing")}
	if err := s.Check(); err == nil {
		t.Error("postgres_export with a missing password file was accepted")
	}
}

// The mirror runs only while the node leads: it starts on leadership,
// stops when it is lost (a change made meanwhile is not exported by this
// node), and resumes from PostgreSQL's index when leadership returns.
// Meanwhile Status reads the position from PostgreSQL.
func TestRunnerFollowsLeadership(t *testing.T) {
	srv := server(t)
	f := newFleet(t)
	schema := schemaName(t)
	var leader atomic.Bool
	leader.Store(true)
	r, err := NewRunner(RunnerConfig{Settings: Settings{DSN: srv.URL(), Schema: schema}, Node: "node1", Store: f.db,
		IsLeader: leader.Load, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run returned %v after cancel, want context.Canceled", err)
		}
	})

	conn := srv.Conn(t)
	count := func() int {
		var c int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+schema+".machines").Scan(&c); err != nil {
			return -1
		}
		return c
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(25 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (the runner's log is above)", what)
			}
		}
	}
	create := func(i int) {
		t.Helper()
		f.apply(t, &raftfsm.MachineCreate{ID: fmt.Sprintf("m-0000000000%02d", i), Now: f.tick()})
	}
	status := func() (Status, bool) {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		defer scancel()
		st, running, err := r.Status(sctx)
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		return st, running
	}

	create(1)
	waitUntil("the first machine in PostgreSQL", func() bool { return count() == 1 })
	if st, running := status(); !running || !st.Running {
		t.Errorf("status while leading: running %v, %+v", running, st)
	}

	leader.Store(false)
	waitUntil("the mirror to stop", func() bool { _, running := status(); return !running })
	create(2)
	time.Sleep(500 * time.Millisecond)
	if c := count(); c != 1 {
		t.Fatalf("%d machines in PostgreSQL after leadership was lost, want 1: the mirror kept running", c)
	}
	if st, _ := status(); st.LagIndexes == 0 || !st.Connected || st.ExportedIndex == 0 {
		t.Errorf("status as a follower: %+v; want connected to PostgreSQL, lagging", st)
	}

	leader.Store(true)
	waitUntil("the second machine after leadership returned", func() bool { return count() == 2 })
}
