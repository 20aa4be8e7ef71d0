//go:build e2e

// Package e2e runs real rollcall processes: a three-node cluster formed with
// join codes, its leader killed with SIGKILL under load and restarted, a
// node removed, and a damaged store refused. `make e2e` runs it.
package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
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

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rollcall-e2e-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "rollcall")
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	build := exec.Command("go", "build", "-o", binary, "./appliance/cmd/rollcall")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build rollcall: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type proc struct {
	name, data, http, raft string
	bin                    string // the binary to run; the current build when empty
	cmd                    *exec.Cmd
	log                    *bytes.Buffer
	done                   chan error
}

func (n *proc) start(t *testing.T, extra ...string) {
	t.Helper()
	args := append([]string{"serve", "-data", n.data, "-name", n.name, "-http", n.http, "-raft", n.raft, "-os-sync=false"}, extra...)
	bin := binary
	if n.bin != "" {
		bin = n.bin
	}
	n.cmd = exec.Command(bin, args...)
	n.log = &bytes.Buffer{}
	w := &lockedWriter{w: n.log}
	n.cmd.Stdout, n.cmd.Stderr = w, w
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.done = make(chan error, 1)
	go func() { n.done <- n.cmd.Wait() }()
	t.Cleanup(func() { n.kill() })
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (n *proc) kill() {
	if n.cmd != nil && n.cmd.Process != nil {
		n.cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-n.done:
		case <-time.After(5 * time.Second):
		}
	}
}

func (n *proc) url() string { return "http://" + n.http }

// waitHealthy waits until the node answers health with a leader.
func (n *proc) waitHealthy(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-n.done:
			t.Fatalf("%s exited: %v\n%s", n.name, err, n.log)
		default:
		}
		var h struct {
			OK     bool   `json:"ok"`
			Leader string `json:"leader"`
		}
		if code, _ := call(n, "", http.MethodGet, "/api/v1/health", nil, &h); code == 200 && h.OK {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not healthy after 30s\n%s", n.name, n.log)
}

var client = &http.Client{Timeout: 20 * time.Second}

func call(n *proc, token, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, n.url()+path, body)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, err
		}
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, errors.New(strings.TrimSpace(string(b)))
	}
	return resp.StatusCode, nil
}

