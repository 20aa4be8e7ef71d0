// Package builtin registers every power driver this module ships, by name,
// explicitly: ipmi, redfish, the twelve Redfish vendor profiles, proxmox and
// manual. The appliance calls NewRegistry once and passes the registry to
// whatever runs power commands.
package builtin

import (
	"github.com/rollcall/rollcall/power"
	"github.com/rollcall/rollcall/power/ipmi"
	"github.com/rollcall/rollcall/power/manual"
	"github.com/rollcall/rollcall/power/proxmox"
	"github.com/rollcall/rollcall/power/redfish"
)

// NewRegistry returns a registry with all built-in drivers, in the order
// `rollcall bmc drivers` lists them.
func NewRegistry() *power.Registry {
	r := power.NewEmptyRegistry()
	must := func(err error) {
		if err != nil {
			panic(err) // duplicate built-in names are a programming error
		}
	}
	must(r.Register(ipmi.Name, ipmi.Description, ipmi.New))
	for _, p := range redfish.Profiles() {
		must(r.Register(p.Name, p.Description, redfish.Factory(p)))
	}
	must(r.Register(proxmox.Name, proxmox.Description, proxmox.New))
	must(r.Register(manual.Name, manual.Description, manual.New))
	return r
}
