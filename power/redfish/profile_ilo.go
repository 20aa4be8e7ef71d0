package redfish

// ILO is HPE iLO 4 (2.30 and later), iLO 5 and iLO 6.
//
// Reference: current boot mode, without it if refused; no PowerCycle (use
// ForceRestart); no boot changes during POST (retried).
//
// Sources:
//   - HPE, "iLO RESTful API Documentation" for iLO 5 and iLO 6
//     (ComputerSystem.Reset allows On, ForceOff, GracefulShutdown,
//     ForceRestart, Nmi, PushPowerButton, GracefulRestart: no PowerCycle).
//   - HPE iLO message registry iLO.2.x: UnableToModifyDuringSystemPOST
//     ("The value for the property cannot be changed while the computer
//     system BIOS is in POST"): a 400 that clears when POST ends.
//   - HPE, "iLO 4 RESTful API" (Redfish from firmware 2.30).
var ILO = Profile{
	Name:        "ilo",
	Vendor:      "HPE iLO 4 (2.30+), 5, 6",
	Description: "HPE iLO 4 (2.30+)/5/6 (Redfish): no PowerCycle (ForceRestart), boot changes retried during POST",
	Sources: []string{
		"HPE iLO 5 / iLO 6 RESTful API Documentation (ComputerSystem.Reset, Boot)",
		"HPE iLO message registry iLO.2.x, UnableToModifyDuringSystemPOST",
		"HPE iLO 4 RESTful API (Redfish 1.0 from firmware 2.30)",
	},
	Recognise: func(s Signals) bool {
		return s.oem("Hpe", "Hp") || s.has("HPE", "Hewlett", "iLO")
	},
	SystemPaths:     []string{"/redfish/v1/Systems/1"},
	BootMode:        BootModeCurrentOrNone,
	Clear:           ClearEnabledDisabled,
	Login:           AuthSession,
	SoftResetTypes:  []string{"GracefulShutdown", "PushPowerButton"},
	CycleResetTypes: []string{"ForceRestart"},
	BusyMessages:    []string{"UnableToModifyDuringSystemPOST", "SystemPOST"},
}
