package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollcall/rollcall/appliance/bootfiles"
	"github.com/rollcall/rollcall/appliance/oscatalog"
	"github.com/rollcall/rollcall/appliance/overlay"
	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/power"
	"github.com/rollcall/rollcall/power/jobs"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/cluster"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/pgexport"
	"github.com/rollcall/rollcall/store/tagrule"
)

// Cluster is what the handlers ask of Raft (raftfsm/cluster.Cluster is
// it): proposing commands, waiting for the local copy, and the membership
// and health questions the cluster routes answer.
type Cluster interface {
	Apply(ctx context.Context, cmd raftfsm.Command) (uint64, error)
	FSM() *raftfsm.FSM
	Leader() (id, address string)
	Advertise() string
	LocalStatus() cluster.NodeStatus
	Lag(ctx context.Context, timeout time.Duration) (uint64, error)
	Members(ctx context.Context, timeout time.Duration) ([]cluster.Member, error)
	RemoveMember(ctx context.Context, id string) error
	RepairMember(ctx context.Context, name string) error
	CheckState(ctx context.Context) (uint64, error)
	ReadBarrier(ctx context.Context) error
}

// BMCHint is one entry of the configuration's bmc_hints: the out-of-band
// BMC of a machine without in-band IPMI.
type BMCHint struct {
	Driver, Address, User, Password string
}

// Config is what the node hands the API: its store, its cluster and the
// services the handlers drive, and the settings of rollcall.json that the
// API applies.
type Config struct {
	Name    string // this node's name, in answers and in the commands it proposes
	Log     *slog.Logger
	DB      *store.DB
	Cluster Cluster
	// Key is the cluster's master key: it seals BMC passwords and signs
	// boot tokens.
	Key pki.MasterKey
	// OpenCA unseals the cluster CA to sign a certificate request
	// (admin, service and intermediate certificates). Nil: refused.
	OpenCA func() (*pki.CA, error)
	// Trust is the cluster roots the node holds now: the current one
	// (served at /ca.pem with any previous ones still trusted, its
	// fingerprint in the cluster view and join codes) and, during a CA
	// rotation's transition, the previous ones.
	Trust func() *pki.Trust
	// Metrics is the node's registry: /metrics serves it, and the API
	// counts its requests in it.
	Metrics *prometheus.Registry
	Power   *power.Registry // the BMC drivers
	Jobs    *jobs.Runner    // BMC commands run as jobs
	Boot    *bootfiles.Server
	Blobs   *bootfiles.Blobs // where image uploads land
	// OS is the OS image catalog's sync and import; nil: its routes
	// answer 503.
	OS *oscatalog.Catalog
	// Export is the PostgreSQL mirror's runner, nil without
	// postgres_export (a func: the node may set it up after the API).
	Export func() *pgexport.Runner
	// Parts lists the node's supervised parts, for health.
	Parts func() []cluster.Part
	// Background outlives any request: work a request starts and that may
	// take longer (Redfish detection after commissioning) runs under it.
	Background context.Context
	// TagFacts keeps machines' inventory facts between tag rule
	// evaluations on this node (nil: the API keeps its own).
	TagFacts *tagrule.FactsCache
	// RedfishDetect queues Redfish detection for each commissioned
	// machine's IPMI BMC (off in tests, which make BMC addresses up).
	RedfishDetect bool
	// DHCPProbe broadcasts a DHCPDISCOVER on an interface and lists the
	// servers that answered, ours never among them (dhcp.Probe): the
	// doctor's search for a foreign DHCP server. Nil: not checked.
	DHCPProbe func(ctx context.Context, iface string) ([]ProbeOffer, error)
	// Served lists the networks this node's DHCP serves, as the DHCP
	// service sees them, with where they point booting machines: the
	// doctor probes and asks them. Nil: neither is checked.
	Served func() []ServedNetwork

	// From rollcall.json.
	AdminHTTP  string // what plain HTTP may do with the admin API: allow, loopback or deny
	AdminToken string // accepted beside the cluster's admin token
	AgentToken string // accepted beside the cluster's agent token
	BMCHints   map[string]BMCHint
	// StatelessRefresh is how often stateless nodes refresh their
	// runtime overlay (stateless_refresh_seconds; 0: five minutes).
	StatelessRefresh time.Duration
	// DataDir is the node's data directory, whose free space and tls/
	// certificates rollcall doctor checks ("": those checks are left out).
	DataDir string
}

// Server is the REST API of one node.
type Server struct {
	cfg          Config
	log          *slog.Logger
	failer       Failer
	engine       *gin.Engine
	machines     listCache
	hintLimiter  *windowLimiter
	jobLimiter   *windowLimiter // the deploy agent's calls, per job
	phoneLimiter *windowLimiter // phone-home posts, per client address
	waiters      atomic.Int64   // blocking queries in progress
	net          *netAPI
	facts        *tagrule.FactsCache
	overlays     *overlay.Renderer
	nodeLimiter  *windowLimiter // stateless nodes' calls, per machine
	seen         *seenWriter
}

