// Package nodetest starts real appliance nodes for tests, one or a cluster
// of several on loopback ports under temporary directories, and calls their
// API as a client would: with the admin token, the shared agent token or a
// boot token, a JSON or raw body, and, where a client would, a retry while
// the cluster has no leader. It is the one helper that starts a node and
// calls its API, for the API's tests (httpapi), the node's (appliance), the
// web UI's and the lab's.
package nodetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/boottoken"
	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm/cluster"
)

// Options change what Start and StartCluster start.
type Options struct {
	// Config is DATA/rollcall.json, written before the node starts; ""
	// for none.
	Config string
	// Log receives the node's log at debug level; nil discards it.
	Log io.Writer
	// Name is the node's name: default t1 for Start, node1…nodeN for a
	// cluster.
	Name string
	// RaftTune tunes Raft. Nil: a single node (Start) elects itself after
	// 100 ms; a cluster's nodes keep raftfsm's defaults.
	RaftTune func(*cluster.Config)
	// HTTPS starts the node's HTTPS listener on a free loopback port.
	HTTPS bool
	// Node has the last word on the node's options (TFTPAddr, HTTPSAddr,
	// RedfishDetect, a DataDir the test prepared, a Logger of its own…),
	// after nodetest filled in its own.
	Node func(*node.Options)
}

// Node is a started node with the tokens a client of it uses. It is closed
// when the test ends.
type Node struct {
	*node.Node
	Dir   string // the data directory
	Admin string // the cluster's admin token (DATA/admin.token of the first node)
	Agent string // the cluster's shared agent token

	joined bool // started with a join code
}

// fastElection makes a single voter elect itself after one short timeout.
func fastElection(c *cluster.Config) {
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
}

