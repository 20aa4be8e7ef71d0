package raftfsm

import (
	"net/netip"

	"github.com/rollcall/rollcall/ipam"
	"github.com/rollcall/rollcall/store"
)

// Network model commands. Every rule is ipam's, checked here again against
// the replicated state (the proposer already checked its local copy).

// FabricPut adds a fabric.
type FabricPut struct {
	Fabric Fabric `json:"fabric"`
}

// FabricDelete removes an empty fabric.
type FabricDelete struct {
	Name string `json:"name"`
}

// VLANPut adds a VLAN, or replaces one when Replace is set.
type VLANPut struct {
	VLAN    VLAN `json:"vlan"`
	Replace bool `json:"replace,omitempty"`
}

// VLANDelete removes a VLAN without subnets.
type VLANDelete struct {
	Fabric string `json:"fabric"`
	VID    int    `json:"vid"`
}

// SubnetPut adds a subnet and adopts the addresses machines already have in
// it.
type SubnetPut struct {
	Subnet Subnet `json:"subnet"`
}

// SubnetDelete removes a subnet and its ranges; with Force also its
// addresses.
type SubnetDelete struct {
	CIDR  netip.Prefix `json:"cidr"`
	Force bool         `json:"force,omitempty"`
}

// RangePut adds a range to a subnet.
type RangePut struct {
	Range Range `json:"range"`
}

// RangeDelete removes a range.
type RangeDelete struct {
	Subnet netip.Prefix `json:"subnet"`
	First  netip.Addr   `json:"first"`
}

// AddressClaim records a used address; the state machine refuses one that
// is taken by the time the claim is applied.
type AddressClaim struct {
	Address Address `json:"address"`
}

// AddressRelease frees an address.
type AddressRelease struct {
	IP netip.Addr `json:"ip"`
}

func (*FabricPut) Type() Type      { return TypeFabricPut }
func (*FabricDelete) Type() Type   { return TypeFabricDelete }
func (*VLANPut) Type() Type        { return TypeVLANPut }
func (*VLANDelete) Type() Type     { return TypeVLANDelete }
func (*SubnetPut) Type() Type      { return TypeSubnetPut }
func (*SubnetDelete) Type() Type   { return TypeSubnetDelete }
func (*RangePut) Type() Type       { return TypeRangePut }
func (*RangeDelete) Type() Type    { return TypeRangeDelete }
func (*AddressClaim) Type() Type   { return TypeAddressClaim }
func (*AddressRelease) Type() Type { return TypeAddressRelease }

func (*FabricPut) Version() uint8      { return 1 }
func (*FabricDelete) Version() uint8   { return 1 }
func (*VLANPut) Version() uint8        { return 1 }
func (*VLANDelete) Version() uint8     { return 1 }
func (*SubnetPut) Version() uint8      { return 1 }
func (*SubnetDelete) Version() uint8   { return 1 }
func (*RangePut) Version() uint8       { return 1 }
func (*RangeDelete) Version() uint8    { return 1 }
func (*AddressClaim) Version() uint8   { return 1 }
func (*AddressRelease) Version() uint8 { return 1 }

func (c *FabricPut) apply(tx *store.Tx) error {
	f := c.Fabric.record()
	if err := ipam.CheckFabric(tx, f); err != nil {
		return err
	}
	return tx.PutFabric(f)
}

func (c *FabricDelete) apply(tx *store.Tx) error {
	if err := ipam.CheckDeleteFabric(tx, c.Name); err != nil {
		return err
	}
	return tx.DeleteFabric(c.Name)
}

func (c *VLANPut) apply(tx *store.Tx) error {
	v := c.VLAN.record()
	if err := ipam.CheckVLAN(tx, v, c.Replace); err != nil {
		return err
	}
	v.Implicit = false // an operator has described it now
	if old, err := tx.VLAN(v.Fabric, v.VID); err == nil && !c.Replace {
		v.Created = old.Created
	}
	return tx.PutVLAN(v)
}

func (c *VLANDelete) apply(tx *store.Tx) error {
	if err := ipam.CheckDeleteVLAN(tx, c.Fabric, c.VID); err != nil {
		return err
	}
	return tx.DeleteVLAN(c.Fabric, c.VID)
}

func (c *SubnetPut) apply(tx *store.Tx) error { return ipam.AddSubnet(tx, c.Subnet.record()) }

func (c *SubnetDelete) apply(tx *store.Tx) error { return ipam.DeleteSubnet(tx, c.CIDR, c.Force) }

func (c *RangePut) apply(tx *store.Tx) error { return ipam.AddRange(tx, c.Range.record()) }

func (c *RangeDelete) apply(tx *store.Tx) error { return ipam.DeleteRange(tx, c.Subnet, c.First) }

func (c *AddressClaim) apply(tx *store.Tx) error { return ipam.Claim(tx, c.Address.record()) }

func (c *AddressRelease) apply(tx *store.Tx) error { return ipam.Release(tx, c.IP) }

func networkCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeFabricPut:      {"fabric-put", 1, func() Command { return &FabricPut{} }},
		TypeFabricDelete:   {"fabric-delete", 1, func() Command { return &FabricDelete{} }},
		TypeVLANPut:        {"vlan-put", 1, func() Command { return &VLANPut{} }},
		TypeVLANDelete:     {"vlan-delete", 1, func() Command { return &VLANDelete{} }},
		TypeSubnetPut:      {"subnet-put", 1, func() Command { return &SubnetPut{} }},
		TypeSubnetDelete:   {"subnet-delete", 1, func() Command { return &SubnetDelete{} }},
		TypeRangePut:       {"range-put", 1, func() Command { return &RangePut{} }},
		TypeRangeDelete:    {"range-delete", 1, func() Command { return &RangeDelete{} }},
		TypeAddressClaim:   {"address-claim", 1, func() Command { return &AddressClaim{} }},
		TypeAddressRelease: {"address-release", 1, func() Command { return &AddressRelease{} }},
	}
}
