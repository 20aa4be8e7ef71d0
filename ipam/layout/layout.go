// Package layout owns interface layouts: how a machine's NICs become
// interfaces (physical, bond, VLAN) with addresses, written once in terms
// that fit many machines (NICs chosen by selectors, subnets by CIDR, name or
// "boot") and resolved against one machine's inventory and the network
// model into a plan: the NICs each selector chose and why, the addresses it
// would claim, and the two files a deployment writes next to the cloud-init
// seed, a cloud-init network-config version 2 and udev rules that pin each
// NIC's name to its MAC (RHEL-family cloud images boot with net.ifnames=0).
// The shape is the reference's "Machine interfaces" section.
//
// Everything here is a function of its arguments and of a store
// transaction it only reads: no clock, no network, nothing written. A plan
// is claimed later (ipam.ClaimAll in the state machine, which checks every
// address again against the state it is applied to), so making one, to
// preview or to deploy, never holds an address.
//
// cloud-init network-config v2:
// https://docs.cloud-init.io/en/latest/reference/network-config-format-v2.html
// (the subset netplan and cloud-init's other renderers share).
package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/rollcall/rollcall/ipam"
	"github.com/rollcall/rollcall/store"
)

// Bounds on a layout. A layout describes one machine's interfaces; the
// largest real ones (a storage head with a dozen ports in bonds and VLANs)
// are far below these.
const (
	// MaxBytes bounds a layout's JSON.
	MaxBytes = 64 << 10
	// MaxInterfaces bounds the interfaces of a layout.
	MaxInterfaces = 64
	// MaxLinks bounds the links of one interface.
	MaxLinks = 16
	// MaxMembers bounds the selectors of one bond.
	MaxMembers = 16
)

// Interface types.
const (
	TypePhysical = "physical"
	TypeBond     = "bond"
	TypeVLAN     = "vlan"
)

// Link modes.
const (
	ModeAuto   = "auto"    // an address from the subnet, picked at deployment
	ModeStatic = "static"  // the address the link gives
	ModeDHCP   = "dhcp"    // the machine asks DHCP
	ModeLinkUp = "link_up" // up, without an address
)

// SubnetBoot names, in a link, the subnet the machine booted from.
const SubnetBoot = "boot"

var (
	interfaceTypes = []string{TypePhysical, TypeBond, TypeVLAN}
	linkModes      = []string{ModeAuto, ModeStatic, ModeDHCP, ModeLinkUp}
	// Bond modes as Linux's bonding driver names them (cloud-init's
	// network-config v2 schema lists the same).
	bondModes = []string{"balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb"}
	lacpRates = []string{"fast", "slow"}
	hashModes = []string{"layer2", "layer2+3", "layer3+4", "encap2+3", "encap3+4"}
)

// DefaultBondMode is a bond's mode when the layout names none: LACP, what
// the switches of a machine room are set up for.
const DefaultBondMode = "802.3ad"

// defaultMIIMonitor is the carrier check interval (ms) of a bond that names
// none: without one the bonding driver never notices a dead member.
const defaultMIIMonitor = 100

// Layout is an interface layout as an operator writes it (the JSON shape of
// the reference's example).
type Layout struct {
	Interfaces []Interface `json:"interfaces"`
}

// Interface is one interface of a layout. Which fields apply depends on
// Type: Select for a physical interface, Members and Bond for a bond,
// Parent and VID for a VLAN.
type Interface struct {
	Type string `json:"type"`
	// Name is the interface's name on the machine. A physical interface
	// defaults to its NIC's name in the inventory (ibN for the Nth
	// InfiniBand port), a VLAN to PARENT.VID; a bond needs one.
	Name string `json:"name,omitempty"`
	// Select chooses the one NIC of a physical interface.
	Select string `json:"select,omitempty"`
	// Members choose a bond's NICs (each selector at least one NIC; two in
	// all at least).
	Members []string `json:"members,omitempty"`
	// Bond sets a bond's mode and options; without it, 802.3ad.
	Bond *Bond `json:"bond,omitempty"`
	// Parent names the interface a VLAN is on (a physical interface or a
	// bond of the layout), VID its tag.
	Parent string `json:"parent,omitempty"`
	VID    int    `json:"vid,omitempty"`
	// MTU of the interface; without it, the MTU of the VLAN its subnet is
	// on in the network model, if that has one, else the kernel's.
	MTU   int    `json:"mtu,omitempty"`
	Links []Link `json:"links,omitempty"`
}

