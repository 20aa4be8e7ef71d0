// Package proxmox is the power driver for Proxmox VE virtual machines,
// through the Proxmox VE API (https://pve.proxmox.com/pve-docs/api-viewer/)
// with an API token: Authorization: PVEAPIToken=USER@REALM!TOKENID=SECRET.
//
// Settings: node, vmid, token_id (or the target's user when it carries
// "!"); the password is the token secret. Power: status/current, start,
// stop, shutdown, reset; a cycle is stop then start. Boot devices are the
// VM's boot order (config "boot: order=…"): Proxmox has no one-time
// override, so every change persists until the next one.
//
// Proxmox listens on HTTPS with a self-signed certificate: it is pinned the
// same way as a Redfish BMC (power.TLSConfig).
package proxmox

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
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rollcall/rollcall/power"
)

// Name is the registry name.
const Name = "proxmox"

// Description is the line shown by `rollcall bmc drivers`.
const Description = "Proxmox VE VMs: API token (user = token id, password = secret); settings node, vmid"

// Driver controls one VM.
type Driver struct {
	t       power.Target
	base    *url.URL
	node    string
	vmid    string
	tokenID string
	verify  bool
	log     *slog.Logger
	poll    time.Duration

	mu    sync.Mutex
	httpc *http.Client
	pin   string
}

