package appliance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store/pgexport"
	"github.com/rollcall/rollcall/store/pgexport/pgtest"
)

// startExportNode starts a one-node cluster and sets ROLLCALL_URL and
// ROLLCALL_TOKEN for the CLI; the node's log goes to the buffer, for leak
// checks.
func startExportNode(t *testing.T) (*nodetest.Node, *nodetest.LogBuffer) {
	t.Helper()
	logs := &nodetest.LogBuffer{}
	n := nodetest.StartWith(t, nodetest.Options{Name: "exp1", Log: logs})
	t.Setenv("ROLLCALL_URL", "http://"+n.HTTPAddr())
	t.Setenv("ROLLCALL_TOKEN", n.Admin)
	t.Setenv("PGPASSWORD", "")
	return n, logs
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = appliance.Main(args, &o, &e)
	return code, o.String(), e.String()
}

func TestExportCLIRefusesPasswordOnCommandLine(t *testing.T) {
	t.Setenv("ROLLCALL_URL", "http://127.0.0.1:1")
	t.Setenv("ROLLCALL_TOKEN", "x")
	for _, dsn := range []string{
		"postgres://rc:hunter2-secret@db.example/fleet",
		"host=db.example user=rc password=hunter2-secret dbname=fleet",
	} {
		code, out, errOut := runCLI("export", "postgres", "-dsn", dsn)
		if code != 1 || !strings.Contains(errOut, "-password-file") || strings.Contains(out+errOut, "hunter2-secret") {
			t.Errorf("dsn %q: exit %d, stderr %q; want 1, a pointer to -password-file, no password echoed", pgexportRedact(dsn), code, errOut)
		}
	}
}

func pgexportRedact(s string) string { return strings.ReplaceAll(s, "hunter2-secret", "xxxxx") }

// `rollcall export postgres` asks the node to export its store; the
// password read from a file reaches PostgreSQL and nothing else.
func TestExportCLIAgainstPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	n, logs := startExportNode(t)
	ctx := t.Context()
	for i, name := range []string{"alpha", "beta"} {
		if _, err := n.Cluster().Apply(ctx, &raftfsm.MachineCreate{ID: fmt.Sprintf("m-00000000000%d", i+1), Name: name, Now: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	const secret = "pw-that-must-not-leak"
	pwFile := filepath.Join(t.TempDir(), "pgpass")
	if err := os.WriteFile(pwFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("export", "postgres", "-dsn", pg.DSN(), "-schema", "cli", "-password-file", pwFile)
	if code != 0 || !strings.Contains(out, "exported 2 machines") {
		t.Fatalf("export: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	conn := pg.Conn(t)
	var names []string
	rows, err := conn.Query(ctx, "SELECT name FROM cli.machines ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		names = append(names, s)
	}
	if strings.Join(names, ",") != "alpha,beta" {
		t.Errorf("machines in PostgreSQL: %v, want alpha, beta", names)
	}
	var node string
	if err := conn.QueryRow(ctx, "SELECT node FROM cli.export_state").Scan(&node); err != nil || node != "exp1" {
		t.Errorf("export_state.node = %q (%v), want exp1", node, err)
	}

	// Unreachable: a clear message, no password anywhere.
	code, out, errOut = runCLI("export", "postgres", "-dsn", "host=/nonexistent user=rc dbname=fleet connect_timeout=2", "-password-file", pwFile)
	if code != 1 || !strings.Contains(errOut, "cannot connect to PostgreSQL") {
		t.Errorf("unreachable: exit %d, stderr %q; want 1 and cannot connect", code, errOut)
	}
	if strings.Contains(out+errOut+logs.String(), secret) {
		t.Error("the password appears in the CLI output or the node's log")
	}
}

// `rollcall export status` says what the node's mirror does: "mirror"
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
		code, out, errOut := runCLI("export", "status", "-json")
		if code != 0 {
			t.Fatalf("export status: %d %s", code, errOut)
		}
		var v wire.ExportStatusView
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
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
	_, out, _ := runCLI("export", "status")
	if !strings.Contains(out, "standby") || !strings.Contains(out, "lag:") {
		t.Errorf("export status text: %q", out)
	}
}
