package redfish

// Gigabyte is GIGABYTE servers on AMI MegaRAC SP-X.
//
// Reference: always the current boot mode; Systems/Self; If-Match required;
// a short reset list.
//
// Sources:
//   - GIGABYTE, "Server Management Redfish API User Guide" (MegaRAC SP-X:
//     Systems/Self; PATCH without If-Match answers 428; ResetType values
//     On, ForceOff, GracefulShutdown, ForceRestart only).
//   - AMI, "MegaRAC SP-X Redfish User Guide" (If-Match on PATCH).
var Gigabyte = Profile{
	Name:        "gigabyte",
	Vendor:      "GIGABYTE (MegaRAC SP-X)",
	Description: "GIGABYTE on MegaRAC SP-X (Redfish): Systems/Self, If-Match required, short reset list",
	Sources: []string{
		"GIGABYTE Server Management Redfish API User Guide",
		"AMI MegaRAC SP-X Redfish User Guide",
	},
	Recognise: func(s Signals) bool {
		return s.has("GIGABYTE", "Giga Computing")
	},
	SystemPaths:    []string{"/redfish/v1/Systems/Self"},
	BootMode:       BootModeAlways,
	Clear:          ClearEnabledDisabled,
	Login:          AuthSession,
	SoftResetTypes: []string{"GracefulShutdown"},
}
