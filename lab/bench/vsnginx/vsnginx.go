// Package vsnginx is what the benchmarks of a node's HTTP serving against
// nginx share (lab/bench/http, lab/bench/stateless): nodes and nginx as
// child processes on 127.0.0.1, so that neither shares a Go runtime with
// the client; the load client, the same for both, with connections from
// many loopback addresses as a boot storm's machines each come from their
// own; the CPU time of a server's process tree, from /proc; and the median
// summary of interleaved runs.
//
// A node is the benchmark's own binary re-executed (StartNode), which runs
// node.Start on a fresh data directory when Child sees its environment:
// a benchmark's main calls Child first. nginx is Debian's binary run as
// `nginx -c CONF -p PREFIX -g 'daemon off;'` with a configuration in a
// temporary directory (sendfile on, access_log off), serving files put
// under its root (Server.Put).
package vsnginx

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/store"
)

// Server is a server child process.
type Server struct {
	Name string
	Base string // http://127.0.0.1:PORT
	Cmd  *exec.Cmd
	// Root is where nginx serves files from ("" for a node).
	Root string
}

// Stop ends the process: SIGTERM, then SIGKILL after 10 s.
func (s *Server) Stop() {
	_ = s.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.Cmd.Process.Kill()
		<-done
	}
}

// CPU is the CPU seconds used so far by the server's process tree (nginx's
// workers are children of its master), from /proc.
func (s *Server) CPU() float64 {
	type proc struct {
		ppid  int
		ticks float64
	}
	procs := map[int]proc{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		var ticks float64
		for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			v, _ := strconv.ParseFloat(f[k], 64)
			ticks += v
		}
		procs[pid] = proc{ppid, ticks}
	}
	in := func(pid int) bool {
		for depth := 0; pid > 1 && depth < 16; depth++ {
			if pid == s.Cmd.Process.Pid {
				return true
			}
			pid = procs[pid].ppid
		}
		return false
	}
	var total float64
	for pid, p := range procs {
		if in(pid) {
			total += p.ticks
		}
	}
	return total / 100 // USER_HZ
}

// FreeAddr is a free TCP address on 127.0.0.1.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// WaitHTTP waits up to 20 s for url to answer at all.
func WaitHTTP(url string) error {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return nil
		}
	}
	return fmt.Errorf("%s did not answer within 20 s", url)
}

// ---- nodes

// childEnv carries a child node's NodeOptions (JSON) to the re-executed
// binary.
const childEnv = "ROLLCALL_BENCH_NODE"

// NodeOptions are a node child's.
type NodeOptions struct {
	Data       string // its data directory
	Name       string
	Addr       string // its HTTP address
	Join       string // a join code: a member of an existing cluster
	CPUProfile string // where the child writes its CPU profile ("" none)
}

// Child runs this process as a node until SIGTERM when StartNode started
// it, and reports whether it did: a benchmark's main calls it first and
// exits when it returns true.
func Child() (bool, error) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return false, nil
	}
	var o NodeOptions
	if err := json.Unmarshal([]byte(spec), &o); err != nil {
		return true, fmt.Errorf("%s: %w", childEnv, err)
	}
	node.TuneRuntime() // as `rollcall serve` does
	if o.CPUProfile != "" {
		defer profile(o.CPUProfile)()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	n, err := node.Start(ctx, node.Options{
		DataDir: o.Data, Name: o.Name, HTTPAddr: o.Addr, RaftAddr: "127.0.0.1:0", Join: o.Join,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", o.Name),
	})
	if err != nil {
		return true, err
	}
	<-ctx.Done()
	return true, n.Close()
}

