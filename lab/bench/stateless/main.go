// Command stateless measures what Rollcall's stateless nodes (issue 20)
// ask of the servers, against nginx serving the same bytes, in one run on
// loopback:
//
//   - renders: a three-node cluster holds -nodes stateless nodes (machines
//     commissioned through the API with fleet inventories from lab/fleet,
//     assigned to a profile whose overlay is the compute example, with
//     addresses from a subnet: its slurm.conf and hosts list every node).
//     Each simulated node fetches GET /api/v1/stateless/self/overlay/system
//     and /runtime with its own node token (X-Rollcall-Node, read from its
//     boot script GET /boot/ipxe?mac=…), all at once, spread over the three
//     nodes (node k on server (k+rep) mod 3). A cold round follows a change
//     (a PUT of the cluster variables, which every tree's cache key holds):
//     each fetch renders. Warm rounds follow with nothing changed: the
//     trees come from the cache. nginx serves each node's two tars, saved
//     once, as static files to the same client. Target: renders/s at
//     least 0.5 x nginx's requests/s.
//   - squashfs: -sq-conns clients each download the image's -sq-size
//     squashfs (random bytes) once, GET /images/compute/squashfs from the
//     first node, against nginx serving the same file. Target: throughput
//     at least 0.9 x nginx's.
//
// The nodes and nginx are child processes (lab/bench/vsnginx); the client
// is Go's net/http in this process, the same for both, with connections
// from many loopback addresses; runs are interleaved so load from
// elsewhere on the machine hits both alike. The table has each server's
// CPU time per request (renders; the three nodes' together) or per GiB
// (squashfs). -cpuprofile PREFIX writes the nodes' CPU profiles of the
// render rounds to PREFIX.n1, PREFIX.n2 and PREFIX.n3.
//
//	go run ./lab/bench/stateless
//
// Measured on a 2-core VM (Go 1.26, nginx 1.26 from Debian), defaults:
// see the report of issue 20's benchmark helper.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/rollcall/rollcall/appliance/overlay"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/lab/bench/vsnginx"
	"github.com/rollcall/rollcall/lab/fleet"
	"github.com/rollcall/rollcall/store"
)

type config struct {
	nodes, conns, reps, warm int
	sqSize, sqConns, sqReps  int
	setupClients             int
	seed                     uint64
	capDur                   time.Duration
	cpuProfile               string
	profileCold              bool
}

// nodeCallLimit is appliance/httpapi's bound on one stateless node's calls
// to one server in a minute (nodeCallsPerMinute).
const nodeCallLimit = 30

func main() {
	if child, err := vsnginx.Child(); child {
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench node:", err)
			os.Exit(1)
		}
		return
	}
	var cfg config
	flag.IntVar(&cfg.nodes, "nodes", 1000, "stateless nodes (machines commissioned and assigned)")
	flag.IntVar(&cfg.conns, "conns", 0, "concurrent clients of a render round (default: one per node)")
	flag.IntVar(&cfg.reps, "reps", 3, "cold rounds (each after a change, each followed by -warm warm rounds)")
	flag.IntVar(&cfg.warm, "warm", 3, "warm rounds after each cold one (nginx runs once per warm round)")
	flag.IntVar(&cfg.sqSize, "sq-size", 256<<20, "bytes of the squashfs (0 skips the squashfs runs)")
	flag.IntVar(&cfg.sqConns, "sq-conns", 200, "concurrent clients downloading the squashfs once each")
	flag.IntVar(&cfg.sqReps, "sq-reps", 2, "squashfs runs per server (the order alternates)")
	flag.IntVar(&cfg.setupClients, "setup-clients", 16, "concurrent API clients commissioning and assigning the machines")
	flag.Uint64Var(&cfg.seed, "seed", 1, "fleet seed (lab/fleet)")
	flag.DurationVar(&cfg.capDur, "cap", 70*time.Second, "wall-time cap of one run")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write the nodes' CPU profiles of the render rounds to PREFIX.n1, .n2, .n3")
	flag.BoolVar(&cfg.profileCold, "cpuprofile-cold", false, "with -cpuprofile: profile the last cold round only")
	flag.Parse()
	if cfg.conns == 0 {
		cfg.conns = cfg.nodes
	}
	if err := check(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "stateless:", err)
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "stateless:", err)
		os.Exit(1)
	}
}

