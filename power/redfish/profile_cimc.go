package redfish

// CIMC is Cisco UCS C-series CIMC.
//
// Reference: current boot mode, without it if refused; the system is
// Systems/<serial>, found through the collection.
//
// Sources:
//   - Cisco, "Cisco UCS C-Series Servers REST API Programmer's Guide"
//     (Redfish: /redfish/v1/Systems/{serial number}; Boot override with
//     BootSourceOverrideTarget and BootSourceOverrideEnabled).
var CIMC = Profile{
	Name:        "cimc",
	Vendor:      "Cisco UCS C-series CIMC",
	Description: "Cisco UCS C-series CIMC (Redfish): system found through the collection (Systems/<serial>)",
	Sources: []string{
		"Cisco UCS C-Series Servers REST API Programmer's Guide (Redfish)",
	},
	Recognise: func(s Signals) bool {
		return s.oem("Cisco") || s.has("Cisco")
	},
	BootMode:       BootModeCurrentOrNone,
	Clear:          ClearEnabledDisabled,
	Login:          AuthSession,
	SoftResetTypes: []string{"GracefulShutdown", "PushPowerButton"},
}
