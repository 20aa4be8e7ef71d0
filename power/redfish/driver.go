// Package redfish is the one implementation of the DMTF Redfish standard
// (DSP0266) Rollcall uses for power and boot control, on
// github.com/stmcginnis/gofish, with a Profile per vendor for what that
// vendor documents differently.
//
// The cross-vendor rules of the reference, all implemented here:
//
//   - reset types and boot targets are read from what the BMC advertises
//     (@Redfish.AllowableValues or the action's @Redfish.ActionInfo);
//   - boot target and enable go in one PATCH;
//   - If-Match carries the ETag (header or @odata.etag); a 412 is retried
//     with the strong form, then without; a 428 fetches the ETag first;
//   - pending settings (@Redfish.Settings, …/SD) get the PATCH;
//   - busy answers are retried for up to a minute (transport.go);
//   - 202 answers are followed to their task monitor;
//   - the chassis reset is used when the system has none;
//   - a missing power cycle is ForceOff, wait for Off, then On;
//   - links from the BMC are followed only on the BMC and under /redfish/.
//
// A driver logs in once (a session, X-Auth-Token) and keeps the session
// until Close; it falls back to basic auth when the service root has no
// Links.Sessions. HTTPS BMCs are pinned by certificate (power.TLSConfig).
package redfish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/rollcall/rollcall/power"
)

// Options are the driver's time limits; zero values take the defaults.
type Options struct {
	// BusyTimeout bounds the retries of busy answers (default 1 minute).
	BusyTimeout time.Duration
	// PollInterval is how often a task monitor or the power state is read
	// while waiting (default 1 s; a Retry-After overrides it).
	PollInterval time.Duration
	// OffTimeout bounds the wait for Off in off–wait–on (default 2 min).
	OffTimeout time.Duration
	// CallTimeout bounds a call when ctx has no deadline (default 3 min).
	CallTimeout time.Duration
	// RequestTimeout bounds one HTTP request until its answer's headers
	// (default 30 s): a stalled BMC fails that step, not the whole call.
	RequestTimeout time.Duration
	// Sleep waits; tests can replace it.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (o Options) withDefaults() Options {
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = time.Minute
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.OffTimeout <= 0 {
		o.OffTimeout = 2 * time.Minute
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 3 * time.Minute
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	return o
}

// Settings are the checked per-machine settings of the reference.
type Settings struct {
	System    string // system=: the system path
	BootMode  string // boot_mode=UEFI|Legacy: always send this mode
	Auth      Auth   // auth=session|basic
	VerifyTLS bool   // verify_tls=true: check against the system's CAs
}

// ParseSettings checks the settings a machine can override.
func ParseSettings(t power.Target) (Settings, error) {
	var s Settings
	if v := t.Setting("system", ""); v != "" {
		if err := checkPath(v); err != nil {
			return s, fmt.Errorf("redfish setting system=%q: %w", v, err)
		}
		s.System = v
	}
	switch v := t.Setting("boot_mode", ""); strings.ToLower(v) {
	case "":
	case "uefi":
		s.BootMode = "UEFI"
	case "legacy":
		s.BootMode = "Legacy"
	default:
		return s, fmt.Errorf("redfish setting boot_mode=%q: %w; allowed: UEFI, Legacy", v, power.ErrInvalid)
	}
	switch v := t.Setting("auth", ""); v {
	case "":
	case string(AuthSession), string(AuthBasic):
		s.Auth = Auth(v)
	default:
		return s, fmt.Errorf("redfish setting auth=%q: %w; allowed: session, basic", v, power.ErrInvalid)
	}
	if v := t.Setting("verify_tls", ""); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("redfish setting verify_tls=%q: %w; allowed: true, false", v, power.ErrInvalid)
		}
		s.VerifyTLS = b
	}
	return s, nil
}

// Driver is the Redfish driver for one BMC and one profile.
type Driver struct {
	t    power.Target
	p    Profile
	s    Settings
	opt  Options
	log  *slog.Logger
	base *url.URL

	mu         sync.Mutex
	httpc      *http.Client
	api        *gofish.APIClient
	root       rootDoc
	pin        string
	basic      bool
	systemPath string
}

