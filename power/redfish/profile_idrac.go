package redfish

// IDRAC is Dell iDRAC 8, 9 and 10.
//
// Reference: boot mode not sent (a change starts a BIOS job); the system is
// System.Embedded.1; iDRAC 10 takes boot settings at .../Settings.
//
// Sources:
//   - Dell, "iDRAC9 Redfish API Guide" (Boot override: BootSourceOverrideMode
//     is a BIOS attribute; changing it creates a BIOS configuration job that
//     needs a reboot).
//   - Dell, "iDRAC10 Redfish API Guide" (ComputerSystem carries
//     @Redfish.Settings; boot changes go to
//     /redfish/v1/Systems/System.Embedded.1/Settings and apply at the next
//     reset; PATCH supports If-Match with the resource's ETag).
//   - Dell, "Redfish API with Dell Integrated Remote Access Controller"
//     white paper (System.Embedded.1, Chassis System.Embedded.1).
var IDRAC = Profile{
	Name:        "idrac",
	Vendor:      "Dell iDRAC 8/9/10",
	Description: "Dell iDRAC 8/9/10 (Redfish): System.Embedded.1, boot mode never sent, iDRAC 10 pending settings",
	Sources: []string{
		"Dell iDRAC9 Redfish API Guide",
		"Dell iDRAC10 Redfish API Guide",
		"Dell white paper: Redfish API with Dell Integrated Remote Access Controller",
	},
	Recognise: func(s Signals) bool {
		return s.oem("Dell") || s.has("Dell", "iDRAC")
	},
	SystemPaths:    []string{"/redfish/v1/Systems/System.Embedded.1"},
	BootMode:       BootModeOmit,
	Clear:          ClearEnabledDisabled,
	Login:          AuthSession,
	SoftResetTypes: []string{"GracefulShutdown", "PushPowerButton"},
}
