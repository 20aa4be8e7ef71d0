package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rollcall/rollcall/store"
)

// node is one `rollcall serve` process in the server namespace.
type node struct {
	name, data, http string
	env              []string // added to the process's environment
	cmd              *exec.Cmd
	log              *bytes.Buffer
	done             chan struct{} // closed when the process has exited
	err              error         // its exit status, once done is closed
}

// The binary is built once per bench run, from the tree as it was then.
var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// buildRollcall builds the appliance binary the way `make build` does.
func buildRollcall(dir string) (string, error) {
	bin := filepath.Join(dir, "rollcall")
	cmd := exec.Command("go", "build", "-o", bin, "./appliance/cmd/rollcall")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build rollcall (run the bench from the repository root): %v\n%s", err, out)
	}
	return bin, nil
}

// start runs `rollcall serve` in the namespace; idle puts the process in
// the SCHED_IDLE class (chrt --idle), where it gets only the CPU time
// nothing else wants.
func (n *node) start(l *lab, bin string, idle bool, extra ...string) error {
	args := []string{"netns", "exec", l.srv, bin, "serve", "-data", n.data, "-name", n.name, "-http", n.http, "-bmc-detect=false"}
	args = append(args, extra...)
	if idle {
		n.cmd = exec.Command("chrt", append([]string{"--idle", "0", "ip"}, args...)...)
	} else {
		n.cmd = exec.Command("ip", args...)
	}
	cpus := *serverCPUs
	if n.name != "n1" && *followerCPUs != "" {
		cpus = *followerCPUs
	}
	n.cmd = pinned(n.cmd, cpus)
	n.cmd.Env = append(os.Environ(), n.env...)
	if *cpuprof != "" && n.name == "n1" {
		// the serving node's profile, beside the bench's own
		n.cmd.Env = append(n.cmd.Env, "ROLLCALL_CPUPROFILE="+*cpuprof+".n1", "ROLLCALL_TRACE="+*cpuprof+".n1.trace")
	}
	n.log = &bytes.Buffer{}
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	if err := n.cmd.Start(); err != nil {
		return err
	}
	n.done = make(chan struct{})
	go func() { n.err = n.cmd.Wait(); close(n.done) }()
	return nil
}

// cli runs a rollcall command against this node from inside the namespace.
func (n *node) cli(l *lab, bin string, args ...string) (string, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", l.srv, bin}, args...)...)
	cmd.Env = append(os.Environ(), "ROLLCALL_DATA="+n.data, "ROLLCALL_URL=", "ROLLCALL_TOKEN=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("rollcall %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// healthy waits until the node answers its health check with a leader.
func (n *node) healthy(l *lab, bin string) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-n.done:
			return fmt.Errorf("%s exited: %v\n%s", n.name, n.err, n.log)
		default:
		}
		if out, err := n.cli(l, bin, "cluster", "status", "-json"); err == nil && strings.Contains(out, `"leader"`) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not healthy after 60s\n%s", n.name, n.log)
}

func (n *node) stop() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(20 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
}

// dhcpServing waits until the node's metrics show the DHCP service up
// with at least one lease block (the gauge of free addresses is set).
func dhcpServing(l *lab, n *node) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out, err := exec.Command("ip", "netns", "exec", l.srv, "curl", "-sf", "http://"+n.http+"/metrics").Output()
		if err == nil && strings.Contains(string(out), "rollcall_dhcp_") {
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, "rollcall_dhcp_free_addresses") && !strings.HasSuffix(line, " 0") {
					return nil
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("DHCP not serving on %s after 30s\n%s", n.name, n.log)
}

