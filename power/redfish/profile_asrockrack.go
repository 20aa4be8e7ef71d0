package redfish

// ASRockRack is ASRock Rack boards on AMI MegaRAC.
//
// Reference: always the current boot mode; boot settings in
// Systems/Self/SD.
//
// Sources:
//   - ASRock Rack, "BMC Redfish API Guide" (MegaRAC: Systems/Self carries
//     @Redfish.Settings pointing at /redfish/v1/Systems/Self/SD; boot
//     override PATCHes go to SD and apply at the next boot).
//   - AMI, "MegaRAC SP-X Redfish User Guide" (settings objects, If-Match).
var ASRockRack = Profile{
	Name:        "asrockrack",
	Vendor:      "ASRock Rack (MegaRAC)",
	Description: "ASRock Rack on MegaRAC (Redfish): Systems/Self, boot settings pending at Systems/Self/SD",
	Sources: []string{
		"ASRock Rack BMC Redfish API Guide",
		"AMI MegaRAC SP-X Redfish User Guide",
	},
	Recognise: func(s Signals) bool {
		return s.has("ASRock")
	},
	SystemPaths:    []string{"/redfish/v1/Systems/Self"},
	BootMode:       BootModeAlways,
	Clear:          ClearEnabledDisabled,
	Login:          AuthSession,
	SettingsSuffix: "SD",
	SoftResetTypes: []string{"GracefulShutdown", "PushPowerButton"},
}
