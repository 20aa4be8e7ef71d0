// Package ipam owns the rules of the network model (fabric → VLAN → subnet →
// ranges) and address allocation. Every check here runs twice: on the
// proposer against its local copy, to answer fast and pick an address, and
// again inside the state machine against the replicated state, so two nodes
// racing for one address never both win.
//
// The functions read and write through a *store.Tx and never touch the clock
// or the network, so the state machine may call them.
package ipam

import (
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/rollcall/rollcall/store"
)

var labelPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

func invalid(format string, a ...any) error {
	return store.Errorf(store.ErrInvalid, format, a...)
}

func conflict(format string, a ...any) error {
	return store.Errorf(store.ErrConflict, format, a...)
}

// CheckFabric validates a new fabric.
func CheckFabric(tx *store.Tx, f store.Fabric) error {
	if !labelPattern.MatchString(f.Name) {
		return invalid("fabric name %q must be lowercase letters, digits, '.', '_' or '-' (1 to 63)", f.Name)
	}
	if f.Kind != store.FabricEthernet && f.Kind != store.FabricInfiniband {
		return invalid("fabric kind %q is not one of ethernet, infiniband", f.Kind)
	}
	if _, err := tx.Fabric(f.Name); err == nil {
		return conflict("fabric %q already exists", f.Name)
	}
	return nil
}

// CheckDeleteFabric refuses to remove a fabric that still has VLANs or
// subnets.
func CheckDeleteFabric(tx *store.Tx, name string) error {
	if _, err := tx.Fabric(name); err != nil {
		return err
	}
	vlans, err := tx.VLANs()
	if err != nil {
		return err
	}
	for _, v := range vlans {
		if v.Fabric == name {
			return conflict("fabric %q still has VLAN %d; remove it first", name, v.VID)
		}
	}
	subnets, err := tx.Subnets()
	if err != nil {
		return err
	}
	for _, s := range subnets {
		if s.Fabric == name {
			return conflict("fabric %q still has subnet %s; remove it first", name, s.CIDR)
		}
	}
	return nil
}

// CheckVLAN validates a VLAN to be created (replace=false) or updated.
func CheckVLAN(tx *store.Tx, v store.VLAN, replace bool) error {
	if _, err := tx.Fabric(v.Fabric); err != nil {
		return err
	}
	if v.VID < 0 || v.VID > 4094 {
		return invalid("VID %d is outside 0–4094 (0 is untagged)", v.VID)
	}
	if v.MTU != 0 && (v.MTU < 576 || v.MTU > 65520) {
		return invalid("MTU %d is outside 576–65520", v.MTU)
	}
	if v.DHCP != store.DHCPOff && v.DHCP != store.DHCPFull && v.DHCP != store.DHCPProxy {
		return invalid("DHCP mode %q is not one of off, full, proxy", v.DHCP)
	}
	switch v.BootLoader {
	case "", store.BootLoaderIPXE, store.BootLoaderPXELinux:
	default:
		return invalid("boot loader %q is not one of %s, %s", v.BootLoader, store.BootLoaderIPXE, store.BootLoaderPXELinux)
	}
	if v.DHCP != store.DHCPOff && len(v.Servers) == 0 {
		return invalid("VLAN %s/%d serves DHCP (%s) but names no node to serve it (-node NAME -iface IF)", v.Fabric, v.VID, v.DHCP)
	}
	if len(v.Servers) > maxVLANServers {
		return invalid("%d DHCP servers is more than the %d a VLAN may have", len(v.Servers), maxVLANServers)
	}
	seen := map[string]bool{}
	for _, s := range v.Servers {
		if s.Node == "" {
			return invalid("a DHCP server needs a node")
		}
		if store.ValidName(s.Node) != nil {
			return invalid("node %q is not a node name", store.Clip(s.Node))
		}
		if _, err := tx.Node(s.Node); err != nil {
			return invalid("node %q is not a member of the cluster (rollcall cluster status lists them)", s.Node)
		}
		if err := CheckIface(s.Iface); err != nil {
			return err
		}
		if seen[s.Node] {
			return invalid("node %q is named twice", s.Node)
		}
		seen[s.Node] = true
	}
	old, err := tx.VLAN(v.Fabric, v.VID)
	if err == nil && !replace && !old.Implicit {
		return conflict("VLAN %d already exists on fabric %q", v.VID, v.Fabric)
	}
	if err != nil && replace {
		return err
	}
	return nil
}

// maxVLANServers bounds the nodes that serve one VLAN: a cluster has a
// handful, remote racks included.
const maxVLANServers = 16

// CheckIface accepts a network interface name as Linux does, and nothing
// that could be a path: 1–15 bytes of letters, digits, '.', '-' and '_',
// not "." or "..". Empty means "find it" where a caller allows that.
func CheckIface(name string) error {
	if name == "" {
		return nil
	}
	ok := len(name) <= 15 && name != "." && name != ".."
	for _, r := range name {
		ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_')
	}
	if !ok {
		return invalid("interface %q is not an interface name (up to 15 letters, digits, '.', '-', '_')", store.Clip(name))
	}
	return nil
}

