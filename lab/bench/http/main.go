// Command http measures a node's image serving (GET /images/NAME/FILE)
// against nginx in one run on loopback: 1,000 concurrent downloads of a
// 64 MiB initrd (each client fetches the whole file once), and 200
// connections fetching a 1 MiB file over and over (a bounded total of
// requests). It prints throughput for both servers and the ratio to nginx
// (target: at least 0.9).
//
// Both servers run as child processes on 127.0.0.1 so that neither shares a
// Go runtime with the client (lab/bench/vsnginx): the node is this binary
// re-executed (node.Start on a fresh data directory; the files are uploaded
// through the API as image "bench"; BENCH_CPUPROFILE=FILE profiles it), nginx is Debian's binary run as
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
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rollcall/rollcall/lab/bench/vsnginx"
)

type config struct {
	bigSize, bigConns                int
	smallSize, smallConns, smallReqs int
	reps, smallReps                  int
	osSize, osConns                  int
	osBlob                           int64 // the compressed image's size, once imported
	capDur                           time.Duration
}

func main() {
	if child, err := vsnginx.Child(); child {
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench node:", err)
			os.Exit(1)
		}
		return
	}
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
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// importOS imports a raw disk image of size bytes (an MBR, then random
// bytes) as OS "bench", as `rollcall os import` does, and returns the
// path of its compressed blob (/os/blobs/SHA256).
func importOS(n *vsnginx.Node, size int, rng *rand.ChaCha8) (string, error) {
	img := make([]byte, size)
	rng.Read(img)
	clear(img[:512])
	img[446+4] = 0x83 // one Linux partition from sector 2048 to the end
	binary.LittleEndian.PutUint32(img[446+8:], 2048)
	binary.LittleEndian.PutUint32(img[446+12:], uint32(size/512-2048))
	img[510], img[511] = 0x55, 0xaa
	if err := n.Do(http.MethodPost, "/api/v1/os/bench/import?family=debian", img, nil); err != nil {
		return "", fmt.Errorf("import: %w", err)
	}
	var im struct {
		Versions []struct {
			SHA256 string `json:"sha256"`
		} `json:"versions"`
	}
	if err := n.Do(http.MethodGet, "/api/v1/os/bench", nil, &im); err != nil || len(im.Versions) == 0 {
		return "", fmt.Errorf("GET /api/v1/os/bench: no version (%v)", err)
	}
	return "/os/blobs/" + im.Versions[0].SHA256, nil
}