// Factory returns the power.Factory for a profile.
func Factory(p Profile) power.Factory {
	return func(t power.Target, log *slog.Logger) (power.Driver, error) {
		return New(t, p, Options{}, log)
	}
}

// New checks the target and builds a driver; it does not connect.
func New(t power.Target, p Profile, opt Options, log *slog.Logger) (*Driver, error) {
	s, err := ParseSettings(t)
	if err != nil {
		return nil, power.Errorf(p.Name, t.Address, "check settings", err)
	}
	base, err := power.BaseURL(t.Address, "https", "443")
	if err != nil {
		return nil, power.Errorf(p.Name, t.Address, "check settings", err)
	}
	if t.PinnedCertSHA256 != "" {
		if _, err := power.NormalizeFingerprint(t.PinnedCertSHA256); err != nil {
			return nil, power.Errorf(p.Name, t.Address, "check settings", err)
		}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Driver{t: t, p: p, s: s, opt: opt.withDefaults(), log: log, base: base}, nil
}

// Profile returns the driver's vendor profile.
func (d *Driver) Profile() Profile { return d.p }

func (d *Driver) fail(step string, err error) error {
	return power.Errorf(d.p.Name, d.t.Address, step, classify(err))
}

// classify maps transport and HTTP failures onto the power sentinels,
// keeping the cause.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var changed power.ErrCertificateChanged
	if errors.As(err, &changed) {
		return changed
	}
	for _, s := range []error{power.ErrAuth, power.ErrUnreachable, power.ErrUnsupported, power.ErrBadAnswer,
		power.ErrBusy, power.ErrUnsafeLink, power.ErrNoRedfish, power.ErrInvalid} {
		if errors.Is(err, s) {
			return err
		}
	}
	var he *schemas.Error
	if errors.As(err, &he) {
		e := &httpError{code: he.HTTPReturnedStatusCode, msg: short(he), cause: err}
		switch he.HTTPReturnedStatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			e.kind = power.ErrAuth
		case http.StatusServiceUnavailable:
			e.kind = power.ErrBusy
		case 0:
			e.kind = power.ErrBadAnswer
		}
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: no answer before the deadline: %w", power.ErrUnreachable, err)
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &ne) || errors.As(err, &oe) {
		return fmt.Errorf("%w: %w", power.ErrUnreachable, err)
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &te) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %w", power.ErrBadAnswer, err)
	}
	return err
}

// httpError is an HTTP failure with the sentinel it means (if any) and the
// gofish error underneath, so errors.Is and statusOf both still work.
type httpError struct {
	code  int
	msg   string
	kind  error
	cause error
}

func (e *httpError) Error() string {
	if e.kind != nil {
		return fmt.Sprintf("%v: http %d: %s", e.kind, e.code, e.msg)
	}
	return fmt.Sprintf("http %d: %s", e.code, e.msg)
}

func (e *httpError) Unwrap() []error {
	if e.kind != nil {
		return []error{e.kind, e.cause}
	}
	return []error{e.cause}
}

func short(e *schemas.Error) string {
	msg := e.Message
	for _, x := range e.ExtendedInfos {
		if x.MessageID != "" {
			msg += " [" + x.MessageID + "]"
		}
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return strings.TrimSpace(msg)
}

func statusOf(err error) int {
	var he *schemas.Error
	if errors.As(err, &he) {
		return he.HTTPReturnedStatusCode
	}
	return 0
}

// withTimeout gives ctx the call timeout when it has no deadline.
func (d *Driver) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d.opt.CallTimeout)
}

// rootDoc is the part of the service root the driver reads before login.
type rootDoc struct {
	ODataID        string          `json:"@odata.id"`
	RedfishVersion string          `json:"RedfishVersion"`
	Vendor         string          `json:"Vendor"`
	Product        string          `json:"Product"`
	Systems        link            `json:"Systems"`
	Managers       link            `json:"Managers"`
	Oem            json.RawMessage `json:"Oem"`
	Links          struct {
		Sessions link `json:"Sessions"`
	} `json:"Links"`
}

type link struct {
	ID string `json:"@odata.id"`
}

