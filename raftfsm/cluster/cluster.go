package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
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
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// ErrNoLeader is returned when a write cannot reach a leader right now (an
// election is running or this node is cut off). Retrying later is safe.
var ErrNoLeader = errors.New("no leader; retry")

// ErrUnknownOutcome is returned when a write was handed to Raft but no answer
// came in time: it may or may not have been applied.
var ErrUnknownOutcome = errors.New("write outcome unknown (timed out waiting for the cluster); check before retrying")

// Config is a cluster node's configuration.
type Config struct {
	Name      string // Raft server ID; unique in the cluster
	Dir       string // where the Raft log, stable store and snapshots live
	Bind      string // listen address of the cluster port (Raft + node calls)
	Advertise string // address other nodes reach this one at; defaults to Bind

	// TLS is the node's mutual-TLS configuration under the cluster CA; used
	// both to serve and to dial.
	TLS *tls.Config
	// VerifyPeer returns the CN of a verified client certificate.
	VerifyPeer func(tls.ConnectionState) (cn string, ok bool)
	// PeerCheck may refuse a verified peer (a removed node). Optional.
	PeerCheck PeerCheck
	// Calls adds routes to the node-call protocol; those under /open/ may be
	// called without a certificate (joining), every other one needs one.
	Calls http.Handler

	// Raft timing; zero values take the tuned defaults in tune().
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	SnapshotThreshold  uint64
	TrailingLogs       uint64
	// SnapshotBytes also snapshots once the entries applied since the
	// last size snapshot hold this many bytes; TrailingBytes is about what
	// stays in the log after it (logsize.go). Zero: 64 MiB and 32 MiB.
	SnapshotBytes, TrailingBytes int64
	// ApplyTimeout bounds how long a write waits for commit.
	ApplyTimeout time.Duration
	// StateCheckEvery is how often the leader asks every node to hash and
	// compare its store (statecheck.go): 10 minutes when zero.
	StateCheckEvery time.Duration
	// VersionReportEvery is how often a node renews its version report
	// while the gate has something it reads shut (gate.go): 20 s when zero.
	VersionReportEvery time.Duration
	// Withhold makes the node read command types only up to these body
	// versions, as an older binary would (tests of the gate).
	Withhold map[raftfsm.Type]uint8

	Logger *slog.Logger
}

// Cluster is a running Raft node replicating the store.
type Cluster struct {
	cfg   Config
	log   *slog.Logger
	raft  *raft.Raft
	fsm   *raftfsm.FSM
	db    *store.DB
	mux   *mux
	logs  *raftboltdb.BoltStore
	calls *http.Server
	peers *http.Client
	trans *raft.NetworkTransport

	Metrics *Metrics

	diverged   atomic.Pointer[Divergence]
	parts      atomic.Pointer[func() []Part]
	readTerm   atomic.Uint64 // the term a barrier committed in, for ReadIndex
	stopChecks context.CancelFunc

	gw gateWatch

	lagMu     sync.Mutex
	lagAt     time.Time // when leaderIdx was last asked
	leaderIdx uint64    // the leader's commit index then
}

func (c *Config) tune() {
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = 500 * time.Millisecond
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = 500 * time.Millisecond
	}
	if c.LeaderLeaseTimeout == 0 {
		// As long as the heartbeat timeout: a shorter lease made a leader of
		// two step down whenever its peer was starved of CPU for a moment.
		c.LeaderLeaseTimeout = 500 * time.Millisecond
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.SnapshotBytes == 0 {
		c.SnapshotBytes = DefaultSnapshotBytes
	}
	if c.TrailingBytes == 0 {
		c.TrailingBytes = DefaultTrailingBytes
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = 10 * time.Second
	}
	if c.Advertise == "" {
		c.Advertise = c.Bind
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.PeerCheck == nil {
		c.PeerCheck = func(string, *x509.Certificate) error { return nil }
	}
}

// Open starts a node on db. It does not bootstrap: call Bootstrap on the
// first node of a new cluster; other nodes wait to be added by the leader.
func Open(cfg Config, db *store.DB) (*Cluster, error) {
	cfg.tune()
	if cfg.TLS == nil || cfg.VerifyPeer == nil {
		return nil, errors.New("cluster: TLS and VerifyPeer are required")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	fsm, err := raftfsm.NewFSM(db, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	for t, v := range cfg.Withhold {
		fsm.Withhold(t, v)
	}
	// A downgrade after the gate opened what this binary cannot read is
	// refused here, before raft feeds the node an entry it would stop on.
	if err := fsm.CheckDowngrade(); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger, fsm: fsm, db: db, Metrics: newMetrics()}

	logs, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.Dir, "raft.db")})
	if err != nil {
		return nil, fmt.Errorf("cluster: open raft log: %w", err)
	}
	c.logs = logs
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hclogFor(cfg.Logger))
	if err != nil {
		logs.Close()
		return nil, fmt.Errorf("cluster: snapshot store: %w", err)
	}

	ln, err := net.Listen("tcp", cfg.Bind)
	if err != nil {
		logs.Close()
		return nil, fmt.Errorf("cluster: listen on %s: %w", cfg.Bind, err)
	}
	if cfg.Advertise == cfg.Bind {
		cfg.Advertise = ln.Addr().String() // resolves :0 in tests
		c.cfg.Advertise = cfg.Advertise
	}
	c.mux = newMux(ln, cfg.TLS, cfg.VerifyPeer, cfg.PeerCheck, cfg.Logger)
	stream := &streamLayer{chanListener: c.mux.raft, advertise: addr(cfg.Advertise), client: cfg.TLS}
	c.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  stream,
		MaxPool: 5,
		Timeout: 10 * time.Second,
		Logger:  hclogFor(cfg.Logger),
	})

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.Name)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 1024
	// The bbolt file is durable and records its own index, so a snapshot is
	// restored at start only when the store is behind the newest one (a
	// store moved aside to be rebuilt): raft would otherwise take the
	// snapshot's index as applied without restoring it.
	rc.NoSnapshotRestoreOnStart = true
	if metas, err := snaps.List(); err == nil && len(metas) > 0 && metas[0].Index > fsm.AppliedIndex() {
		rc.NoSnapshotRestoreOnStart = false
		cfg.Logger.Info("store behind the newest snapshot: restoring it", "store_index", fsm.AppliedIndex(), "snapshot_index", metas[0].Index)
	}
	rc.Logger = hclogFor(cfg.Logger)

	sized := newSizedFSM(fsm, cfg.SnapshotBytes)
	r, err := raft.NewRaft(rc, sized, logs, logs, snaps, c.trans)
	if err != nil {
		c.mux.Close()
		logs.Close()
		return nil, fmt.Errorf("cluster: start raft: %w", err)
	}
	c.raft = r

	c.peers = &http.Client{
		Transport: &http.Transport{
			DialTLSContext: func(ctx context.Context, _, a string) (net.Conn, error) {
				return DialCalls(ctx, cfg.TLS, a)
			},
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
		},
	}
	c.calls = &http.Server{Handler: c.callHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ConnContext: connContext}
	go c.calls.Serve(c.mux.rpc)
	go c.Metrics.watch(c)
	c.loadDiverged()
	fsm.OnHash(func(h store.StateHash) { go c.compareHash(h) })
	var checks context.Context
	checks, c.stopChecks = context.WithCancel(context.Background())
	go c.runStateChecks(checks, cfg.StateCheckEvery)
	go c.sizeLog(checks, sized)
	go c.runGate(checks)
	return c, nil
}