// profile writes a CPU profile to path from now until the function it
// returns is called; SIGUSR1 (Node.RestartProfile) starts it again from
// an empty file, SIGUSR2 (Node.StopProfile) ends it.
func profile(path string) func() {
	var mu sync.Mutex
	var f *os.File
	stop := func() {
		if f != nil {
			pprof.StopCPUProfile()
			f.Close()
			f = nil
		}
	}
	start := func() {
		stop()
		var err error
		if f, err = os.Create(path); err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench node: CPU profile:", err)
		}
	}
	start()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for s := range sig {
			mu.Lock()
			if s == syscall.SIGUSR1 {
				start()
			} else {
				stop()
			}
			mu.Unlock()
		}
	}()
	return func() {
		signal.Stop(sig)
		mu.Lock()
		defer mu.Unlock()
		stop()
	}
}

// RestartProfile starts the node's CPU profile (NodeOptions.CPUProfile)
// again from an empty file: it then covers what follows only.
func (n *Node) RestartProfile() { _ = n.Cmd.Process.Signal(syscall.SIGUSR1) }

// StopProfile ends the node's CPU profile and writes it out.
func (n *Node) StopProfile() { _ = n.Cmd.Process.Signal(syscall.SIGUSR2) }

// Node is a node child process.
type Node struct {
	Server
	Data  string
	Admin string // the cluster's admin token, from the data directory
}

// StartNode starts a node child on a free address (o.Addr and o.Name are
// filled when empty) and waits for its admin token.
func StartNode(o NodeOptions) (*Node, error) {
	if o.Addr == "" {
		addr, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		o.Addr = addr
	}
	if o.Name == "" {
		o.Name = "bench"
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec, _ := json.Marshal(o)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	n := &Node{Server: Server{Name: o.Name, Base: "http://" + o.Addr, Cmd: cmd}, Data: o.Data}
	for deadline := time.Now().Add(30 * time.Second); n.Admin == ""; time.Sleep(100 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(o.Data, "admin.token")); err == nil {
			n.Admin = strings.TrimSpace(string(b))
		} else if time.Now().After(deadline) {
			n.Stop()
			return nil, fmt.Errorf("node %s wrote no admin token: %w", o.Name, err)
		}
	}
	return n, nil
}

// apiClient is the client of the benchmarks' own API calls (setup, not
// load): enough idle connections for a few dozen concurrent callers.
var apiClient = &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// Do sends an admin request (Authorization: Bearer) to the node; see
// DoWith.
func (n *Node) Do(method, path string, body []byte, out any) error {
	return n.DoWith(method, path, "Authorization", "Bearer "+n.Admin, body, out)
}

// DoWith sends a request with one header (none if header is "") to the
// node and decodes a JSON answer into out: nothing if out is nil, the body
// as it is if out is a *[]byte. A 503 (no leader yet, an election) or a
// refused connection (the node still starting) is retried for 30 s.
func (n *Node) DoWith(method, path, header, value string, body []byte, out any) error {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		req, _ := http.NewRequest(method, n.Base+path, bytes.NewReader(body))
		if header != "" {
			req.Header.Set(header, value)
		}
		if body != nil && json.Valid(body) {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := apiClient.Do(req)
		if err != nil {
			if time.Now().After(deadline) {
				return err
			}
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			switch out := out.(type) {
			case nil:
				return nil
			case *[]byte:
				*out = b
				return nil
			}
			return json.Unmarshal(b, out)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return fmt.Errorf("%s %s on %s: %d %s", method, path, n.Name, resp.StatusCode, bytes.TrimSpace(b))
		}
	}
}

// ImageFile is one file of an image to import.
type ImageFile struct {
	Name string // kernel, initrd, squashfs
	Data []byte
}

// ImportImage uploads the files as image name, as `rollcall image import`
// does, and returns them as stored (their digests name their blobs).
func (n *Node) ImportImage(name string, files ...ImageFile) ([]store.ImageFile, error) {
	var stored []store.ImageFile
	for _, f := range files {
		var sf store.ImageFile
		if err := n.Do(http.MethodPut, "/api/v1/images/"+name+"/files/"+f.Name, f.Data, &sf); err != nil {
			return nil, err
		}
		stored = append(stored, sf)
	}
	body, _ := json.Marshal(map[string]any{"name": name, "files": stored})
	var im store.Image
	return stored, n.Do(http.MethodPost, "/api/v1/images", body, &im)
}

