// Command tftp measures Rollcall's TFTP server against tftpd-hpa (and, for
// reference, a stock pin/tftp v3 server) in one run on loopback: a 32 MiB
// file at blksize 1468 and 512, fetched by the same client from each
// server several times (median seconds and the ratio to tftpd-hpa), and 200
// concurrent 1 MiB transfers (total time).
//
// Every server runs as its own child process on 127.0.0.1 (tftpd-hpa as
// `in.tftpd --foreground --address 127.0.0.1:PORT --secure DIR`; ours and
// pin/tftp as this binary re-executed with -serve), so client and server
// never share a Go runtime. The single-file client is atftp (tftp-hpa's
// client cannot ask for blksize); the concurrent client is pin/tftp's Go
// client in this process, the same for every server. Repetitions are
// interleaved across servers so load from elsewhere on the machine hits
// them alike; the raw samples go to stderr. For the Go servers the table
// also has their CPU time (tftpd-hpa's forked transfer processes cannot be
// charged from /proc).
//
//	go run ./lab/bench/tftp -reps 7
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	pintftp "github.com/pin/tftp/v3"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/tftp"
)

type config struct {
	size, concSize   int
	reps, conc       int
	concReps         int
	blksizes         string
	servers          string
	serve, dir, addr string
	profile          string
}

