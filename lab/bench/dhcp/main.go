// Command dhcp benchmarks Rollcall's DHCP server against Kea, side by side
// in one run: each server in a topology of its own (two network namespaces
// joined by a veth, perfdhcp in one, the server in the other), all alike.
// perfdhcp acts as a relay with 60,000 simulated clients; the offered rate
// is stepped up, each step run -repeat times per server with the servers
// taking turns (so a slow minute on a shared machine hits both), and the
// highest rate whose median run stays under 1% failed exchanges is
// reported for each, plain and with PXE options (-o 60 PXEClient…, -o 93
// x86-64 UEFI).
//
// Rollcall runs as three real `rollcall serve` processes joined by Raft
// (-rollcall processes, the default): n1 serves DHCP and every lease it
// grants is committed through Raft and applied on all three; n2 and n3
// stand for other machines and run in the SCHED_IDLE class, on any CPU
// (they get only time nothing else wants). The server (Kea, or Rollcall's
// n1) has CPU 1 to itself (-server-cpus) and perfdhcp, single-threaded,
// CPU 0 (-perf-cpus): each side a CPU of its own, so the figure is the
// server's, not how the two took turns on one CPU. perfdhcp polls, so its
// CPU time is always the run's length and says nothing of its headroom.
// -rollcall harness runs the DHCP server in this process with -stores
// stores fed one log (package replica) instead.
//
// Run as root from the repository root: go run ./lab/bench/dhcp [-clients 60000] [-period 6s].
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netns"

	appnode "github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/dhcp"
	"github.com/rollcall/rollcall/lab/bench/dhcp/replica"
	"github.com/rollcall/rollcall/store"
)

var (
	clients      = flag.Int("clients", 60000, "simulated clients (perfdhcp -R)")
	period       = flag.Duration("period", 6*time.Second, "length of each rate step")
	rates        = flag.String("rates", "8000,10000,12000,14000,16000,17000,18000,19000,20000,21000,22000,24000,26000,28000,30000,32000,34000,36000,40000", "offered rates to step through")
	maxDrop      = flag.Float64("max-drop", 1.0, "drop percentage that ends the stepping")
	repeat       = flag.Int("repeat", 3, "perfdhcp runs per step; the step counts as their median by drops (a single 6 s run swings by ±1,000/s on two CPUs)")
	only         = flag.String("only", "", "run only this server (rollcall or kea)")
	variant      = flag.String("variant", "", "run only this variant (plain or pxe)")
	cpuprof      = flag.String("cpuprofile", "", "write a CPU profile of the run here")
	workers      = flag.Int("workers", 0, "Rollcall DHCP workers per socket (0: the server's default)")
	batchMax     = flag.Int("batch-max", 0, "lease batch size that triggers a send (0: the server's default)")
	batchInt     = flag.Duration("batch-interval", 0, "lease batch interval (0: the server's default)")
	housekeeping = flag.Duration("housekeeping", 0, "the leader's lease-expiry round (0: the server's default)")
	stores       = flag.Int("stores", 3, "with -rollcall harness: replicated stores Rollcall's leases go to (the issue's target is with 3; 1 shows the cost of replication)")
	setups       = flag.String("rollcall", "processes", "how Rollcall runs, comma-separated: processes (three `rollcall serve` nodes joined by Raft, DHCP on n1) and/or harness (the DHCP server in this process, leases applied to -stores stores in it, package replica)")
	serverCPUs   = flag.String("server-cpus", "1", "CPU list the server is confined to (taskset -c), away from -perf-cpus: Kea, and Rollcall's serving node (its followers: -followers-cpus); not -rollcall harness, which runs in this process; empty: not confined")
	abEnv        = flag.String("ab-env", "", "with -rollcall processes: also run a second set of nodes whose serving node has these environment variables (KEY=V,KEY=V), side by side in the same turns, to compare settings")
	perfCPUs     = flag.String("perf-cpus", "0", "CPU list perfdhcp is confined to (taskset -c), away from -server-cpus: left free, its threads took turns with the server on the server's CPU and the bench measured that contention (both servers' ceilings 11,000-13,000/s, set by perfdhcp's receive buffer or theirs); empty: free on every CPU")
	perfMode     = flag.String("perf-threads", "single", "perfdhcp's thread mode (-g): single or multi (its receiver thread in a thread of its own, which on one CPU takes turns with the sender: Kea 15,936/s with 0.37% drops in multi, 16,000/s with none in single); empty: perfdhcp's default")
	followerCPUs = flag.String("followers-cpus", "any", "with -rollcall processes: CPU list n2 and n3 are confined to; empty: as -server-cpus; any: not confined (in the SCHED_IDLE class they run only when a CPU has nothing else to do)")
	rmemDefault  = flag.Int("rmem-default", 4<<20, "net.core.rmem_default for the run (restored after; 0: left alone): the receive buffer of every socket that does not set its own, Kea's and perfdhcp's among them; Rollcall asks for 4 MiB itself, so the default gives Kea the same (Kea has no setting for it)")
	idle         = flag.Bool("followers-idle", true, "with -rollcall processes: run n2 and n3 in the SCHED_IDLE class, standing for other machines")
)

