// Package appliance composes a Rollcall node: the store, the Raft cluster,
// the cluster PKI, the services and the REST API (appliance/httpapi, built
// from the node's parts). It is the only package that knows how the
// services fit together. The command line (appliance/cli) and the console
// (appliance/console) are clients of its API; the command line starts a node
// through Start and reads what DataDir holds for clients (datadir.go), never
// the other way round.
package node

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/rollcall/rollcall/appliance/bootfiles"
	"github.com/rollcall/rollcall/appliance/boottoken"
	"github.com/rollcall/rollcall/appliance/httpapi"
	"github.com/rollcall/rollcall/appliance/oscatalog"
	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/dhcp"
	"github.com/rollcall/rollcall/power"
	"github.com/rollcall/rollcall/power/builtin"
	"github.com/rollcall/rollcall/power/jobs"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/cluster"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/pgexport"
	"github.com/rollcall/rollcall/store/tagrule"
	"github.com/rollcall/rollcall/tftp"
)

// Options are what `rollcall serve` takes.
type Options struct {
	DataDir       string // default ./var
	Name          string // default the host name
	HTTPAddr      string // API, default 127.0.0.1:8080
	RaftAddr      string // cluster port, default 127.0.0.1:8300
	RaftAdvertise string // address other nodes dial; default RaftAddr
	Join          string // a join code, for the first start of a new member
	HTTPSAddr     string // HTTPS API with a certificate from the cluster CA; "" for none
	TFTPAddr      string // TFTP for boot loaders: "" serves port 69 wherever this node serves DHCP, "off" none, else this address
	ConfigFile    string // default DATA/rollcall.json (optional there)
	// RedfishDetect asks each commissioned machine's IPMI BMC whether it
	// speaks Redfish. `rollcall serve` turns it on; in-process nodes (tests,
	// labs) leave it off so they never reach out to BMC addresses they made up.
	RedfishDetect bool
	// OSSyncTimer runs the nightly OS sync (os_sync_interval) on the
	// leader. `rollcall serve` turns it on; in-process nodes leave it off
	// so they never fetch vendor mirrors (a sync an operator asks for
	// still runs).
	OSSyncTimer bool

	Logger *slog.Logger
	// Raft tuning for tests; zero keeps raftfsm's defaults.
	RaftTune func(*cluster.Config)
	// Node certificate timing for tests; zero keeps a year's validity,
	// renewal a month before the end and a check every hour.
	NodeCertTTL, NodeCertRenewAhead, NodeCertCheckEvery time.Duration
}

// Files in the data directory.
const (
	fileState     = "state.db"
	dirRaft       = "raft"
	fileMasterKey = "master.key"
	fileAdmin     = "admin.token"
	fileAgent     = "agent.token"
	fileConfig    = "rollcall.json"
	fileNodeInfo  = "node.json"
	dirTLS        = "tls"
	fileCA        = "ca.pem"
	fileCert      = "node.pem"
	fileKey       = "node-key.pem"
	dirOSWork     = "os-work" // the OS catalog's downloads and conversions in progress
)

// NodeInfo is written to DATA/node.json so that the CLI on the node finds
// its API without flags.
type NodeInfo struct {
	Name     string `json:"name"`
	HTTPAddr string `json:"http_addr"`
	RaftAddr string `json:"raft_addr"`
}

// Node is a running appliance node.
type Node struct {
	opts Options
	// facts is the tag rules' inventory facts, kept warm (tagfacts.go).
	facts   *tagrule.FactsCache
	log     *slog.Logger
	db      *store.DB
	cluster *cluster.Cluster
	key     pki.MasterKey
	// trust is the cluster roots this node holds (more than one during a
	// CA rotation's transition: trust.go).
	trust  atomic.Pointer[pki.Trust]
	reg    *prometheus.Registry
	http   *http.Server
	httpLn net.Listener
	api    http.Handler
	conf   FileConfig

	power        *power.Registry
	export       atomic.Pointer[pgexport.Runner] // nil without postgres_export
	tftp         atomic.Pointer[tftp.Server]
	sup          *supervisor
	dhcpMetrics  *dhcp.Metrics
	dhcpHandoff  *dhcp.Handoff // blocks pass from one DHCP service to the next
	bgOnce       sync.Once
	bg           context.Context
	jobs         *jobs.Runner
	bootTmpl     *bootfiles.Templates
	blobs        *bootfiles.Blobs
	boot         *bootfiles.Server // boot scripts and files, image sync
	bootCounters *bootfiles.Metrics
	apiServer    *httpapi.Server
	os           *oscatalog.Catalog // the OS image catalog's sync and import

	https     *http.Server
	httpsLn   net.Listener
	httpsCert atomic.Pointer[httpsCert]
	peerCert  *pki.PeerCert // the node certificate, renewed in place (certs.go)
	certMu    sync.Mutex    // held by a node certificate renewal
	closing   chan struct{}

	pendingCAKey []byte // sealed CA key between createIdentity and bootstrap
}

