package redfish

// XCC is Lenovo XClarity Controller (XCC, XCC2).
//
// Reference: current boot mode, without it if refused; the override is Once
// only.
//
// Sources:
//   - Lenovo, "XClarity Controller Redfish REST API Guide" (ComputerSystem
//     Boot: BootSourceOverrideEnabled allowable values Once and Disabled;
//     Continuous is not supported).
//   - Lenovo, "XClarity Controller 2 (XCC2) Redfish REST API Guide".
var XCC = Profile{
	Name:        "xcc",
	Vendor:      "Lenovo XCC, XCC2",
	Description: "Lenovo XClarity Controller XCC/XCC2 (Redfish): one-time boot overrides only",
	Sources: []string{
		"Lenovo XClarity Controller Redfish REST API Guide (Boot override)",
		"Lenovo XClarity Controller 2 Redfish REST API Guide",
	},
	Recognise: func(s Signals) bool {
		return s.oem("Lenovo") || s.has("Lenovo", "XClarity")
	},
	SystemPaths:    []string{"/redfish/v1/Systems/1"},
	BootMode:       BootModeCurrentOrNone,
	Clear:          ClearEnabledDisabled,
	Login:          AuthSession,
	OnceOnly:       true,
	SoftResetTypes: []string{"GracefulShutdown", "PushPowerButton"},
}