func main() {
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "dhcp bench: needs root (network namespaces)")
		os.Exit(2)
	}
	for _, tool := range []string{"ip", "perfdhcp", "kea-dhcp4"} {
		if _, err := exec.LookPath(tool); err != nil {
			fmt.Fprintf(os.Stderr, "dhcp bench: needs %s (Debian: iproute2, kea-admin, kea-dhcp4-server)\n", tool)
			os.Exit(2)
		}
	}
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	appnode.TuneRuntime() // as `rollcall serve` does
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	restore, err := setRmemDefault(*rmemDefault)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dhcp bench:", err)
		os.Exit(1)
	}
	err = run(ctx)
	restore()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dhcp bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// setRmemDefault sets net.core.rmem_default (machine-wide: the namespaces
// share it) and returns what puts the old value back.
func setRmemDefault(v int) (restore func(), err error) {
	const path = "/proc/sys/net/core/rmem_default"
	if v <= 0 {
		return func() {}, nil
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(v)), 0o644); err != nil {
		return nil, fmt.Errorf("set %s: %w", path, err)
	}
	fmt.Fprintf(os.Stderr, "net.core.rmem_default %d for the run (was %s)\n", v, strings.TrimSpace(string(old)))
	return func() { _ = os.WriteFile(path, old, 0o644) }, nil
}

type lab struct {
	srv, perf string
	dir       string
	// pids are the server's processes while it runs, the one that serves
	// first (for Rollcall's harness, this process).
	pids []int
}

// pinned confines cmd to the CPU list cpus ("" or "any": not confined;
// taskset keeps the affinity across the execs that follow: ip netns exec,
// chrt).
func pinned(cmd *exec.Cmd, cpus string) *exec.Cmd {
	if cpus == "" || cpus == "any" {
		return cmd
	}
	c := exec.Command("taskset", append([]string{"-c", cpus}, cmd.Args...)...)
	c.Env = cmd.Env
	return c
}

// cpuSeconds is the CPU time (user + system) a process has used, from
// /proc/PID/stat; 0 when it is gone.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// cpu returns the CPU seconds of the serving process and of the others.
func (l *lab) cpu() (serving, others float64) {
	for k, pid := range l.pids {
		if k == 0 {
			serving = cpuSeconds(pid)
		} else {
			others += cpuSeconds(pid)
		}
	}
	return serving, others
}