// connect reads the certificate (when not pinned), the service root
// without credentials, then logs in once.
func (d *Driver) connect(ctx context.Context) (*gofish.APIClient, error) {
	if d.api != nil {
		return d.api.WithContext(ctx), nil
	}
	if d.httpc == nil {
		tr := &http.Transport{
			Proxy:                 nil, // a BMC network is never behind the appliance's proxy
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
			IdleConnTimeout:       60 * time.Second,
			MaxIdleConnsPerHost:   2,
		}
		if d.base.Scheme == "https" {
			pin := d.t.PinnedCertSHA256
			if pin == "" && !d.s.VerifyTLS {
				// Not pinned yet: read the certificate with a handshake that
				// sends nothing and pin it for this driver's life; Probe
				// reports it so the caller records it.
				got, err := power.FetchCertificate(ctx, d.base.String())
				if err != nil {
					return nil, d.fail("read certificate", err)
				}
				pin = got
			}
			cfg, err := power.TLSConfig(pin, d.s.VerifyTLS, d.base.Hostname())
			if err != nil {
				return nil, d.fail("tls", err)
			}
			if !d.s.VerifyTLS {
				d.pin, _ = power.NormalizeFingerprint(pin)
			}
			tr.TLSClientConfig = cfg
		}
		g := &guard{next: tr, base: d.base, busy: d.p.BusyMessages, timeout: d.opt.BusyTimeout, attempt: d.opt.RequestTimeout, sleep: d.opt.Sleep}
		d.httpc = &http.Client{
			Transport: g,
			CheckRedirect: func(req *http.Request, via []*http.Request) error {
				if len(via) >= 3 {
					return errors.New("too many redirects")
				}
				return checkURL(d.base, req.URL)
			},
		}
	}
	root, err := d.readRoot(ctx)
	if err != nil {
		return nil, err
	}
	d.root = root
	auth := d.s.Auth
	if auth == "" {
		auth = d.p.Login
	}
	d.basic = auth == AuthBasic
	if !d.basic && root.Links.Sessions.ID == "" {
		d.log.Debug("service root has no Links.Sessions: basic auth")
		d.basic = true
	}
	if !d.basic {
		if _, err := resolveLink(d.base, root.Links.Sessions.ID); err != nil {
			return nil, d.fail("login", err)
		}
	}
	api, err := gofish.ConnectContext(ctx, gofish.ClientConfig{
		Endpoint:          d.base.String(),
		Username:          d.t.User,
		Password:          d.t.Password,
		BasicAuth:         d.basic,
		HTTPClient:        d.httpc,
		NoModifyTransport: true,
		ReuseConnections:  true,
	})
	if err != nil {
		step := "login (session)"
		if d.basic {
			step = "read service root"
		}
		return nil, d.fail(step, err)
	}
	d.api = api
	return api.WithContext(ctx), nil
}

func (d *Driver) readRoot(ctx context.Context) (rootDoc, error) {
	var root rootDoc
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base.String()+"/redfish/v1/", nil)
	if err != nil {
		return root, d.fail("read service root", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := d.httpc.Do(req)
	if err != nil {
		return root, d.fail("read service root", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return root, d.fail("read service root", err)
	}
	if resp.StatusCode != http.StatusOK {
		return root, d.fail("read service root", fmt.Errorf("%w: http %d", power.ErrNoRedfish, resp.StatusCode))
	}
	if err := json.Unmarshal(body, &root); err != nil || (root.RedfishVersion == "" && root.ODataID == "") {
		return root, d.fail("read service root", fmt.Errorf("%w: %w: not a Redfish service root", power.ErrNoRedfish, power.ErrBadAnswer))
	}
	return root, nil
}

// do runs fn with a logged-in client. A session the BMC forgot (401) is
// replaced once; a failed login is never repeated.
func (d *Driver) do(ctx context.Context, fn func(c *gofish.APIClient) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.connect(ctx)
	if err != nil {
		return err
	}
	err = fn(c)
	if statusOf(err) == http.StatusUnauthorized && !d.basic {
		d.log.Info("redfish session refused; logging in again once")
		d.api = nil
		if c, err = d.connect(ctx); err != nil {
			return err
		}
		err = fn(c)
	}
	return err
}

// Close ends the session.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.api != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.api.WithContext(ctx).Logout()
		d.api = nil
	}
	if d.httpc != nil {
		d.httpc.CloseIdleConnections()
	}
	return nil
}