func check(cfg config) error {
	switch {
	case cfg.nodes < 3 || cfg.nodes > store.MaxNamePool:
		return fmt.Errorf("-nodes %d: 3 to %d", cfg.nodes, store.MaxNamePool)
	case cfg.conns < 1 || cfg.reps < 1 || cfg.warm < 1 || cfg.setupClients < 1 || cfg.sqReps < 1 || cfg.sqConns < 1:
		return errors.New("-conns, -reps, -warm, -setup-clients, -sq-conns and -sq-reps must be positive")
	case cfg.sqSize < 0:
		return errors.New("-sq-size must be 0 (no squashfs runs) or more")
	}
	// Node k meets server (k+rep) mod 3: each server sees a node in every
	// third rep, twice a round, besides the first fetch. A minute holds
	// the whole run of the defaults; more than the limit would be
	// answered 429 and counted as failures.
	if calls := 2 + 2*(1+cfg.warm)*((cfg.reps+2)/3); calls > nodeCallLimit {
		return fmt.Errorf("-reps %d -warm %d: a node would call one server %d times, more than the %d a minute it may", cfg.reps, cfg.warm, calls, nodeCallLimit)
	}
	return nil
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}

// parallel runs f(0..n-1) on workers goroutines and returns the first
// error (the rest still run).
func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	wg.Wait()
	return first
}