// BlobPath is where the node keeps an image file's blob: it is there, in
// full, once the node has it (a joined node copies it from its peers).
func (n *Node) BlobPath(f store.ImageFile) string {
	return filepath.Join(n.Data, "images", "blobs", f.SHA256)
}

// ---- nginx

// StartNginx starts nginx on a free address, serving dir/www (Put adds
// files).
func StartNginx(dir string) (*Server, error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			return nil, fmt.Errorf("nginx: %w (apt-get install -y nginx)", err)
		}
		bin = "/usr/sbin/nginx"
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	prefix := filepath.Join(dir, "nginx")
	root := filepath.Join(dir, "www")
	for _, d := range []string{prefix, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	// Workers run as nobody when the master is root: every directory on
	// the way to the files must be searchable.
	for d := root; d != filepath.Dir(dir); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	conf := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`worker_processes auto;
worker_rlimit_nofile 16384;
error_log %[1]s/error.log warn;
pid %[1]s/nginx.pid;
events { worker_connections 8192; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    default_type application/octet-stream;
    server {
        listen %[2]s backlog=4096;
        root %[3]s;
    }
}
`, prefix, addr, root)), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-c", conf, "-p", prefix, "-g", "daemon off;")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{Name: "nginx", Base: "http://" + addr, Cmd: cmd, Root: root}
	if err := WaitHTTP(s.Base + "/"); err != nil {
		s.Stop()
		b, _ := os.ReadFile(filepath.Join(prefix, "error.log"))
		return nil, fmt.Errorf("nginx: %w\n%s", err, b)
	}
	return s, nil
}