func (o *Options) defaults() error {
	if o.DataDir == "" {
		o.DataDir = "var"
	}
	if o.Name == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("node name: %w", err)
		}
		o.Name = h
	}
	if err := store.ValidName(o.Name); err != nil {
		return fmt.Errorf("node name: %w", err)
	}
	if o.HTTPAddr == "" {
		o.HTTPAddr = "127.0.0.1:8080"
	}
	if o.RaftAddr == "" {
		o.RaftAddr = "127.0.0.1:8300"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

func (n *Node) path(parts ...string) string {
	return filepath.Join(append([]string{n.opts.DataDir}, parts...)...)
}

// Start brings a node up: it opens the store, obtains the cluster identity
// (bootstrapping a new cluster or joining one with a code on first start),
// starts Raft and serves the API. It returns once the API listens.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	n := &Node{opts: opts, log: opts.Logger.With("node", opts.Name), closing: make(chan struct{}), blobs: bootfiles.OpenBlobs(opts.DataDir),
		power: builtin.NewRegistry()}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	confPath, optional := opts.ConfigFile, false
	if confPath == "" {
		confPath, optional = n.path(fileConfig), true
	}
	conf, err := LoadFileConfig(confPath, optional)
	if err != nil {
		return nil, err
	}
	n.conf = conf
	if n.bootTmpl, err = bootfiles.LoadTemplates(opts.DataDir); err != nil {
		return nil, err
	}
	db, err := store.Open(n.path(fileState))
	if err != nil {
		return nil, err
	}
	n.db = db
	ok := false
	defer func() {
		if !ok {
			n.Close()
		}
	}()

	hasState, err := cluster.HasState(n.path(dirRaft))
	if err != nil {
		return nil, fmt.Errorf("read raft state: %w", err)
	}
	_, statErr := os.Stat(n.path(dirTLS, fileCert))
	haveCert := statErr == nil

	var mode string
	var joinCode pki.JoinCode
	switch {
	case haveCert && opts.Join != "":
		return nil, errors.New("this data directory already belongs to a cluster: -join is only for a node's first start (use an empty -data directory)")
	case haveCert:
		mode = "restart"
	case hasState:
		return nil, fmt.Errorf("data directory %s has Raft state but no node certificate (%s): refusing to guess; restore the tls directory or start from an empty directory", opts.DataDir, n.path(dirTLS, fileCert))
	case opts.Join != "":
		mode = "join"
		joinCode, err = pki.ParseJoinCode(opts.Join)
		if err != nil {
			return nil, err
		}
		if err := n.join(ctx, joinCode); err != nil {
			return nil, err
		}
	default:
		mode = "bootstrap"
		if err := n.createIdentity(); err != nil {
			return nil, err
		}
	}
	if err := n.loadIdentity(); err != nil {
		return nil, err
	}
	if err := n.startCluster(); err != nil {
		return nil, err
	}
	// Before the API serves: its power handlers queue jobs.
	if n.jobs, err = jobs.New(jobs.Config{Node: opts.Name, Store: n.db, Cluster: n.cluster, Drivers: n.power, OpenPassword: func(b store.BMC) (string, error) { return httpapi.OpenBMCPassword(n.key, b) }}); err != nil {
		return nil, err
	}
	n.sup = newSupervisor(n.background(), n.log)
	n.cluster.SetParts(n.sup.status)
	n.dhcpMetrics, n.dhcpHandoff = dhcp.NewMetrics(), &dhcp.Handoff{}
	n.reg = prometheus.NewRegistry()
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	n.reg.MustRegister(n.cluster.Metrics.Collectors()...)
	n.bootCounters = bootfiles.NewMetrics()
	n.reg.MustRegister(n.bootCounters.Collectors()...)
	n.reg.MustRegister(n.dhcpMetrics.Collectors()...)
	if n.boot, err = n.newBootFiles(); err != nil {
		return nil, err
	}
	if n.os, err = oscatalog.New(oscatalog.Config{
		DB: n.db, Cluster: n.cluster, Blobs: n.blobs, Node: opts.Name, WorkDir: n.path(dirOSWork),
		Sources: n.conf.osSources(), Keep: n.conf.OSKeep, Interval: n.osSyncInterval(),
		WakeSync: n.boot.WakeSync, Log: n.log.With("component", "oscatalog"),
	}); err != nil {
		return nil, err
	}
	n.facts = &tagrule.FactsCache{}
	n.sup.run("tag-facts", n.warmTagFacts)
	if err := n.serveHTTP(); err != nil {
		return nil, err
	}
	if err := writeJSONFile(n.path(fileNodeInfo), NodeInfo{Name: opts.Name, HTTPAddr: n.HTTPAddr(), RaftAddr: n.cluster.Advertise()}, 0o644); err != nil {
		return nil, err
	}

	switch mode {
	case "bootstrap":
		if err := n.bootstrap(ctx); err != nil {
			return nil, err
		}
	case "join":
		if err := n.announce(ctx, joinCode.Addr); err != nil {
			return nil, err
		}
	case "restart":
		go n.refreshNodeRecord(ctx)
	}
	if opts.HTTPSAddr != "" {
		if err := n.serveHTTPS(ctx); err != nil {
			return nil, err
		}
	}
	if t := opts.TFTPAddr; t != "" && t != tftpOff {
		// An address named on the command line must bind now: a mistake
		// there is the operator's to see at once.
		srv, errc, err := n.startTFTP(n.background(), []string{t})
		if err != nil {
			return nil, err
		}
		n.sup.run("tftp", n.tftpPart([]string{t}, srv, errc))
	}
	n.sup.run("node-cert", n.keepNodeCert)
	n.sup.run("cert-records", n.keepCertRecords)
	n.sup.run("ca-trust", n.keepTrust)
	n.sup.run("image-sync", n.boot.Run)
	n.sup.run("os-sync", n.os.Run)
	n.sup.run("bmc-jobs", n.jobs.Run)
	n.sup.run("deploy-timeouts", n.runDeployTimeouts)
	n.sup.run("dhcp", n.runDHCP)
	if n.conf.PostgresExport != nil {
		r, err := pgexport.NewRunner(pgexport.RunnerConfig{Settings: *n.conf.PostgresExport, Node: opts.Name, Store: n.db, IsLeader: n.cluster.IsLeader})
		if err != nil {
			return nil, fmt.Errorf("postgres_export: %w", err)
		}
		n.export.Store(r)
		n.sup.run("export-mirror", r.Run)
	}
	n.log.Info("node started", "mode", mode, "api", "http://"+n.HTTPAddr(), "cluster", n.cluster.Advertise())
	ok = true
	return n, nil
}