// get reads a resource: its body and ETag (header, else @odata.etag).
func get(c *gofish.APIClient, p string, v any) (etag string, err error) {
	resp, err := c.Get(p)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return "", fmt.Errorf("%w: %s is not JSON: %w", power.ErrBadAnswer, p, err)
	}
	etag = resp.Header.Get("ETag")
	if etag == "" {
		var e struct {
			ETag string `json:"@odata.etag"`
		}
		_ = json.Unmarshal(body, &e)
		etag = e.ETag
	}
	return etag, nil
}

// systemDoc is the part of a ComputerSystem the driver reads. It is decoded
// here rather than through schemas.ComputerSystem because that type drops
// the ETag, the Reset action's target and ActionInfo, and @Redfish.Settings.
type systemDoc struct {
	ID           string `json:"@odata.id"`
	PowerState   string `json:"PowerState"`
	Manufacturer string `json:"Manufacturer"`
	Model        string `json:"Model"`
	SerialNumber string `json:"SerialNumber"`
	BiosVersion  string `json:"BiosVersion"`
	Boot         bootDoc
	Actions      struct {
		Reset *actionDoc `json:"#ComputerSystem.Reset"`
	} `json:"Actions"`
	Settings *struct {
		SettingsObject link `json:"SettingsObject"`
	} `json:"@Redfish.Settings"`
	Links struct {
		Chassis   []link `json:"Chassis"`
		ManagedBy []link `json:"ManagedBy"`
	} `json:"Links"`
}

type bootDoc struct {
	Enabled        string   `json:"BootSourceOverrideEnabled,omitempty"`
	Target         string   `json:"BootSourceOverrideTarget,omitempty"`
	Mode           string   `json:"BootSourceOverrideMode,omitempty"`
	AllowedTargets []string `json:"BootSourceOverrideTarget@Redfish.AllowableValues,omitempty"`
	AllowedEnabled []string `json:"BootSourceOverrideEnabled@Redfish.AllowableValues,omitempty"`
}

type actionDoc struct {
	Target     string   `json:"target"`
	ResetTypes []string `json:"ResetType@Redfish.AllowableValues"`
	ActionInfo string   `json:"@Redfish.ActionInfo"`
}

type chassisDoc struct {
	ID         string `json:"@odata.id"`
	PowerState string `json:"PowerState"`
	Actions    struct {
		Reset *actionDoc `json:"#Chassis.Reset"`
	} `json:"Actions"`
}

// system finds (once) and reads the system resource.
func (d *Driver) system(c *gofish.APIClient) (systemDoc, string, error) {
	if d.systemPath == "" {
		p, err := d.findSystem(c)
		if err != nil {
			return systemDoc{}, "", err
		}
		d.systemPath = p
	}
	var s systemDoc
	etag, err := get(c, d.systemPath, &s)
	if err != nil {
		return s, "", d.fail("read system "+d.systemPath, err)
	}
	return s, etag, nil
}

func (d *Driver) findSystem(c *gofish.APIClient) (string, error) {
	if d.s.System != "" {
		return d.s.System, nil
	}
	// The collection is the truth; the profile's usual path is preferred
	// when the collection lists it (a blade BMC lists several systems).
	coll := d.root.Systems.ID
	if coll == "" {
		coll = "/redfish/v1/Systems"
	}
	p, err := resolveLink(d.base, coll)
	if err != nil {
		return "", d.fail("find system", err)
	}
	var col struct {
		Members []link `json:"Members"`
	}
	if _, err := get(c, p, &col); err != nil {
		return "", d.fail("find system (read "+p+")", err)
	}
	var members []string
	for _, m := range col.Members {
		mp, err := resolveLink(d.base, m.ID)
		if err != nil {
			return "", d.fail("find system", err)
		}
		members = append(members, strings.TrimSuffix(mp, "/"))
	}
	for _, want := range d.p.SystemPaths {
		if slices.Contains(members, want) {
			return want, nil
		}
	}
	if len(members) == 0 {
		return "", d.fail("find system", fmt.Errorf("%w: the Systems collection is empty", power.ErrUnsupported))
	}
	if len(members) > 1 {
		d.log.Warn("several systems on this bmc; using the first; set system= to choose", "systems", members)
	}
	return members[0], nil
}