// Bootstrap makes this node the sole voter of a new cluster. It is a no-op
// error (raft.ErrCantBootstrap) when the node already has state.
func (c *Cluster) Bootstrap() error {
	f := c.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{
		ID: raft.ServerID(c.cfg.Name), Address: raft.ServerAddress(c.cfg.Advertise), Suffrage: raft.Voter,
	}}})
	return f.Error()
}

// HasState reports whether the Raft directory holds an existing cluster.
func HasState(dir string) (bool, error) {
	p := filepath.Join(dir, "raft.db")
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	logs, err := raftboltdb.New(raftboltdb.Options{Path: p, BoltOptions: nil})
	if err != nil {
		return false, err
	}
	defer logs.Close()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
	if err != nil {
		return false, err
	}
	return raft.HasExistingState(logs, logs, snaps)
}

// Name is this node's server ID.
func (c *Cluster) Name() string { return c.cfg.Name }

// Advertise is the cluster address other nodes use for this one.
func (c *Cluster) Advertise() string { return c.cfg.Advertise }

// Raft exposes the underlying node for status and tests.
func (c *Cluster) Raft() *raft.Raft { return c.raft }

// FSM is the state machine applying to the local store.
func (c *Cluster) FSM() *raftfsm.FSM { return c.fsm }

// IsLeader reports whether this node leads.
func (c *Cluster) IsLeader() bool { return c.raft.State() == raft.Leader }

// Leader returns the leader's ID and cluster address, empty when none is known.
func (c *Cluster) Leader() (id, address string) {
	a, i := c.raft.LeaderWithID()
	return string(i), string(a)
}

// WaitLeader blocks until some leader is known.
func (c *Cluster) WaitLeader(ctx context.Context) error {
	for {
		if id, _ := c.Leader(); id != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ErrNoLeader
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Shutdown stops Raft and closes the cluster port. The store stays open.
func (c *Cluster) Shutdown() error {
	c.stopChecks()
	err := c.raft.Shutdown().Error()
	c.calls.Close()
	c.mux.Close()
	c.trans.Close()
	c.peers.CloseIdleConnections()
	c.Metrics.stop()
	if cerr := c.logs.Close(); err == nil {
		err = cerr
	}
	return err
}

func hclogFor(l *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "raft",
		Level:      hclog.Warn,
		JSONFormat: true,
		Output:     slogWriter{l.With("component", "raft")},
	})
}

// slogWriter turns hclog's JSON lines into slog records, so that one log
// stream remains, with raft's levels and fields.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	var rec map[string]any
	if err := json.Unmarshal(p, &rec); err != nil {
		w.l.Warn(strings.TrimSpace(string(p)))
		return len(p), nil
	}
	level := slog.LevelInfo
	switch rec["@level"] {
	case "error":
		level = slog.LevelError
	case "warn":
		level = slog.LevelWarn
	case "debug", "trace":
		level = slog.LevelDebug
	}
	msg, _ := rec["@message"].(string)
	attrs := make([]any, 0, 2*len(rec))
	for k, v := range rec {
		if !strings.HasPrefix(k, "@") {
			attrs = append(attrs, k, v)
		}
	}
	w.l.Log(context.Background(), level, msg, attrs...)
	return len(p), nil
}
