package redfish

// Supermicro is Supermicro X11 and later, H12 and later.
//
// Reference: always send the current boot mode (left out, some boards
// switch to Legacy).
//
// Sources:
//   - Supermicro, "Redfish Reference Guide" (X11/H11 and later; Boot
//     override PATCH carries BootSourceOverrideMode; the BMC answers 503
//     while the host is in POST or the BMC is busy).
var Supermicro = Profile{
	Name:        "supermicro",
	Vendor:      "Supermicro X11+, H12+",
	Description: "Supermicro X11+/H12+ (Redfish): current boot mode always sent, 503 while busy",
	Sources: []string{
		"Supermicro Redfish Reference Guide (X11/H11 and later)",
	},
	Recognise: func(s Signals) bool {
		return s.oem("Supermicro") || s.has("Supermicro")
	},
	SystemPaths:    []string{"/redfish/v1/Systems/1"},
	BootMode:       BootModeAlways,
	Clear:          ClearEnabledDisabled,
	Login:          AuthSession,
	SoftResetTypes: []string{"GracefulShutdown", "PushPowerButton"},
}