// Bond is a bond's mode and options, as the bonding driver knows them.
type Bond struct {
	Mode string `json:"mode,omitempty"`
	// LACPRate is 802.3ad's: fast or slow.
	LACPRate string `json:"lacp_rate,omitempty"`
	// MIIMonitor is the carrier check interval in milliseconds (100 when
	// unset; it cannot be turned off, a bond that never checks keeps
	// sending to a dead member).
	MIIMonitor int `json:"mii_monitor_interval,omitempty"`
	// TransmitHashPolicy is for balance-xor, 802.3ad and balance-tlb.
	TransmitHashPolicy string `json:"transmit_hash_policy,omitempty"`
	MinLinks           int    `json:"min_links,omitempty"`
	// UpDelay and DownDelay are in milliseconds.
	UpDelay   int `json:"up_delay,omitempty"`
	DownDelay int `json:"down_delay,omitempty"`
}

// Link is one address configuration of an interface.
type Link struct {
	// Subnet is a CIDR, a subnet's name, or "boot"; auto needs one, static
	// finds it from its address when it has none, dhcp may name one (an
	// IPv6 one asks DHCPv6), link_up takes none.
	Subnet string `json:"subnet,omitempty"`
	Mode   string `json:"mode"`
	// Address is a static link's address, without a prefix (the subnet's).
	Address string `json:"address,omitempty"`
	// DefaultGateway routes the link's address family through the
	// subnet's gateway; one link per family may say so.
	DefaultGateway bool `json:"default_gateway,omitempty"`
}

func invalid(format string, a ...any) error { return store.Errorf(store.ErrInvalid, format, a...) }

func conflict(format string, a ...any) error { return store.Errorf(store.ErrConflict, format, a...) }

// Parse decodes and validates a layout. Decoding is strict: a field the
// layout does not have is refused by name (a typo would otherwise be
// dropped without a word), and so is anything after the object.
func Parse(b []byte) (*Layout, error) {
	if len(b) > MaxBytes {
		return nil, invalid("layout is %d bytes, more than the %d allowed", len(b), MaxBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var l Layout
	if err := dec.Decode(&l); err != nil {
		return nil, decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid("layout: data after the layout's object")
	}
	if err := checkKeys(b); err != nil {
		return nil, err
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &l, nil
}

// decodeError words a JSON decoding failure for the operator.
func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return invalid("layout is not JSON: %s (at byte %d)", strings.TrimPrefix(syn.Error(), "json: "), syn.Offset)
	case errors.As(err, &typ):
		where := typ.Field
		if where == "" {
			where = "the layout"
		}
		return invalid("layout: %s must be %s, not %s", where, jsonKind(typ.Type.Kind().String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return invalid("layout: unknown field %s (a layout has interfaces; an interface type, name, select, members, bond, parent, vid, mtu, links; a link subnet, mode, address, default_gateway)",
			strings.TrimPrefix(err.Error(), "json: unknown field "))
	case err.Error() == "EOF":
		return invalid("layout is empty")
	}
	return invalid("layout is not JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// fieldNames are the JSON names of every field a layout has.
var fieldNames = func() []string {
	var out []string
	for _, t := range []reflect.Type{reflect.TypeFor[Layout](), reflect.TypeFor[Interface](), reflect.TypeFor[Bond](), reflect.TypeFor[Link]()} {
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			out = append(out, name)
		}
	}
	return out
}()

// checkKeys refuses what encoding/json lets through: a field name in
// another case ("Mode" is read as "mode") and a field given twice in one
// object (the last would win without a word). b has decoded already, so
// it is JSON and every key is a field's name in some case.
func checkKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	var walk func() error
	walk = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k, _ := kt.(string)
				if seen[k] {
					return invalid("layout: field %q is given twice in one object", store.Clip(k))
				}
				seen[k] = true
				if !slices.Contains(fieldNames, k) {
					return invalid("layout: field %q: write it %s (field names are lowercase)", store.Clip(k), strings.ToLower(k))
				}
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for dec.More() {
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	return walk()
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64", "uint8":
		return "a whole number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice":
		return "a list"
	case "struct", "ptr":
		return "an object"
	}
	return goKind
}

// namePattern is a layout's name: it is a URL segment and a CLI argument.
var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

// CheckName validates a layout's name.
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return invalid("layout name %q must be lowercase letters, digits, '.', '_' or '-' (1 to 63)", store.Clip(name))
	}
	return nil
}

// where names an interface in a refusal: its place and what it is.
func (it *Interface) where(i int) string {
	name := it.Name
	switch {
	case name == "" && it.Type == TypeVLAN && it.Parent != "":
		name = fmt.Sprintf("%s.%d", it.Parent, it.VID)
	case name == "" && it.Select != "":
		name = it.Select
	}
	if name == "" {
		return fmt.Sprintf("interfaces[%d] (%s)", i, store.Clip(it.Type))
	}
	return fmt.Sprintf("interfaces[%d] (%s %s)", i, store.Clip(it.Type), store.Clip(name))
}

// Validate checks what a layout says by itself, without a machine: every
// rule that does not need an inventory or the network model. Parse runs it;
// Resolve runs it again, for layouts built in code.
func (l *Layout) Validate() error {
	if len(l.Interfaces) == 0 {
		return invalid("a layout needs at least one interface")
	}
	if len(l.Interfaces) > MaxInterfaces {
		return invalid("%d interfaces is more than the %d a layout may have", len(l.Interfaces), MaxInterfaces)
	}
	named := map[string]int{}    // explicit names → interface index
	unnamedPhysical := false     // a physical interface named after its NIC
	explicit := map[string]int{} // explicit NIC selectors → interface index
	for i := range l.Interfaces {
		it := &l.Interfaces[i]
		w := it.where(i)
		if !slices.Contains(interfaceTypes, it.Type) {
			return invalid("%s: type %q is not one of %s", w, store.Clip(it.Type), strings.Join(interfaceTypes, ", "))
		}
		if it.Name != "" {
			if err := ipam.CheckIface(it.Name); err != nil {
				return invalid("%s: %s", w, store.Public(err))
			}
			if j, dup := named[it.Name]; dup {
				return invalid("%s: the name %s is taken by interfaces[%d]", w, it.Name, j)
			}
			named[it.Name] = i
		}
		if it.MTU != 0 && (it.MTU < 576 || it.MTU > 65520) {
			return invalid("%s: MTU %d is outside 576–65520", w, it.MTU)
		}
		if err := it.validateKind(w, explicit, i); err != nil {
			return err
		}
		if it.Type == TypePhysical && it.Name == "" {
			unnamedPhysical = true
		}
		if err := validateLinks(w, it); err != nil {
			return err
		}
	}
	// Default VLAN names are known now; a parent named after its NIC is
	// known only against an inventory (Resolve checks it there).
	for i := range l.Interfaces {
		it := &l.Interfaces[i]
		if it.Type != TypeVLAN {
			continue
		}
		w := it.where(i)
		j, ok := named[it.Parent]
		switch {
		case ok && l.Interfaces[j].Type == TypeVLAN:
			return invalid("%s: parent %s is a VLAN; a VLAN sits on a physical interface or a bond", w, it.Parent)
		case !ok && !unnamedPhysical:
			return invalid("%s: parent %s is not an interface of the layout", w, store.Clip(it.Parent))
		}
		if it.Name == "" {
			name := fmt.Sprintf("%s.%d", it.Parent, it.VID)
			if err := ipam.CheckIface(name); err != nil {
				return invalid("%s: the default name %s is longer than an interface name may be (15): give the VLAN a name", w, name)
			}
			if k, dup := named[name]; dup {
				return invalid("%s: the name %s is taken by interfaces[%d]", w, name, k)
			}
			named[name] = i
		}
	}
	return checkGateways(l)
}

// validateKind checks the fields of one interface type and refuses the
// fields of the others.
func (it *Interface) validateKind(w string, explicit map[string]int, i int) error {
	misplaced := func(field, forType string) error {
		return invalid("%s: %s is for %s interfaces", w, field, forType)
	}
	if it.Type != TypePhysical && it.Select != "" {
		return misplaced("select", TypePhysical)
	}
	if it.Type != TypeBond && len(it.Members) > 0 {
		return misplaced("members", TypeBond)
	}
	if it.Type != TypeBond && it.Bond != nil {
		return misplaced("bond", TypeBond)
	}
	if it.Type != TypeVLAN && (it.Parent != "" || it.VID != 0) {
		return misplaced("parent and vid", TypeVLAN)
	}
	claim := func(s Selector) error {
		if !s.explicit() {
			return nil
		}
		key := s.String()
		if j, dup := explicit[key]; dup {
			return invalid("%s: %s is claimed by interfaces[%d] too; a NIC belongs to one interface", w, key, j)
		}
		explicit[key] = i
		return nil
	}
	switch it.Type {
	case TypePhysical:
		if it.Select == "" {
			return invalid("%s: a physical interface needs select (boot, name:X, mac:X, fastest:N, ib:N, all)", w)
		}
		s, err := ParseSelector(it.Select)
		if err != nil {
			return invalid("%s: %s", w, store.Public(err))
		}
		if s.Kind == SelectFastest && s.N != 1 {
			return invalid("%s: a physical interface has one NIC; %s chooses %d (make it a bond, or fastest:1)", w, s, s.N)
		}
		return claim(s)
	case TypeBond:
		if it.Name == "" {
			return invalid("%s: a bond needs a name (bond0, …)", w)
		}
		if len(it.Members) == 0 {
			return invalid("%s: a bond needs members (selectors: name:X, mac:X, fastest:N, all, …)", w)
		}
		if len(it.Members) > MaxMembers {
			return invalid("%s: %d member selectors is more than the %d a bond may have", w, len(it.Members), MaxMembers)
		}
		seen := map[string]bool{}
		for _, m := range it.Members {
			s, err := ParseSelector(m)
			if err != nil {
				return invalid("%s: member %s", w, store.Public(err))
			}
			if s.Kind == SelectIB {
				return invalid("%s: member %s is an InfiniBand port; a bond is of Ethernet NICs", w, s)
			}
			if seen[s.String()] {
				return invalid("%s: member %s is named twice", w, s)
			}
			seen[s.String()] = true
			if err := claim(s); err != nil {
				return err
			}
		}
		if len(it.Members) == 1 {
			if s, _ := ParseSelector(it.Members[0]); s.explicit() || s.Kind == SelectFastest && s.N == 1 {
				return invalid("%s: a bond with one member (%s) is no bond: give it two or more", w, s)
			}
		}
		return it.Bond.validate(w)
	case TypeVLAN:
		if it.Parent == "" {
			return invalid("%s: a VLAN needs a parent (the interface it is tagged on)", w)
		}
		if err := ipam.CheckIface(it.Parent); err != nil {
			return invalid("%s: parent %s", w, store.Public(err))
		}
		if it.VID < 1 || it.VID > 4094 {
			return invalid("%s: VID %d is outside 1–4094", w, it.VID)
		}
	}
	return nil
}

func (b *Bond) validate(w string) error {
	if b == nil {
		return nil
	}
	mode := b.mode()
	if !slices.Contains(bondModes, mode) {
		return invalid("%s: bond mode %q is not one of %s", w, store.Clip(b.Mode), strings.Join(bondModes, ", "))
	}
	if b.LACPRate != "" {
		if !slices.Contains(lacpRates, b.LACPRate) {
			return invalid("%s: lacp_rate %q is not one of %s", w, store.Clip(b.LACPRate), strings.Join(lacpRates, ", "))
		}
		if mode != "802.3ad" {
			return invalid("%s: lacp_rate is for 802.3ad bonds, not %s", w, mode)
		}
	}
	if b.TransmitHashPolicy != "" {
		if !slices.Contains(hashModes, b.TransmitHashPolicy) {
			return invalid("%s: transmit_hash_policy %q is not one of %s", w, store.Clip(b.TransmitHashPolicy), strings.Join(hashModes, ", "))
		}
		if mode != "balance-xor" && mode != "802.3ad" && mode != "balance-tlb" {
			return invalid("%s: transmit_hash_policy is for balance-xor, 802.3ad and balance-tlb bonds, not %s", w, mode)
		}
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"mii_monitor_interval", b.MIIMonitor}, {"min_links", b.MinLinks}, {"up_delay", b.UpDelay}, {"down_delay", b.DownDelay}} {
		if v.n < 0 || v.n > 600_000 {
			return invalid("%s: %s %d is outside 0–600000", w, v.name, v.n)
		}
	}
	if b.MinLinks > 0 && mode != "802.3ad" {
		return invalid("%s: min_links is for 802.3ad bonds, not %s", w, mode)
	}
	return nil
}

func (b *Bond) mode() string {
	if b == nil || b.Mode == "" {
		return DefaultBondMode
	}
	return b.Mode
}

func validateLinks(w string, it *Interface) error {
	if len(it.Links) > MaxLinks {
		return invalid("%s: %d links is more than the %d an interface may have", w, len(it.Links), MaxLinks)
	}
	for j, ln := range it.Links {
		lw := fmt.Sprintf("%s links[%d]", w, j)
		if !slices.Contains(linkModes, ln.Mode) {
			return invalid("%s: mode %q is not one of %s", lw, store.Clip(ln.Mode), strings.Join(linkModes, ", "))
		}
		if ln.Subnet != "" && ln.Subnet != SubnetBoot {
			if _, err := parseSubnetRef(ln.Subnet); err != nil {
				return invalid("%s: %s", lw, store.Public(err))
			}
		}
		if ln.Address != "" && ln.Mode != ModeStatic {
			return invalid("%s: address is for static links, not %s", lw, ln.Mode)
		}
		switch ln.Mode {
		case ModeAuto:
			if ln.Subnet == "" {
				return invalid("%s: an auto link needs a subnet (a CIDR, a subnet's name, or boot)", lw)
			}
		case ModeStatic:
			a, err := parseAddress(ln.Address)
			if err != nil {
				return invalid("%s: %s", lw, store.Public(err))
			}
			if p, err := parseSubnetRef(ln.Subnet); err == nil && p.IsValid() && !p.Contains(a) {
				return invalid("%s: static address %s is outside its subnet %s", lw, a, p)
			}
		case ModeDHCP:
			if ln.DefaultGateway {
				return invalid("%s: a DHCP link's routes are the DHCP server's; default_gateway is for auto and static links", lw)
			}
		case ModeLinkUp:
			if ln.Subnet != "" || ln.DefaultGateway {
				return invalid("%s: a link_up link has no address, so no subnet or default_gateway", lw)
			}
			if len(it.Links) > 1 {
				return invalid("%s: link_up is an interface without addresses; it cannot stand beside other links", lw)
			}
		}
	}
	return nil
}