// CheckDeleteVLAN refuses to remove a VLAN that still carries subnets.
func CheckDeleteVLAN(tx *store.Tx, fabric string, vid int) error {
	if _, err := tx.VLAN(fabric, vid); err != nil {
		return err
	}
	subnets, err := tx.Subnets()
	if err != nil {
		return err
	}
	for _, s := range subnets {
		if s.Fabric == fabric && s.VID == vid {
			return conflict("VLAN %s/%d still carries subnet %s; remove it first", fabric, vid, s.CIDR)
		}
	}
	return nil
}

// CheckSubnet validates a new subnet. Subnets may not overlap at all (within
// a fabric the reference forbids it; across fabrics the appliance forbids it
// too, because addresses are recorded by value).
func CheckSubnet(tx *store.Tx, s store.Subnet) error {
	if !s.CIDR.IsValid() {
		return invalid("subnet needs a CIDR such as 10.50.0.0/24")
	}
	if s.CIDR != s.CIDR.Masked() {
		return invalid("%s has host bits set; the subnet is %s", s.CIDR, s.CIDR.Masked())
	}
	if s.CIDR.Addr().Is4() && s.CIDR.Bits() > 30 || s.CIDR.Addr().Is6() && s.CIDR.Bits() > 126 {
		return invalid("%s is too small to hold machines", s.CIDR)
	}
	if s.CIDR.Addr().Is4In6() {
		return invalid("%s: write IPv4 subnets in dotted form", s.CIDR)
	}
	if _, err := tx.Fabric(s.Fabric); err != nil {
		return err
	}
	if s.VID < 0 || s.VID > 4094 {
		return invalid("VID %d is outside 0–4094 (0 is untagged)", s.VID)
	}
	if !slices.Contains(store.Purposes, s.Purpose) {
		return invalid("purpose %q is not one of %s", s.Purpose, strings.Join(store.Purposes, ", "))
	}
	if s.Name != "" && !labelPattern.MatchString(s.Name) {
		return invalid("subnet name %q must be lowercase letters, digits, '.', '_' or '-'", s.Name)
	}
	if s.Gateway.IsValid() && !hostIn(s.CIDR, s.Gateway) {
		return invalid("gateway %s is not a host address of %s", s.Gateway, s.CIDR)
	}
	for _, d := range s.DNS {
		if !d.IsValid() {
			return invalid("DNS server address is not valid")
		}
	}
	if s.Domain != "" && !regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`).MatchString(s.Domain) {
		return invalid("domain %q is not a DNS name", s.Domain)
	}
	subnets, err := tx.Subnets()
	if err != nil {
		return err
	}
	for _, o := range subnets {
		if o.CIDR.Overlaps(s.CIDR) {
			where := "fabric " + o.Fabric
			return conflict("subnet %s overlaps subnet %s (%s, VLAN %d)", s.CIDR, o.CIDR, where, o.VID)
		}
		if s.Name != "" && o.Name == s.Name {
			return conflict("subnet name %q is taken by %s", s.Name, o.CIDR)
		}
	}
	return nil
}

// hostIn reports whether a is a usable host address of p (not the network
// or, for IPv4, the broadcast address).
func hostIn(p netip.Prefix, a netip.Addr) bool {
	if !p.Contains(a) || a == p.Masked().Addr() {
		return false
	}
	if a.Is4() && a == lastOf(p) {
		return false
	}
	return true
}

// firstHost and lastHost bound the host addresses of p.
func firstHost(p netip.Prefix) netip.Addr { return p.Masked().Addr().Next() }

func lastHost(p netip.Prefix) netip.Addr {
	l := lastOf(p)
	if l.Is4() {
		return l.Prev()
	}
	return l
}

func lastOf(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				b[i] |= 0x80 >> j
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// AddSubnet records a checked subnet, creating its VLAN (DHCP off, marked
// implicit) when the VID has none yet, and adopts the addresses machines
// already have in it.
func AddSubnet(tx *store.Tx, s store.Subnet) error {
	if err := CheckSubnet(tx, s); err != nil {
		return err
	}
	if _, err := tx.VLAN(s.Fabric, s.VID); err != nil {
		if err := tx.PutVLAN(store.VLAN{Fabric: s.Fabric, VID: s.VID, DHCP: store.DHCPOff, Implicit: true, Created: s.Created}); err != nil {
			return err
		}
	}
	if err := tx.PutSubnet(s); err != nil {
		return err
	}
	_, err := Adopt(tx, s.CIDR)
	return err
}

// CheckDeleteSubnet refuses to remove a subnet that still has addresses,
// unless force (which releases them).
func CheckDeleteSubnet(tx *store.Tx, p netip.Prefix, force bool) error {
	if _, err := tx.Subnet(p); err != nil {
		return err
	}
	if force {
		return nil
	}
	used, err := tx.Addresses(p, 3)
	if err != nil {
		return err
	}
	if len(used) > 0 {
		return conflict("subnet %s still has addresses in use (%s …); release them or use -force", p, used[0].IP)
	}
	return nil
}

// DeleteSubnet removes a subnet with its ranges, hints and (force) addresses.
func DeleteSubnet(tx *store.Tx, p netip.Prefix, force bool) error {
	if err := CheckDeleteSubnet(tx, p, force); err != nil {
		return err
	}
	used, err := tx.Addresses(p, 0)
	if err != nil {
		return err
	}
	for _, a := range used {
		if err := tx.DeleteAddress(a.IP); err != nil {
			return err
		}
	}
	ranges, err := tx.Ranges(p)
	if err != nil {
		return err
	}
	for _, r := range ranges {
		if err := tx.DeleteRange(p, r.First); err != nil {
			return err
		}
	}
	if err := tx.DeleteAllocHints(hintPrefix(p)); err != nil {
		return err
	}
	return tx.DeleteSubnet(p)
}

// CheckRange validates a new range: inside its subnet, first ≤ last, not
// overlapping another range, IPv4 only for dynamic (DHCPv6 is not served
// yet), and a dynamic range may not hold the gateway or a reserved address.
func CheckRange(tx *store.Tx, r store.Range) error {
	s, err := tx.Subnet(r.Subnet)
	if err != nil {
		return err
	}
	switch r.Kind {
	case store.RangeDynamic, store.RangeReserved, store.RangeStatic:
	default:
		return invalid("range kind %q is not one of dynamic, reserved, static", r.Kind)
	}
	if !r.First.IsValid() || !r.Last.IsValid() {
		return invalid("a range needs a first and a last address")
	}
	if r.Last.Less(r.First) {
		return invalid("range %s–%s ends before it starts", r.First, r.Last)
	}
	if !hostIn(s.CIDR, r.First) || !hostIn(s.CIDR, r.Last) {
		return invalid("range %s–%s is not inside subnet %s (hosts %s–%s)", r.First, r.Last, s.CIDR, firstHost(s.CIDR), lastHost(s.CIDR))
	}
	if r.Kind == store.RangeDynamic && r.First.Is6() {
		return invalid("dynamic range %s–%s: DHCPv6 is not served yet, so IPv6 subnets take static and reserved ranges only", r.First, r.Last)
	}
	ranges, err := tx.Ranges(s.CIDR)
	if err != nil {
		return err
	}
	for _, o := range ranges {
		if !(r.Last.Less(o.First) || o.Last.Less(r.First)) {
			return conflict("range %s–%s (%s) overlaps %s range %s–%s", r.First, r.Last, r.Kind, o.Kind, o.First, o.Last)
		}
	}
	if r.Kind == store.RangeDynamic {
		if s.Gateway.IsValid() && r.Contains(s.Gateway) {
			return conflict("dynamic range %s–%s holds the gateway %s of %s", r.First, r.Last, s.Gateway, s.CIDR)
		}
		if a, ok := firstUsedIn(tx, r.First, r.Last, store.HowReserved, store.HowStatic, store.HowPinned, store.HowAuto, store.HowStateless); ok {
			return conflict("dynamic range %s–%s holds %s (%s %s)", r.First, r.Last, a.IP, a.How, nameOf(a))
		}
	}
	return nil
}

func nameOf(a store.Address) string {
	if a.Name != "" {
		return a.Name
	}
	if a.Machine != "" {
		return a.Machine
	}
	return ""
}

// firstUsedIn finds a used address in [first, last] of one of the kinds.
func firstUsedIn(tx *store.Tx, first, last netip.Addr, how ...string) (store.Address, bool) {
	var found store.Address
	ok := false
	tx.AddressesBetween(first, last, func(a store.Address) bool {
		if slices.Contains(how, a.How) {
			found, ok = a, true
			return false
		}
		return true
	})
	return found, ok
}

// AddRange records a checked range; the subnet's spans change with it, so
// its allocation hints are dropped.
func AddRange(tx *store.Tx, r store.Range) error {
	if err := CheckRange(tx, r); err != nil {
		return err
	}
	if err := tx.PutRange(r); err != nil {
		return err
	}
	return tx.DeleteAllocHints(hintPrefix(r.Subnet))
}

// DeleteRange removes a range; the subnet's allocation hints are dropped.
func DeleteRange(tx *store.Tx, p netip.Prefix, first netip.Addr) error {
	if err := tx.DeleteRange(p, first); err != nil {
		return err
	}
	return tx.DeleteAllocHints(hintPrefix(p))
}
