package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store/pgexport"
	"github.com/rollcall/rollcall/store/pgexport/pgtest"
)

// startExportNode starts a one-node cluster; the node's log goes to the
// buffer, for leak checks.
func startExportNode(t *testing.T) (*nodetest.Node, *nodetest.LogBuffer) {
	t.Helper()
	logs := &nodetest.LogBuffer{}
	n := nodetest.StartWith(t, nodetest.Options{Name: "exp1", Log: logs})
	return n, logs
}

// GET /api/v1/export/status says what the node's mirror does: "mirror"
// with its own status while it runs here, "standby" with the position the
// leader's mirror keeps in PostgreSQL (connected, lagging) when it does not.
// How the runner follows leadership is pgexport's test.
func TestExportStatusFollowsLeadership(t *testing.T) {
	pg := pgtest.Start(t)
	n, logs := startExportNode(t)
	ctx, cancel := context.WithCancel(t.Context())
	var leader atomic.Bool
	leader.Store(true)
	r, err := pgexport.NewRunner(pgexport.RunnerConfig{Settings: pgexport.Settings{DSN: pg.URL(), Schema: "mirror"}, Node: n.Name(), Store: n.Store(),
		IsLeader: leader.Load, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	n.SetExport(r)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, slog.New(slog.NewTextHandler(logs, nil))) }()
	t.Cleanup(func() { cancel(); <-done })

	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(25 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s\nnode log:\n%s", what, logs.String())
			}
		}
	}
	create := func(i int) {
		t.Helper()
		if _, err := n.Cluster().Apply(ctx, &raftfsm.MachineCreate{ID: fmt.Sprintf("m-0000000000%02d", i), Now: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	status := func() wire.ExportStatusView {
		t.Helper()
		r := n.Do(t, "GET", "/api/v1/export/status", nil, nodetest.Bearer(n.Admin)...)
		if r.Status != http.StatusOK {
			t.Fatalf("export status: %s", r)
		}
		var v wire.ExportStatusView
		r.Decode(t, &v)
		return v
	}

	create(1)
	waitUntil("the first machine exported", func() bool {
		v := status()
		return v.Role == "mirror" && v.Mirror != nil && v.Mirror.Running && v.Mirror.ExportedIndex > 0 && v.Mirror.LagIndexes == 0
	})

	leader.Store(false)
	waitUntil("the mirror to stop", func() bool { return status().Role == "standby" })
	create(2)
	v := status()
	if v.Role != "standby" || v.Mirror == nil || v.Mirror.LagIndexes == 0 || !v.Mirror.Connected {
		t.Errorf("status as a follower: %+v; want standby, connected to PostgreSQL, lagging", v)
	}
}
