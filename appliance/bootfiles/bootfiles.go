// Package bootfiles serves what a machine fetches once DHCP has told it
// where to boot, the step of its journey called HTTP boot: the iPXE binaries
// for UEFI HTTP boot, its iPXE script (or, where iPXE cannot run, its
// pxelinux.cfg file over TFTP) rendered from replicated state, and the boot
// images' files. It owns the content-addressed blob store those files live
// in, and the image sync that fetches every image's files from the nodes
// that hold them and removes the ones no image names any more.
//
// It knows neither gin nor the node: handlers are net/http ones that the
// node's route table mounts, and what it needs of the cluster is the small
// interface Cluster.
package bootfiles

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// Cluster is what image sync needs of the cluster: to tell it this node
// holds an image (raftfsm.ImageHave), and to fetch a blob from another
// node over the cluster's mutual TLS.
type Cluster interface {
	Apply(ctx context.Context, cmd raftfsm.Command) (uint64, error)
	Stream(ctx context.Context, nodeAddr, path string, fn func(io.Reader) error) error
}

// Config is what the boot-file side of one node needs. New checks it.
type Config struct {
	DB        *store.DB  // the local copy: machines, leases, images, nodes (read only)
	Cluster   Cluster    // proposes ImageHave, fetches missing blobs
	Node      string     // this node's name, as image records name their holders
	Blobs     *Blobs     // where image files are kept
	Templates *Templates // the boot templates, loaded at start
	Metrics   *Metrics

	// CommissionImage is the image unknown, new and commissioning machines
	// boot ("commissioning" when empty); CommissionAppend is added to the
	// agent's kernel command line.
	CommissionImage  string
	CommissionAppend string
	// Where the boot loaders are installed: iPXE's binaries (Debian's
	// /usr/lib/ipxe when empty), lpxelinux.0 and syslinux's BIOS modules
	// (Debian's package directories when empty).
	IPXEDir, PXELinuxDir, SyslinuxDir string

	// HTTPAddr is the address the node's HTTP server listens on (its port
	// goes into the URLs of pxelinux files); HTTPSAddr the HTTPS one, or ""
	// for none. Functions: the listeners are bound after New.
	HTTPAddr  func() string
	HTTPSAddr func() string
	// CAFingerprint is the cluster CA's SHA-256 in hex, handed to the agent
	// so that it can check the CA it fetches (asked at each boot: a CA
	// rotation changes it); nil or "" leaves it out.
	CAFingerprint func() string
	// BootToken mints the agent token a commissioning boot script hands
	// out, bound to the MAC that asked.
	BootToken func(mac string) (string, error)
	// JobToken renders the token of a deploy or release job
	// (boottoken.MintJob), handed to the deploy agent as rollcall.job=.
	JobToken func(job string) (string, error)
	// NodeToken renders the token of a stateless node's assignment
	// (boottoken.MintNode), handed to the node as rollcall.node=.
	NodeToken func(machine string, generation uint64) (string, error)
	// Diverged is non-nil when a consistency check found this node's store
	// damaged: it then refuses boot scripts rather than render them from
	// state it cannot trust. Nil: never.
	Diverged func() error

	// Log is for what requests and TFTP renders log; Run logs to the
	// logger it is given.
	Log *slog.Logger
}

// Server is the boot-file side of one node.
type Server struct {
	conf Config
	log  *slog.Logger
	m    *Metrics
	wake chan struct{} // image sync: look again now
}

// New checks cfg and returns the server; nothing runs until Run.
func New(cfg Config) (*Server, error) {
	var missing []error
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"DB", cfg.DB != nil}, {"Cluster", cfg.Cluster != nil}, {"Node", cfg.Node != ""}, {"Blobs", cfg.Blobs != nil},
		{"Templates", cfg.Templates != nil}, {"Metrics", cfg.Metrics != nil}, {"HTTPAddr", cfg.HTTPAddr != nil}, {"BootToken", cfg.BootToken != nil}, {"JobToken", cfg.JobToken != nil}, {"NodeToken", cfg.NodeToken != nil},
	} {
		if !f.set {
			missing = append(missing, errors.New("bootfiles: "+f.name+" is required"))
		}
	}
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	if cfg.CommissionImage == "" {
		cfg.CommissionImage = defaultCommissionImage
	}
	if cfg.PXELinuxDir == "" {
		cfg.PXELinuxDir = DefaultPXELinuxDir
	}
	if cfg.SyslinuxDir == "" {
		cfg.SyslinuxDir = DefaultSyslinuxDir
	}
	if cfg.HTTPSAddr == nil {
		cfg.HTTPSAddr = func() string { return "" }
	}
	if cfg.Diverged == nil {
		cfg.Diverged = func() error { return nil }
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{conf: cfg, log: log, m: cfg.Metrics, wake: make(chan struct{}, 1)}, nil
}

// Metrics count what the boot-file side refused and fetched.
type Metrics struct {
	BootRefused  prometheus.Counter // boot and image requests refused
	ImageFetched prometheus.Counter // image files fetched from other nodes
	ImageRefused prometheus.Counter // image file fetches refused or failed
}

// NewMetrics makes the counters; register Collectors with the node's
// registry.
func NewMetrics() *Metrics {
	return &Metrics{
		BootRefused:  prometheus.NewCounter(prometheus.CounterOpts{Name: "rollcall_boot_refused_total", Help: "Boot and image requests refused (bad MAC, unknown image or file)."}),
		ImageFetched: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollcall_image_files_fetched_total", Help: "Image files fetched from other nodes and verified."}),
		ImageRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollcall_image_fetch_failures_total", Help: "Image file fetches refused (checksum mismatch) or failed."}),
	}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.BootRefused, m.ImageFetched, m.ImageRefused}
}

// Error is a refusal with what the client may be told: the handler that
// refuses writes Message for the machine's operator, and the node's error
// path renders it with Status and Code.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }
