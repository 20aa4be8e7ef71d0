// Package ipmi is the IPMI 2.0 over LAN power driver (lanplus, RMCP+),
// built on github.com/bougou/go-ipmi instead of shelling out to ipmitool.
//
// Every call opens one RMCP+ session, does its work and closes the session,
// as ipmitool does. The cipher suite is chosen explicitly: auto-detection
// cost seconds per call against ipmi_sim (DESIGN, BMC notes). By default
// suite 17 (HMAC-SHA256, AES-CBC-128) is tried and suite 3 (HMAC-SHA1) only
// when the BMC refuses 17 at Open Session; a BMC that refuses the user or
// password is never asked again in the same call, so a wrong password costs
// one failed login, never an account lock-out.
//
// Commands: IPMI v2.0 §28.2 Get Chassis Status, §28.3 Chassis Control,
// §28.13 Set System Boot Options (parameter 5, boot flags: valid, persistent,
// EFI, device selector), §20.1 Get Device ID.
package ipmi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/chassis"
	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/rollcall/rollcall/power"
)

// Name is the registry name.
const Name = "ipmi"

// Description is the line shown by `rollcall bmc drivers`.
const Description = "IPMI 2.0 over LAN (lanplus), any vendor; settings cipher (default 17, then 3), privilege, port, timeout"

// Defaults. A step is one IPMI request/response; a call is a whole
// session (open, RAKP, command, close).
const (
	DefaultPacketTimeout = 2 * time.Second
	DefaultRetransmits   = 2
	DefaultCallTimeout   = 20 * time.Second
)

// Config is the driver's checked settings.
type Config struct {
	Host     string
	Port     int
	User     string
	Password string
	// Ciphers are tried in order; the next one only when the BMC refuses
	// the previous one at Open Session.
	Ciphers       []types.CipherSuiteID
	Privilege     types.PrivilegeLevel
	PacketTimeout time.Duration
	Retransmits   int
}

var privileges = map[string]types.PrivilegeLevel{
	"administrator": types.PrivilegeLevelAdministrator,
	"admin":         types.PrivilegeLevelAdministrator,
	"operator":      types.PrivilegeLevelOperator,
	"user":          types.PrivilegeLevelUser,
}

// ParseTarget checks a target's settings: cipher (0–17, default 17 with
// fallback to 3), privilege (administrator|operator|user), port, timeout
// (per packet, Go duration), retransmits, interface (lanplus only).
func ParseTarget(t power.Target) (Config, error) {
	cfg := Config{
		User: t.User, Password: t.Password,
		Ciphers:       []types.CipherSuiteID{types.CipherSuiteID17, types.CipherSuiteID3},
		Privilege:     types.PrivilegeLevelAdministrator,
		PacketTimeout: DefaultPacketTimeout,
		Retransmits:   DefaultRetransmits,
		Port:          623,
	}
	host, port := t.Address, ""
	if h, p, err := net.SplitHostPort(t.Address); err == nil {
		host, port = h, p
	}
	host = strings.Trim(host, "[]")
	if host == "" {
		return cfg, fmt.Errorf("ipmi address: %w: empty", power.ErrInvalid)
	}
	cfg.Host = host
	if p := t.Setting("port", port); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return cfg, fmt.Errorf("ipmi port %q: %w; want 1-65535", p, power.ErrInvalid)
		}
		cfg.Port = n
	}
	if c := t.Setting("cipher", ""); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 || n > 17 {
			return cfg, fmt.Errorf("ipmi cipher %q: %w; allowed: 0-17 (17 or 3 on most BMCs)", c, power.ErrInvalid)
		}
		cfg.Ciphers = []types.CipherSuiteID{types.CipherSuiteID(n)}
	}
	if p := t.Setting("privilege", ""); p != "" {
		lvl, ok := privileges[strings.ToLower(p)]
		if !ok {
			return cfg, fmt.Errorf("ipmi privilege %q: %w; allowed: administrator, operator, user", p, power.ErrInvalid)
		}
		cfg.Privilege = lvl
	}
	if i := t.Setting("interface", "lanplus"); i != "lanplus" {
		return cfg, fmt.Errorf("ipmi interface %q: %w; allowed: lanplus", i, power.ErrInvalid)
	}
	if s := t.Setting("timeout", ""); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > time.Minute {
			return cfg, fmt.Errorf("ipmi timeout %q: %w; want a duration up to 1m", s, power.ErrInvalid)
		}
		cfg.PacketTimeout = d
	}
	if s := t.Setting("retransmits", ""); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 5 {
			return cfg, fmt.Errorf("ipmi retransmits %q: %w; want 0-5", s, power.ErrInvalid)
		}
		cfg.Retransmits = n
	}
	return cfg, nil
}