func jsonBody(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// startCluster starts three nodes, the second and third joining the
// first with join codes, and waits for three reachable voters. The nodes
// started are returned also with an error, for the caller to stop.
func startCluster(dir, cpuProfile string) ([]*vsnginx.Node, error) {
	opts := func(k int) vsnginx.NodeOptions {
		o := vsnginx.NodeOptions{Data: filepath.Join(dir, fmt.Sprintf("n%d", k)), Name: fmt.Sprintf("n%d", k)}
		if cpuProfile != "" {
			o.CPUProfile = cpuProfile + "." + o.Name
		}
		return o
	}
	n1, err := vsnginx.StartNode(opts(1))
	if err != nil {
		return nil, fmt.Errorf("start n1: %w", err)
	}
	nodes := []*vsnginx.Node{n1}
	for k := 2; k <= 3; k++ {
		var jc struct {
			Code string `json:"code"`
		}
		if err := n1.Do("POST", "/api/v1/cluster/join-codes", nil, &jc); err != nil {
			return nodes, fmt.Errorf("join code for n%d: %w", k, err)
		}
		o := opts(k)
		o.Join = jc.Code
		n, err := vsnginx.StartNode(o)
		if err != nil {
			return nodes, fmt.Errorf("start n%d: %w", k, err)
		}
		nodes = append(nodes, n)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var view struct {
			Leader  string `json:"leader"`
			Members []struct {
				Voter     bool `json:"voter"`
				Reachable bool `json:"reachable"`
			} `json:"members"`
		}
		err := n1.Do("GET", "/api/v1/cluster", nil, &view)
		ok := 0
		for _, m := range view.Members {
			if m.Voter && m.Reachable {
				ok++
			}
		}
		if err == nil && ok == 3 && view.Leader != "" {
			return nodes, nil
		}
		if time.Now().After(deadline) {
			return nodes, fmt.Errorf("cluster did not form: %d reachable voters, err %v", ok, err)
		}
	}
}

// simNode is one simulated stateless node.
type simNode struct {
	mac, machine, name, token string
	size                      [2]int64 // of its system and runtime tars
}

var trees = [2]string{store.TreeSystem, store.TreeRuntime}

var nodeToken = regexp.MustCompile(`rollcall\.node=(rcn1\.[A-Za-z0-9_.-]+)`)

// setup makes the image, the overlay, the profile and the nodes, fetches
// each node's trees once (saving them for nginx) and waits until every
// node is booted, so that the rounds see no writes of their own.
func setup(cfg config, nodes []*vsnginx.Node, ng *vsnginx.Server, rng *rand.ChaCha8) ([]simNode, []byte, error) {
	n1 := nodes[0]
	for _, s := range []struct {
		path string
		body any
	}{
		{"/api/v1/fabrics", wire.FabricRequest{Name: "bench"}},
		{"/api/v1/vlans", map[string]any{"fabric": "bench", "vid": 0}},
		{"/api/v1/subnets", map[string]any{"cidr": "10.100.0.0/16", "fabric": "bench", "vid": 0, "purpose": "provisioning", "gateway": "10.100.0.1", "domain": "bench.example"}},
		{"/api/v1/ranges", wire.RangeRequest{Subnet: "10.100.0.0/16", Kind: "static", First: "10.100.1.1", Last: "10.100.255.254"}},
	} {
		if err := n1.Do("POST", s.path, jsonBody(s.body), nil); err != nil {
			return nil, nil, err
		}
	}

	logf("image compute: kernel, initrd, squashfs of %d MiB", cfg.sqSize>>20)
	kernel, initrd, squashfs := make([]byte, 1<<20), make([]byte, 4<<20), make([]byte, max(cfg.sqSize, 4096))
	rng.Read(kernel)
	rng.Read(initrd)
	rng.Read(squashfs)
	files, err := n1.ImportImage("compute", vsnginx.ImageFile{Name: "kernel", Data: kernel}, vsnginx.ImageFile{Name: "initrd", Data: initrd}, vsnginx.ImageFile{Name: "squashfs", Data: squashfs})
	if err != nil {
		return nil, nil, fmt.Errorf("image: %w", err)
	}

	example, err := overlay.Example("compute")
	if err != nil {
		return nil, nil, err
	}
	var ov wire.OverlayRequest
	for _, f := range example {
		ov.Files = append(ov.Files, wire.OverlayFile{Path: f.Path, Mode: f.Mode, Content: f.Content})
	}
	if err := n1.Do("PUT", "/api/v1/overlays/compute", jsonBody(ov), nil); err != nil {
		return nil, nil, fmt.Errorf("overlay: %w", err)
	}
	if err := n1.Do("PUT", "/api/v1/cluster/vars", jsonBody(wire.ClusterVars{Vars: clusterVars(-1)}), nil); err != nil {
		return nil, nil, err
	}
	width := max(4, len(strconv.Itoa(cfg.nodes)))
	if err := n1.Do("POST", "/api/v1/profiles/compute", jsonBody(wire.ProfileRequest{Image: "compute", Overlays: []string{"compute"},
		NameFormat: fmt.Sprintf("cn%%0%dd", width), NameFirst: 1, NameLast: cfg.nodes, Subnets: []string{"10.100.0.0/16"}}), nil); err != nil {
		return nil, nil, fmt.Errorf("profile: %w", err)
	}

	sim := make([]simNode, cfg.nodes)
	t0 := time.Now()
	logf("commissioning %d machines (lab/fleet seed %d), %d clients over the three nodes", cfg.nodes, cfg.seed, cfg.setupClients)
	if err := parallel(cfg.nodes, cfg.setupClients, func(i int) error {
		n := nodes[i%3]
		rep := fleet.Generate(cfg.seed, i)
		var tok struct {
			Token string `json:"token"`
		}
		if err := n.Do("POST", "/api/v1/boot-tokens", jsonBody(wire.BootTokenRequest{MAC: rep.BootMAC}), &tok); err != nil {
			return fmt.Errorf("boot token: %w", err)
		}
		var cr wire.CommissionReply
		if err := n.DoWith("POST", "/api/v1/commission", "X-Rollcall-Token", tok.Token, jsonBody(rep), &cr); err != nil {
			return fmt.Errorf("commission: %w", err)
		}
		sim[i].mac, sim[i].machine = rep.BootMAC, cr.ID
		return nil
	}); err != nil {
		return nil, nil, err
	}
	logf("commissioned in %s; assigning them to profile compute", time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	if err := parallel(cfg.nodes, cfg.setupClients, func(i int) error {
		var ar wire.AssignResult
		if err := nodes[i%3].Do("POST", "/api/v1/machines/"+sim[i].machine+"/assign", jsonBody(wire.AssignRequest{Profile: "compute"}), &ar); err != nil {
			return fmt.Errorf("assign: %w", err)
		}
		sim[i].name = ar.Node.Name
		return nil
	}); err != nil {
		return nil, nil, err
	}
	logf("assigned in %s; reading the boot scripts and fetching each node's trees once", time.Since(t0).Round(time.Millisecond))

	t0 = time.Now()
	if err := parallel(cfg.nodes, cfg.setupClients, func(i int) error {
		n := nodes[i%3]
		// A node that has not applied the assign yet answers another
		// script: ask again.
		for deadline := time.Now().Add(30 * time.Second); sim[i].token == ""; time.Sleep(100 * time.Millisecond) {
			var script []byte
			if err := n.DoWith("GET", "/boot/ipxe?mac="+sim[i].mac, "", "", nil, &script); err != nil {
				return err
			}
			if m := nodeToken.FindSubmatch(script); m != nil {
				sim[i].token = string(m[1])
			} else if time.Now().After(deadline) {
				return fmt.Errorf("%s's boot script has no node token:\n%s", sim[i].mac, script)
			}
		}
		for t, tree := range trees {
			var b []byte
			if err := n.DoWith("GET", "/api/v1/stateless/self/overlay/"+tree, "X-Rollcall-Node", sim[i].token, nil, &b); err != nil {
				return err
			}
			if tree == store.TreeSystem {
				if got := tarFile(b, "etc/hostname"); got != sim[i].name+"\n" {
					return fmt.Errorf("node %s's system tree has hostname %q", sim[i].name, got)
				}
			}
			sim[i].size[t] = int64(len(b))
			if err := ng.Put(nginxPath(sim[i], tree), b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	logf("trees fetched in %s: %d + %d bytes for node %s", time.Since(t0).Round(time.Millisecond), sim[0].size[0], sim[0].size[1], sim[0].name)

	// The first fetches mark the nodes booted (written every two seconds,
	// batched); the joined nodes copy the image's blobs from the first.
	logf("waiting for every node to be booted and every server to hold the image")
	for _, n := range nodes {
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
			var list wire.StatelessNodeList
			if err := n.Do("GET", "/api/v1/stateless/nodes", nil, &list); err != nil {
				return nil, nil, err
			}
			booted := 0
			for _, s := range list.Nodes {
				if !s.Booted.IsZero() {
					booted++
				}
			}
			have := 0
			for _, f := range files {
				if st, err := os.Stat(n.BlobPath(f)); err == nil && st.Size() == f.Size {
					have++
				}
			}
			if booted == cfg.nodes && have == len(files) {
				break
			}
			if time.Now().After(deadline) {
				return nil, nil, fmt.Errorf("%s: %d of %d nodes booted, %d of %d image files", n.Name, booted, cfg.nodes, have, len(files))
			}
		}
	}
	return sim, squashfs, nil
}

// clusterVars are the cluster's variables of round rep: bench_round is
// read by no template, but the change is one every tree's cache key holds.
func clusterVars(rep int) map[string]string {
	return map[string]string{"slurm_controller": "head1", "cluster_name": "bench", "bench_round": strconv.Itoa(rep)}
}

func nginxPath(n simNode, tree string) string { return "/stateless/" + n.machine + "/" + tree }

// tarFile is the content of name in a tar ("" if it is not there).
func tarFile(b []byte, name string) string {
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err != nil {
			return ""
		}
		if h.Name == name {
			c, _ := io.ReadAll(tr)
			return string(c)
		}
	}
}

// change makes every node's trees stale on every server: a new cluster
// variable, waited for on each.
func change(nodes []*vsnginx.Node, rep int) error {
	var cv wire.ClusterVars
	if err := nodes[0].Do("PUT", "/api/v1/cluster/vars", jsonBody(wire.ClusterVars{Vars: clusterVars(rep)}), &cv); err != nil {
		return err
	}
	for _, n := range nodes {
		if err := n.Do("GET", "/api/v1/cluster/vars?min_index="+strconv.FormatUint(cv.Index, 10), nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// renders is one round: every node fetches its system tree, then its
// runtime tree, from url(k, tree), all at once over conns clients.
func renders(cfg config, sim []simNode, cpu func() float64, url func(k int, tree string) string) vsnginx.Result {
	n := len(sim)
	return vsnginx.Load{
		Conns: cfg.conns, Requests: 2 * n, Cap: cfg.capDur, CPU: cpu,
		Request: func(ctx context.Context, i int) *http.Request {
			k := i % n
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url(k, trees[i/n]), nil)
			req.Header.Set("X-Rollcall-Node", sim[k].token)
			return req
		},
		Size: func(i int) int64 { return sim[i%n].size[i/n] },
	}.Run()
}

func run(cfg config) error {
	began := time.Now()
	dir, err := os.MkdirTemp("", "rollcall-bench-stateless")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rng := rand.NewChaCha8([32]byte{20})

	logf("starting three nodes and nginx in %s", dir)
	nodes, err := startCluster(dir, cfg.cpuProfile)
	defer func() {
		for _, n := range nodes {
			n.Stop()
		}
	}()
	if err != nil {
		return err
	}
	ng, err := vsnginx.StartNginx(dir)
	if err != nil {
		return err
	}
	defer ng.Stop()
	sim, squashfs, err := setup(cfg, nodes, ng, rng)
	if err != nil {
		return err
	}
	clusterCPU := func() float64 {
		var t float64
		for _, n := range nodes {
			t += n.CPU()
		}
		return t
	}

	type series map[string][]vsnginx.Result
	cold, warm, sq := series{}, series{}, series{}
	logRun := func(server, what string, rep int, r vsnginx.Result) {
		msg := ""
		if r.FirstErr != "" {
			msg = " first failure: " + r.FirstErr
		}
		fmt.Fprintf(os.Stderr, "%-8s %-8s rep %d: %6.0f req/s, %.2f GB/s, p99 %s, %d ok, %d failed, %v, cpu %.1fs%s\n", server, what, rep,
			r.RPS(), r.GBps(), r.Percentile(0.99).Round(100*time.Microsecond), r.Completed, r.Failed, r.Elapsed.Round(time.Millisecond), r.CPU, msg)
	}
	ours := func(rep int) vsnginx.Result {
		return renders(cfg, sim, clusterCPU, func(k int, tree string) string {
			return nodes[(k+rep)%3].Base + "/api/v1/stateless/self/overlay/" + tree
		})
	}
	theirs := func() vsnginx.Result {
		return renders(cfg, sim, ng.CPU, func(k int, tree string) string { return ng.Base + nginxPath(sim[k], tree) })
	}
	for _, n := range nodes {
		if cfg.cpuProfile != "" {
			n.RestartProfile()
		}
	}
	logf("render rounds: %d nodes x 2 trees, %d clients; %d cold rounds, %d warm after each", cfg.nodes, cfg.conns, cfg.reps, cfg.warm)
	for rep := range cfg.reps {
		profileCold := cfg.cpuProfile != "" && cfg.profileCold && rep == cfg.reps-1
		signal := func(f func(*vsnginx.Node)) {
			for _, n := range nodes {
				f(n)
			}
			time.Sleep(200 * time.Millisecond) // the nodes see their signals
		}
		if profileCold {
			signal((*vsnginx.Node).RestartProfile)
		}
		if err := change(nodes, rep); err != nil {
			return fmt.Errorf("change: %w", err)
		}
		r := ours(rep)
		if profileCold {
			signal((*vsnginx.Node).StopProfile)
		}
		logRun("rollcall", "cold", rep, r)
		cold["rollcall"] = append(cold["rollcall"], r)
		for w := range cfg.warm {
			for j := range 2 {
				if (j+rep*cfg.warm+w)%2 == 0 {
					r := ours(rep)
					logRun("rollcall", "warm", rep, r)
					warm["rollcall"] = append(warm["rollcall"], r)
				} else {
					r := theirs()
					logRun("nginx", "static", rep, r)
					warm["nginx"] = append(warm["nginx"], r)
				}
			}
		}
	}
	cold["nginx"] = warm["nginx"]
	if cfg.cpuProfile != "" {
		for _, n := range nodes {
			n.StopProfile()
		}
		logf("CPU profiles of the render rounds: %s.n1, .n2, .n3", cfg.cpuProfile)
	}

	if cfg.sqSize > 0 {
		if err := ng.Put("/images/compute/squashfs", squashfs); err != nil {
			return err
		}
		servers := []*vsnginx.Server{&nodes[0].Server, ng}
		for _, s := range servers {
			if err := vsnginx.Verify(s.Base+"/images/compute/squashfs", squashfs); err != nil {
				return fmt.Errorf("%s: %w", s.Name, err)
			}
		}
		logf("squashfs runs: %d clients x %d MiB from %s", cfg.sqConns, cfg.sqSize>>20, nodes[0].Name)
		for rep := range cfg.sqReps {
			for j := range 2 {
				s := servers[(j+rep)%2]
				r := vsnginx.Load{Conns: cfg.sqConns, Requests: cfg.sqConns, Cap: cfg.capDur, Request: vsnginx.Get(s.Base + "/images/compute/squashfs"),
					Size: vsnginx.Fixed(int64(cfg.sqSize)), CPU: s.CPU}.Run()
				name := map[bool]string{true: "nginx", false: "rollcall"}[s == ng]
				logRun(name, "squashfs", rep, r)
				sq[name] = append(sq[name], r)
			}
		}
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "test\tserver\truns\trate\tp99\tcompleted\tfailed\tserver CPU\tvs nginx\ttarget\t")
	var short []string
	row := func(test string, s series, byRate bool, target float64) {
		ref := vsnginx.Summarize(s["nginx"])
		if ref.Runs == 0 {
			return
		}
		for _, name := range []string{"rollcall", "nginx"} {
			r := vsnginx.Summarize(s[name])
			rate, ratio := fmt.Sprintf("%.0f req/s", r.RPS), r.RPS/ref.RPS
			cpu := fmt.Sprintf("%.0f µs/req", float64(r.CPUPerReq)/float64(time.Microsecond))
			if !byRate {
				rate, ratio, cpu = fmt.Sprintf("%.2f GB/s", r.GBps), r.GBps/ref.GBps, fmt.Sprintf("%.2f s/GiB", r.CPUPerGiB)
			}
			goal := ""
			if name == "rollcall" {
				goal = fmt.Sprintf("≥ %.1f", target)
				if ratio < target || r.Failed > 0 {
					short = append(short, test)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\t%.2f\t%s\t\n", test, name, r.Runs, rate, r.P99.Round(100*time.Microsecond), r.Completed, r.Failed, cpu, ratio, goal)
		}
	}
	row(fmt.Sprintf("renders, cold: %d nodes x 2 trees", cfg.nodes), cold, true, 0.5)
	row(fmt.Sprintf("renders, warm: %d nodes x 2 trees", cfg.nodes), warm, true, 0.5)
	row(fmt.Sprintf("squashfs %d MiB, %d clients", cfg.sqSize>>20, cfg.sqConns), sq, false, 0.9)
	tw.Flush()
	fmt.Printf("(rates and p99: median over runs (mean of the middle two for an even count); GB = 10^9 bytes; rollcall's renders: three nodes,\n"+
		" its CPU theirs together; nginx's renders: the saved tars, its runs in the warm rounds, the cold row compared with the same;\n"+
		" trees of node %s: %d + %d bytes; whole run %v)\n", sim[0].name, sim[0].size[0], sim[0].size[1], time.Since(began).Round(time.Second))
	if len(short) > 0 {
		return errors.New("below target (or failures): " + strings.Join(short, "; "))
	}
	return nil
}
