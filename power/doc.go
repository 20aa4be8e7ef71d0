// Package power owns power and boot-device control of machines through their
// BMCs: the Driver interface every BMC driver implements, the Target a driver
// is built for, the Registry that names drivers, the typed errors a caller
// turns into events, and TLS certificate pinning for HTTPS BMCs.
//
// The drivers live in sub-packages (ipmi, redfish with its vendor profiles,
// proxmox, manual); builtin registers them all. Nothing here knows about the
// store, Raft or the API: the appliance passes plain values in and records
// results and events itself.
//
// What each driver does follows the "Power drivers", "Redfish across vendors"
// and HTTPS BMC paragraphs of the v0.4 reference.
package power