// checkGateways refuses two default gateways of one family where the
// family is known from the layout alone (static addresses, CIDRs); the
// rest is checked against the network model by Resolve.
func checkGateways(l *Layout) error {
	var four, six string
	for i, it := range l.Interfaces {
		for j, ln := range it.Links {
			if !ln.DefaultGateway {
				continue
			}
			var is6 bool
			if a, err := parseAddress(ln.Address); err == nil {
				is6 = a.Is6()
			} else if p, err := parseSubnetRef(ln.Subnet); err == nil && p.IsValid() {
				is6 = p.Addr().Is6()
			} else {
				continue
			}
			here := fmt.Sprintf("%s links[%d]", it.where(i), j)
			at := &four
			if is6 {
				at = &six
			}
			if *at != "" {
				return invalid("%s: a second default gateway (the first is %s); one link per address family routes by default", here, *at)
			}
			*at = here
		}
	}
	return nil
}

// parseSubnetRef reads a link's subnet: a CIDR (valid prefix, host bits
// clear) or a subnet's name (an invalid prefix is returned for a name).
func parseSubnetRef(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, invalid("subnet %q is not a CIDR such as 10.60.0.0/24", store.Clip(s))
		}
		if p != p.Masked() {
			return p, invalid("subnet %s has host bits set; the subnet is %s", p, p.Masked())
		}
		return p, nil
	}
	if !namePattern.MatchString(s) {
		return netip.Prefix{}, invalid("subnet %q is neither a CIDR, a subnet's name, nor boot", store.Clip(s))
	}
	return netip.Prefix{}, nil
}

func parseAddress(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, invalid("a static link needs an address")
	}
	if strings.Contains(s, "/") {
		return netip.Addr{}, invalid("address %q: give the address alone, the prefix is its subnet's", store.Clip(s))
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, invalid("address %q is not an IP address", store.Clip(s))
	}
	if a.Is4In6() {
		return netip.Addr{}, invalid("address %s: write IPv4 addresses in dotted form", a)
	}
	return a, nil
}