// load is one run of conns clients fetching url (size bytes) requests
// times in all.
func load(s *vsnginx.Server, url string, conns, requests int, size int64, capDur time.Duration) vsnginx.Result {
	return vsnginx.Load{Conns: conns, Requests: requests, Cap: capDur, Request: vsnginx.Get(url), Size: vsnginx.Fixed(size), CPU: s.CPU}.Run()
}

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

	var servers []*vsnginx.Server
	defer func() {
		for _, s := range servers {
			s.Stop()
		}
	}()
	rc, err := vsnginx.StartNode(vsnginx.NodeOptions{Data: filepath.Join(dir, "node"), Name: "rollcall", CPUProfile: os.Getenv("BENCH_CPUPROFILE")})
	if err != nil {
		return fmt.Errorf("rollcall: %w", err)
	}
	servers = append(servers, &rc.Server)
	if _, err := rc.ImportImage("bench", vsnginx.ImageFile{Name: "kernel", Data: small}, vsnginx.ImageFile{Name: "initrd", Data: big}); err != nil {
		return fmt.Errorf("rollcall: %w", err)
	}
	ng, err := vsnginx.StartNginx(dir)
	if err != nil {
		return err
	}
	servers = append(servers, ng)
	if err := ng.Put("images/bench/kernel", small); err != nil {
		return err
	}
	if err := ng.Put("images/bench/initrd", big); err != nil {
		return err
	}
	// Same bytes from both, and both files in the page cache.
	for _, s := range servers {
		if err := vsnginx.Verify(s.Base+"/images/bench/initrd", big); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		if err := vsnginx.Verify(s.Base+"/images/bench/kernel", small); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
	}

	type row struct {
		test string
		res  map[string][]vsnginx.Result
	}
	osURL := ""
	if cfg.osSize > 0 {
		if osURL, err = importOS(rc, cfg.osSize, rng); err != nil {
			return fmt.Errorf("rollcall: OS import: %w", err)
		}
		// nginx serves the very blob the node serves, from its own root.
		blob, err := os.ReadFile(filepath.Join(rc.Data, "images", "blobs", filepath.Base(osURL)))
		if err != nil {
			return err
		}
		if err := ng.Put(osURL, blob); err != nil {
			return err
		}
		for _, s := range servers {
			if err := vsnginx.Verify(s.Base+osURL, blob); err != nil {
				return fmt.Errorf("%s: %w", s.Name, err)
			}
		}
		cfg.osBlob = int64(len(blob))
	}
	rows := []row{
		{test: fmt.Sprintf("%d x %d MiB, %d concurrent", cfg.bigConns, cfg.bigSize>>20, cfg.bigConns), res: map[string][]vsnginx.Result{}},
		{test: fmt.Sprintf("%d x %d MiB, %d connections", cfg.smallReqs, cfg.smallSize>>20, cfg.smallConns), res: map[string][]vsnginx.Result{}},
		{test: fmt.Sprintf("OS image %d MiB zstd, %d deploy clients", cfg.osBlob>>20, cfg.osConns), res: map[string][]vsnginx.Result{}},
	}
	logRun := func(s *vsnginx.Server, what string, rep int, r vsnginx.Result) {
		fmt.Fprintf(os.Stderr, "%-8s %-5s rep %d: %.2f GB/s, %d ok, %d failed, %v, cpu %.1fs\n", s.Name, what, rep, r.GBps(), r.Completed, r.Failed, r.Elapsed.Round(time.Millisecond), r.CPU)
	}
	for rep := range max(cfg.reps, cfg.smallReps) {
		order := servers
		if rep%2 == 1 {
			order = []*vsnginx.Server{servers[1], servers[0]}
		}
		for _, s := range order {
			if rep < cfg.smallReps {
				r := load(s, s.Base+"/images/bench/kernel", cfg.smallConns, cfg.smallReqs, int64(cfg.smallSize), cfg.capDur)
				logRun(s, "small", rep, r)
				rows[1].res[s.Name] = append(rows[1].res[s.Name], r)
			}
			if rep < cfg.reps && osURL != "" {
				r := load(s, s.Base+osURL, cfg.osConns, cfg.osConns, cfg.osBlob, cfg.capDur)
				logRun(s, "os", rep, r)
				rows[2].res[s.Name] = append(rows[2].res[s.Name], r)
			}
			if rep < cfg.reps {
				r := load(s, s.Base+"/images/bench/initrd", cfg.bigConns, cfg.bigConns, int64(cfg.bigSize), cfg.capDur)
				logRun(s, "big", rep, r)
				rows[0].res[s.Name] = append(rows[0].res[s.Name], r)
			}
		}
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "test\tserver\truns\tGB/s\treq/s\tcompleted\tfailed\tCPU s/GiB\tvs nginx\t")
	var short []string
	for _, rw := range rows {
		ref := vsnginx.Summarize(rw.res["nginx"])
		if ref.Runs == 0 {
			continue
		}
		for _, s := range servers {
			r := vsnginx.Summarize(rw.res[s.Name])
			ratio := r.GBps / ref.GBps
			if s.Name == "rollcall" && ratio < 0.9 {
				short = append(short, rw.test)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.0f\t%d\t%d\t%.2f\t%.2f\t\n", rw.test, s.Name, r.Runs, r.GBps, r.RPS, r.Completed, r.Failed, r.CPUPerGiB, ratio)
		}
	}
	tw.Flush()
	fmt.Printf("(GB/s and req/s: median over runs (mean of the middle two for an even count); GB = 10^9 bytes; completed/failed: all runs;\n CPU: the server's process tree; target rollcall >= 0.9 x nginx; whole run %v)\n", time.Since(began).Round(time.Second))
	if len(short) > 0 {
		return errors.New("below 0.9 x nginx: " + strings.Join(short, "; "))
	}
	return nil
}