func sh(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func setup() (*lab, func(), error) {
	s := suffix()
	l := &lab{srv: "rcb-srv-" + s, perf: "rcb-perf-" + s}
	dir, err := os.MkdirTemp("", "rollcall-dhcp-bench-")
	if err != nil {
		return nil, nil, err
	}
	l.dir = dir
	cleanup := func() {
		_ = exec.Command("ip", "netns", "del", l.srv).Run()
		_ = exec.Command("ip", "netns", "del", l.perf).Run()
		_ = os.RemoveAll(dir)
	}
	steps := [][]string{
		{"ip", "netns", "add", l.srv},
		{"ip", "netns", "add", l.perf},
		{"ip", "link", "add", "rcb" + s + "a", "type", "veth", "peer", "name", "rcb" + s + "b"},
		{"ip", "link", "set", "rcb" + s + "a", "netns", l.srv, "name", "srv0"},
		{"ip", "link", "set", "rcb" + s + "b", "netns", l.perf, "name", "perf0"},
		{"ip", "-n", l.srv, "addr", "add", "10.213.0.1/16", "dev", "srv0"},
		{"ip", "-n", l.perf, "addr", "add", "10.213.0.2/16", "dev", "perf0"},
		{"ip", "-n", l.srv, "link", "set", "srv0", "up"},
		{"ip", "-n", l.perf, "link", "set", "perf0", "up"},
		{"ip", "-n", l.srv, "link", "set", "lo", "up"},
		{"ip", "-n", l.perf, "link", "set", "lo", "up"},
	}
	for _, st := range steps {
		if err := sh(st...); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	return l, cleanup, nil
}

// pxeOpts are perfdhcp options that make every client a UEFI x86-64 PXE ROM.
var pxeOpts = []string{"-o", "60," + hex.EncodeToString([]byte("PXEClient:Arch:00007:UNDI:003016")), "-o", "93,0007"}

type step struct {
	offered  int
	achieved float64
	dropPct  float64
	perfCPU  float64 // perfdhcp's CPU seconds in the run: near the run's length, the load generator is the limit
}

func perf(ctx context.Context, l *lab, rate int, extra []string) (step, error) {
	args := []string{"netns", "exec", l.perf}
	if *perfCPUs != "" {
		args = append(args, "taskset", "-c", *perfCPUs)
	}
	args = append(args, "perfdhcp", "-4", "-l", "perf0", "-r", strconv.Itoa(rate),
		"-R", strconv.Itoa(*clients), "-p", strconv.Itoa(int(period.Seconds())), "-W", "1000000")
	if *perfMode != "" {
		args = append(args, "-g", *perfMode)
	}
	args = append(args, extra...)
	args = append(args, "10.213.0.1")
	cmd := exec.CommandContext(ctx, "ip", args...) // ip and taskset exec perfdhcp: one process
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return step{}, ctx.Err()
	}
	if os.Getenv("BENCH_PERF_OUT") != "" {
		os.Stderr.Write(out)
	}
	st := parse(string(out))
	if st.sentDO == 0 {
		return step{}, fmt.Errorf("perfdhcp sent nothing: %v\n%s", err, out)
	}
	drop := 100 * (1 - float64(st.recvRA)/float64(st.sentDO))
	// perfdhcp's own "Rate" divides by the run including the exit wait;
	// completed exchanges over the sending period is the sustained rate.
	var cpu float64
	if ps := cmd.ProcessState; ps != nil {
		cpu = (ps.UserTime() + ps.SystemTime()).Seconds()
	}
	return step{offered: rate, achieved: float64(st.recvRA) / period.Seconds(), dropPct: drop, perfCPU: cpu}, nil
}

type stats struct {
	sentDO, recvDO, sentRA, recvRA int
	rate                           float64
}

func parse(s string) stats {
	var st stats
	section := 0
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.Contains(line, "DISCOVER-OFFER"):
			section = 1
		case strings.Contains(line, "REQUEST-ACK"):
			section = 2
		case strings.HasPrefix(line, "Rate:"):
			if f := strings.Fields(line); len(f) > 1 {
				st.rate, _ = strconv.ParseFloat(f[1], 64)
			}
		}
		num := func(key string) (int, bool) {
			if !strings.HasPrefix(line, key) {
				return 0, false
			}
			v, err := strconv.Atoi(strings.Fields(strings.TrimPrefix(line, key))[0])
			return v, err == nil
		}
		if v, ok := num("sent packets:"); ok && section == 1 {
			st.sentDO = v
		} else if ok && section == 2 {
			st.sentRA = v
		}
		if v, ok := num("received packets:"); ok && section == 1 {
			st.recvDO = v
		} else if ok && section == 2 {
			st.recvRA = v
		}
	}
	return st
}

