package redfish

// IRMC is Fujitsu / Fsas Technologies iRMC S5 and S6.
//
// Reference: boot mode not sent; the system is Systems/0; the ETag comes
// from the body; clearing is Target None (never Enabled Disabled); no
// GracefulShutdown (use the power button).
//
// Sources:
//   - Fujitsu, "iRMC S5 Redfish API Specification" (Systems/0; PATCH needs
//     If-Match with @odata.etag from the body, no ETag header;
//     BootSourceOverrideTarget None clears the override).
//   - Fsas Technologies, "iRMC S6 Redfish API Specification"
//     (ComputerSystem.Reset values On, ForceOff, ForceRestart,
//     PushPowerButton, Nmi, PowerCycle: no GracefulShutdown).
var IRMC = Profile{
	Name:        "irmc",
	Vendor:      "Fujitsu / Fsas iRMC S5, S6",
	Description: "Fujitsu / Fsas iRMC S5/S6 (Redfish): Systems/0, ETag from the body, clear with Target None, soft off by power button",
	Sources: []string{
		"Fujitsu iRMC S5 Redfish API Specification",
		"Fsas Technologies iRMC S6 Redfish API Specification",
	},
	Recognise: func(s Signals) bool {
		return s.oem("ts_fujitsu", "Fujitsu") || s.has("Fujitsu", "Fsas", "iRMC")
	},
	SystemPaths:    []string{"/redfish/v1/Systems/0"},
	BootMode:       BootModeOmit,
	Clear:          ClearTargetNone,
	Login:          AuthSession,
	SoftResetTypes: []string{"PushPowerButton"},
}
