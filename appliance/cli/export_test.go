package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store/pgexport/pgtest"
)

func TestExportCLIRefusesPasswordOnCommandLine(t *testing.T) {
	t.Setenv("ROLLCALL_URL", "http://127.0.0.1:1")
	t.Setenv("ROLLCALL_TOKEN", "x")
	for _, dsn := range []string{
		"postgres://rc:hunter2-secret@db.example/fleet",
		"host=db.example user=rc password=hunter2-secret dbname=fleet",
	} {
		code, out, errOut := run("export", "postgres", "-dsn", dsn)
		if code != 1 || !strings.Contains(errOut, "-password-file") || strings.Contains(out+errOut, "hunter2-secret") {
			t.Errorf("dsn %q: exit %d, stderr %q; want 1, a pointer to -password-file, no password echoed", strings.ReplaceAll(dsn, "hunter2-secret", "xxxxx"), code, errOut)
		}
	}
}

// `rollcall export postgres` asks the node to export its store; the
// password read from a file reaches PostgreSQL and nothing else.
func TestExportCLIAgainstPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	n := startNode(t, nodeOptions{name: "exp1"})
	n.use(t)
	t.Setenv("PGPASSWORD", "")
	ctx := t.Context()
	for _, name := range []string{"alpha", "beta"} {
		mustRun(t, "add", "-name", name)
	}
	const secret = "pw-that-must-not-leak"
	pwFile := filepath.Join(t.TempDir(), "pgpass")
	if err := os.WriteFile(pwFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run("export", "postgres", "-dsn", pg.DSN(), "-schema", "cli", "-password-file", pwFile)
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
	var reply wire.ExportReply
	if err := json.Unmarshal([]byte(mustRun(t, "export", "postgres", "-dsn", pg.DSN(), "-schema", "cli", "-password-file", pwFile, "-json")), &reply); err != nil ||
		reply.Node != "exp1" || reply.Stats.Machines != 2 {
		t.Errorf("export postgres -json: %+v, %v", reply, err)
	}

	// Unreachable: a clear message, no password anywhere.
	code, out, errOut = run("export", "postgres", "-dsn", "host=/nonexistent user=rc dbname=fleet connect_timeout=2", "-password-file", pwFile)
	if code != 1 || !strings.Contains(errOut, "cannot connect to PostgreSQL") {
		t.Errorf("unreachable: exit %d, stderr %q; want 1 and cannot connect", code, errOut)
	}
	if strings.Contains(out+errOut+n.log(t), secret) {
		t.Error("the password appears in the CLI output or the node's log")
	}
}

// `rollcall export status` on each node of a cluster that mirrors into
// PostgreSQL: the leader runs the mirror, the follower is on standby and
// says where the leader's mirror stands. (How the node's answer follows
// leadership is appliance's test; how the runner does, pgexport's.)
func TestExportStatusCLI(t *testing.T) {
	t.Setenv("ROLLCALL_URL", "") // -data says which node
	t.Setenv("ROLLCALL_TOKEN", "")
	t.Setenv("PGPASSWORD", "")
	if out := mustRun(t, "export", "status", "-data", startNode(t, nodeOptions{name: "plain"}).Dir); out != "node plain: no postgres_export in its configuration\n" {
		t.Errorf("export status without a mirror: %q", out)
	}

	pg := pgtest.Start(t)
	nodes := startCluster(t, 2, nodeOptions{config: fmt.Sprintf(`{"postgres_export":{"dsn":%q,"schema":"mirror"}}`, pg.URL())})
	mustRun(t, "add", "-name", "m1")
	status := func(n *testNode) wire.ExportStatusView {
		t.Helper()
		var v wire.ExportStatusView
		if err := json.Unmarshal([]byte(mustRun(t, "export", "status", "-json", "-data", n.Dir)), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	t.Setenv("ROLLCALL_URL", "")
	t.Setenv("ROLLCALL_TOKEN", "")
	waitFor(t, "the leader's mirror to export", func() bool {
		v := status(nodes[0])
		return v.Role == "mirror" && v.Mirror != nil && v.Mirror.ExportedIndex > 0
	})
	waitFor(t, "the follower to see the mirror's position", func() bool {
		v := status(nodes[1])
		return v.Role == "standby" && v.Mirror != nil && v.Mirror.Connected && v.Mirror.ExportedIndex > 0
	})
	for i, want := range []string{"node t1: mirror (leader t1)\n", "node t2: standby (leader t1)\n"} {
		out := mustRun(t, "export", "status", "-data", nodes[i].Dir)
		if !strings.HasPrefix(out, want) || !strings.Contains(out, "\ntarget:    ") || !strings.Contains(out, "\nexported:  index ") ||
			!strings.Contains(out, "\napplied:   index ") || !strings.Contains(out, "\nlag:       ") {
			t.Errorf("export status on %s:\n%s", nodes[i].Name(), out)
		}
	}
}