// Start starts a single-node cluster.
func Start(t testing.TB) *Node {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith starts a single-node cluster with the options given.
func StartWith(t testing.TB, o Options) *Node {
	t.Helper()
	if o.Name == "" {
		o.Name = "t1"
	}
	if o.RaftTune == nil {
		o.RaftTune = fastElection
	}
	n := start(t, o, "")
	if !n.joined { // a node that joined holds no token files: its cluster's first node does
		n.Admin, n.Agent = readToken(t, n.Dir, "admin.token"), readToken(t, n.Dir, "agent.token")
	}
	settle(n)
	return n
}

// StartCluster starts count nodes: the first bootstraps, each other joins
// with a join code from the first, and each is waited for until it knows
// the leader and has caught up with the first before the next starts.
func StartCluster(t testing.TB, count int, o Options) []*Node {
	t.Helper()
	// Version reports every second while something is not open (a real
	// cluster renews them every 20 s): the gate opens within seconds of
	// the last join instead of a minute. A test's own RaftTune has the
	// last word.
	tune := o.RaftTune
	o.RaftTune = func(c *cluster.Config) {
		c.VersionReportEvery = time.Second
		if tune != nil {
			tune(c)
		}
	}
	var nodes []*Node
	for i := range count {
		oi := o
		if oi.Name == "" {
			oi.Name = fmt.Sprintf("node%d", i+1)
		} else if count > 1 {
			oi.Name = fmt.Sprintf("%s%d", o.Name, i+1)
		}
		join := ""
		if i > 0 {
			var jc wire.JoinCodeView
			if code := nodes[0].Call(t, nodes[0].Admin, http.MethodPost, "/api/v1/cluster/join-codes", `{"ttl":"10m"}`, &jc); code != http.StatusCreated {
				t.Fatalf("join code: %d", code)
			}
			join = jc.Code
		}
		n := start(t, oi, join)
		if i == 0 {
			n.Admin, n.Agent = readToken(t, n.Dir, "admin.token"), readToken(t, n.Dir, "agent.token")
		} else {
			n.Admin, n.Agent = nodes[0].Admin, nodes[0].Agent
		}
		nodes = append(nodes, n)
		first := nodes[0]
		WaitFor(t, "the new member to catch up", func() bool {
			id, _ := n.Cluster().Leader()
			return id != "" && n.Cluster().FSM().AppliedIndex() >= first.Cluster().FSM().AppliedIndex()
		})
	}
	settle(nodes...)
	return nodes
}

// settle waits (up to 15 s, without failing) until the nodes' own
// background writes are done: the version gate has opened what they read,
// and each has recorded its node certificate (and its HTTPS one) by
// serial. Tests that check a refused request takes no Raft entry would
// otherwise see those land in the middle.
func settle(nodes ...*Node) {
	deadline := time.Now().Add(15 * time.Second)
	for _, n := range nodes {
		for time.Now().Before(deadline) && !n.settled() {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func (n *Node) settled() bool {
	if len(n.Cluster().FSM().Pending()) > 0 {
		return false
	}
	if n.Admin == "" {
		return true // a node joined on its own: its tokens are its first node's
	}
	r, err := n.Send(context.Background(), http.MethodGet, "/api/v1/ca/certificates?kind=node", nil, Bearer(n.Admin)...)
	if err == nil && (r.Status == http.StatusForbidden || r.Status == http.StatusUnauthorized) {
		return true // the test's configuration keeps the admin API from this client
	}
	if err != nil || r.Status != http.StatusOK {
		return false
	}
	var l wire.CertList
	if json.Unmarshal(r.Body, &l) != nil {
		return false
	}
	recorded := map[string]bool{}
	for _, c := range l.Certificates {
		recorded[c.Serial] = true
	}
	files := []string{"node.pem"}
	if n.HTTPSAddr() != "" {
		files = append(files, "https.pem")
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(n.Dir, "tls", f))
		if err != nil {
			return false
		}
		c, err := pki.ParseCertPEM(b)
		if err != nil {
			return false
		}
		if !recorded[pki.SerialHex(c)] {
			return false
		}
	}
	return true
}

func start(t testing.TB, o Options, join string) *Node {
	t.Helper()
	h := slog.DiscardHandler
	if o.Log != nil {
		h = slog.NewTextHandler(o.Log, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	opts := node.Options{
		DataDir: t.TempDir(), Name: o.Name, HTTPAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", Join: join,
		Logger: slog.New(h), RaftTune: o.RaftTune,
	}
	if o.HTTPS {
		opts.HTTPSAddr = "127.0.0.1:0"
	}
	if o.Node != nil {
		o.Node(&opts)
	}
	if o.Config != "" {
		if err := os.WriteFile(filepath.Join(opts.DataDir, "rollcall.json"), []byte(o.Config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n, err := node.Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("start node %s: %v", o.Name, err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close node %s: %v", o.Name, err)
		}
	})
	return &Node{Node: n, Dir: opts.DataDir, joined: opts.Join != ""}
}

func readToken(t testing.TB, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// WaitFor polls cond every 50 ms and fails the test after 30 s.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// LogBuffer is a log destination (Options.Log) the node's goroutines may
// share while the test reads it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ---- boot tokens

// Key is the cluster's master key, as the node keeps it (DATA/master.key).
func (n *Node) Key(t testing.TB) pki.MasterKey {
	t.Helper()
	k, err := pki.LoadMasterKey(filepath.Join(n.Dir, "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// BootToken is the token a boot script hands mac.
func (n *Node) BootToken(t testing.TB, mac string) string {
	t.Helper()
	return n.MintBootToken(t, mac, time.Now(), boottoken.TTL)
}

// MintBootToken mints a boot token for mac valid from now for ttl (an
// expired one, for a now in the past).
func (n *Node) MintBootToken(t testing.TB, mac string, now time.Time, ttl time.Duration) string {
	t.Helper()
	tok, _, err := boottoken.Mint(n.Key(t), mac, now, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// ---- the client

// Bearer and AgentHeader are header pairs for Do and Send.
func Bearer(tok string) []string      { return []string{"Authorization", "Bearer " + tok} }
func AgentHeader(tok string) []string { return []string{"X-Rollcall-Token", tok} }

// Response is a finished exchange.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// ErrorCode and ErrorMessage read the API's error shape; both are "" when
// the body is not one.
func (r Response) ErrorCode() string    { c, _ := r.apiError(); return c }
func (r Response) ErrorMessage() string { _, m := r.apiError(); return m }

func (r Response) apiError() (code, message string) {
	var e wire.ErrorReply
	json.Unmarshal(r.Body, &e)
	return e.Error.Code, e.Error.Message
}

func (r Response) String() string {
	b := r.Body
	if len(b) > 400 {
		b = append(b[:400:400], "…"...)
	}
	return fmt.Sprintf("%d %s", r.Status, b)
}

// Decode reads the body as JSON into v, failing the test if it cannot.
func (r Response) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r, err)
	}
}

// client keeps up to 32 idle connections per node: tests call a node from
// dozens of goroutines, and with net/http's default of two, every other
// request opened a connection while the server still held the closed
// ones, running into its 64-per-client limit (connlimit) under load.
var client = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
	Proxy: nil, MaxIdleConns: 256, MaxIdleConnsPerHost: 32, IdleConnTimeout: 90 * time.Second,
}}

// Do sends a request to the node. body is nil (none), []byte or string
// (sent as is), or anything else (sent as JSON); header holds name, value
// pairs.
func (n *Node) Do(t testing.TB, method, path string, body any, header ...string) Response {
	t.Helper()
	r, err := n.Send(t.Context(), method, path, body, header...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Send is Do for goroutines other than the test's.
func (n *Node) Send(ctx context.Context, method, path string, body any, header ...string) (Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return Response{}, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+n.HTTPAddr()+path, rd)
	if err != nil {
		return Response{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: out}, nil
}

// Call makes an API call with an admin token ("" for none) and decodes a
// 2xx JSON answer into out (a *[]byte takes the body whatever the status).
// Like any client, it retries (for a while) a call refused with "no leader;
// retry", which is always safe: nothing was applied.
func (n *Node) Call(t testing.TB, token, method, path, body string, out any) int {
	t.Helper()
	var header []string
	if token != "" {
		header = Bearer(token)
	}
	var r Response
	for deadline := time.Now().Add(20 * time.Second); ; {
		r = n.Do(t, method, path, body, header...)
		if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != "no_leader" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out != nil {
		if raw, ok := out.(*[]byte); ok {
			*raw = r.Body
		} else if r.Status/100 == 2 {
			r.Decode(t, out)
		}
	}
	return r.Status
}

// Upload puts one file of an image on the node (PUT
// /api/v1/images/NAME/files/FILE), failing the test unless it is stored.
func (n *Node) Upload(t testing.TB, token, image, file string, data []byte) wire.ImageFile {
	t.Helper()
	r := n.Do(t, http.MethodPut, "/api/v1/images/"+image+"/files/"+file, data, Bearer(token)...)
	if r.Status != http.StatusOK {
		t.Fatalf("upload %s: %s", file, r)
	}
	var f wire.ImageFile
	r.Decode(t, &f)
	return f
}

// ImportImage uploads a kernel and an initrd and records them as image
// name, failing the test unless the image is created.
func (n *Node) ImportImage(t testing.TB, token, name string, kernel, initrd []byte) (wire.ImageFile, wire.ImageFile) {
	t.Helper()
	kf := n.Upload(t, token, name, "kernel", kernel)
	inf := n.Upload(t, token, name, "initrd", initrd)
	r := n.Do(t, http.MethodPost, "/api/v1/images", wire.ImageRequest{Name: name, Files: []wire.ImageFile{kf, inf}}, Bearer(token)...)
	if r.Status != http.StatusCreated {
		t.Fatalf("post image %s: %s", name, r)
	}
	return kf, inf
}
