package cli

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/nodetest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from what the CLI prints")

func TestMain(m *testing.M) {
	// Tables print local times; the goldens hold UTC ones.
	time.Local = time.UTC
	os.Exit(m.Run())
}

// ---- a real node for the CLI to talk to (appliance/nodetest starts it)

// testNode is a node started for a test, with the file its log goes to.
type testNode struct {
	*nodetest.Node
	logFile string
}

// log is what the node has logged so far (debug level).
func (n *testNode) log(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(n.logFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// nodeOptions changes what startNode starts.
type nodeOptions struct {
	name   string // default t1
	config string // DATA/rollcall.json, written before Start; "" for none
	join   string // a join code: the node joins that cluster
	https  bool   // serve the HTTPS API too
}

// startNode starts a node through nodetest, with a join code of the CLI's
// own making when o.join is set; it is closed when the test ends.
func startNode(t *testing.T, o nodeOptions) *testNode {
	t.Helper()
	// A file, not a buffer: the test may read it while the node logs.
	logFile := filepath.Join(t.TempDir(), "node.log")
	logw, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logw.Close() }) // after the node's Close, registered below
	n := nodetest.StartWith(t, nodetest.Options{Name: o.name, Config: o.config, Log: logw, Node: func(opts *node.Options) {
		opts.Join = o.join
		if o.https {
			opts.HTTPSAddr = "127.0.0.1:0"
		}
	}})
	return &testNode{Node: n, logFile: logFile}
}

// use points the CLI at n, as an operator's $ROLLCALL_URL and
// $ROLLCALL_TOKEN would.
func (n *testNode) use(t *testing.T) {
	t.Setenv("ROLLCALL_URL", "http://"+n.HTTPAddr())
	t.Setenv("ROLLCALL_TOKEN", n.Admin)
}

// startCluster starts count nodes named t1, t2, … with o (o.name and
// o.join are set here): the first bootstraps, each other joins with a code
// from `rollcall cluster join-code`, and is caught up before the next
// starts. The CLI is left pointed at the first.
func startCluster(t *testing.T, count int, o nodeOptions) []*testNode {
	t.Helper()
	var nodes []*testNode
	for i := range count {
		o.name, o.join = fmt.Sprintf("t%d", i+1), ""
		if i > 0 {
			o.join = strings.TrimSpace(mustRun(t, "cluster", "join-code", "-ttl", "10m"))
		}
		n := startNode(t, o)
		nodes = append(nodes, n)
		waitFor(t, o.name+" to catch up", func() bool {
			id, _ := n.Cluster().Leader()
			return id != "" && n.Cluster().FSM().AppliedIndex() >= nodes[0].Cluster().FSM().AppliedIndex()
		})
		nodes[0].use(t)
	}
	return nodes
}

// call makes an API call as the admin, for what a test does beside the CLI.
func (n *testNode) call(t *testing.T, method, path string, body io.Reader, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+n.HTTPAddr()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+n.Admin)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// waitFor polls cond for up to 30 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// ---- running the command line

// runIn runs the command line in-process with stdin; it returns the exit
// status and what went to stdout and stderr.
func runIn(stdin string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// run is runIn with nothing on stdin.
func run(args ...string) (int, string, string) { return runIn("", args...) }

// mustRun runs the command line and fails the test unless it exits 0.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := run(args...)
	if code != 0 {
		t.Fatalf("rollcall %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}

// ---- goldens

// golden compares got with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./appliance/cli -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("rollcall's output differs from %s (-want +got):\n%s", path, diff)
	}
}

// What differs from run to run, each replaced by a placeholder as wide as
// itself, so a table's columns line up in the golden as they did on the
// screen.
var (
	machineIDs = regexp.MustCompile(`m-[0-9a-f]{12}`)
	stamps     = regexp.MustCompile(`\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?`)
	ports      = regexp.MustCompile(`127\.0\.0\.1:\d+`)
)

// normalize makes output comparable with a golden: the machine IDs given
// become m-000000000001, m-000000000002, … in that order (any other is
// numbered after them as it appears); times and ports are masked.
func normalize(s string, ids ...string) string {
	seen := map[string]string{}
	for _, id := range ids {
		if _, ok := seen[id]; !ok {
			seen[id] = fmt.Sprintf("m-%012d", len(seen)+1)
		}
	}
	s = machineIDs.ReplaceAllStringFunc(s, func(id string) string {
		if _, ok := seen[id]; !ok {
			seen[id] = fmt.Sprintf("m-%012d", len(seen)+1)
		}
		return seen[id]
	})
	s = stamps.ReplaceAllStringFunc(s, func(t string) string {
		return strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return '#'
			}
			return r
		}, t)
	})
	return ports.ReplaceAllStringFunc(s, func(a string) string {
		return "127.0.0.1:" + strings.Repeat("#", len(a)-len("127.0.0.1:"))
	})
}

// sortRows sorts a table's rows, its header first: for lists in an order
// that is random from run to run (machines by their random IDs).
func sortRows(table string) string {
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	slices.Sort(lines[1:])
	return strings.Join(lines, "\n") + "\n"
}
