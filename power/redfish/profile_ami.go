package redfish

// AMI is AMI MegaRAC SP-X boards (vendors without a profile of their own).
//
// Reference: always the current boot mode; Systems/Self; If-Match required.
//
// Sources:
//   - AMI, "MegaRAC SP-X Redfish User Guide" (Systems/Self; PATCH needs
//     If-Match with the ETag, 428 Precondition Required otherwise).
var AMI = Profile{
	Name:        "ami",
	Vendor:      "AMI MegaRAC SP-X boards",
	Description: "AMI MegaRAC SP-X boards (Redfish): Systems/Self, If-Match required",
	Sources: []string{
		"AMI MegaRAC SP-X Redfish User Guide",
	},
	Recognise: func(s Signals) bool {
		return s.oem("Ami") || s.has("American Megatrends", "MegaRAC", "AMI")
	},
	SystemPaths:    []string{"/redfish/v1/Systems/Self"},
	BootMode:       BootModeAlways,
	Clear:          ClearEnabledDisabled,
	Login:          AuthSession,
	SoftResetTypes: []string{"GracefulShutdown", "PushPowerButton"},
}
