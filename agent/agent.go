// Package agent is Rollcall's commissioning agent: it runs as the init of
// the commissioning image, takes the machine's inventory, sets up an
// administrator account on its BMC, reports both to the appliance and powers
// the machine off. It imports no server package: it speaks to the appliance
// over the REST API only (POST /api/v1/enlist, POST /api/v1/commission,
// GET /api/v1/bmc-hint), with the report type from store/inventory.
//
// Sub-packages: collect (inventory collectors reading from a root), bmc (the
// BMC account in-band, or a verified hint), sysinit (what PID 1 does before
// and after: mounts, modules, DHCP, power-off).
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rollcall/rollcall/agent/bmc"
	"github.com/rollcall/rollcall/agent/collect"
	"github.com/rollcall/rollcall/agent/nodeenv"
	"github.com/rollcall/rollcall/store/inventory"
)

// Version is stamped into reports; the image build sets it with -ldflags.
var Version = "dev"

// DefaultRetryFor bounds how long each request is retried while the
// appliance is unreachable before the agent gives up (and powers off).
const DefaultRetryFor = 10 * time.Minute

// DefaultLLDPWait is how long a live run listens for LLDP: switches send
// every 30 s by default.
const DefaultLLDPWait = 31 * time.Second

// Modes of the agent (rollcall.mode=).
const (
	ModeCommission = "commission"
	ModeDeploy     = "deploy"
	// ModeStateless boots the machine into an image in RAM (agent/stateless
	// reads its own settings from the command line: rollcall.node=,
	// rollcall.root=, …).
	ModeStateless = "stateless"
)

// Config is what the agent needs, mostly from the kernel command line.
type Config struct {
	Server     string        // rollcall.server=URL: plain HTTP base URL (required)
	Token      string        // rollcall.token=: the agent token
	BMCUser    string        // rollcall.bmcuser= (default commissioner)
	NoPowerOff bool          // rollcall.nopoweroff: stay up after reporting
	PowerOff   bool          // rollcall.poweroff: power off at once, nothing else
	TLS        string        // rollcall.tls=https://HOST:PORT
	CA         string        // rollcall.ca=: SHA-256 (hex) of the CA certificate's DER
	BootMAC    string        // BOOTIF=01-aa-bb-… or rollcall.bootmac=; else the NIC that got a lease
	LLDPWait   time.Duration // rollcall.lldpwait=: 0 turns LLDP off
	NoBMC      bool          // rollcall.nobmc: leave the BMC alone
	Mode       string        // rollcall.mode=: ModeCommission (the default), ModeDeploy or ModeStateless
	Job        string        // rollcall.job=: the deploy job's one-time token (X-Rollcall-Job)

	Root     string        // file system root to inventory ("/" live)
	Live     bool          // running on the machine itself (ethtool, LLDP, /dev/ipmi0)
	RetryFor time.Duration // per request; default DefaultRetryFor
	Log      *slog.Logger
}

func (c Config) logger() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// ParseCmdline reads the agent's settings from a kernel command line.
// Unknown words are the kernel's business and are ignored.
func ParseCmdline(cmdline string) (Config, error) {
	cfg := Config{BMCUser: bmc.DefaultUser, Root: "/", Live: true, LLDPWait: DefaultLLDPWait}
	for _, w := range nodeenv.SplitCmdline(cmdline) {
		k, v, _ := strings.Cut(w, "=")
		switch k {
		case "rollcall.server":
			cfg.Server = v
		case "rollcall.token":
			cfg.Token = v
		case "rollcall.bmcuser":
			cfg.BMCUser = v
		case "rollcall.nopoweroff":
			cfg.NoPowerOff = true
		case "rollcall.poweroff":
			cfg.PowerOff = true
		case "rollcall.tls":
			cfg.TLS = v
		case "rollcall.ca":
			cfg.CA = v
		case "rollcall.nobmc":
			cfg.NoBMC = true
		case "rollcall.mode":
			cfg.Mode = v
		case "rollcall.job":
			cfg.Job = v
		case "rollcall.bootmac":
			cfg.BootMAC = v
		case "BOOTIF":
			// pxelinux/iPXE form: 01-aa-bb-cc-dd-ee-ff (01 = Ethernet).
			if m, ok := strings.CutPrefix(v, "01-"); ok {
				cfg.BootMAC = strings.ReplaceAll(m, "-", ":")
			}
		case "rollcall.lldpwait":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return cfg, fmt.Errorf("rollcall.lldpwait=%q: not a duration such as 31s", v)
			}
			cfg.LLDPWait = d
		}
	}
	if cfg.PowerOff {
		return cfg, nil
	}
	return cfg, cfg.Validate()
}

