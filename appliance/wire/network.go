package wire

import (
	"net/netip"
	"time"
)

// ---- requests

// FabricRequest is POST /api/v1/fabrics.
type FabricRequest struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // ethernet (default) or infiniband
}

// VLANServer is a node that serves DHCP/PXE on a VLAN, on one of its
// interfaces (empty: the one holding an address in the VLAN's subnets).
type VLANServer struct {
	Node  string `json:"node"`
	Iface string `json:"iface"`
}

// VLANRequest is POST /api/v1/vlans.
type VLANRequest struct {
	Fabric  string       `json:"fabric"`
	VID     *int         `json:"vid"` // required: 0 is untagged
	MTU     int          `json:"mtu"`
	DHCP    string       `json:"dhcp"` // off (default), full, proxy
	Servers []VLANServer `json:"servers"`
	// BootLoader is what BIOS PXE firmware is handed: ipxe (default) or
	// pxelinux, for NICs that cannot run iPXE.
	BootLoader string `json:"boot_loader,omitempty"`
}

// VLANUpdate is PUT /api/v1/vlans/{fabric}/{vid}: it replaces the mutable
// part of a VLAN, so what it omits is reset.
type VLANUpdate struct {
	DHCP    string       `json:"dhcp"`
	Servers []VLANServer `json:"servers"`
	MTU     int          `json:"mtu"`
	// BootLoader: ipxe (also when omitted) or pxelinux.
	BootLoader string `json:"boot_loader,omitempty"`
}

// SubnetRequest is POST /api/v1/subnets.
type SubnetRequest struct {
	CIDR    string   `json:"cidr"`
	Name    string   `json:"name"`
	Fabric  string   `json:"fabric"`
	VID     *int     `json:"vid"`     // required: 0 is untagged
	Purpose string   `json:"purpose"` // provisioning, mgmt, bmc, storage, ib, other
	Gateway string   `json:"gateway"`
	DNS     []string `json:"dns"`
	Domain  string   `json:"domain"`
}

// RangeRequest is POST /api/v1/ranges.
type RangeRequest struct {
	Subnet  string `json:"subnet"` // CIDR
	Kind    string `json:"kind"`   // dynamic, reserved or static
	First   string `json:"first"`
	Last    string `json:"last"`
	Comment string `json:"comment"`
}

// ReserveRequest is POST /api/v1/ips/reserve: one address held under a name
// and never handed out.
type ReserveRequest struct {
	IP   string `json:"ip"`
	Name string `json:"name"` // what holds it: switch-1, pdu-a
}

// AllocateRequest is POST /api/v1/ips/allocate.
type AllocateRequest struct {
	Subnet    string `json:"subnet"`    // CIDR; optional when ip is given
	Machine   string `json:"machine"`   // ID or name
	Interface string `json:"interface"` // optional
	IP        string `json:"ip"`        // optional: this address (static), else the next free one (auto)
}

// ---- records

// Fabric is a switched layer-2 domain.
type Fabric struct {
	Name    string    `json:"name"`
	Kind    string    `json:"kind"`
	Created time.Time `json:"created"`
	Index   uint64    `json:"index"`
}

// VLAN is a VID on a fabric (a partition key on InfiniBand).
type VLAN struct {
	Fabric     string       `json:"fabric"`
	VID        int          `json:"vid"`
	MTU        int          `json:"mtu"`
	DHCP       string       `json:"dhcp"`
	Servers    []VLANServer `json:"servers,omitempty"`
	BootLoader string       `json:"boot_loader,omitempty"`
	// Implicit marks a VLAN that `subnet add` created for a VID that had
	// none; `vlan add` may take it over.
	Implicit bool      `json:"implicit,omitempty"`
	Created  time.Time `json:"created"`
	Index    uint64    `json:"index"`
}

// Subnet is an IP network on a VLAN.
type Subnet struct {
	CIDR    netip.Prefix `json:"cidr"`
	Name    string       `json:"name,omitempty"`
	Fabric  string       `json:"fabric"`
	VID     int          `json:"vid"`
	Purpose string       `json:"purpose"`
	Gateway netip.Addr   `json:"gateway,omitzero"`
	DNS     []netip.Addr `json:"dns,omitempty"`
	Domain  string       `json:"domain,omitempty"`
	Created time.Time    `json:"created"`
	Index   uint64       `json:"index"`
}

// Range is a span of addresses inside a subnet.
type Range struct {
	Subnet  netip.Prefix `json:"subnet"`
	Kind    string       `json:"kind"`
	First   netip.Addr   `json:"first"`
	Last    netip.Addr   `json:"last"`
	Comment string       `json:"comment,omitempty"`
	Created time.Time    `json:"created"`
	Index   uint64       `json:"index"`
}

// Address is one used address.
type Address struct {
	IP        netip.Addr   `json:"ip"`
	Subnet    netip.Prefix `json:"subnet"`
	How       string       `json:"how"` // auto, static, pinned, dhcp, reserved, adopted
	Machine   string       `json:"machine,omitempty"`
	Interface string       `json:"interface,omitempty"`
	Name      string       `json:"name,omitempty"` // reserved addresses
	Created   time.Time    `json:"created"`
	Index     uint64       `json:"index"`
}

// ---- answers

// FabricList is GET /api/v1/fabrics.
type FabricList struct {
	Index   uint64   `json:"index"` // the network table's change index
	Fabrics []Fabric `json:"fabrics"`
}

// FabricDetail is a fabric with its VLANs.
type FabricDetail struct {
	Fabric
	VLANs []VLAN `json:"vlans"`
}

// VLANList is GET /api/v1/vlans.
type VLANList struct {
	Index uint64 `json:"index"`
	VLANs []VLAN `json:"vlans"`
}

// VLANDetail is a VLAN with its subnets.
type VLANDetail struct {
	VLAN
	Subnets []Subnet `json:"subnets"`
}

// SubnetView is a subnet with the number of addresses recorded in it.
type SubnetView struct {
	Subnet
	Used int `json:"used"`
}

// SubnetList is GET /api/v1/subnets.
type SubnetList struct {
	Index   uint64       `json:"index"`
	Subnets []SubnetView `json:"subnets"`
}

// SubnetDetail is a subnet with its ranges.
type SubnetDetail struct {
	SubnetView
	Ranges []Range `json:"ranges"`
}

// RangeList is GET /api/v1/ranges.
type RangeList struct {
	Index  uint64  `json:"index"`
	Ranges []Range `json:"ranges"`
}

// AddressList is GET /api/v1/ips.
type AddressList struct {
	Index     uint64    `json:"index"`
	Addresses []Address `json:"addresses"`
}