// createIdentity makes a new cluster's CA, master key and this node's
// certificate. The CA key goes into the store sealed (at bootstrap) so that
// any future leader can sign joins; on disk it exists only in memory here.
func (n *Node) createIdentity() error {
	now := time.Now()
	ca, err := pki.NewCA("Rollcall cluster CA", now)
	if err != nil {
		return err
	}
	key, err := pki.NewMasterKey()
	if err != nil {
		return err
	}
	cert, certKey, err := ca.IssueNode(n.opts.Name, n.hosts(), now, n.nodeCertTTL())
	if err != nil {
		return err
	}
	caKeyPEM, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	sealed, err := key.Seal(caKeyPEM, []byte(pki.CAKeyAAD))
	if err != nil {
		return err
	}
	n.pendingCAKey = sealed
	if err := os.MkdirAll(n.path(dirTLS), 0o700); err != nil {
		return err
	}
	if err := key.Save(n.path(fileMasterKey)); err != nil {
		return err
	}
	return writeTLSFiles(n.path(dirTLS), ca.CertPEM, cert, certKey)
}

const (
	nodeCertTTL   = 365 * 24 * time.Hour
	aadAdminToken = "cluster/admin-token"
	aadAgentToken = "cluster/agent-token"
)

func writeTLSFiles(dir string, caPEM, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{fileCA, caPEM, 0o644}, {fileKey, keyPEM, 0o600}, {fileCert, certPEM, 0o644}} {
		if err := writeFileAtomic(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// hosts are the names and addresses this node's certificate carries.
func (n *Node) hosts() []string {
	hosts := []string{n.opts.Name}
	for _, a := range []string{n.opts.RaftAddr, n.opts.RaftAdvertise, n.opts.HTTPAddr} {
		if h, _, err := net.SplitHostPort(a); err == nil && h != "" {
			hosts = append(hosts, h)
		}
	}
	return dedupe(hosts)
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func (n *Node) loadIdentity() error {
	key, err := pki.LoadMasterKey(n.path(fileMasterKey))
	if err != nil {
		return fmt.Errorf("load master key: %w", err)
	}
	n.key = key
	caPEM, err := os.ReadFile(n.path(dirTLS, fileCA))
	if err != nil {
		return fmt.Errorf("load cluster CA: %w", err)
	}
	crossPEM, err := os.ReadFile(n.path(dirTLS, fileCACross))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("load cluster CA cross certificates: %w", err)
	}
	t, err := pki.ParseTrust(caPEM, crossPEM)
	if err != nil {
		return fmt.Errorf("load cluster CA: %w", err)
	}
	n.trust.Store(t)
	return nil
}

func (n *Node) startCluster() error {
	pc, err := n.loadPeerCert()
	if err != nil {
		return err
	}
	n.peerCert = pc
	pc.RefuseWith(func(leaf *x509.Certificate) error { return n.peerCheck(leaf.Subject.CommonName, leaf) })
	tlsCfg := pc.Config()
	cfg := cluster.Config{
		Name:       n.opts.Name,
		Dir:        n.path(dirRaft),
		Bind:       n.opts.RaftAddr,
		Advertise:  n.opts.RaftAdvertise,
		TLS:        tlsCfg,
		VerifyPeer: pki.PeerVerified,
		PeerCheck:  n.peerCheck,
		Calls:      n.calls(),
		Logger:     n.log.With("component", "cluster"),
	}
	if n.opts.RaftTune != nil {
		n.opts.RaftTune(&cfg)
	}
	c, err := cluster.Open(cfg, n.db)
	if err != nil {
		return err
	}
	n.cluster = c
	return nil
}

// newBootFiles builds the boot-file side from the node's configuration,
// store and cluster.
func (n *Node) newBootFiles() (*bootfiles.Server, error) {
	return bootfiles.New(bootfiles.Config{
		DB: n.db, Cluster: n.cluster, Node: n.opts.Name, Blobs: n.blobs, Templates: n.bootTmpl, Metrics: n.bootCounters,
		CommissionImage: n.conf.CommissionImage, CommissionAppend: n.conf.CommissionAppend,
		IPXEDir: n.conf.IPXEDir, PXELinuxDir: n.conf.PXELinuxDir, SyslinuxDir: n.conf.SyslinuxDir,
		HTTPAddr: n.HTTPAddr, HTTPSAddr: n.HTTPSAddr, CAFingerprint: n.caFingerprint,
		BootToken: func(mac string) (string, error) {
			tok, _, err := boottoken.Mint(n.key, mac, time.Now(), boottoken.TTL)
			return tok, err
		},
		JobToken: func(job string) (string, error) { return boottoken.MintJob(n.key, job) },
		NodeToken: func(machine string, generation uint64) (string, error) {
			return boottoken.MintNode(n.key, machine, generation)
		},
		Diverged: func() error {
			if d := n.cluster.Diverged(); d != nil {
				return errors.New(d.String())
			}
			return nil
		},
		Log: n.log,
	})
}

// peerCheck refuses a peer that may not act as a node: one removed from
// the cluster, whatever certificate it still holds; a certificate whose
// serial was revoked (cluster remove revokes the node's) or that the
// cluster recorded for something else (an administrator, another
// service); an administrator's certificate by its name. It runs at every
// handshake on the cluster port, as server and client (pki.PeerCert), on
// every node call, and every few seconds on open Raft connections.
func (n *Node) peerCheck(cn string, leaf *x509.Certificate) error {
	if strings.HasPrefix(cn, pki.AdminPrefix) {
		return fmt.Errorf("%q is an administrator's certificate, not a node's", cn)
	}
	var refusal string
	removed := false
	n.db.View(func(tx *store.Tx) error {
		removed = tx.NodeRemoved(cn)
		if leaf != nil {
			refusal = tx.CertRefusal(pki.SerialHex(leaf), store.CertNode, cn)
		}
		return nil
	})
	if removed {
		return fmt.Errorf("node %q was removed from the cluster", cn)
	}
	if refusal != "" {
		return errors.New(refusal)
	}
	return nil
}

// bootstrap makes this node a one-node cluster and records the cluster
// identity and the first admin token.
func (n *Node) bootstrap(ctx context.Context) error {
	if err := n.cluster.Bootstrap(); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for !n.cluster.IsLeader() {
		select {
		case <-wctx.Done():
			return errors.New("bootstrap: this node did not become leader within 30s")
		case <-time.After(10 * time.Millisecond):
		}
	}
	token, tokenHash, sealedToken, err := n.newToken(aadAdminToken)
	if err != nil {
		return err
	}
	agentToken, agentHash, sealedAgent, err := n.newToken(aadAgentToken)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	id := store.ClusterIdentity{
		CACertPEM: string(n.trust.Load().CurrentPEM()), SealedCAKey: n.pendingCAKey,
		AdminTokenHash: tokenHash, SealedAdminToken: sealedToken,
		AgentTokenHash: agentHash, SealedAgentToken: sealedAgent, Created: now,
	}
	n.pendingCAKey = nil
	// The token files first: once the identity is in the store the node
	// reports healthy, and a client on the node then finds its token.
	if err := writeFileAtomic(n.path(fileAdmin), []byte(token+"\n"), 0o600); err != nil {
		return fmt.Errorf("bootstrap: write admin token: %w", err)
	}
	if err := writeFileAtomic(n.path(fileAgent), []byte(agentToken+"\n"), 0o600); err != nil {
		return fmt.Errorf("bootstrap: write agent token: %w", err)
	}
	if err := n.applyUntil(wctx, &raftfsm.ClusterInit{Identity: raftfsm.ClusterIdentityBody(id)}, func(tx *store.Tx) bool {
		_, err := tx.Identity()
		return err == nil
	}); err != nil {
		return fmt.Errorf("bootstrap: record cluster identity: %w", err)
	}
	return n.putNodeRecord(wctx)
}

// applyUntil applies a command, and when the outcome is unknown or no leader
// answered (a loaded machine at start), retries until done(tx) says the
// state has it or ctx ends. A business error is final.
func (n *Node) applyUntil(ctx context.Context, cmd raftfsm.Command, done func(*store.Tx) bool) error {
	for {
		_, err := n.cluster.Apply(ctx, cmd)
		if err == nil {
			return nil
		}
		if !errors.Is(err, cluster.ErrUnknownOutcome) && !errors.Is(err, cluster.ErrNoLeader) {
			return err
		}
		ok := false
		n.db.View(func(tx *store.Tx) error { ok = done(tx); return nil })
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// newToken makes a random token, its SHA-256 (hex) and its sealed form.
func (n *Node) newToken(aad string) (token, hash string, sealed []byte, err error) {
	token, err = pki.NewToken()
	if err != nil {
		return "", "", nil, err
	}
	sum := sha256.Sum256([]byte(token))
	sealed, err = n.key.Seal([]byte(token), []byte(aad))
	return token, hex.EncodeToString(sum[:]), sealed, err
}

func (n *Node) putNodeRecord(ctx context.Context) error {
	_, err := n.cluster.Apply(ctx, &raftfsm.NodePut{Node: raftfsm.Node{
		Name: n.opts.Name, RaftAddr: n.cluster.Advertise(), HTTPAddr: n.HTTPAddr(), Joined: time.Now().UTC(),
	}})
	if err != nil {
		return fmt.Errorf("record node: %w", err)
	}
	return nil
}

// refreshNodeRecord updates this node's addresses in the store after a
// restart, once a leader is reachable, if they changed.
func (n *Node) refreshNodeRecord(ctx context.Context) {
	for attempt := 0; attempt < 60; attempt++ {
		var rec store.Node
		err := n.db.View(func(tx *store.Tx) error {
			var err error
			rec, err = tx.Node(n.opts.Name)
			return err
		})
		if err == nil && rec.HTTPAddr == n.HTTPAddr() && rec.RaftAddr == n.cluster.Advertise() {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = n.putNodeRecord(cctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// background is a context that ends when the node closes.
func (n *Node) background() context.Context {
	n.bgOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		n.bg = ctx
		go func() { <-n.closing; cancel() }()
	})
	return n.bg
}

// HTTPAddr is the address the API listens on.
func (n *Node) HTTPAddr() string {
	if n.httpLn != nil {
		return n.httpLn.Addr().String()
	}
	return n.opts.HTTPAddr
}

// API is the node's REST API (its route table, for tests and documents).
func (n *Node) API() *httpapi.Server { return n.apiServer }

// Cluster is the node's Raft cluster.
func (n *Node) Cluster() *cluster.Cluster { return n.cluster }

// osSyncInterval is os_sync_interval, or off (negative) without
// Options.OSSyncTimer.
func (n *Node) osSyncInterval() time.Duration {
	if !n.opts.OSSyncTimer {
		return -1
	}
	return n.conf.osSyncInterval()
}

// OS is the node's OS image catalog.
func (n *Node) OS() *oscatalog.Catalog { return n.os }

// Store is the node's local copy.
func (n *Node) Store() *store.DB { return n.db }

// Name is the node's name.
func (n *Node) Name() string { return n.opts.Name }

// Close stops serving and shuts Raft down, then closes the store.
func (n *Node) Close() error {
	var errs []error
	select {
	case <-n.closing:
	default:
		close(n.closing)
	}
	// Every part stops (the supervisor's context ends with n.closing) and
	// is waited for before Raft and the store close under it.
	for _, srv := range []*http.Server{n.https, n.http} {
		if srv == nil {
			continue
		}
		// Blocking queries may hold connections for minutes: give requests
		// a moment to finish, then close what is left.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := srv.Shutdown(ctx); errors.Is(err, context.DeadlineExceeded) {
			srv.Close()
		} else {
			errs = append(errs, err)
		}
		cancel()
	}
	if n.sup != nil {
		n.sup.wait()
	}
	if n.cluster != nil {
		errs = append(errs, n.cluster.Shutdown())
	}
	if n.db != nil {
		errs = append(errs, n.db.Close())
	}
	return errors.Join(errs...)
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func writeJSONFile(path string, v any, mode os.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'), mode)
}

// tftpOff is -tftp off: no TFTP even where this node serves DHCP.
const tftpOff = "off"

// startTFTP starts a TFTP server on addrs: the iPXE binaries from ipxe_dir
// (default Debian's /usr/lib/ipxe), lpxelinux.0 and its modules, the
// pxelinux.cfg files bootfiles renders, and nothing else. It
// returns once the server listens, with the channel its end arrives on.
func (n *Node) startTFTP(ctx context.Context, addrs []string) (*tftp.Server, <-chan error, error) {
	srv, err := tftp.New(tftp.Config{Addrs: addrs, Roots: n.boot.TFTPRoots(), Resolver: n.boot.ResolveTFTP})
	if err != nil {
		return nil, nil, fmt.Errorf("tftp: %w", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Start(ctx, n.log.With("component", "tftp")) }()
	select {
	case <-srv.Ready():
	case err := <-errc:
		return nil, nil, public("cannot listen for TFTP on "+strings.Join(addrs, ", "), err)
	case <-time.After(5 * time.Second):
		return nil, nil, fmt.Errorf("tftp on %s: did not start", strings.Join(addrs, ", "))
	}
	// One server's metrics at a time: a restarted server replaces them.
	if old := n.tftp.Swap(srv); old != nil {
		for _, c := range old.Metrics().Collectors() {
			n.reg.Unregister(c)
		}
	}
	n.reg.MustRegister(srv.Metrics().Collectors()...)
	return srv, errc, nil
}

// tftpPart runs TFTP on addrs as a part: first the server Start began,
// then a new one whenever it ended.
func (n *Node) tftpPart(addrs []string, srv *tftp.Server, errc <-chan error) func(context.Context, *slog.Logger) error {
	return func(ctx context.Context, _ *slog.Logger) error {
		if errc == nil {
			var err error
			if _, errc, err = n.startTFTP(ctx, addrs); err != nil {
				return err
			}
		}
		err := <-errc
		errc = nil
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return public("TFTP stopped", err)
	}
}

// TFTPAddrs are the addresses TFTP listens on.
func (n *Node) TFTPAddrs() []net.Addr {
	if srv := n.tftp.Load(); srv != nil {
		return srv.Addrs()
	}
	return nil
}