// rcvbufErrors reads the namespace's UDP receive-buffer overflow count,
// cumulative since the namespace was made (-a absolute, -s no history file).
func rcvbufErrors(ns string) int {
	out, _ := exec.Command("ip", "netns", "exec", ns, "nstat", "-as", "UdpRcvbufErrors").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "UdpRcvbufErrors" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// contender is one server under test, in a topology of its own (its own
// server and perfdhcp namespaces, alike for all).
type contender struct {
	name  string
	title string
	lab   *lab
	start func(*lab) (func(), error)
	best  step
	done  bool // its median passed the drop limit
}

// ladder steps the rate until every contender's drops pass the limit, and
// records each one's best step under it. At each rate the contenders take
// turns, run by run (kea, rollcall, kea, rollcall…), so that a slow minute
// on a shared machine falls on all of them alike and the ratio compares
// runs made side by side.
func ladder(ctx context.Context, cs []*contender, extra []string) error {
	for _, f := range strings.Split(*rates, ",") {
		rate, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return err
		}
		runs := make([][]step, len(cs))
		for range max(*repeat, 1) {
			for k, c := range cs {
				if c.done {
					continue
				}
				s0, o0 := c.lab.cpu()
				st, err := perf(ctx, c.lab, rate, extra)
				if err != nil {
					return err
				}
				s1, o1 := c.lab.cpu()
				fmt.Fprintf(os.Stderr, "  %-18s offered %6d/s  achieved %8.0f/s  drops %5.2f%%  CPU s: server %.2f, others %.2f, perfdhcp %.2f  (UDP receive-buffer overflows so far: server %d, perfdhcp %d)\n",
					c.name, st.offered, st.achieved, st.dropPct, s1-s0, o1-o0, st.perfCPU, rcvbufErrors(c.lab.srv), rcvbufErrors(c.lab.perf))
				runs[k] = append(runs[k], st)
			}
		}
		alive := false
		for k, c := range cs {
			if c.done {
				continue
			}
			slices.SortFunc(runs[k], func(a, b step) int { return cmp.Compare(a.dropPct, b.dropPct) })
			st := runs[k][len(runs[k])/2]
			if st.dropPct > *maxDrop {
				c.done = true
				continue
			}
			alive = true
			if st.achieved > c.best.achieved {
				c.best = st
			}
		}
		if !alive {
			return nil
		}
	}
	return nil
}

// inNS runs f on a thread switched into the namespace; the thread is
// never given back.
func inNS(name string, f func()) error {
	h, err := netns.GetFromName(name)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- err
			return
		}
		errc <- nil
		f()
	}()
	return <-errc
}

