//go:build e2e

package e2e

import (
	"bytes"
	"context"
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

	"golang.org/x/sys/unix"
)

// Helpers for the VM lab (vm_test.go): a network namespace the test
// creates, processes run inside it with `ip netns exec`, and an HTTP client
// whose sockets are made inside it, so that the test (in the root
// namespace) reaches the node's API without any traffic leaving the lab.

// labNS is a network namespace with lo up, deleted in t.Cleanup (with
// every link in it).
type labNS struct{ name string }

func newLabNS(t *testing.T, name string) *labNS {
	t.Helper()
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	mustRun(t, "ip", "netns", "add", name)
	mustRun(t, "ip", "-n", name, "link", "set", "lo", "up")
	return &labNS{name: name}
}

func (ns *labNS) ip(t *testing.T, args ...string) {
	t.Helper()
	mustRun(t, "ip", append([]string{"-n", ns.name}, args...)...)
}

// command is name args run inside the namespace (ip netns exec execs it,
// so the process's PID is the command's own).
func (ns *labNS) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.name, name}, args...)...)
}

func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// dial makes the socket inside the namespace (a socket belongs to the
// namespace of the thread that created it), then returns the thread to the
// test's namespace; a thread that cannot go back is not reused.
func (ns *labNS) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + ns.name)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("setns %s: %w", ns.name, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else the goroutine ends locked and the runtime drops the thread
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

func (ns *labNS) httpClient() *http.Client {
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: ns.dial, DisableKeepAlives: true}}
}

// labNode is `rollcall serve` running inside a namespace.
type labNode struct {
	name    string
	ns      *labNS
	data    string
	base    string // http://LINK:PORT
	token   string
	client  *http.Client
	cmd     *exec.Cmd
	log     *lockedBuffer
	exited  chan error
	stopped bool
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startLabNode(t *testing.T, ns *labNS, name, data, httpAddr string, args ...string) *labNode {
	t.Helper()
	args = append([]string{"-name", name}, args...)
	n := &labNode{name: name, ns: ns, data: data, base: "http://" + httpAddr, client: ns.httpClient(), log: &lockedBuffer{}, exited: make(chan error, 1)}
	n.cmd = ns.command(context.Background(), binary, append([]string{"serve", "-data", data, "-http", httpAddr, "-os-sync=false"}, args...)...)
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("rollcall serve: %v", err)
	}
	go func() { n.exited <- n.cmd.Wait() }()
	t.Cleanup(func() {
		n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.exited:
		case <-time.After(15 * time.Second):
			n.cmd.Process.Kill()
			<-n.exited
		}
		if t.Failed() {
			t.Logf("%s: rollcall serve log (last 8 KiB):\n%s", n.name, tailString(n.log.String(), 8192))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-n.exited:
			n.exited <- err
			t.Fatalf("rollcall serve exited: %v\n%s", err, n.log)
		default:
		}
		var h struct{ OK bool }
		if code, _ := n.call("", http.MethodGet, "/api/v1/health", nil, &h); code == 200 && h.OK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rollcall serve not healthy after 60 s\n%s", n.log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b, err := os.ReadFile(filepath.Join(data, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	n.token = strings.TrimSpace(string(b))
	return n
}

func (n *labNode) call(token, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, n.base+path, body)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, errors.New(strings.TrimSpace(string(b)))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, err
		}
	}
	return resp.StatusCode, nil
}

// cli runs the rollcall CLI inside the namespace against this node's data
// directory (the CLI finds the URL and the token there).
func (n *labNode) cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := n.ns.command(context.Background(), binary, args...)
	cmd.Env = append(os.Environ(), "ROLLCALL_DATA="+n.data, "ROLLCALL_URL=", "ROLLCALL_TOKEN=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rollcall %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// leaderOfLab is the leader's name as the nodes' health reports agree on it.
func leaderOfLab(t *testing.T, nodes []*labNode) string {
	t.Helper()
	var leader string
	waitUntil(t, 30*time.Second, "one leader seen by every node", func() bool {
		leader = ""
		for _, n := range nodes {
			var h struct{ Leader string }
			if code, _ := n.call("", http.MethodGet, "/api/v1/health", nil, &h); code != http.StatusOK || h.Leader == "" || (leader != "" && h.Leader != leader) {
				return false
			}
			leader = h.Leader
		}
		return true
	})
	return leader
}