func cli(t *testing.T, data string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "ROLLCALL_DATA="+data, "ROLLCALL_URL=", "ROLLCALL_TOKEN=")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func TestClusterOfProcesses(t *testing.T) {
	dir := t.TempDir()
	nodes := make([]*proc, 3)
	for i := range nodes {
		nodes[i] = &proc{name: fmt.Sprintf("n%d", i+1), data: filepath.Join(dir, fmt.Sprintf("n%d", i+1)), http: freePort(t), raft: freePort(t)}
	}
	n1 := nodes[0]
	n1.start(t)
	n1.waitHealthy(t)
	tokenBytes, err := os.ReadFile(filepath.Join(n1.data, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))
	if st, _ := os.Stat(filepath.Join(n1.data, "admin.token")); st.Mode().Perm() != 0o600 {
		t.Fatalf("admin.token mode %v, want 0600", st.Mode().Perm())
	}

	var usedCode string
	for _, n := range nodes[1:] {
		code, err := cli(t, n1.data, "cluster", "join-code", "-ttl", "10m")
		if err != nil || !strings.HasPrefix(code, "rcj1-") {
			t.Fatalf("join-code: %v %q", err, code)
		}
		n.start(t, "-join", code)
		n.waitHealthy(t)
		usedCode = code
	}
	// The joined nodes got the admin token, so the CLI works on them too.
	out, err := cli(t, nodes[2].data, "cluster", "status")
	if err != nil {
		t.Fatalf("cluster status on n3: %v\n%s", err, out)
	}
	for _, n := range nodes {
		if !strings.Contains(out, n.name) {
			t.Fatalf("status misses %s:\n%s", n.name, out)
		}
	}
	if strings.Count(out, " yes ") != 3 {
		t.Fatalf("want 3 voters:\n%s", out)
	}

	// A reused join code is refused with the reason, and the node does not start.
	n4 := &proc{name: "n4", data: filepath.Join(dir, "n4"), http: freePort(t), raft: freePort(t)}
	n4.start(t, "-join", usedCode)
	select {
	case err := <-n4.done:
		if err == nil || !strings.Contains(n4.log.String(), "already used") {
			t.Fatalf("reused code: exit %v, log:\n%s", err, n4.log)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("node with a reused join code did not exit")
	}

	// Write on a follower, read on the third node.
	leader := leaderOf(t, nodes, token)
	var follower, third *proc
	for _, n := range nodes {
		if n != leader {
			if follower == nil {
				follower = n
			} else {
				third = n
			}
		}
	}
	var m struct {
		ID    string `json:"id"`
		Index uint64 `json:"index"`
	}
	if _, err := call(follower, token, http.MethodPost, "/api/v1/machines", map[string]string{"name": "first", "mac": "52:54:00:00:00:01"}, &m); err != nil {
		t.Fatalf("write on follower: %v", err)
	}
	if _, err := call(third, token, http.MethodGet, fmt.Sprintf("/api/v1/machines/%s?min_index=%d", m.ID, m.Index), nil, nil); err != nil {
		t.Fatalf("read on third node: %v", err)
	}

	// Writers on every node; SIGKILL the leader mid-stream.
	acked := map[string]bool{}
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var firstAfterKill time.Time
	var killedAt time.Time
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				target := nodes[(w+i)%3]
				if target == leader && !killedAt.IsZero() {
					continue
				}
				var m struct{ ID string }
				if _, err := call(target, token, http.MethodPost, "/api/v1/machines", map[string]string{"name": fmt.Sprintf("w%d-%d", w, i)}, &m); err == nil {
					mu.Lock()
					acked[m.ID] = true
					if !killedAt.IsZero() && firstAfterKill.IsZero() {
						firstAfterKill = time.Now()
					}
					mu.Unlock()
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}(w)
	}
	time.Sleep(2 * time.Second)
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	leader.kill()
	time.Sleep(4 * time.Second)
	close(stop)
	wg.Wait()
	if firstAfterKill.IsZero() {
		t.Fatal("no write was acknowledged after the leader was killed")
	}
	t.Logf("leader %s killed; first acknowledged write %v later; %d writes acknowledged", leader.name, firstAfterKill.Sub(killedAt).Round(time.Millisecond), len(acked))

	// Restart the killed node on its data: it rejoins and catches up.
	leader.start(t)
	leader.waitHealthy(t)
	requireAcked(t, nodes, token, acked)

	// Remove a node: the others go on as a two-node cluster.
	victim := nodes[2]
	survivor := nodes[0]
	if out, err := cli(t, survivor.data, "cluster", "remove", victim.name); err != nil {
		t.Fatalf("remove: %v %s", err, out)
	}
	out, _ = cli(t, survivor.data, "cluster", "status", "-json")
	var cv struct {
		Members []struct{ ID string } `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &cv); err != nil || len(cv.Members) != 2 {
		t.Fatalf("after remove: %v %s", err, out)
	}
	if _, err := call(survivor, token, http.MethodPost, "/api/v1/machines", map[string]string{"name": "after-remove"}, nil); err != nil {
		t.Fatalf("write after remove: %v", err)
	}
	victim.kill()

	// A damaged store refuses to start and says why.
	n2 := nodes[1]
	n2.kill()
	corrupt(t, filepath.Join(n2.data, "state.db"))
	n2.start(t)
	select {
	case err := <-n2.done:
		if err == nil || !strings.Contains(n2.log.String(), "corrupt") {
			t.Fatalf("corrupt store: exit %v, log:\n%s", err, n2.log)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("node with a corrupt store did not refuse to start")
	}
}

// requireAcked fails unless every node lists every acknowledged machine,
// read at the highest index any node has applied.
func requireAcked(t *testing.T, nodes []*proc, token string, acked map[string]bool) {
	t.Helper()
	var idx uint64
	for _, n := range nodes {
		var h struct {
			Applied uint64 `json:"applied_index"`
		}
		call(n, "", http.MethodGet, "/api/v1/health", nil, &h)
		idx = max(idx, h.Applied)
	}
	for _, n := range nodes {
		var list struct {
			Machines []struct{ ID string } `json:"machines"`
		}
		if _, err := call(n, token, http.MethodGet, fmt.Sprintf("/api/v1/machines?min_index=%d", idx), nil, &list); err != nil {
			t.Fatalf("list on %s: %v", n.name, err)
		}
		have := map[string]bool{}
		for _, m := range list.Machines {
			have[m.ID] = true
		}
		for id := range acked {
			if !have[id] {
				t.Fatalf("%s lost acknowledged write %s", n.name, id)
			}
		}
	}
}

func leaderOf(t *testing.T, nodes []*proc, token string) *proc {
	t.Helper()
	var h struct {
		Leader string `json:"leader"`
	}
	call(nodes[0], "", http.MethodGet, "/api/v1/health", nil, &h)
	for _, n := range nodes {
		if n.name == h.Leader {
			return n
		}
	}
	t.Fatalf("no leader among nodes (health says %q)", h.Leader)
	return nil
}

// corrupt overwrites both bbolt meta pages.
func corrupt(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := bytes.Repeat([]byte{0xa5}, 2*4096)
	if _, err := f.WriteAt(junk, 0); err != nil {
		t.Fatal(err)
	}
}
