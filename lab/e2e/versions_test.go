//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// oldRev is the build a rolling upgrade starts from: the last commit of
// main before the version gate (ROLLCALL_OLD_REV overrides it). Going from
// a build without the gate to one with it is the upgrade the gate's
// bootstrap rule exists for (raftfsm/gate.go): the new nodes may write
// nothing the old ones cannot read until the last old node is gone.
const oldRev = "255f308^"

// buildAt builds appliance/cmd/rollcall as it was at rev, in a git
// worktree of this checkout.
func buildAt(t *testing.T, rev string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	tree := filepath.Join(t.TempDir(), "src")
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s (the test needs main's history: a shallow clone lacks %s)", strings.Join(args, " "), err, out, rev)
		}
	}
	git("worktree", "add", "--detach", tree, rev)
	t.Cleanup(func() { exec.Command("git", "-C", root, "worktree", "remove", "--force", tree).Run() })
	bin := filepath.Join(t.TempDir(), "rollcall-old")
	build := exec.Command("go", "build", "-o", bin, "./appliance/cmd/rollcall")
	build.Dir = tree
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", rev, err, out)
	}
	return bin
}

// stop ends a node as an operator's upgrade would: SIGTERM, then wait.
func (n *proc) stop(t *testing.T) {
	t.Helper()
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop within 30s of SIGTERM\n%s", n.name, n.log)
	}
}

// gateView is what GET /api/v1/cluster says of the gate, per member.
type gateView struct {
	Members []struct {
		ID     string `json:"id"`
		Status *struct {
			Build string `json:"build"`
			Gate  *struct {
				Pending []string `json:"pending"`
				Waiting []string `json:"waiting"`
			} `json:"gate"`
		} `json:"status"`
	} `json:"members"`
}

func clusterGate(n *proc, token string) (gateView, error) {
	var v gateView
	_, err := call(n, token, http.MethodGet, "/api/v1/cluster", nil, &v)
	return v, err
}