// Validate checks the settings Run needs.
func (c Config) Validate() error {
	var errs []error
	if u, err := url.Parse(c.Server); c.Server == "" || err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		errs = append(errs, fmt.Errorf("rollcall.server=%q: need an http:// URL of the appliance", c.Server))
	}
	if c.TLS != "" {
		if u, err := url.Parse(c.TLS); err != nil || u.Scheme != "https" || u.Host == "" {
			errs = append(errs, fmt.Errorf("rollcall.tls=%q: need an https:// URL", c.TLS))
		}
		if c.CA == "" {
			errs = append(errs, errors.New("rollcall.tls= needs rollcall.ca= to check the server by"))
		}
	}
	switch c.Mode {
	case "", ModeCommission, ModeStateless:
	case ModeDeploy:
		if c.Job == "" {
			errs = append(errs, errors.New("rollcall.mode=deploy needs rollcall.job= (the job's token)"))
		}
	default:
		errs = append(errs, fmt.Errorf("rollcall.mode=%q: want %s, %s or %s", c.Mode, ModeCommission, ModeDeploy, ModeStateless))
	}
	if c.BootMAC != "" {
		if hw, err := net.ParseMAC(c.BootMAC); err != nil || len(hw) != 6 {
			errs = append(errs, fmt.Errorf("boot MAC %q is not a MAC address", c.BootMAC))
		}
	}
	return errors.Join(errs...)
}

// EnlistReply is the appliance's answer to POST /api/v1/enlist.
type EnlistReply struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Index uint64 `json:"index"`
}

// CommissionReply is the answer to POST /api/v1/commission.
type CommissionReply struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Index uint64 `json:"index"`
}

// Result is what a run did.
type Result struct {
	Enlist     EnlistReply
	Commission CommissionReply
	Report     *inventory.Report
}

// Run commissions the machine: enlist → collect → BMC → commission. It does
// not power off; the caller (PID 1) does, whatever Run returns.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.PowerOff {
		return nil, nil
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Root == "" {
		cfg.Root = "/"
	}
	if cfg.BMCUser == "" {
		cfg.BMCUser = bmc.DefaultUser
	}
	log := cfg.logger()
	c, err := Connect(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	log.Info("appliance", "url", c.BaseURL())

	opts := collect.Options{Root: cfg.Root, Live: cfg.Live, Log: log}
	if cfg.Live {
		opts.LLDPWait = cfg.LLDPWait
	}
	id := collect.Identity(opts)
	res := &Result{}
	enlist := map[string]any{
		"system_uuid": validUUID(id.System.UUID), "serial": id.System.Serial,
		"boot_mac": cfg.BootMAC, "macs": macsOf(id),
	}
	if err := c.Do(ctx, http.MethodPost, "/api/v1/enlist", enlist, &res.Enlist); err != nil {
		return res, fmt.Errorf("enlist: %w", err)
	}
	log.Info("enlisted", "machine", res.Enlist.ID, "state", res.Enlist.State)

	start := time.Now()
	r := collect.Collect(ctx, opts)
	r.Agent, r.BootMAC = Version, cfg.BootMAC
	r.System.UUID = validUUID(r.System.UUID)
	log.Info("inventory collected", "took", time.Since(start).Round(time.Millisecond), "errors", len(r.Errors))

	if !cfg.NoBMC {
		r.BMC = setupBMC(ctx, c, cfg, r, log)
	}
	res.Report = r
	if err := c.Do(ctx, http.MethodPost, "/api/v1/commission", r, &res.Commission); err != nil {
		return res, fmt.Errorf("commission: %w", err)
	}
	log.Info("commissioned", "machine", res.Commission.ID, "state", res.Commission.State)
	return res, nil
}

// setupBMC creates the account in-band when the host has an IPMI device;
// when there is none, or the BMC refused the account, it asks the
// appliance for a hint and verifies it. nil: no BMC found at all.
func setupBMC(ctx context.Context, c *Client, cfg Config, r *inventory.Report, log *slog.Logger) *inventory.BMC {
	var inBand *inventory.BMC
	if cfg.Live && bmc.HasInBand(strings.TrimRight(cfg.Root, "/")) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		inBand = bmc.SetupInBand(ctx, bmc.Options{User: cfg.BMCUser})
		cancel()
		log.Info("bmc account", "channel", inBand.Channel, "user_id", inBand.UserID, "address", inBand.Address, "errors", len(inBand.Errors))
		if inBand.Password != "" {
			return inBand
		}
	}
	hint := askHint(ctx, c, r, log)
	switch {
	case hint == nil:
		return inBand
	case inBand != nil:
		// Keep what in-band IPMI said: why the hint was needed.
		for _, e := range inBand.Errors {
			hint.Errors = append(hint.Errors, "in-band: "+e)
		}
	}
	return hint
}

func askHint(ctx context.Context, c *Client, r *inventory.Report, log *slog.Logger) *inventory.BMC {
	macs := inventory.MACs(r)
	if len(macs) == 0 {
		return nil
	}
	var h bmc.Hint
	err := c.Do(ctx, http.MethodGet, "/api/v1/bmc-hint?macs="+url.QueryEscape(strings.Join(macs, ",")), nil, &h)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		log.Info("no BMC hint for this machine")
		return nil
	}
	if err != nil {
		return &inventory.BMC{Source: "hint", Errors: []string{fmt.Sprintf("bmc hint: %v", err)}}
	}
	b := bmc.VerifyHint(ctx, h)
	log.Info("bmc hint", "address", h.Address, "verified", len(b.Errors) == 0)
	return b
}

// validUUID drops what the server would reject as not a UUID (the report
// would fail validation as a whole).
func validUUID(u string) string {
	return inventory.NormalizeUUID(u)
}

func macsOf(r *inventory.Report) []string {
	out := make([]string, 0, len(r.NICs))
	for _, n := range r.NICs {
		out = append(out, n.MAC)
	}
	return out
}
