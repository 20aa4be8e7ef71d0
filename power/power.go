package power

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// PowerState is what a BMC reports about the machine's power.
type PowerState string

// Power states. Drivers map vendor answers (PoweringOn, Paused, …) onto these.
const (
	StateOn      PowerState = "on"
	StateOff     PowerState = "off"
	StateUnknown PowerState = "unknown"
)

// Action is a power action an operator or the appliance asks for.
type Action string

// Actions, as `rollcall power ID ACTION` spells them.
const (
	ActionOn    Action = "on"    // power on; nothing to do when already on
	ActionOff   Action = "off"   // hard power off; nothing to do when already off
	ActionSoft  Action = "soft"  // graceful shutdown through the OS (ACPI)
	ActionCycle Action = "cycle" // off then on; a machine that is off is powered on
	ActionReset Action = "reset" // hard reset; a machine that is off is powered on
)

// Actions lists the allowed actions in the order the CLI shows them.
var Actions = []Action{ActionOn, ActionOff, ActionSoft, ActionCycle, ActionReset}

// ParseAction checks s against the allowed actions.
func ParseAction(s string) (Action, error) {
	for _, a := range Actions {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("power action %q: %w; allowed: %s", s, ErrInvalid, joinStrings(Actions))
}

// Device is a boot device.
type Device string

// Boot devices, as `rollcall bootdev ID DEV` spells them.
const (
	DevicePXE   Device = "pxe"
	DeviceDisk  Device = "disk"
	DeviceCDROM Device = "cdrom"
	DeviceBIOS  Device = "bios" // firmware setup
	DeviceNone  Device = "none" // clear the override: the firmware's own order
)

// Devices lists the allowed boot devices.
var Devices = []Device{DevicePXE, DeviceDisk, DeviceCDROM, DeviceBIOS, DeviceNone}

// ParseDevice checks s against the allowed boot devices.
func ParseDevice(s string) (Device, error) {
	for _, d := range Devices {
		if string(d) == s {
			return d, nil
		}
	}
	return "", fmt.Errorf("boot device %q: %w; allowed: %s", s, ErrInvalid, joinStrings(Devices))
}

// BootDevice is a boot override.
type BootDevice struct {
	Device Device
	// Persistent keeps the override for every boot; otherwise it applies to
	// the next boot only.
	Persistent bool
	// UEFI asks for an EFI boot rather than a legacy (BIOS) one. IPMI sends
	// it as the EFI boot-flag bit. Redfish follows the BMC's current
	// BootSourceOverrideMode (or the boot_mode setting) as the reference says
	// and uses UEFI only when the BMC reports no mode at all.
	UEFI bool
}

// ProbeResult is what a driver learned about a BMC without changing anything.
type ProbeResult struct {
	Reachable        bool
	Vendor           string
	Model            string
	Firmware         string // BMC firmware version
	RedfishAvailable bool
	// Driver is the driver name the probe recommends for this BMC (a
	// Redfish vendor profile, or the driver that probed).
	Driver string
	// CertSHA256 is the SHA-256 (lowercase hex) of the certificate an HTTPS
	// BMC showed: what the caller pins as tls_fingerprint.
	CertSHA256 string
	PowerState PowerState
	// SystemPath is the Redfish system resource in use.
	SystemPath string
}

// Target is one BMC as the appliance knows it. It is a plain value: the
// appliance unseals the password and copies the record's fields in.
type Target struct {
	// Address is a host, host:port, or for HTTPS drivers an https:// URL.
	Address  string
	User     string
	Password string
	// Settings are the record's per-driver settings (cipher, privilege,
	// system, boot_mode, auth, verify_tls, node, vmid, …). Keys a driver
	// does not know are ignored; values it knows are checked.
	Settings map[string]string
	// PinnedCertSHA256 is the pinned certificate fingerprint (hex, colons
	// and case ignored). Empty means "not pinned yet": an HTTPS driver reads
	// the certificate first, pins it for its own lifetime and reports it in
	// ProbeResult.CertSHA256 for the caller to record.
	PinnedCertSHA256 string
}

// Setting returns a setting or def when it is unset or empty.
func (t Target) Setting(key, def string) string {
	if v, ok := t.Settings[key]; ok && v != "" {
		return v
	}
	return def
}

// Driver controls one BMC. Every method that talks to the BMC takes ctx and
// returns before its deadline; a driver adds its own per-step timeouts when
// ctx has none. Errors are *Error values naming the BMC and the step.
//
// A Driver may keep a session between calls (Redfish logs in once); Close
// ends it. Drivers are safe for use by one goroutine at a time per BMC.
type Driver interface {
	Status(ctx context.Context) (PowerState, error)
	Power(ctx context.Context, a Action) error
	SetBootDevice(ctx context.Context, b BootDevice) error
	Probe(ctx context.Context) (ProbeResult, error)
	Close() error
}

// Sentinel errors, checked with errors.Is. *Error wraps one of them (or a
// cause that says more).
var (
	ErrInvalid        = errors.New("not allowed")
	ErrUnknownDriver  = errors.New("unknown power driver")
	ErrAuth           = errors.New("wrong credentials or not enough privilege")
	ErrUnreachable    = errors.New("bmc unreachable")
	ErrUnsupported    = errors.New("not offered by this bmc")
	ErrBadAnswer      = errors.New("bmc answered something that is not a valid reply")
	ErrBusy           = errors.New("bmc still busy")
	ErrNoPowerControl = errors.New("no power control for this machine")
	ErrUnsafeLink     = errors.New("bmc link leaves the bmc or /redfish/")
	ErrNoRedfish      = errors.New("bmc does not speak redfish")
)

// ErrCertificateChanged is returned when an HTTPS BMC shows a certificate
// other than the pinned one. No credentials were sent. The caller records
// the `bmc certificate changed` event with both fingerprints.
type ErrCertificateChanged struct {
	Old string // pinned SHA-256
	New string // SHA-256 the BMC showed
}

func (e ErrCertificateChanged) Error() string {
	return fmt.Sprintf("bmc certificate changed: pinned sha256 %s, bmc showed %s; no credentials sent", e.Old, e.New)
}

// Error is a driver failure: which driver, which BMC, which step, and why.
type Error struct {
	Driver string
	BMC    string // the address as configured
	Step   string // "login", "read power state", "reset ForceOff", …
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s bmc %s: %s: %v", e.Driver, e.BMC, e.Step, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error; drivers use it for every failure they return.
func Errorf(driver, bmc, step string, err error) error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) && pe.BMC == bmc {
		return err // already names the BMC and a (finer) step
	}
	return &Error{Driver: driver, BMC: bmc, Step: step, Err: err}
}

func joinStrings[T ~string](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}