// rollcall starts our server in the server namespace, its leases
// replicated to three stores; stop stops it.
func rollcall(l *lab) (stop func(), err error) {
	l.pids = []int{os.Getpid()}
	dir := filepath.Join(l.dir, "rollcall-"+suffix())
	c, err := replica.New(dir, *stores, nil)
	if err != nil {
		return nil, err
	}
	subnet := netip.MustParsePrefix("10.213.0.0/16")
	err = c.Network(context.Background(),
		store.VLAN{Fabric: "bench", DHCP: store.DHCPFull, MTU: 1500, Servers: []store.VLANServer{{Node: "n1", Iface: "srv0"}}},
		store.Subnet{CIDR: subnet, Fabric: "bench", Purpose: "provisioning", Gateway: netip.MustParseAddr("10.213.0.1")},
		store.Range{Subnet: subnet, Kind: store.RangeDynamic, First: netip.MustParseAddr("10.213.1.0"), Last: netip.MustParseAddr("10.213.255.254")})
	if err != nil {
		c.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	metrics := dhcp.NewMetrics()
	cfg := dhcp.Config{
		Metrics: metrics,
		Node:    "n1", DB: c.DB(0), Replicator: c.Node(0), Housekeeper: c.Node(0), IsLeader: func() bool { return true },
		BlockSize: 512, LowWater: 8192, Workers: *workers, BatchMax: *batchMax, BatchInterval: *batchInt, Housekeeping: *housekeeping,
		Boot: dhcp.BootConfig{},
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if v := os.Getenv("BENCH_LOG"); v != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if err := inNS(l.srv, func() { done <- cfg.Start(ctx, log) }); err != nil {
		cancel()
		c.Close()
		return nil, err
	}
	// Wait for the first blocks.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		n := 0
		_ = c.DB(0).View(func(tx *store.Tx) error { bs, _ := tx.LeaseBlocks(netip.Prefix{}); n = len(bs); return nil })
		if n > 0 {
			break
		}
		select {
		case err := <-done:
			cancel()
			c.Close()
			return nil, fmt.Errorf("rollcall dhcp: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	time.Sleep(300 * time.Millisecond)
	return func() {
		cancel()
		<-done
		leases := 0
		agree := true
		var counts [3]int
		for i := range 3 {
			_ = c.DB(i).View(func(tx *store.Tx) error {
				return tx.Leases(netip.MustParseAddr("10.213.0.0"), netip.MustParseAddr("10.213.255.255"), func(store.Lease) bool { counts[i]++; return true })
			})
		}
		leases = counts[0]
		agree = counts[0] == counts[1] && counts[1] == counts[2]
		reg := prometheus.NewRegistry()
		reg.MustRegister(metrics.Collectors()...)
		if mfs, err := reg.Gather(); err == nil {
			for _, mf := range mfs {
				if !strings.Contains(mf.GetName(), "drops") && !strings.Contains(mf.GetName(), "packets") && !strings.Contains(mf.GetName(), "batches") {
					continue
				}
				for _, m := range mf.Metric {
					var labels []string
					for _, lp := range m.Label {
						labels = append(labels, lp.GetValue())
					}
					fmt.Fprintf(os.Stderr, "    %s{%s} %.0f\n", mf.GetName(), strings.Join(labels, ","), m.GetCounter().GetValue())
				}
			}
		}
		fmt.Fprintf(os.Stderr, "  rollcall: %d leases in each of %d replicated stores (agree: %v)\n", leases, *stores, agree)
		c.Close()
	}, nil
}

const keaConf = `{"Dhcp4": {
  "interfaces-config": {"interfaces": ["srv0"], "dhcp-socket-type": "udp"},
  "lease-database": {"type": "memfile", "persist": true, "name": "DIR/kea-leases4.csv", "lfc-interval": 0},
  "valid-lifetime": 3600, "renew-timer": 1800, "rebind-timer": 3150,
  "client-classes": [
    {"name": "uefi-x64", "test": "option[93].hex == 0x0007", "next-server": "10.213.0.1", "boot-file-name": "ipxe.efi"},
    {"name": "bios", "test": "option[93].hex == 0x0000", "next-server": "10.213.0.1", "boot-file-name": "undionly.kpxe"}
  ],
  "subnet4": [{"id": 1, "subnet": "10.213.0.0/16", "pools": [{"pool": "10.213.1.0 - 10.213.255.254"}],
    "option-data": [{"name": "routers", "data": "10.213.0.1"}]}],
  "loggers": [{"name": "kea-dhcp4", "output_options": [{"output": "DIR/kea.log"}], "severity": "WARN"}]
}}`

func kea(l *lab) (stop func(), err error) {
	dir := filepath.Join(l.dir, "kea-"+suffix())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "kea-dhcp4.conf")
	if err := os.WriteFile(conf, []byte(strings.ReplaceAll(keaConf, "DIR", dir)), 0o600); err != nil {
		return nil, err
	}
	cmd := pinned(exec.Command("ip", "netns", "exec", l.srv, "kea-dhcp4", "-c", conf), *serverCPUs)
	cmd.Env = append(os.Environ(), "KEA_PIDFILE_DIR="+dir, "KEA_LOCKFILE_DIR="+dir)
	out, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	l.pids = []int{cmd.Process.Pid}
	time.Sleep(1500 * time.Millisecond)
	if cmd.ProcessState != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "stdout"))
		return nil, fmt.Errorf("kea-dhcp4 exited: %s", b)
	}
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		out.Close()
	}, nil
}