var (
	nodeRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]*$`)
	tokenRe = regexp.MustCompile(`^[^\s!=]+@[^\s!=]+![A-Za-z][A-Za-z0-9._-]*$`)
)

// New is the power.Factory.
func New(t power.Target, log *slog.Logger) (power.Driver, error) {
	return NewDriver(t, log)
}

// NewDriver checks the settings and builds the driver.
func NewDriver(t power.Target, log *slog.Logger) (*Driver, error) {
	fail := func(err error) error { return power.Errorf(Name, t.Address, "check settings", err) }
	base, err := power.BaseURL(t.Address, "https", "8006")
	if err != nil {
		return nil, fail(err)
	}
	d := &Driver{t: t, base: base, node: t.Setting("node", ""), vmid: t.Setting("vmid", ""), log: log, poll: 500 * time.Millisecond}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if !nodeRe.MatchString(d.node) {
		return nil, fail(fmt.Errorf("proxmox setting node=%q: %w; want a node name", d.node, power.ErrInvalid))
	}
	if n, err := strconv.Atoi(d.vmid); err != nil || n < 100 || n > 999999999 {
		return nil, fail(fmt.Errorf("proxmox setting vmid=%q: %w; want 100-999999999", d.vmid, power.ErrInvalid))
	}
	d.tokenID = t.Setting("token_id", "")
	if d.tokenID == "" && strings.Contains(t.User, "!") {
		d.tokenID = t.User
	}
	if !tokenRe.MatchString(d.tokenID) {
		return nil, fail(fmt.Errorf("proxmox token id %q: %w; want USER@REALM!TOKENID (setting token_id or the user)", d.tokenID, power.ErrInvalid))
	}
	if v := t.Setting("verify_tls", ""); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fail(fmt.Errorf("proxmox setting verify_tls=%q: %w; allowed: true, false", v, power.ErrInvalid))
		}
		d.verify = b
	}
	if t.PinnedCertSHA256 != "" {
		if _, err := power.NormalizeFingerprint(t.PinnedCertSHA256); err != nil {
			return nil, fail(err)
		}
	}
	return d, nil
}

func (d *Driver) fail(step string, err error) error {
	return power.Errorf(Name, d.t.Address, step, err)
}

func (d *Driver) client(ctx context.Context) (*http.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.httpc != nil {
		return d.httpc, nil
	}
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
	if d.base.Scheme == "https" {
		pin := d.t.PinnedCertSHA256
		if pin == "" && !d.verify {
			got, err := power.FetchCertificate(ctx, d.base.String())
			if err != nil {
				return nil, d.fail("read certificate", err)
			}
			pin = got
		}
		cfg, err := power.TLSConfig(pin, d.verify, d.base.Hostname())
		if err != nil {
			return nil, d.fail("tls", err)
		}
		if !d.verify {
			d.pin, _ = power.NormalizeFingerprint(pin)
		}
		tr.TLSClientConfig = cfg
	}
	d.httpc = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return d.httpc, nil
}

func (d *Driver) vmPath(rest string) string {
	return "/api2/json/nodes/" + url.PathEscape(d.node) + "/qemu/" + d.vmid + rest
}

// call sends one API request and decodes {"data": …} into out.
func (d *Driver) call(ctx context.Context, step, method, p string, form url.Values, out any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
	}
	c, err := d.client(ctx)
	if err != nil {
		return err
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, d.base.String()+p, body)
	if err != nil {
		return d.fail(step, err)
	}
	req.Header.Set("Authorization", "PVEAPIToken="+d.tokenID+"="+d.t.Password)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		var changed power.ErrCertificateChanged
		if errors.As(err, &changed) {
			return d.fail(step, changed)
		}
		return d.fail(step, fmt.Errorf("%w: %w", power.ErrUnreachable, err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return d.fail(step, fmt.Errorf("%w: %w", power.ErrUnreachable, err))
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return d.fail(step, fmt.Errorf("%w: http %d %s", power.ErrAuth, resp.StatusCode, strings.TrimSpace(resp.Status)))
	case resp.StatusCode != http.StatusOK:
		return d.fail(step, fmt.Errorf("http %d: %s", resp.StatusCode, strings.TrimSpace(string(b[:min(len(b), 300)]))))
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return d.fail(step, fmt.Errorf("%w: not a Proxmox API answer: %w", power.ErrBadAnswer, err))
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			return d.fail(step, fmt.Errorf("%w: %w", power.ErrBadAnswer, err))
		}
	}
	return nil
}

// Status reads status/current.
func (d *Driver) Status(ctx context.Context) (power.PowerState, error) {
	var st struct {
		Status string `json:"status"`
	}
	if err := d.call(ctx, "read power state", http.MethodGet, d.vmPath("/status/current"), nil, &st); err != nil {
		return power.StateUnknown, err
	}
	switch st.Status {
	case "running":
		return power.StateOn, nil
	case "stopped":
		return power.StateOff, nil
	case "":
		return power.StateUnknown, d.fail("read power state", fmt.Errorf("%w: no status", power.ErrBadAnswer))
	}
	return power.StateUnknown, nil
}

// Power maps the actions onto the VM status endpoints and waits for the
// task each returns.
func (d *Driver) Power(ctx context.Context, a power.Action) error {
	if _, err := power.ParseAction(string(a)); err != nil {
		return d.fail("power", err)
	}
	st, err := d.Status(ctx)
	if err != nil {
		return err
	}
	var steps []string
	switch a {
	case power.ActionOn:
		if st != power.StateOn {
			steps = []string{"start"}
		}
	case power.ActionOff:
		if st != power.StateOff {
			steps = []string{"stop"}
		}
	case power.ActionSoft:
		if st != power.StateOff {
			steps = []string{"shutdown"}
		}
	case power.ActionReset:
		steps = []string{"reset"}
		if st == power.StateOff {
			steps = []string{"start"}
		}
	case power.ActionCycle:
		steps = []string{"stop", "start"}
		if st == power.StateOff {
			steps = []string{"start"}
		}
	}
	for _, s := range steps {
		var upid string
		step := "power " + string(a) + " (" + s + ")"
		if err := d.call(ctx, step, http.MethodPost, d.vmPath("/status/"+s), url.Values{}, &upid); err != nil {
			return err
		}
		if err := d.waitTask(ctx, step, upid); err != nil {
			return err
		}
	}
	return nil
}

func (d *Driver) waitTask(ctx context.Context, step, upid string) error {
	if upid == "" {
		return nil
	}
	p := "/api2/json/nodes/" + url.PathEscape(d.node) + "/tasks/" + url.PathEscape(upid) + "/status"
	for {
		var ts struct {
			Status     string `json:"status"`
			ExitStatus string `json:"exitstatus"`
		}
		if err := d.call(ctx, step+" (task)", http.MethodGet, p, nil, &ts); err != nil {
			return err
		}
		if ts.Status == "stopped" {
			if ts.ExitStatus != "OK" {
				return d.fail(step, fmt.Errorf("task %s ended: %s", upid, ts.ExitStatus))
			}
			return nil
		}
		t := time.NewTimer(d.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return d.fail(step, fmt.Errorf("%w: task %s not finished before the deadline", power.ErrUnreachable, upid))
		case <-t.C:
		}
	}
}

var diskKey = regexp.MustCompile(`^(scsi|virtio|sata|ide|efidisk|nvme)\d+$`)

// SetBootDevice rewrites the boot order with the device's class first.
func (d *Driver) SetBootDevice(ctx context.Context, b power.BootDevice) error {
	if _, err := power.ParseDevice(string(b.Device)); err != nil {
		return d.fail("set boot device", err)
	}
	step := "set boot device " + string(b.Device)
	switch b.Device {
	case power.DeviceBIOS:
		return d.fail(step, fmt.Errorf("%w: a Proxmox VM has no boot-to-setup override", power.ErrUnsupported))
	case power.DeviceNone:
		return nil // no override exists to clear: the order stays as set
	}
	var cfg map[string]any
	if err := d.call(ctx, step+" (read config)", http.MethodGet, d.vmPath("/config"), nil, &cfg); err != nil {
		return err
	}
	var nets, disks, cds []string
	for k, v := range cfg {
		s, _ := v.(string)
		switch {
		case strings.HasPrefix(k, "net") && isDigits(k[3:]):
			nets = append(nets, k)
		case diskKey.MatchString(k) && !strings.HasPrefix(k, "efidisk"):
			if strings.Contains(s, "media=cdrom") {
				cds = append(cds, k)
			} else {
				disks = append(disks, k)
			}
		}
	}
	sort.Strings(nets)
	sort.Strings(disks)
	sort.Strings(cds)
	first := map[power.Device][]string{power.DevicePXE: nets, power.DeviceDisk: disks, power.DeviceCDROM: cds}[b.Device]
	if len(first) == 0 {
		return d.fail(step, fmt.Errorf("%w: the VM has no %s device", power.ErrUnsupported, b.Device))
	}
	order := slices.Clone(first)
	current, _ := cfg["boot"].(string)
	if rest, ok := strings.CutPrefix(current, "order="); ok {
		for _, dev := range strings.Split(rest, ";") {
			if dev != "" && !slices.Contains(order, dev) {
				order = append(order, dev)
			}
		}
	}
	for _, dev := range slices.Concat(disks, cds, nets) {
		if !slices.Contains(order, dev) {
			order = append(order, dev)
		}
	}
	form := url.Values{"boot": {"order=" + strings.Join(order, ";")}}
	return d.call(ctx, step, http.MethodPut, d.vmPath("/config"), form, nil)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Probe reads the API version and the VM's state.
func (d *Driver) Probe(ctx context.Context) (power.ProbeResult, error) {
	res := power.ProbeResult{Driver: Name, Vendor: "Proxmox", Model: "QEMU VM " + d.vmid, PowerState: power.StateUnknown}
	var v struct {
		Version string `json:"version"`
	}
	if err := d.call(ctx, "probe (version)", http.MethodGet, "/api2/json/version", nil, &v); err != nil {
		d.mu.Lock()
		res.CertSHA256 = d.pin
		d.mu.Unlock()
		return res, err
	}
	res.Reachable, res.Firmware = true, v.Version
	d.mu.Lock()
	res.CertSHA256 = d.pin
	d.mu.Unlock()
	st, err := d.Status(ctx)
	res.PowerState = st
	return res, err
}

// Close drops idle connections.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.httpc != nil {
		d.httpc.CloseIdleConnections()
	}
	return nil
}