// processes starts three real nodes in the server namespace, joined with
// join codes as an operator would, with DHCP on n1's srv0; the leases n1
// grants go through Raft to all three. followersIdle runs n2 and n3 in the
// SCHED_IDLE class: they stand for other machines, so on this two-CPU box
// they take only CPU time the serving node and perfdhcp leave (their work
// is still done, and checked: the three stores must agree at the end).
func processes(l *lab, followersIdle bool, env []string) (stop func(), err error) {
	dir := filepath.Join(l.dir, "cluster-"+suffix())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	binOnce.Do(func() { binPath, binErr = buildRollcall(filepath.Dir(l.dir)) })
	bin, err := binPath, binErr
	if err != nil {
		return nil, err
	}
	var nodes []*node
	stopAll := func() {
		for i := len(nodes) - 1; i >= 0; i-- {
			nodes[i].stop()
		}
	}
	for i := 1; i <= 3; i++ {
		n := &node{name: fmt.Sprintf("n%d", i), data: filepath.Join(dir, fmt.Sprintf("n%d", i)), http: fmt.Sprintf("127.0.0.1:%d", 18080+i)}
		raft := []string{"-raft", fmt.Sprintf("127.0.0.1:%d", 17300+i)}
		if i > 1 {
			code, err := nodes[0].cli(l, bin, "cluster", "join-code", "-ttl", "10m")
			if err != nil {
				stopAll()
				return nil, err
			}
			raft = append(raft, "-join", code)
		}
		if i == 1 {
			n.env = env
		}
		if err := n.start(l, bin, i > 1 && followersIdle, raft...); err != nil {
			stopAll()
			return nil, err
		}
		nodes = append(nodes, n)
		if err := n.healthy(l, bin); err != nil {
			stopAll()
			return nil, err
		}
	}
	n1 := nodes[0]
	l.pids = nil
	for _, n := range nodes {
		l.pids = append(l.pids, n.cmd.Process.Pid)
	}
	for _, args := range [][]string{
		{"fabric", "add", "bench"},
		{"vlan", "add", "-dhcp", "-node", "n1", "-iface", "srv0", "bench", "0"},
		{"subnet", "add", "-fabric", "bench", "-vid", "0", "-purpose", "provisioning", "-gateway", "10.213.0.1", "10.213.0.0/16"},
		{"range", "add", "10.213.0.0/16", "dynamic", "10.213.1.0", "10.213.255.254"},
	} {
		if _, err := n1.cli(l, bin, args...); err != nil {
			stopAll()
			return nil, err
		}
	}
	if err := dhcpServing(l, n1); err != nil {
		stopAll()
		return nil, err
	}
	time.Sleep(time.Second)
	return func() {
		metrics, _ := exec.Command("ip", "netns", "exec", l.srv, "curl", "-sf", "http://"+n1.http+"/metrics").Output()
		for _, line := range strings.Split(string(metrics), "\n") {
			if strings.HasPrefix(line, "rollcall_dhcp_drops") || strings.HasPrefix(line, "rollcall_dhcp_lease_batches") {
				fmt.Fprintf(os.Stderr, "    %s\n", line)
			}
		}
		caughtUp(l, nodes)
		stopAll()
		if os.Getenv("BENCH_NODE_LOG") != "" {
			os.Stderr.Write(n1.log.Bytes())
		}
		var counts []int
		for _, n := range nodes {
			counts = append(counts, countLeases(filepath.Join(n.data, "state.db")))
		}
		fmt.Fprintf(os.Stderr, "  rollcall (3 processes): leases per node %v\n", counts)
	}, nil
}

// caughtUp waits (at most a minute) until every node reports the same
// applied index twice in a row: the followers, at idle priority, may lag
// while perfdhcp runs.
func caughtUp(l *lab, nodes []*node) {
	var last []uint64
	for range 300 {
		var cur []uint64
		for _, n := range nodes {
			out, _ := exec.Command("ip", "netns", "exec", l.srv, "curl", "-sf", "http://"+n.http+"/api/v1/health").Output()
			var h struct {
				Applied uint64 `json:"applied_index"`
			}
			_ = json.Unmarshal(out, &h)
			cur = append(cur, h.Applied)
		}
		if slices.Equal(cur, last) && slices.Min(cur) == slices.Max(cur) && cur[0] > 0 {
			return
		}
		last = cur
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "  followers did not catch up within a minute: applied %v\n", last)
}

func countLeases(path string) int {
	db, err := store.Open(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "  open %s: %v\n", path, err)
		return -1
	}
	defer db.Close()
	n := 0
	_ = db.View(func(tx *store.Tx) error {
		return tx.Leases(netip.MustParseAddr("10.213.0.0"), netip.MustParseAddr("10.213.255.255"), func(store.Lease) bool { n++; return true })
	})
	return n
}
