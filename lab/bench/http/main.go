// Command http measures a node's image serving (GET /images/NAME/FILE)
// against nginx in one run on loopback: 1,000 concurrent downloads of a
// 64 MiB initrd (each client fetches the whole file once), and 200
// connections fetching a 1 MiB file over and over (a bounded total of
// requests). It prints throughput for both servers and the ratio to nginx
// (target: at least 0.9).
//
// Both servers run as child processes on 127.0.0.1 so that neither shares a
// Go runtime with the client: the node is this binary re-executed with
// -serve (node.Start on a fresh data directory; the files are uploaded
// through the API as image "bench"), nginx is Debian's binary run as
// `nginx -c CONF -p PREFIX -g 'daemon off;'` with a configuration in a
// temporary directory (sendfile on, access_log off), serving the same bytes
// from a temporary root. The client is Go's net/http in this process, the
// same for both; runs are interleaved so load from elsewhere on the machine
// hits both alike, and each run is cut at -cap (bytes received so far still
// count). The table also has each server's CPU time (its process tree, from
// /proc) per GiB served.
//
//	go run ./lab/bench/http
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
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
	"text/tabwriter"
	"time"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/store"
)

type config struct {
	bigSize, bigConns                int
	smallSize, smallConns, smallReqs int
	reps, smallReps                  int
	osSize, osConns                  int
	osBlob                           int64 // the compressed image's size, once imported
	capDur                           time.Duration
	serve, data, addr                string
}

func main() {
	var cfg config
	flag.IntVar(&cfg.bigSize, "size", 64<<20, "bytes of the initrd")
	flag.IntVar(&cfg.bigConns, "conns", 1000, "concurrent downloads of the initrd (each fetches it once)")
	flag.IntVar(&cfg.reps, "reps", 2, "repetitions of the initrd run per server (the order alternates)")
	flag.IntVar(&cfg.smallSize, "small-size", 1<<20, "bytes of the small file")
	flag.IntVar(&cfg.smallConns, "small-conns", 200, "connections fetching the small file")
	flag.IntVar(&cfg.smallReqs, "small-reqs", 4000, "small-file requests per run, spread over the connections")
	flag.IntVar(&cfg.smallReps, "small-reps", 3, "repetitions of the small-file run per server")
	flag.IntVar(&cfg.osSize, "os-size", 256<<20, "bytes of the raw OS image deployed (random: it compresses to about its size; 0 skips the OS run)")
	flag.IntVar(&cfg.osConns, "os-conns", 50, "concurrent deploy clients fetching the compressed OS image once each")
	flag.DurationVar(&cfg.capDur, "cap", 70*time.Second, "wall-time cap of one run")
	flag.StringVar(&cfg.serve, "serve", "", "internal: run a node (-serve rollcall) with -data on -addr")
	flag.StringVar(&cfg.data, "data", "", "internal: the node's data directory")
	flag.StringVar(&cfg.addr, "addr", "", "internal: the node's HTTP address")
	flag.Parse()
	var err error
	if cfg.serve != "" {
		err = serve(cfg)
	} else {
		err = run(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// serve is the child process: one node until SIGTERM.
func serve(cfg config) error {
	node.TuneRuntime() // as `rollcall serve` does
	if p := os.Getenv("BENCH_CPUPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	n, err := node.Start(ctx, node.Options{
		DataDir: cfg.data, Name: "bench", HTTPAddr: cfg.addr, RaftAddr: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	return n.Close()
}

type server struct {
	name string
	base string // http://127.0.0.1:PORT
	cmd  *exec.Cmd
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// cpu is the CPU seconds used so far by the server's process tree (nginx's
// workers are children of its master), from /proc.
func (s *server) cpu() float64 {
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
			if pid == s.cmd.Process.Pid {
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

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitHTTP(url string) error {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return nil
		}
	}
	return fmt.Errorf("%s did not answer within 20 s", url)
}

func startRollcall(dir string, small, big []byte) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "node")
	cmd := exec.Command(self, "-serve", "rollcall", "-data", data, "-addr", addr)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{name: "rollcall", base: "http://" + addr, cmd: cmd}
	if err := s.importImage(data, small, big); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// importImage uploads the files as image "bench" (kernel: the small file,
// initrd: the big one), as `rollcall image import` does.
func (s *server) importImage(data string, small, big []byte) error {
	var token string
	for deadline := time.Now().Add(20 * time.Second); token == ""; time.Sleep(100 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(data, "admin.token")); err == nil {
			token = strings.TrimSpace(string(b))
		} else if time.Now().After(deadline) {
			return fmt.Errorf("the node wrote no admin token: %w", err)
		}
	}
	do := func(method, path string, body []byte, out any) error {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			req, _ := http.NewRequest(method, s.base+path, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				if time.Now().After(deadline) {
					return err
				}
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return json.Unmarshal(b, out)
			}
			if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
				return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
			}
		}
	}
	var kf, inf store.ImageFile
	if err := do(http.MethodPut, "/api/v1/images/bench/files/kernel", small, &kf); err != nil {
		return err
	}
	if err := do(http.MethodPut, "/api/v1/images/bench/files/initrd", big, &inf); err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"name": "bench", "files": []store.ImageFile{kf, inf}})
	var im store.Image
	return do(http.MethodPost, "/api/v1/images", body, &im)
}