// Status reads PowerState.
func (d *Driver) Status(ctx context.Context) (power.PowerState, error) {
	ctx, cancel := d.withTimeout(ctx)
	defer cancel()
	st := power.StateUnknown
	err := d.do(ctx, func(c *gofish.APIClient) error {
		s, _, err := d.system(c)
		if err != nil {
			return err
		}
		st = mapPowerState(s.PowerState)
		if st == power.StateUnknown && s.PowerState == "" {
			return d.fail("read power state", fmt.Errorf("%w: system has no PowerState", power.ErrBadAnswer))
		}
		return nil
	})
	if err != nil {
		return power.StateUnknown, d.fail("read power state", err)
	}
	return st, nil
}

func mapPowerState(s string) power.PowerState {
	switch schemas.PowerState(s) {
	case schemas.OnPowerState, schemas.PoweringOffPowerState, schemas.PausedPowerState:
		return power.StateOn
	case schemas.OffPowerState, schemas.PoweringOnPowerState:
		return power.StateOff
	}
	return power.StateUnknown
}

// Probe reads the service root, the system and its manager.
func (d *Driver) Probe(ctx context.Context) (power.ProbeResult, error) {
	ctx, cancel := d.withTimeout(ctx)
	defer cancel()
	res := power.ProbeResult{Driver: d.p.Name, PowerState: power.StateUnknown}
	err := d.do(ctx, func(c *gofish.APIClient) error {
		res.Reachable, res.RedfishAvailable = true, true
		res.CertSHA256 = d.pin
		sig, err := d.signals(c)
		if err != nil {
			return err
		}
		s, _, err := d.system(c)
		if err != nil {
			return err
		}
		res.SystemPath = d.systemPath
		res.PowerState = mapPowerState(s.PowerState)
		res.Vendor = firstNonEmpty(sig.SystemManufacturer, sig.ManagerManufacturer, sig.RootVendor)
		res.Model = firstNonEmpty(s.Model, sig.ManagerModel)
		res.Firmware = sig.ManagerFirmware
		if d.p.Name == Standard.Name {
			res.Driver = Recognise(sig).Name
		}
		return nil
	})
	if err != nil {
		res.CertSHA256 = d.pin
		return res, d.fail("probe", err)
	}
	return res, nil
}

func firstNonEmpty(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}

// signals reads what identifies the vendor: service root, first manager and
// the system.
func (d *Driver) signals(c *gofish.APIClient) (Signals, error) {
	var sig Signals
	sig.RootVendor, sig.RootProduct = d.root.Vendor, d.root.Product
	sig.OemKeys = oemKeys(d.root.Oem)
	mgrs := d.root.Managers.ID
	if mgrs != "" {
		p, err := resolveLink(d.base, mgrs)
		if err != nil {
			return sig, d.fail("read managers", err)
		}
		var col struct {
			Members []link `json:"Members"`
		}
		if _, err := get(c, p, &col); err == nil && len(col.Members) > 0 {
			mp, err := resolveLink(d.base, col.Members[0].ID)
			if err != nil {
				return sig, d.fail("read manager", err)
			}
			var m struct {
				Manufacturer    string          `json:"Manufacturer"`
				Model           string          `json:"Model"`
				FirmwareVersion string          `json:"FirmwareVersion"`
				Oem             json.RawMessage `json:"Oem"`
			}
			if _, err := get(c, mp, &m); err == nil {
				sig.ManagerManufacturer, sig.ManagerModel, sig.ManagerFirmware = m.Manufacturer, m.Model, m.FirmwareVersion
				sig.OemKeys = append(sig.OemKeys, oemKeys(m.Oem)...)
			}
		}
	}
	if s, _, err := d.system(c); err == nil {
		sig.SystemManufacturer, sig.SystemModel = s.Manufacturer, s.Model
	}
	return sig, nil
}

func oemKeys(raw json.RawMessage) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if !strings.HasPrefix(k, "@") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
