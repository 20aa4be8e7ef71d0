// Command ipam measures address allocation through the API on a cluster of
// three in-process appliance nodes: n auto allocations in a /16 whose one
// static range covers it, spread round-robin over the nodes by concurrent
// clients (POST /api/v1/ips/allocate). It reports allocations/s and the
// cost of one allocation in each 10% of the run as the subnet fills, which
// must stay flat (not grow with the number of used addresses).
//
//	go run ./lab/bench/ipam -n 60000
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/wire"
)

type config struct {
	n, clients, machines int
	dir                  string
}

func main() {
	var cfg config
	flag.IntVar(&cfg.n, "n", 60000, "addresses to allocate (at most 65534: one /16)")
	flag.IntVar(&cfg.clients, "c", 32, "concurrent clients")
	flag.IntVar(&cfg.machines, "machines", 8, "machines the addresses are given to")
	flag.StringVar(&cfg.dir, "dir", "", "where the nodes keep their files (default: a temporary directory, removed after)")
	flag.Parse()
	if cfg.n < 10 || cfg.n > 65534 {
		fmt.Fprintln(os.Stderr, "bench: -n must be in 10–65534")
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// api is a client for one node.
type api struct {
	base, token string
	http        *http.Client
}

type apiError struct {
	status    int
	code, msg string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d: %s", e.status, e.msg) }

func (a api) do(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		json.Unmarshal(b, &e)
		return &apiError{resp.StatusCode, e.Error.Code, e.Error.Message}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func run(cfg config) error {
	dir := cfg.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "rollcall-ipam-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The nodes log failed requests at error level; the run counts them.
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.clients, MaxConnsPerHost: cfg.clients}}

	// Three nodes: the first bootstraps, the others join with codes.
	var nodes []*node.Node
	defer func() {
		for i := len(nodes) - 1; i >= 0; i-- {
			nodes[i].Close()
		}
	}()
	var token string
	for i := range 3 {
		raftAddr, err := freeAddr()
		if err != nil {
			return err
		}
		o := node.Options{
			DataDir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)), Name: fmt.Sprintf("n%d", i+1),
			HTTPAddr: "127.0.0.1:0", RaftAddr: raftAddr, Logger: logger,
		}
		if i > 0 {
			var code wire.JoinCodeView
			if err := (api{"http://" + nodes[0].HTTPAddr(), token, hc}).do("POST", "/api/v1/cluster/join-codes", map[string]string{"ttl": "10m"}, &code); err != nil {
				return fmt.Errorf("join code: %w", err)
			}
			o.Join = code.Code
		}
		n, err := node.Start(ctx, o)
		if err != nil {
			return fmt.Errorf("start n%d: %w", i+1, err)
		}
		nodes = append(nodes, n)
		if i == 0 {
			b, err := os.ReadFile(filepath.Join(o.DataDir, "admin.token"))
			if err != nil {
				return err
			}
			token = strings.TrimSpace(string(b))
			if err := waitLeader(ctx, n); err != nil {
				return err
			}
		}
	}
	clients := make([]api, len(nodes))
	for i, n := range nodes {
		clients[i] = api{"http://" + n.HTTPAddr(), token, hc}
	}
	if err := waitVoters(ctx, clients[0], 3); err != nil {
		return err
	}

	// The network: one /16 whose static range covers it, and machines.
	first := clients[0]
	setup := []struct {
		path string
		body any
	}{
		{"/api/v1/fabrics", map[string]any{"name": "hall-a"}},
		{"/api/v1/vlans", map[string]any{"fabric": "hall-a", "vid": 0}},
		{"/api/v1/subnets", map[string]any{"cidr": "10.100.0.0/16", "fabric": "hall-a", "vid": 0, "purpose": "provisioning", "gateway": "10.100.0.1"}},
		{"/api/v1/ranges", map[string]any{"subnet": "10.100.0.0/16", "kind": "static", "first": "10.100.0.1", "last": "10.100.255.254"}},
	}
	for _, s := range setup {
		if err := first.do("POST", s.path, s.body, nil); err != nil {
			return fmt.Errorf("POST %s: %w", s.path, err)
		}
	}
	machines := make([]string, cfg.machines)
	for i := range machines {
		var m struct {
			ID string `json:"id"`
		}
		if err := first.do("POST", "/api/v1/machines", map[string]any{"name": fmt.Sprintf("bench-%d", i)}, &m); err != nil {
			return fmt.Errorf("create machine: %w", err)
		}
		machines[i] = m.ID
	}
	// Every node has the setup before the clock starts.
	var h struct {
		Applied uint64 `json:"applied_index"`
	}
	if err := first.do("GET", "/api/v1/health", nil, &h); err != nil {
		return err
	}
	for _, c := range clients {
		if err := c.do("GET", fmt.Sprintf("/api/v1/machines?min_index=%d", h.Applied), nil, nil); err != nil {
			return fmt.Errorf("wait for the setup on every node: %w", err)
		}
	}

	fmt.Printf("allocating %d addresses in 10.100.0.0/16 on 3 nodes, %d clients, %d machines\n", cfg.n, cfg.clients, len(machines))
	const buckets = 10
	var (
		next       atomic.Int64
		failures   atomic.Int64
		retries    atomic.Int64
		noLeader   atomic.Int64
		unknown    atomic.Int64 // outcome unknown (leadership lost mid-commit): may or may not hold an address
		mu         sync.Mutex
		seen       = make(map[string]bool, cfg.n)
		dupes      int
		latency    [buckets]time.Duration
		count      [buckets]int
		startAt    [buckets]time.Time // first request of the bucket sent
		endAt      [buckets]time.Time // last one answered
		firstError error
	)
	start := time.Now()
	var wg sync.WaitGroup
	for range cfg.clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.n {
					return
				}
				c := clients[i%len(clients)]
				body := map[string]any{"subnet": "10.100.0.0/16", "machine": machines[i%len(machines)], "interface": "eth0"}
				var out struct {
					IP string `json:"ip"`
				}
				t0 := time.Now()
				var err error
				for try := 0; try < 100; try++ {
					if err = c.do("POST", "/api/v1/ips/allocate", body, &out); err == nil {
						break
					}
					var ae *apiError
					if !errors.As(err, &ae) {
						break
					}
					if ae.code == "no_leader" { // nothing was written: safe to send again
						noLeader.Add(1)
						time.Sleep(50 * time.Millisecond)
						continue
					}
					if ae.code == "unknown_outcome" {
						unknown.Add(1)
						break
					}
					if ae.status != http.StatusConflict {
						break
					}
					retries.Add(1)
				}
				el := time.Since(t0)
				b := i * buckets / cfg.n
				mu.Lock()
				if err != nil {
					failures.Add(1)
					if firstError == nil {
						firstError = err
					}
				} else {
					if seen[out.IP] {
						dupes++
					}
					seen[out.IP] = true
				}
				latency[b] += el
				count[b]++
				if startAt[b].IsZero() || t0.Before(startAt[b]) {
					startAt[b] = t0
				}
				if now := t0.Add(el); now.After(endAt[b]) {
					endAt[b] = now
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	total := time.Since(start)

	ok := cfg.n - int(failures.Load())
	fmt.Printf("\n%d allocated in %v: %.0f allocations/s\n", ok, total.Round(time.Millisecond), float64(ok)/total.Seconds())
	fmt.Printf("%d handed out twice, %d failed (%d of them with an unknown outcome: leadership lost mid-commit), %d resent after \"no leader\", %d resent after a 409\n",
		dupes, failures.Load(), unknown.Load(), noLeader.Load(), retries.Load())
	if firstError != nil {
		fmt.Printf("first failure: %v\n", firstError)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\nfill\tallocations\twall time per allocation\tmean latency\t")
	var perAlloc [buckets]float64
	for b := range buckets {
		if count[b] > 0 {
			perAlloc[b] = float64(endAt[b].Sub(startAt[b])) / float64(count[b])
		}
		mean := time.Duration(0)
		if count[b] > 0 {
			mean = latency[b] / time.Duration(count[b])
		}
		fmt.Fprintf(tw, "%d–%d%%\t%d\t%v\t%v\t\n", b*10, b*10+10, count[b], time.Duration(perAlloc[b]).Round(time.Microsecond), mean.Round(time.Microsecond))
	}
	tw.Flush()
	firstMean := latency[0] / time.Duration(max(count[0], 1))
	lastMean := latency[buckets-1] / time.Duration(max(count[buckets-1], 1))
	fmt.Printf("\nfirst bucket %v, last bucket %v per allocation (wall): ratio %.2f\n",
		time.Duration(perAlloc[0]).Round(time.Microsecond), time.Duration(perAlloc[buckets-1]).Round(time.Microsecond), perAlloc[buckets-1]/perAlloc[0])
	fmt.Printf("first bucket %v, last bucket %v mean latency: ratio %.2f\n",
		firstMean.Round(time.Microsecond), lastMean.Round(time.Microsecond), float64(lastMean)/float64(firstMean))
	// Check: every node records every address the clients were given, and
	// nothing else but what the unknown outcomes may have committed.
	for i, c := range clients {
		var l struct {
			Addresses []struct {
				IP string `json:"ip"`
			} `json:"addresses"`
		}
		var err error
		for try := 0; try < 20; try++ { // a follower may lag by a few entries
			if err = c.do("GET", "/api/v1/ips?subnet=10.100.0.0/16", nil, &l); err == nil && len(l.Addresses) >= len(seen) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			return err
		}
		recorded := 0
		for _, a := range l.Addresses {
			if seen[a.IP] {
				recorded++
			}
		}
		extra := len(l.Addresses) - recorded
		fmt.Printf("node n%d records %d addresses: all %d given to clients%s, %d from unknown outcomes\n",
			i+1, len(l.Addresses), recorded, map[bool]string{true: "", false: " (MISSING SOME)"}[recorded == len(seen)], extra)
		if recorded != len(seen) || extra > int(unknown.Load()) {
			return fmt.Errorf("node n%d: %d of %d given addresses recorded, %d unexplained", i+1, recorded, len(seen), extra)
		}
	}
	if dupes > 0 {
		return fmt.Errorf("%d addresses handed out twice", dupes)
	}
	return nil
}

func waitLeader(ctx context.Context, n *node.Node) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return n.Cluster().WaitLeader(ctx)
}

func waitVoters(ctx context.Context, c api, want int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var v struct {
			Members []struct {
				Voter  bool            `json:"voter"`
				Status json.RawMessage `json:"status"`
			} `json:"members"`
		}
		if err := c.do("GET", "/api/v1/cluster", nil, &v); err == nil {
			voters := 0
			for _, m := range v.Members {
				if m.Voter && len(m.Status) > 0 && string(m.Status) != "null" {
					voters++
				}
			}
			if voters >= want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster did not reach %d reachable voters in a minute", want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
