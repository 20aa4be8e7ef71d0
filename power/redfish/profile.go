package redfish

import (
	"slices"
	"strings"
)

// A Profile is what one vendor documents differently from the DMTF
// standard: the driver name, how the BMC is recognised, its usual system
// path, the boot mode rule, how an override is cleared and the login
// method, plus the quirks the reference lists. Everything else is the one
// implementation of the standard in this package. Each vendor's profile is
// in its own file with the reference's rules and the vendor documents they
// come from. The rules are the reference's table; the documents are named
// so a reader can check them (they were not fetched while writing this:
// the build machine has no access to vendor sites), and no profile has run
// against the real BMC yet, as the reference says of its own.
type Profile struct {
	Name        string // driver name
	Vendor      string // "Dell iDRAC 8/9/10"
	Description string // one line for `rollcall bmc drivers`
	// Sources are the public documents the rules come from.
	Sources []string

	// Recognise says whether a BMC is this vendor's, from what its service
	// root and manager say (nil: never recognised, only chosen).
	Recognise func(s Signals) bool
	// SystemPaths are tried in order before the Systems collection.
	SystemPaths []string
	// BootMode is how BootSourceOverrideMode goes into an override PATCH.
	BootMode BootModeRule
	// Clear is how an override is cleared (device none).
	Clear ClearRule
	// Login is the default login method (the auth setting overrides it).
	Login Auth
	// OnceOnly: the BMC accepts only one-time overrides.
	OnceOnly bool
	// SettingsSuffix is where pending boot settings live when the system
	// resource has no @Redfish.Settings annotation ("SD" on ASRock Rack).
	SettingsSuffix string
	// SoftResetTypes are tried in order for a graceful shutdown.
	SoftResetTypes []string
	// CycleResetTypes are tried in order for a power cycle (and a reset)
	// before ForceRestart and before off–wait–on.
	CycleResetTypes []string
	// BusyMessages are answer fragments that mean "busy, retry".
	BusyMessages []string
	// VerifyAfter400: a PATCH that worked can answer 400; read the
	// resource back before calling it a failure.
	VerifyAfter400 bool
}

// BootModeRule says how the boot mode goes into an override.
type BootModeRule int

// Boot mode rules from the reference's table.
const (
	// BootModeCurrentOrNone sends the current mode and, if the BMC refuses
	// the PATCH, sends it again without the mode.
	BootModeCurrentOrNone BootModeRule = iota
	// BootModeAlways always sends the current mode: left out, some boards
	// switch to Legacy.
	BootModeAlways
	// BootModeOmit never sends a mode: on iDRAC a mode change starts a
	// BIOS job.
	BootModeOmit
)

// ClearRule says how an override is cleared.
type ClearRule int

// Clear rules.
const (
	ClearEnabledDisabled ClearRule = iota // BootSourceOverrideEnabled: Disabled
	ClearTargetNone                       // BootSourceOverrideTarget: None, never Enabled Disabled
)

// Auth is a login method.
type Auth string

// Login methods (setting auth=session|basic).
const (
	AuthSession Auth = "session"
	AuthBasic   Auth = "basic"
)

// Signals is what identifies a vendor: service root Vendor and Product, the
// Oem keys of the root and the manager, the manager's and the system's
// Manufacturer and Model.
type Signals struct {
	RootVendor, RootProduct string
	OemKeys                 []string
	ManagerManufacturer     string
	ManagerModel            string
	ManagerFirmware         string
	SystemManufacturer      string
	SystemModel             string
}

// has reports whether any signal contains one of the words (case-insensitive).
func (s Signals) has(words ...string) bool {
	fields := append([]string{s.RootVendor, s.RootProduct, s.ManagerManufacturer, s.ManagerModel, s.SystemManufacturer}, s.OemKeys...)
	for _, f := range fields {
		lf := strings.ToLower(f)
		for _, w := range words {
			if lf != "" && strings.Contains(lf, strings.ToLower(w)) {
				return true
			}
		}
	}
	return false
}

func (s Signals) oem(keys ...string) bool {
	for _, k := range s.OemKeys {
		if slices.ContainsFunc(keys, func(x string) bool { return strings.EqualFold(x, k) }) {
			return true
		}
	}
	return false
}

// Standard is the DMTF standard with no vendor assumptions: the system is
// found through the Systems collection, the current boot mode is sent and
// dropped if refused, sessions are used when the root links them.
var Standard = Profile{
	Name:        "redfish",
	Vendor:      "DMTF Redfish",
	Description: "DMTF Redfish, any vendor: the standard without vendor rules; settings system, boot_mode, auth, verify_tls",
	Sources: []string{
		"DMTF DSP0266 Redfish Specification 1.20 (§7.5 ETags, §7.9 settings, §7.11 tasks, §8.2 sessions)",
		"DMTF DSP2046 Redfish Resource and Schema Guide 2024.1 (ComputerSystem.Boot, ComputerSystem.Reset)",
	},
	BootMode:       BootModeCurrentOrNone,
	Clear:          ClearEnabledDisabled,
	Login:          AuthSession,
	SoftResetTypes: []string{"GracefulShutdown", "PushPowerButton"},
}

// Profiles returns the standard and every vendor profile, in the order
// recognition tries them (board makers before the firmware they run:
// GIGABYTE and ASRock Rack ship AMI MegaRAC).
func Profiles() []Profile {
	return []Profile{
		Standard, IDRAC, ILO, XCC, Supermicro, XFusion, Kaytus, IRMC, CIMC,
		Gigabyte, ASRockRack, OpenBMC, AMI,
	}
}

// Recognise picks the profile for what a BMC says about itself; the
// standard when no vendor's rule matches.
func Recognise(s Signals) Profile {
	for _, p := range Profiles() {
		if p.Recognise != nil && p.Recognise(s) {
			return p
		}
	}
	return Standard
}