func run(ctx context.Context) error {
	var modes []string
	for _, m := range strings.Split(*setups, ",") {
		switch m = strings.TrimSpace(m); m {
		case "processes", "harness":
			modes = append(modes, m)
		default:
			return fmt.Errorf("-rollcall: %q is neither processes nor harness", m)
		}
	}
	if *only == "kea" {
		modes = nil
	}
	var cs []*contender
	if *only != "rollcall" {
		cs = append(cs, &contender{name: "kea", title: "Kea 2.2 memfile", start: kea})
	}
	for _, m := range modes {
		c := &contender{name: "rollcall/" + m}
		switch m {
		case "processes":
			c.title = "Rollcall, 3 nodes (processes, Raft)"
			c.start = func(l *lab) (func(), error) { return processes(l, *idle, nil) }
			if *abEnv != "" {
				env := strings.Split(*abEnv, ",")
				cs = append(cs, c)
				c = &contender{name: "rollcall/" + *abEnv, title: "Rollcall, 3 nodes, n1 with " + *abEnv,
					start: func(l *lab) (func(), error) { return processes(l, *idle, env) }}
			}
		case "harness":
			c.title = fmt.Sprintf("Rollcall, %d stores in one process", *stores)
			c.start = rollcall
		}
		cs = append(cs, c)
	}
	for _, c := range cs {
		l, cleanup, err := setup()
		if err != nil {
			return err
		}
		defer cleanup()
		c.lab = l
	}
	type row struct {
		variant string
		best    []step
	}
	var rows []row
	for _, v := range []struct {
		name  string
		extra []string
	}{{"plain DORA", nil}, {"PXE options", pxeOpts}} {
		if *variant != "" && !strings.HasPrefix(strings.ToLower(v.name), *variant) {
			continue
		}
		fmt.Fprintf(os.Stderr, "%s, %d clients, %s per step:\n", v.name, *clients, *period)
		var stops []func()
		stopAll := func() {
			for _, stop := range stops {
				stop()
			}
		}
		for _, c := range cs {
			c.best, c.done = step{}, false
			stop, err := c.start(c.lab)
			if err != nil {
				stopAll()
				return fmt.Errorf("%s: %w", c.name, err)
			}
			stops = append(stops, stop)
		}
		err := ladder(ctx, cs, v.extra)
		stopAll()
		if err != nil {
			return err
		}
		r := row{variant: v.name}
		for _, c := range cs {
			r.best = append(r.best, c.best)
		}
		rows = append(rows, r)
	}
	fmt.Printf("\nDHCPv4 4-way exchanges/s sustained with <= %.0f%% drops, %d simulated clients (perfdhcp as relay), %d CPUs, servers measured in turns at each rate", *maxDrop, *clients, runtime.NumCPU())
	fmt.Printf("; server on CPUs %q, perfdhcp on %q (-g %s), net.core.rmem_default %d", *serverCPUs, *perfCPUs, *perfMode, *rmemDefault)
	if slices.Contains(modes, "processes") && *idle {
		fmt.Printf("; nodes n2 and n3 in the SCHED_IDLE class on CPUs %q (other machines)", *followerCPUs)
	}
	fmt.Printf("\n| variant |")
	for k, c := range cs {
		fmt.Printf(" %s |", c.title)
		if k > 0 && cs[0].name == "kea" {
			fmt.Printf(" ratio |")
		}
	}
	fmt.Printf("\n|---|")
	for k, c := range cs {
		fmt.Printf("---|")
		if k > 0 && c != nil && cs[0].name == "kea" {
			fmt.Printf("---|")
		}
	}
	fmt.Println()
	for _, r := range rows {
		fmt.Printf("| %s |", r.variant)
		for k, st := range r.best {
			fmt.Printf(" %.0f (offered %d, %.2f%% drops) |", st.achieved, st.offered, st.dropPct)
			if k > 0 && cs[0].name == "kea" {
				ratio := "-"
				if r.best[0].achieved > 0 {
					ratio = fmt.Sprintf("%.2f", st.achieved/r.best[0].achieved)
				}
				fmt.Printf(" %s |", ratio)
			}
		}
		fmt.Println()
	}
	return nil
}