// Driver is the IPMI driver for one BMC.
type Driver struct {
	cfg  Config
	addr string
	log  *slog.Logger
}

// New is the power.Factory.
func New(t power.Target, log *slog.Logger) (power.Driver, error) {
	cfg, err := ParseTarget(t)
	if err != nil {
		return nil, power.Errorf(Name, t.Address, "check settings", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Driver{cfg: cfg, addr: t.Address, log: log}, nil
}

// NewDriver builds a driver from an already checked Config.
func NewDriver(cfg Config, log *slog.Logger) *Driver {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Driver{cfg: cfg, addr: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)), log: log}
}

func (d *Driver) fail(step string, err error) error { return power.Errorf(Name, d.addr, step, err) }

// session runs fn inside one RMCP+ session.
func (d *Driver) session(ctx context.Context, fn func(ctx context.Context, c *client.Client) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCallTimeout)
		defer cancel()
	}
	c, err := d.connect(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// Closing is best effort but bounded: a BMC that stopped answering
		// must not hold the caller.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.PacketTimeout)
		defer cancel()
		_ = c.Close(cctx)
	}()
	return fn(ctx, c)
}

func (d *Driver) connect(ctx context.Context) (*client.Client, error) {
	var errs []error
	for i, cs := range d.cfg.Ciphers {
		c, err := client.NewClient(d.cfg.Host, d.cfg.Port, d.cfg.User, d.cfg.Password)
		if err != nil {
			return nil, d.fail("open session", fmt.Errorf("%w: %w", power.ErrInvalid, err))
		}
		c.WithInterface(client.InterfaceLanplus).
			WithTimeout(d.cfg.PacketTimeout).
			WithRetry(d.cfg.Retransmits).
			WithCipherSuiteID(cs).
			WithMaxPrivilegeLevel(d.cfg.Privilege)
		err = c.Connect(ctx)
		if err == nil {
			return c, nil
		}
		kind, cerr := classifyConnect(ctx, err)
		d.log.Debug("ipmi session failed", "cipher", int(cs), "kind", kind, "err", err)
		switch kind {
		case failCipher:
			errs = append(errs, fmt.Errorf("cipher suite %d refused: %w", cs, err))
			if i+1 < len(d.cfg.Ciphers) {
				continue
			}
			return nil, d.fail("open session", fmt.Errorf("%w: cipher suites %v refused: %w", power.ErrUnsupported, d.cfg.Ciphers, errors.Join(errs...)))
		case failAuth:
			// One failed login, no second attempt with another suite: BMCs
			// lock an account after a few failures.
			return nil, d.fail(fmt.Sprintf("login as %q (cipher suite %d)", d.cfg.User, cs), cerr)
		default:
			return nil, d.fail("connect", cerr)
		}
	}
	return nil, d.fail("open session", fmt.Errorf("%w: no cipher suite configured", power.ErrInvalid))
}

type failKind string

const (
	failCipher  failKind = "cipher"
	failAuth    failKind = "auth"
	failNetwork failKind = "network"
	failOther   failKind = "other"
)