// importOS imports a raw disk image of size bytes (an MBR, then random
// bytes) as OS "bench", as `rollcall os import` does, and returns the
// path of its compressed blob (/os/blobs/SHA256).
func (s *server) importOS(dir string, size int, rng *rand.ChaCha8) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "node", "admin.token"))
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(b))
	img := make([]byte, size)
	rng.Read(img)
	clear(img[:512])
	img[446+4] = 0x83 // one Linux partition from sector 2048 to the end
	binary.LittleEndian.PutUint32(img[446+8:], 2048)
	binary.LittleEndian.PutUint32(img[446+12:], uint32(size/512-2048))
	img[510], img[511] = 0x55, 0xaa
	req, _ := http.NewRequest(http.MethodPost, s.base+"/api/v1/os/bench/import?family=debian", bytes.NewReader(img))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("import: %d %s", resp.StatusCode, out)
	}
	req, _ = http.NewRequest(http.MethodGet, s.base+"/api/v1/os/bench", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var im struct {
		Versions []struct {
			SHA256 string `json:"sha256"`
		} `json:"versions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&im); err != nil || len(im.Versions) == 0 {
		return "", fmt.Errorf("GET /api/v1/os/bench: no version (%v; import said %s)", err, out)
	}
	return "/os/blobs/" + im.Versions[0].SHA256, nil
}

func startNginx(dir string, small, big []byte) (*server, error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			return nil, fmt.Errorf("nginx: %w (apt-get install -y nginx)", err)
		}
		bin = "/usr/sbin/nginx"
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	prefix := filepath.Join(dir, "nginx")
	root := filepath.Join(dir, "www")
	files := filepath.Join(root, "images", "bench")
	if err := os.MkdirAll(files, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(files, "kernel"), small, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(files, "initrd"), big, 0o644); err != nil {
		return nil, err
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
	s := &server{name: "nginx", base: "http://" + addr, cmd: cmd}
	if err := waitHTTP(s.base + "/images/bench/kernel"); err != nil {
		s.stop()
		b, _ := os.ReadFile(filepath.Join(prefix, "error.log"))
		return nil, fmt.Errorf("nginx: %w\n%s", err, b)
	}
	return s, nil
}

// result is one run against one server.
type result struct {
	bytes     int64
	completed int
	failed    int
	elapsed   time.Duration
	cpu       float64
}

func (r result) gbps() float64 { return float64(r.bytes) / r.elapsed.Seconds() / 1e9 }

type summary struct {
	runs, completed, failed int
	gbps, rps, cpuPerGiB    float64
}

func summarize(rs []result) summary {
	med := func(v []float64) float64 {
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	s := summary{runs: len(rs)}
	if len(rs) == 0 {
		return s
	}
	var g, q []float64
	var cpu, bytes float64
	for _, r := range rs {
		g = append(g, r.gbps())
		q = append(q, float64(r.completed)/r.elapsed.Seconds())
		s.completed += r.completed
		s.failed += r.failed
		cpu += r.cpu
		bytes += float64(r.bytes)
	}
	s.gbps, s.rps, s.cpuPerGiB = med(g), med(q), cpu/(bytes/(1<<30))
	return s
}

// load makes requests GETs of url over conns connections (each connection
// a goroutine with its own keep-alive connection) and counts the body
// bytes received, until all are done or cap passes.
func load(s *server, url string, conns, requests int, size int64, capDur time.Duration) result {
	// Connections come from many loopback addresses, as a boot storm's
	// machines each come from their own: the node caps connections per
	// client address (appliance/connlimit), nginx does not; 32 per address
	// stays under the node's cap for both.
	var dials atomic.Int64
	tr := &http.Transport{
		MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			k := dials.Add(1) / 32
			src := &net.TCPAddr{IP: net.IPv4(127, 0, 10+byte(k>>8), 1+byte(k&0xff))}
			return (&net.Dialer{Timeout: 30 * time.Second, LocalAddr: src}).DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), capDur)
	defer cancel()
	var total atomic.Int64
	var completed, failed atomic.Int64
	var next atomic.Int64
	cpu0 := s.cpu()
	start := time.Now()
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			for next.Add(1) <= int64(requests) && ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
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
				if resp.StatusCode == http.StatusOK && got == size {
					completed.Add(1)
				} else if ctx.Err() == nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return result{bytes: total.Load(), completed: int(completed.Load()), failed: int(failed.Load()), elapsed: time.Since(start), cpu: s.cpu() - cpu0}
}

// verify fetches url and checks it is the file.
func verify(url string, want []byte) error {
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
	if resp.StatusCode != 200 || n != int64(len(want)) || !bytes.Equal(h.Sum(nil), sha(want)) {
		return fmt.Errorf("%s: status %d, %d bytes, not the file", url, resp.StatusCode, n)
	}
	return nil
}

func sha(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

func run(cfg config) error {
	began := time.Now()
	dir, err := os.MkdirTemp("", "rollcall-bench-http")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rng := rand.NewChaCha8([32]byte{1})
	big := make([]byte, cfg.bigSize)
	small := make([]byte, cfg.smallSize)
	rng.Read(big)
	rng.Read(small)

	var servers []*server
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	rc, err := startRollcall(dir, small, big)
	if err != nil {
		return fmt.Errorf("rollcall: %w", err)
	}
	servers = append(servers, rc)
	ng, err := startNginx(dir, small, big)
	if err != nil {
		return err
	}
	servers = append(servers, ng)
	// Same bytes from both, and both files in the page cache.
	for _, s := range servers {
		if err := verify(s.base+"/images/bench/initrd", big); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if err := verify(s.base+"/images/bench/kernel", small); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}

	type row struct {
		test string
		res  map[string][]result
	}
	osURL := ""
	if cfg.osSize > 0 {
		if osURL, err = rc.importOS(dir, cfg.osSize, rng); err != nil {
			return fmt.Errorf("rollcall: OS import: %w", err)
		}
		// nginx serves the very blob the node serves, from its own root.
		blob, err := os.ReadFile(filepath.Join(dir, "node", "images", "blobs", filepath.Base(osURL)))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, "www", "os", "blobs"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "www", filepath.FromSlash(osURL)), blob, 0o644); err != nil {
			return err
		}
		for _, s := range servers {
			if err := verify(s.base+osURL, blob); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
		cfg.osBlob = int64(len(blob))
	}
	rows := []row{
		{test: fmt.Sprintf("%d x %d MiB, %d concurrent", cfg.bigConns, cfg.bigSize>>20, cfg.bigConns), res: map[string][]result{}},
		{test: fmt.Sprintf("%d x %d MiB, %d connections", cfg.smallReqs, cfg.smallSize>>20, cfg.smallConns), res: map[string][]result{}},
		{test: fmt.Sprintf("OS image %d MiB zstd, %d deploy clients", cfg.osBlob>>20, cfg.osConns), res: map[string][]result{}},
	}
	for rep := range max(cfg.reps, cfg.smallReps) {
		order := servers
		if rep%2 == 1 {
			order = []*server{servers[1], servers[0]}
		}
		for _, s := range order {
			if rep < cfg.smallReps {
				r := load(s, s.base+"/images/bench/kernel", cfg.smallConns, cfg.smallReqs, int64(cfg.smallSize), cfg.capDur)
				fmt.Fprintf(os.Stderr, "%-8s small rep %d: %.2f GB/s, %d ok, %d failed, %v, cpu %.1fs\n", s.name, rep, r.gbps(), r.completed, r.failed, r.elapsed.Round(time.Millisecond), r.cpu)
				rows[1].res[s.name] = append(rows[1].res[s.name], r)
			}
			if rep < cfg.reps && osURL != "" {
				r := load(s, s.base+osURL, cfg.osConns, cfg.osConns, cfg.osBlob, cfg.capDur)
				fmt.Fprintf(os.Stderr, "%-8s os    rep %d: %.2f GB/s, %d ok, %d failed, %v, cpu %.1fs\n", s.name, rep, r.gbps(), r.completed, r.failed, r.elapsed.Round(time.Millisecond), r.cpu)
				rows[2].res[s.name] = append(rows[2].res[s.name], r)
			}
			if rep < cfg.reps {
				r := load(s, s.base+"/images/bench/initrd", cfg.bigConns, cfg.bigConns, int64(cfg.bigSize), cfg.capDur)
				fmt.Fprintf(os.Stderr, "%-8s big   rep %d: %.2f GB/s, %d ok, %d failed, %v, cpu %.1fs\n", s.name, rep, r.gbps(), r.completed, r.failed, r.elapsed.Round(time.Millisecond), r.cpu)
				rows[0].res[s.name] = append(rows[0].res[s.name], r)
			}
		}
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "test\tserver\truns\tGB/s\treq/s\tcompleted\tfailed\tCPU s/GiB\tvs nginx\t")
	var short []string
	for _, rw := range rows {
		ref := summarize(rw.res["nginx"])
		if ref.runs == 0 {
			continue
		}
		for _, s := range servers {
			r := summarize(rw.res[s.name])
			ratio := r.gbps / ref.gbps
			if s.name == "rollcall" && ratio < 0.9 {
				short = append(short, rw.test)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.0f\t%d\t%d\t%.2f\t%.2f\t\n", rw.test, s.name, r.runs, r.gbps, r.rps, r.completed, r.failed, r.cpuPerGiB, ratio)
		}
	}
	tw.Flush()
	fmt.Printf("(GB/s and req/s: median over runs (mean of the middle two for an even count); GB = 10^9 bytes; completed/failed: all runs;\n CPU: the server's process tree; target rollcall >= 0.9 x nginx; whole run %v)\n", time.Since(began).Round(time.Second))
	if len(short) > 0 {
		return errors.New("below 0.9 x nginx: " + strings.Join(short, "; "))
	}
	return nil
}
