package redfish

// Kaytus is KAYTUS (formerly Inspur) servers.
//
// Reference: current boot mode, without it if refused; there is no public
// Redfish guide: the reset may be on the chassis, and a PATCH that worked
// can answer 400.
//
// Sources:
//   - No public Redfish API guide from KAYTUS or Inspur. The rules are the
//     reference's field notes: ComputerSystem without its own
//     #ComputerSystem.Reset (the chassis carries #Chassis.Reset), and boot
//     PATCHes that apply but answer 400, so the resource is read back.
var Kaytus = Profile{
	Name:        "kaytus",
	Vendor:      "KAYTUS / Inspur",
	Description: "KAYTUS / Inspur (Redfish): reset through the chassis if needed, PATCH verified after a 400",
	Sources: []string{
		"no public Redfish guide; the reference's field notes (chassis reset, 400 after a PATCH that applied)",
	},
	Recognise: func(s Signals) bool {
		return s.oem("Inspur", "Kaytus") || s.has("Inspur", "KAYTUS")
	},
	SystemPaths:    []string{"/redfish/v1/Systems/1"},
	BootMode:       BootModeCurrentOrNone,
	Clear:          ClearEnabledDisabled,
	Login:          AuthSession,
	SoftResetTypes: []string{"GracefulShutdown", "PushPowerButton"},
	VerifyAfter400: true,
}