// classifyConnect sorts a go-ipmi Connect error by the step that failed.
// go-ipmi reports the step only in its message ("Get Channel Authentication
// Capabilities failed", "RMCP+ Open Session failed", "rakp1 failed", …) and
// the RMCP+ status code (IPMI v2.0 Table 13-15) as *types.RmcpStatusError.
func classifyConnect(ctx context.Context, err error) (failKind, error) {
	msg := err.Error()
	var st *types.RmcpStatusError
	hasStatus := errors.As(err, &st)
	switch {
	case ctx.Err() != nil:
		return failNetwork, fmt.Errorf("%w: %w (%v)", power.ErrUnreachable, ctx.Err(), err)
	case strings.Contains(msg, "Get Channel Authentication Capabilities"):
		if strings.Contains(msg, "connection refused") {
			return failNetwork, fmt.Errorf("%w: nothing listens on the IPMI port: %w", power.ErrUnreachable, err)
		}
		if strings.Contains(msg, "no datagram matched") || strings.Contains(msg, "no matching IPMI response") {
			return failNetwork, fmt.Errorf("%w: no valid IPMI answer (silent, or not an IPMI BMC): %w", power.ErrUnreachable, err)
		}
		if isTimeout(err) {
			return failNetwork, fmt.Errorf("%w: no answer to Get Channel Authentication Capabilities: %w", power.ErrUnreachable, err)
		}
		return failOther, fmt.Errorf("%w: %w", power.ErrBadAnswer, err)
	case strings.Contains(msg, "Open Session failed"):
		// A refused suite answers with a status code (no matching cipher
		// suite, invalid algorithm); some BMCs (ipmi_sim with 17) just don't
		// answer. Both mean "try the next suite"; no credentials were used.
		return failCipher, err
	case errors.Is(err, client.ErrRAKPAuthentication),
		hasStatus && (st.StatusCode() == types.RmcpStatusCodeUnauthorizedName ||
			st.StatusCode() == types.RmcpStatusCodeInvalidRole ||
			st.StatusCode() == types.RmcpStatusCodeUnauthorizedRoleOfPriLevel ||
			st.StatusCode() == types.RmcpStatusCodeInvalidIntegrityCheckValue):
		return failAuth, fmt.Errorf("%w: %w", power.ErrAuth, err)
	case strings.Contains(msg, "rakp") || strings.Contains(msg, "RAKP"):
		if isTimeout(err) {
			return failAuth, fmt.Errorf("%w: no answer during login (RAKP): %w", power.ErrUnreachable, err)
		}
		return failAuth, fmt.Errorf("%w: %w", power.ErrAuth, err)
	case strings.Contains(msg, "SetSessionPrivilegeLevel"):
		return failAuth, fmt.Errorf("%w: privilege refused: %w", power.ErrAuth, err)
	case isTimeout(err):
		return failNetwork, fmt.Errorf("%w: %w", power.ErrUnreachable, err)
	}
	return failOther, err
}

func isTimeout(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout") ||
		strings.Contains(err.Error(), "i/o timeout")
}

func (d *Driver) cmdErr(ctx context.Context, err error) error {
	if ctx.Err() != nil || isTimeout(err) {
		return fmt.Errorf("%w: %w", power.ErrUnreachable, err)
	}
	return err
}

// Status asks Get Chassis Status.
func (d *Driver) Status(ctx context.Context) (power.PowerState, error) {
	st := power.StateUnknown
	err := d.session(ctx, func(ctx context.Context, c *client.Client) error {
		s, err := d.status(ctx, c)
		st = s
		return err
	})
	return st, err
}

func (d *Driver) status(ctx context.Context, c *client.Client) (power.PowerState, error) {
	res, err := c.GetChassisStatus(ctx)
	if err != nil {
		return power.StateUnknown, d.fail("read power state (Get Chassis Status)", d.cmdErr(ctx, err))
	}
	if res.PowerIsOn {
		return power.StateOn, nil
	}
	return power.StateOff, nil
}