// New builds the API and its router. Nothing runs until the node serves
// Handler.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.DB == nil || cfg.Cluster == nil:
		return nil, errors.New("api: a store and a cluster are required")
	case cfg.Metrics == nil:
		return nil, errors.New("api: a metrics registry is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Background == nil {
		cfg.Background = context.Background()
	}
	if cfg.Export == nil {
		cfg.Export = func() *pgexport.Runner { return nil }
	}
	if cfg.Parts == nil {
		cfg.Parts = func() []cluster.Part { return nil }
	}
	cfg.Cluster = auditing{Cluster: cfg.Cluster, node: cfg.Name}
	s := &Server{cfg: cfg, log: cfg.Log,
		hintLimiter:  newWindowLimiter(hintsPerMinute, time.Minute, hintLimiterKeys),
		jobLimiter:   newWindowLimiter(jobCallsPerMinute, time.Minute, jobLimiterKeys),
		phoneLimiter: newWindowLimiter(phoneHomePerMinute, time.Minute, jobLimiterKeys)}
	s.facts = cfg.TagFacts
	if s.facts == nil {
		s.facts = &tagrule.FactsCache{}
	}
	s.net = &netAPI{s: s, pending: map[netip.Addr]bool{}}
	s.overlays = &overlay.Renderer{Key: cfg.Key, CAPEM: s.caBundle}
	s.nodeLimiter = newWindowLimiter(nodeCallsPerMinute, time.Minute, jobLimiterKeys)
	s.seen = newSeenWriter(min(store.SeenInterval, s.refresh()))
	s.failer = Failer{Log: cfg.Log, Classifiers: []Classifier{clusterErrors, bootfilesErrors, osErrors, deployErrors, statelessErrors}}
	engine, err := s.router()
	if err != nil {
		return nil, err
	}
	s.engine = engine
	return s, nil
}

// Handler is the API: the router every HTTP and HTTPS listener of the node
// serves.
func (s *Server) Handler() http.Handler { return s.engine }

// clusterErrors are the cluster's own failures: no leader (nothing was
// applied: retrying is safe), and a write whose fate is unknown.
func clusterErrors(err error) *Error {
	switch {
	case errors.Is(err, cluster.ErrNoLeader):
		return &Error{Status: http.StatusServiceUnavailable, Code: "no_leader", Message: "no leader; retry", cause: err}
	case errors.Is(err, raftfsm.ErrGateClosed):
		// A command this cluster cannot write yet: a member runs a build
		// that does not read it (a rolling upgrade in progress).
		return &Error{Status: http.StatusServiceUnavailable, Code: "gate_closed",
			Message: err.Error() + "; retry once every node runs this version (rollcall cluster status)", cause: err}
	case errors.Is(err, cluster.ErrUnknownOutcome):
		return &Error{Status: http.StatusServiceUnavailable, Code: "unknown_outcome",
			Message: "write outcome unknown (timed out waiting for the cluster); check before retrying", cause: err}
	}
	return nil
}

// bootfilesErrors are the boot-file handlers' refusals, with the status,
// code and public message bootfiles wrote.
func bootfilesErrors(err error) *Error {
	var be *bootfiles.Error
	if errors.As(err, &be) {
		return &Error{Status: be.Status, Code: be.Code, Message: be.Message, cause: err}
	}
	return nil
}

func (s *Server) router() (*gin.Engine, error) {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollcall_http_requests_total", Help: "API requests by route and status.",
	}, []string{"method", "route", "status"})
	if err := s.cfg.Metrics.Register(requests); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	r.Use(func(c *gin.Context) {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("panic in handler", "route", c.FullPath(), "panic", p)
				s.failer.Fail(c, fmt.Errorf("panic: %v", p))
			}
		}()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		requests.WithLabelValues(c.Request.Method, route, strconv.Itoa(c.Writer.Status())).Inc()
	}, RequestID)
	r.NoRoute(s.failer.Handle(func(c *gin.Context) error {
		return Errorf(http.StatusNotFound, "not_found", "no such endpoint: %s", store.Clip(c.Request.URL.Path))
	}))
	r.NoMethod(s.failer.Handle(func(c *gin.Context) error {
		return Errorf(http.StatusMethodNotAllowed, "method_not_allowed", "%s is not allowed on %s", store.Clip(c.Request.Method), store.Clip(c.Request.URL.Path))
	}))
	for _, rt := range s.routes() {
		r.Handle(rt.Method, rt.Path, append(s.middleware(rt.Auth), s.failer.Handle(rt.handler))...)
	}
	return r, nil
}