func main() {
	var cfg config
	flag.IntVar(&cfg.size, "size", 32<<20, "bytes of the single-file transfer")
	flag.IntVar(&cfg.reps, "reps", 5, "repetitions per server and block size (median reported)")
	flag.StringVar(&cfg.blksizes, "blksizes", "1468,512", "block sizes for the single-file transfer")
	flag.IntVar(&cfg.conc, "conc", 200, "concurrent transfers")
	flag.IntVar(&cfg.concReps, "conc-reps", 3, "repetitions of the concurrent run (median reported)")
	flag.IntVar(&cfg.concSize, "conc-size", 1<<20, "bytes of each concurrent transfer")
	flag.StringVar(&cfg.servers, "servers", "rollcall,tftpd-hpa,pin-stock", "servers to measure (tftpd-hpa is the reference)")
	flag.StringVar(&cfg.serve, "serve", "", "internal: run server rollcall|pin-stock on -addr serving -dir")
	flag.StringVar(&cfg.dir, "dir", "", "internal: directory to serve")
	flag.StringVar(&cfg.addr, "addr", "", "internal: address to serve on")
	flag.StringVar(&cfg.profile, "cpuprofile", "", "internal: write the rollcall server's CPU profile here")
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

// serve is the child process: one server until SIGTERM.
func serve(cfg config) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	switch cfg.serve {
	case "rollcall":
		node.TuneRuntime() // as `rollcall serve` does
		if cfg.profile != "" {
			f, err := os.Create(cfg.profile)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		s, err := tftp.New(tftp.Config{Addr: cfg.addr, Roots: map[string]string{"": cfg.dir}, MaxTransfers: 1000, MaxPerClient: 1000})
		if err != nil {
			return err
		}
		return s.Start(ctx, logger)
	case "pin-stock":
		root, err := os.OpenRoot(cfg.dir)
		if err != nil {
			return err
		}
		s := pintftp.NewServer(func(name string, rf io.ReaderFrom) error {
			f, err := root.Open(name)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = rf.ReadFrom(f)
			return err
		}, nil)
		go func() { <-ctx.Done(); s.Shutdown() }()
		return s.ListenAndServe(cfg.addr)
	}
	return fmt.Errorf("unknown server %q", cfg.serve)
}

type server struct {
	name string
	addr string
	cmd  *exec.Cmd
}

func startServer(name, dir string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var cmd *exec.Cmd
	switch name {
	case "tftpd-hpa":
		bin, err := exec.LookPath("in.tftpd")
		if err != nil {
			return nil, fmt.Errorf("tftpd-hpa: %w (apt-get install tftpd-hpa)", err)
		}
		// Run the binary directly: no system service, no inetd.
		cmd = exec.Command(bin, "--foreground", "--address", addr, "--secure", dir)
	default:
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cmd = exec.Command(self, "-serve", name, "-addr", addr, "-dir", dir)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &server{name: name, addr: addr, cmd: cmd}
	if err := waitServing(addr); err != nil {
		s.stop()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// cpu is the CPU time used by the server's process tree: every live
// process under it (in.tftpd --foreground forks a listener, which forks one
// process per transfer) plus the children each has reaped, from /proc.
func (s *server) cpu() float64 {
	// A tftpd-hpa transfer process is reaped (and counted in its parent's
	// cutime) shortly after its transfer ends.
	time.Sleep(50 * time.Millisecond)
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
		// Fields after the ")" closing the command name start at field 3
		// (state); ppid is field 4, utime, stime, cutime, cstime 14..17.
		f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
		if len(f) < 15 {
			continue
		}
		var p proc
		p.ppid, _ = strconv.Atoi(string(f[1]))
		for _, x := range f[11:15] {
			n, _ := strconv.ParseFloat(string(x), 64)
			p.ticks += n
		}
		procs[pid] = p
	}
	var sum func(pid int) float64
	sum = func(pid int) float64 {
		t := procs[pid].ticks
		for c, p := range procs {
			if p.ppid == pid {
				t += sum(c)
			}
		}
		return t
	}
	return sum(s.cmd.Process.Pid) / 100 // USER_HZ
}

func freePort() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// waitServing sends RRQs for a missing file until the server answers.
func waitServing(addr string) error {
	to, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return err
	}
	// Unconnected: the answer comes from the server's transfer port.
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	defer c.Close()
	rrq := []byte("\x00\x01no-such-file\x00octet\x00")
	buf := make([]byte, 600)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		_, _ = c.WriteTo(rrq, to)
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if n, _, err := c.ReadFrom(buf); err == nil && n >= 4 {
			return nil
		}
	}
	return errors.New("not answering on " + addr)
}

func writeRandom(path string, n int) ([32]byte, error) {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return sha256.Sum256(b), os.WriteFile(path, b, 0o644)
}

type row struct {
	metric string
	vals   map[string]float64
}

func run(cfg config) error {
	atftp, err := exec.LookPath("atftp")
	if err != nil {
		return fmt.Errorf("atftp: %w (apt-get install atftp)", err)
	}
	dir, err := os.MkdirTemp("", "tftp-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	serveDir := filepath.Join(dir, "srv")
	if err := os.Mkdir(serveDir, 0o755); err != nil {
		return err
	}
	bigSum, err := writeRandom(filepath.Join(serveDir, "big.bin"), cfg.size)
	if err != nil {
		return err
	}
	smallSum, err := writeRandom(filepath.Join(serveDir, "small.bin"), cfg.concSize)
	if err != nil {
		return err
	}
	var blksizes []int
	for _, f := range bytes.Split([]byte(cfg.blksizes), []byte(",")) {
		n, err := strconv.Atoi(string(bytes.TrimSpace(f)))
		if err != nil {
			return fmt.Errorf("-blksizes: %w", err)
		}
		blksizes = append(blksizes, n)
	}
	names := []string{}
	for _, f := range bytes.Split([]byte(cfg.servers), []byte(",")) {
		names = append(names, string(bytes.TrimSpace(f)))
	}

	// Start every server first, then interleave the repetitions (server A,
	// B, C, A, B, C, …) so that drift in the machine's speed during the run
	// hits every server alike.
	servers := make([]*server, 0, len(names))
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	for _, name := range names {
		srv, err := startServer(name, serveDir)
		if err != nil {
			return err
		}
		servers = append(servers, srv)
	}
	var rows []row
	var res results
	for _, bs := range blksizes {
		secs := map[string][]float64{}
		cpu := map[string][]float64{}
		for i := 0; i < cfg.reps; i++ {
			for _, srv := range servers {
				c0 := srv.cpu()
				d, err := atftpGet(atftp, srv.addr, "big.bin", filepath.Join(dir, "out.bin"), bs, bigSum)
				if err != nil {
					return fmt.Errorf("%s blksize %d: %w", srv.name, bs, err)
				}
				secs[srv.name] = append(secs[srv.name], d.Seconds())
				cpu[srv.name] = append(cpu[srv.name], srv.cpu()-c0)
			}
		}
		metric := fmt.Sprintf("%d MiB, blksize %d, atftp (median of %d, s)", cfg.size>>20, bs, cfg.reps)
		metricCPU := fmt.Sprintf("%d MiB, blksize %d", cfg.size>>20, bs)
		for _, srv := range servers {
			fmt.Fprintf(os.Stderr, "blksize %d %s: %.3f\n", bs, srv.name, secs[srv.name])
		}
		// tftpd-hpa's per-transfer processes are reaped without being
		// charged to their parent here, so its CPU cannot be read from /proc.
		cpuMetric := ": server CPU (user+sys, median, s)"
		for _, srv := range servers {
			if len(secs[srv.name]) > 0 {
				res.put(metric, srv.name, median(secs[srv.name]))
				if srv.name != "tftpd-hpa" {
					res.put(metricCPU+cpuMetric, srv.name, median(cpu[srv.name]))
				}
			}
		}
	}
	concSecs := map[string][]float64{}
	concFailed := map[string]int{}
	concCPU := map[string][]float64{}
	for i := 0; i < cfg.concReps; i++ {
		for _, srv := range servers {
			c0 := srv.cpu()
			d, failed := concurrent(srv.addr, cfg.conc, smallSum)
			concSecs[srv.name] = append(concSecs[srv.name], d.Seconds())
			concCPU[srv.name] = append(concCPU[srv.name], srv.cpu()-c0)
			concFailed[srv.name] += failed
		}
	}
	for _, srv := range servers {
		if len(concSecs[srv.name]) == 0 {
			continue
		}
		res.put(fmt.Sprintf("%d × %d KiB concurrent, blksize 1468, Go client (median of %d, total s)", cfg.conc, cfg.concSize>>10, cfg.concReps), srv.name, median(concSecs[srv.name]))
		if srv.name != "tftpd-hpa" {
			res.put(fmt.Sprintf("%d × %d KiB concurrent: server CPU (user+sys, median, s)", cfg.conc, cfg.concSize>>10), srv.name, median(concCPU[srv.name]))
		}
		res.put(fmt.Sprintf("%d × %d KiB concurrent: failed transfers (all reps)", cfg.conc, cfg.concSize>>10), srv.name, float64(concFailed[srv.name]))
	}
	for _, m := range res.order {
		rows = append(rows, row{m, res.vals[m]})
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "metric\t")
	for _, n := range names {
		fmt.Fprintf(tw, "%s\t", n)
	}
	for _, n := range names {
		if n != "tftpd-hpa" {
			fmt.Fprintf(tw, "tftpd-hpa/%s\t", n)
		}
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t", r.metric)
		for _, n := range names {
			if v, ok := r.vals[n]; ok {
				fmt.Fprintf(tw, "%.3f\t", v)
			} else {
				fmt.Fprint(tw, "n/a\t")
			}
		}
		ref, hasRef := r.vals["tftpd-hpa"]
		for _, n := range names {
			if n == "tftpd-hpa" {
				continue
			}
			timed := strings.HasSuffix(r.metric, ", s)") || strings.HasSuffix(r.metric, "total s)")
			if v := r.vals[n]; timed && hasRef && v > 0 && ref > 0 {
				// Time ratio: above 1 means faster than tftpd-hpa.
				fmt.Fprintf(tw, "%.2f×\t", ref/v)
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// results are the table's values: metric → server → value, metrics in the
// order first measured.
type results struct {
	order []string
	vals  map[string]map[string]float64
}

func (r *results) put(metric, server string, v float64) {
	if r.vals == nil {
		r.vals = map[string]map[string]float64{}
	}
	if r.vals[metric] == nil {
		r.vals[metric] = map[string]float64{}
		r.order = append(r.order, metric)
	}
	r.vals[metric][server] = v
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func atftpGet(bin, addr, name, out string, blksize int, want [32]byte) (time.Duration, error) {
	host, port, _ := net.SplitHostPort(addr)
	os.Remove(out)
	args := []string{"--get", "-r", name, "-l", out}
	if blksize != 512 {
		args = append(args, "--option", fmt.Sprintf("blksize %d", blksize))
	}
	args = append(args, host, port)
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("atftp: %w: %s", err, stderr.String())
	}
	got, err := os.ReadFile(out)
	if err != nil {
		return d, err
	}
	if sha256.Sum256(got) != want {
		return d, fmt.Errorf("atftp: %d bytes received, content differs", len(got))
	}
	return d, nil
}

// concurrent runs n pin/tftp client transfers at once and returns the wall
// time until all ended and how many failed or were corrupt.
func concurrent(addr string, n int, want [32]byte) (time.Duration, int) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	var firstErr error
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := goGet(addr, "small.bin", 1468, want)
			if err != nil {
				mu.Lock()
				failed++
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	if firstErr != nil {
		fmt.Fprintf(os.Stderr, "  %d/%d failed, first: %v\n", failed, n, firstErr)
	}
	return d, failed
}

func goGet(addr, name string, blksize int, want [32]byte) error {
	c, err := pintftp.NewClient(addr)
	if err != nil {
		return err
	}
	c.SetBlockSize(blksize)
	c.SetTimeout(2 * time.Second)
	c.SetRetries(5)
	c.SetBackoff(func(int) time.Duration { return 0 })
	wt, err := c.Receive(name, "octet")
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := wt.WriteTo(h); err != nil {
		return err
	}
	if [32]byte(h.Sum(nil)) != want {
		return errors.New("content differs")
	}
	return nil
}