// Put writes a file nginx serves at /path.
func (s *Server) Put(path string, data []byte) error {
	p := filepath.Join(s.Root, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

// Verify fetches url and checks it is want.
func Verify(url string, want []byte) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(want)
	if resp.StatusCode != 200 || n != int64(len(want)) || !bytes.Equal(h.Sum(nil), sum[:]) {
		return fmt.Errorf("%s: status %d, %d bytes, not the file", url, resp.StatusCode, n)
	}
	return nil
}

// ---- load

// Load is one run: Requests requests over Conns connections (each a
// goroutine with its own keep-alive connection), cut at Cap (bytes
// received so far still count).
type Load struct {
	Conns, Requests int
	Cap             time.Duration
	// Request is the i-th request (0 ≤ i < Requests).
	Request func(ctx context.Context, i int) *http.Request
	// Size is the i-th answer's length: a 200 of exactly that many bytes
	// completes it, anything else fails it.
	Size func(i int) int64
	// CPU is the CPU seconds the server(s) have used so far
	// (Server.CPU, or their sum).
	CPU func() float64
}

// Get is a Load.Request: GET url.
func Get(url string) func(context.Context, int) *http.Request {
	return func(ctx context.Context, _ int) *http.Request {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		return req
	}
}

// Fixed is a Load.Size: every answer is size bytes.
func Fixed(size int64) func(int) int64 { return func(int) int64 { return size } }

// Result is one run against one server.
type Result struct {
	Bytes     int64
	Completed int
	Failed    int
	Elapsed   time.Duration
	CPU       float64         // the server's CPU seconds during the run
	Latency   []time.Duration // of each completed request
	FirstErr  string          // the first failure, "" for none
}

// GBps is the run's throughput, 10^9 bytes a second.
func (r Result) GBps() float64 { return float64(r.Bytes) / r.Elapsed.Seconds() / 1e9 }

// RPS is the run's completed requests a second.
func (r Result) RPS() float64 { return float64(r.Completed) / r.Elapsed.Seconds() }

// Percentile is the q-quantile (0..1) of the run's latencies (nearest
// rank), 0 without any.
func (r Result) Percentile(q float64) time.Duration {
	if len(r.Latency) == 0 {
		return 0
	}
	l := slices.Clone(r.Latency)
	slices.Sort(l)
	k := int(q*float64(len(l))+0.5) - 1
	return l[min(max(k, 0), len(l)-1)]
}

// Run runs the load and counts the body bytes received.
func (l Load) Run() Result {
	// Connections come from many loopback addresses, as a boot storm's
	// machines each come from their own: the node caps connections per
	// client address (appliance/connlimit), nginx does not; 32 per address
	// stays under the node's cap for both.
	var dials atomic.Int64
	tr := &http.Transport{
		MaxIdleConnsPerHost: l.Conns, MaxConnsPerHost: l.Conns, DisableCompression: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			k := dials.Add(1) / 32
			src := &net.TCPAddr{IP: net.IPv4(127, 0, 10+byte(k>>8), 1+byte(k&0xff))}
			return (&net.Dialer{Timeout: 30 * time.Second, LocalAddr: src}).DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), l.Cap)
	defer cancel()
	var (
		total, completed, failed, next atomic.Int64
		mu                             sync.Mutex
		lat                            = make([]time.Duration, 0, l.Requests)
		firstErr                       string
	)
	fail := func(msg string) {
		failed.Add(1)
		mu.Lock()
		if firstErr == "" {
			firstErr = msg
		}
		mu.Unlock()
	}
	cpu0 := l.CPU()
	start := time.Now()
	var wg sync.WaitGroup
	for range l.Conns {
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			var local []time.Duration
			defer func() { mu.Lock(); lat = append(lat, local...); mu.Unlock() }()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= l.Requests {
					return
				}
				t0 := time.Now()
				resp, err := client.Do(l.Request(ctx, i))
				if err != nil {
					if ctx.Err() == nil {
						fail(err.Error())
					}
					continue
				}
				var got int64
				for {
					n, err := resp.Body.Read(buf)
					got += int64(n)
					if err != nil {
						break
					}
				}
				resp.Body.Close()
				total.Add(got)
				switch {
				case resp.StatusCode == http.StatusOK && got == l.Size(i):
					completed.Add(1)
					local = append(local, time.Since(t0))
				case ctx.Err() == nil:
					fail(fmt.Sprintf("%s: %s, %d bytes (want %d)", resp.Request.URL.Path, resp.Status, got, l.Size(i)))
				}
			}
		})
	}
	wg.Wait()
	return Result{Bytes: total.Load(), Completed: int(completed.Load()), Failed: int(failed.Load()), Elapsed: time.Since(start),
		CPU: l.CPU() - cpu0, Latency: lat, FirstErr: firstErr}
}

// Summary is a server's runs of one test.
type Summary struct {
	Runs, Completed, Failed int
	// GBps, RPS and P99: medians over the runs (the mean of the middle two
	// for an even count).
	GBps, RPS float64
	P99       time.Duration
	// CPUPerGiB and CPUPerReq: the server's CPU over all runs.
	CPUPerGiB float64
	CPUPerReq time.Duration
}

// Summarize summarizes runs.
func Summarize(rs []Result) Summary {
	s := Summary{Runs: len(rs)}
	if len(rs) == 0 {
		return s
	}
	var g, q, p []float64
	var cpu, bytes float64
	for _, r := range rs {
		g = append(g, r.GBps())
		q = append(q, r.RPS())
		p = append(p, float64(r.Percentile(0.99)))
		s.Completed += r.Completed
		s.Failed += r.Failed
		cpu += r.CPU
		bytes += float64(r.Bytes)
	}
	s.GBps, s.RPS, s.P99 = median(g), median(q), time.Duration(median(p))
	s.CPUPerGiB = cpu / (bytes / (1 << 30))
	s.CPUPerReq = time.Duration(cpu / float64(max(s.Completed, 1)) * float64(time.Second))
	return s
}

func median(v []float64) float64 {
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
