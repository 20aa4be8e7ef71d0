package redfish

// OpenBMC is OpenBMC's bmcweb.
//
// Reference: current boot mode, without it if refused; Systems/system.
//
// Sources:
//   - OpenBMC bmcweb, redfish-core/lib/systems.hpp (/redfish/v1/Systems/system;
//     #ComputerSystem.Reset advertises its types through
//     @Redfish.ActionInfo at Systems/system/ResetActionInfo, not
//     AllowableValues; PowerCycle is offered).
//   - OpenBMC bmcweb, DEVELOPING.md / Redfish.md (sessions at
//     /redfish/v1/SessionService/Sessions, basic auth also accepted).
var OpenBMC = Profile{
	Name:        "openbmc",
	Vendor:      "OpenBMC (bmcweb)",
	Description: "OpenBMC bmcweb (Redfish): Systems/system, reset types from ActionInfo",
	Sources: []string{
		"OpenBMC bmcweb redfish-core/lib/systems.hpp (ResetActionInfo)",
		"OpenBMC bmcweb Redfish.md",
	},
	Recognise: func(s Signals) bool {
		return s.oem("OpenBmc") || s.has("OpenBMC")
	},
	SystemPaths:    []string{"/redfish/v1/Systems/system"},
	BootMode:       BootModeCurrentOrNone,
	Clear:          ClearEnabledDisabled,
	Login:          AuthSession,
	SoftResetTypes: []string{"GracefulShutdown", "PushPowerButton"},
}