// Power sends Chassis Control. Cycle and reset of a machine that is off
// power it on: IPMI v2.0 §28.3 leaves a power cycle of an off chassis
// undefined (many BMCs answer 0xD5), and "recommission now" must boot it.
func (d *Driver) Power(ctx context.Context, a power.Action) error {
	if _, err := power.ParseAction(string(a)); err != nil {
		return d.fail("power", err)
	}
	return d.session(ctx, func(ctx context.Context, c *client.Client) error {
		var ctl chassis.ChassisControl
		switch a {
		case power.ActionOn:
			ctl = chassis.ChassisControlPowerUp
		case power.ActionOff:
			ctl = chassis.ChassisControlPowerDown
		case power.ActionSoft:
			ctl = chassis.ChassisControlSoftShutdown
		case power.ActionCycle, power.ActionReset:
			st, err := d.status(ctx, c)
			if err != nil {
				return err
			}
			switch {
			case st == power.StateOff:
				ctl = chassis.ChassisControlPowerUp
			case a == power.ActionCycle:
				ctl = chassis.ChassisControlPowerCycle
			default:
				ctl = chassis.ChassisControlHardReset
			}
		}
		if _, err := c.ChassisControl(ctx, ctl); err != nil {
			return d.fail(fmt.Sprintf("power %s (Chassis Control %d)", a, ctl), d.cmdErr(ctx, err))
		}
		return nil
	})
}

var selectors = map[power.Device]types.BootDeviceSelector{
	power.DevicePXE:   types.BootDeviceSelectorForcePXE,
	power.DeviceDisk:  types.BootDeviceSelectorForceHardDrive,
	power.DeviceCDROM: types.BootDeviceSelectorForceCDROM,
	power.DeviceBIOS:  types.BootDeviceSelectorForceBIOSSetup,
	power.DeviceNone:  types.BootDeviceSelectorNoOverride,
}

// SetBootDevice sets boot flags (parameter 5) with the valid, persistent
// and EFI bits. go-ipmi's SetBootDevice is used: SetBootParamBootFlags
// failed on both simulators (DESIGN, BMC notes).
func (d *Driver) SetBootDevice(ctx context.Context, b power.BootDevice) error {
	sel, ok := selectors[b.Device]
	if !ok {
		_, err := power.ParseDevice(string(b.Device))
		return d.fail("set boot device", err)
	}
	bootType := types.BIOSBootTypeLegacy
	if b.UEFI {
		bootType = types.BIOSBootTypeEFI
	}
	return d.session(ctx, func(ctx context.Context, c *client.Client) error {
		if err := c.SetBootDevice(ctx, sel, bootType, b.Persistent); err != nil {
			return d.fail(fmt.Sprintf("set boot device %s (Set System Boot Options)", b.Device), d.cmdErr(ctx, err))
		}
		return nil
	})
}

// Probe reads Get Device ID and the power state.
func (d *Driver) Probe(ctx context.Context) (power.ProbeResult, error) {
	res := power.ProbeResult{Driver: Name, PowerState: power.StateUnknown}
	err := d.session(ctx, func(ctx context.Context, c *client.Client) error {
		res.Reachable = true
		id, err := c.GetDeviceID(ctx)
		if err != nil {
			return d.fail("probe (Get Device ID)", d.cmdErr(ctx, err))
		}
		res.Vendor = Manufacturer(uint32(id.ManufacturerID))
		res.Model = fmt.Sprintf("product %#04x", id.ProductID)
		res.Firmware = fmt.Sprintf("%d.%02x", id.MajorFirmwareRevision, id.MinorFirmwareRevision)
		st, err := d.status(ctx, c)
		res.PowerState = st
		return err
	})
	return res, err
}

// Close does nothing: sessions do not outlive a call.
func (d *Driver) Close() error { return nil }

// Manufacturer names a few IANA enterprise numbers BMCs report in Get
// Device ID; others are shown as the number.
func Manufacturer(id uint32) string {
	switch id {
	case 674:
		return "Dell"
	case 11:
		return "HPE"
	case 19046:
		return "Lenovo"
	case 2:
		return "IBM"
	case 10876:
		return "Supermicro"
	case 2011:
		return "Huawei"
	case 10368:
		return "Fujitsu"
	case 5771:
		return "Cisco"
	case 343:
		return "Intel"
	case 20974:
		return "AMI"
	case 49622:
		return "OpenBMC"
	case 4753:
		return "OpenIPMI"
	}
	return fmt.Sprintf("IANA %d", id)
}