// A three-node cluster of the build before the gate, upgraded to this one
// node by node with writers running on every node: no node stops (the old
// ones skip the new nodes' version reports, which carry the ignorable
// bit), no acknowledged write is lost, the new nodes hold back what only
// they read while an old node is a member, and open it once the last one
// has moved. A node may go back to the old build before the gate opened;
// after, the old build stops with the reason. A DHCP client renews all the
// while and keeps its one address.
func TestRollingUpgradeAcrossTheGate(t *testing.T) {
	old := buildAt(t, envOr("ROLLCALL_OLD_REV", oldRev))
	dir := t.TempDir()
	nodes := make([]*proc, 3)
	for i := range nodes {
		nodes[i] = &proc{name: fmt.Sprintf("v%d", i+1), data: filepath.Join(dir, fmt.Sprintf("v%d", i+1)), http: freePort(t), raft: freePort(t), bin: old}
	}
	nodes[0].start(t)
	nodes[0].waitHealthy(t)
	tokenBytes, err := os.ReadFile(filepath.Join(nodes[0].data, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))
	for _, n := range nodes[1:] {
		code, err := cli(t, nodes[0].data, "cluster", "join-code", "-ttl", "10m")
		if err != nil || !strings.HasPrefix(code, "rcj1-") {
			t.Fatalf("join-code: %v %q", err, code)
		}
		n.start(t, "-join", code)
		n.waitHealthy(t)
	}

	// A DHCP client for the whole roll, served by the first node (which is
	// upgraded, and goes back and forth, like the others).
	dhcpNS := startDHCPLab(t)
	serveDHCP(t, nodes[0].data, nodes[0].name)
	probe := startDHCPProbe(t, dhcpNS)

	// Writers on every node for the whole roll.
	var mu sync.Mutex
	acked := map[string]bool{}
	failed := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var m struct{ ID string }
				_, err := call(nodes[(w+i)%3], token, http.MethodPost, "/api/v1/machines", map[string]string{"name": fmt.Sprintf("u%d-%d", w, i)}, &m)
				mu.Lock()
				if err == nil {
					acked[m.ID] = true
				} else {
					failed++ // a node restarting, or an election
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(50 * time.Millisecond)
				} else {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	alive := func() {
		t.Helper()
		for _, n := range nodes {
			select {
			case err := <-n.done:
				t.Fatalf("%s (%s) exited during the roll: %v\n%s", n.name, filepath.Base(n.cmd.Path), err, n.log)
			default:
			}
		}
	}

	// Followers first, the leader last (its restart is one election).
	leader := leaderOf(t, nodes, token)
	order := []*proc{}
	for _, n := range nodes {
		if n != leader {
			order = append(order, n)
		}
	}
	order = append(order, leader)
	time.Sleep(2 * time.Second)
	for k, n := range order {
		alive()
		if k == len(order)-1 {
			// Two new nodes, one old: the new ones report, and hold
			// back what the old one cannot read.
			var v gateView
			deadline := time.Now().Add(60 * time.Second)
			for {
				v, err = clusterGate(order[0], token)
				if err == nil && pending(v, order[0].name) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("with %s still on the old build, %s shows nothing pending: %+v (%v)", n.name, order[0].name, v, err)
				}
				time.Sleep(500 * time.Millisecond)
			}
			t.Logf("before the last node moved, %s waits: %s", order[0].name, waiting(v, order[0].name))
		}
		n.stop(t)
		n.bin = binary
		n.start(t)
		n.waitHealthy(t)
		t.Logf("%s now runs the current build", n.name)
		if k == 0 {
			// And back, before the gate opened: safe, the new build
			// wrote nothing the old one cannot read.
			alive()
			n.stop(t)
			n.bin = old
			n.start(t)
			n.waitHealthy(t)
			alive()
			t.Logf("%s went back to the old build and runs", n.name)
			n.stop(t)
			n.bin = binary
			n.start(t)
			n.waitHealthy(t)
		}
	}

	probe.mark("rolled")

	// Every node on the new build: the gate opens on every node.
	opened := time.Now()
	deadline := opened.Add(120 * time.Second)
	for {
		alive()
		done := true
		var last gateView
		for _, n := range nodes {
			v, err := clusterGate(n, token)
			last = v
			if err != nil || pending(v, n.name) != 0 {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gate did not open within 120s of the last upgrade: %+v", last)
		}
		time.Sleep(time.Second)
	}
	t.Logf("gate open on every node %v after the last node moved", time.Since(opened).Round(time.Second))

	// Back after the gate opened is refused: the old build meets an entry
	// it cannot read (the writers' audited writes) and stops, naming why;
	// the other two go on. Moved forward again, it catches up.
	back := order[0]
	back.stop(t)
	back.bin = old
	back.start(t)
	select {
	case <-back.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("%s on the old build after the gate opened did not stop\n%s", back.name, back.log)
	}
	if !strings.Contains(back.log.String(), "this node is older than the leader") {
		t.Fatalf("%s on the old build after the gate opened stopped without saying why:\n%s", back.name, back.log)
	}
	t.Logf("%s on the old build after the gate opened stopped: it is older than the leader", back.name)
	back.bin = binary
	back.start(t)
	back.waitHealthy(t)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	alive()

	if !probe.finish(t) {
		for _, n := range nodes {
			t.Logf("%s's DHCP log:\n%s", n.name, grepLog(n.log.String(), "dhcp"))
		}
		t.FailNow()
	}
	requireAcked(t, nodes, token, acked)
	if len(acked) < 50 {
		t.Fatalf("only %d writes acknowledged during the roll (%d failed): the load did not run", len(acked), failed)
	}
	t.Logf("%d writes acknowledged during the roll, %d refused or failed while a node restarted", len(acked), failed)
}

// pending is how many versions the named member's gate holds back: -1
// when the member did not answer or is a build without the gate.
func pending(v gateView, name string) int {
	for _, m := range v.Members {
		if m.ID == name && m.Status != nil && m.Status.Build != "" {
			if m.Status.Gate == nil {
				return 0
			}
			return len(m.Status.Gate.Pending)
		}
	}
	return -1
}

func waiting(v gateView, name string) string {
	for _, m := range v.Members {
		if m.ID == name && m.Status != nil && m.Status.Gate != nil {
			b, _ := json.Marshal(m.Status.Gate)
			return string(b)
		}
	}
	return "nothing"
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
