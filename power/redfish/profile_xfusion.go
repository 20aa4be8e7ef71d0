package redfish

// XFusion is xFusion FusionServer iBMC and Huawei iBMC.
//
// Reference: current boot mode, without it if refused; session login;
// If-Match on every PATCH; ForcePowerCycle.
//
// Sources:
//   - xFusion, "FusionServer iBMC Redfish API Reference" (every PATCH needs
//     If-Match with the resource's ETag, 428 otherwise; ResetType values On,
//     ForceOff, GracefulShutdown, ForceRestart, Nmi, ForcePowerCycle).
//   - Huawei, "iBMC Redfish Interface Reference" (session login through
//     /redfish/v1/SessionService/Sessions; basic authentication refused).
var XFusion = Profile{
	Name:        "xfusion",
	Vendor:      "xFusion / Huawei iBMC",
	Description: "xFusion / Huawei iBMC (Redfish): session login, If-Match on every PATCH, ForcePowerCycle",
	Sources: []string{
		"xFusion FusionServer iBMC Redfish API Reference",
		"Huawei iBMC Redfish Interface Reference",
	},
	Recognise: func(s Signals) bool {
		return s.oem("xFusion", "Huawei") || s.has("xFusion", "Huawei")
	},
	SystemPaths:     []string{"/redfish/v1/Systems/1"},
	BootMode:        BootModeCurrentOrNone,
	Clear:           ClearEnabledDisabled,
	Login:           AuthSession,
	SoftResetTypes:  []string{"GracefulShutdown"},
	CycleResetTypes: []string{"ForcePowerCycle"},
}
