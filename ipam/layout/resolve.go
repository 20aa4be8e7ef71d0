package layout

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/rollcall/rollcall/ipam"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// Input is the machine a layout is resolved for.
type Input struct {
	Machine store.Machine
	// Inventory is the machine's last commissioning report; a layout
	// chooses among its NICs, so a machine without one is refused.
	Inventory *inventory.Report
	// Pins fix an interface's address on a subnet (rollcall net set ID
	// -static IFACE=ADDR): the auto link of that interface on the
	// address's subnet takes it. The caller passes the pins recorded for
	// the machine (PinsOf) with the ones being set or cleared applied.
	Pins []Pin
}

// Pin is an address fixed to one interface of a machine.
type Pin struct {
	Interface string
	Address   netip.Addr
}

func (p Pin) String() string { return p.Interface + "=" + p.Address.String() }

// ParsePin reads IFACE=ADDR.
func ParsePin(s string) (Pin, error) {
	iface, addr, ok := strings.Cut(s, "=")
	if !ok || iface == "" {
		return Pin{}, invalid("pin %q is not IFACE=ADDR (ens18=10.0.0.60)", store.Clip(s))
	}
	if err := ipam.CheckIface(iface); err != nil {
		return Pin{}, invalid("pin %q: %s", store.Clip(s), store.Public(err))
	}
	a, err := parseAddress(addr)
	if err != nil {
		return Pin{}, invalid("pin %q: %s", store.Clip(s), store.Public(err))
	}
	return Pin{Interface: iface, Address: a}, nil
}

// PinsOf lists the pinned addresses among a machine's addresses
// (store.Tx.MachineAddresses), in address order.
func PinsOf(addrs []store.Address) []Pin {
	var out []Pin
	for _, a := range addrs {
		if a.How == store.HowPinned && a.Interface != "" {
			out = append(out, Pin{Interface: a.Interface, Address: a.IP})
		}
	}
	return out
}

// Plan is a layout resolved for one machine: what it chose and why, the
// interfaces to configure, and the addresses a deployment claims.
type Plan struct {
	Machine string
	// Layout is the layout's name; empty for Default.
	Layout     string
	Choices    []Choice
	Interfaces []Resolved
	Addresses  []Allocation
	// Notes say what the plan does that an operator may not expect (no
	// default route, DHCP for want of a subnet, where the boot subnet
	// was found).
	Notes []string
}

// Choice is one NIC a selector chose.
type Choice struct {
	Interface string // the layout interface that has it (a bond for a member)
	Selector  string
	NIC       string // its name on the deployed machine
	MAC       string // an InfiniBand port's GUID
	Reason    string
}

// Resolved is one interface of a plan, ready to render.
type Resolved struct {
	Name string
	Type string
	// MAC is a physical Ethernet interface's; GUID a physical InfiniBand
	// port's (IPoIB).
	MAC  string
	GUID string
	// Members are a bond's NICs; Bond its mode and options, defaults
	// filled in.
	Members []Member
	Bond    Bond
	Parent  string // a VLAN's
	VID     int
	MTU     int // 0: the kernel's
	Links   []ResolvedLink
}

// Member is a NIC of a bond.
type Member struct {
	Name, MAC string
}

// ResolvedLink is a link with its subnet found and its address chosen.
type ResolvedLink struct {
	Mode           string
	Subnet         store.Subnet // zero for a dhcp link without a subnet, and link_up
	Address        netip.Addr   // auto and static
	DefaultGateway bool
}

// Allocation is an address the plan gives an interface.
type Allocation struct {
	Interface string
	IP        netip.Addr
	Subnet    netip.Prefix
	How       string // store.HowAuto, HowStatic or HowPinned
	// Held: the machine holds the address already (a pin, or the address
	// of an earlier deployment); there is nothing to claim.
	Held   bool
	Reason string
}

// Claims are the addresses a deployment claims (ipam.ClaimAll), without
// the times the proposer stamps.
func (p *Plan) Claims() []store.Address {
	var out []store.Address
	for _, a := range p.Addresses {
		if !a.Held {
			out = append(out, store.Address{IP: a.IP, Subnet: a.Subnet, How: a.How, Machine: p.Machine, Interface: a.Interface})
		}
	}
	return out
}

// Check tells whether the plan still holds against tx: every address to
// claim still passes ipam's checks and every held one is still the
// machine's. A plan that fails is resolved again.
func (p *Plan) Check(tx *store.Tx) error {
	for _, a := range p.Addresses {
		if !a.Held {
			if err := ipam.CheckClaim(tx, store.Address{IP: a.IP, Subnet: a.Subnet, How: a.How, Machine: p.Machine, Interface: a.Interface}); err != nil {
				return err
			}
			continue
		}
		rec, err := tx.Address(a.IP)
		if err != nil || rec.Machine != p.Machine {
			return conflict("address %s is no longer %s's", a.IP, p.Machine)
		}
	}
	return nil
}

// Resolve resolves a layout for a machine against the network model in tx
// (read only: nothing is claimed). A nil layout is Default. Every refusal
// says which interface and why, and comes before any address is chosen.
func Resolve(tx *store.Tx, in Input, name string, l *Layout) (*Plan, error) {
	if l == nil {
		return Default(tx, in)
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	r, err := newResolver(tx, in)
	if err != nil {
		return nil, err
	}
	p, err := r.resolve(l)
	if err != nil {
		return nil, err
	}
	p.Layout = name
	return p, nil
}

// Default is the plan of a machine without a layout: its boot NIC takes an
// auto address on the subnet it booted from and on every other subnet of
// that VLAN (an IPv6 subnet beside the IPv4 one: dual stack), routing by
// default through their gateways. Without any subnet in the model, or
// when the machine's boot addresses are in none of them, the boot NIC asks
// DHCP, as deployments did before the network model.
func Default(tx *store.Tx, in Input) (*Plan, error) {
	r, err := newResolver(tx, in)
	if err != nil {
		return nil, err
	}
	boot := Interface{Type: TypePhysical, Select: SelectBoot}
	var note string
	if len(r.subnets) == 0 {
		boot.Links = []Link{{Mode: ModeDHCP}}
		note = "no layout and no subnet in the network model: the boot NIC asks DHCP"
	} else if s, ok := r.bootSubnet(); !ok {
		boot.Links = []Link{{Mode: ModeDHCP}}
		note = "no layout, and no address the machine booted with is in a subnet of the model: the boot NIC asks DHCP"
	} else {
		gw := map[bool]bool{}
		add := func(sub store.Subnet, ref string) {
			is6 := sub.CIDR.Addr().Is6()
			dg := sub.Gateway.IsValid() && !gw[is6]
			gw[is6] = gw[is6] || dg
			boot.Links = append(boot.Links, Link{Subnet: ref, Mode: ModeAuto, DefaultGateway: dg})
		}
		add(s, SubnetBoot)
		var others []string
		for _, o := range r.subnets {
			if o.CIDR != s.CIDR && o.Fabric == s.Fabric && o.VID == s.VID && len(boot.Links) < MaxLinks {
				add(o, o.CIDR.String())
				others = append(others, o.CIDR.String())
			}
		}
		note = "no layout: the boot NIC takes an auto address on its subnet " + s.CIDR.String()
		if len(others) > 0 {
			note += " and on " + strings.Join(others, ", ") + " (the same VLAN)"
		}
	}
	p, err := r.resolve(&Layout{Interfaces: []Interface{boot}})
	if err != nil {
		return nil, err
	}
	p.Notes = append([]string{note}, p.Notes...)
	return p, nil
}

type resolver struct {
	tx      *store.Tx
	in      Input
	bootMAC string
	nics    []*nic
	subnets []store.Subnet
	held    map[netip.Addr]store.Address // the machine's addresses

	boot       *store.Subnet // found by bootSubnet
	bootWhy    string
	bootLooked bool
}

func newResolver(tx *store.Tx, in Input) (*resolver, error) {
	if in.Machine.ID == "" {
		return nil, invalid("resolve a layout: no machine")
	}
	if in.Inventory == nil {
		return nil, invalid("machine %s has no inventory: commission it first, a layout chooses among the NICs it reports", in.Machine.ID)
	}
	r := &resolver{tx: tx, in: in, held: map[netip.Addr]store.Address{}}
	for _, m := range []string{in.Machine.BootMAC, in.Inventory.BootMAC} {
		if n, err := store.NormalizeMAC(m); err == nil {
			r.bootMAC = n
			break
		}
	}
	r.nics = nics(in.Inventory, r.bootMAC)
	var err error
	if r.subnets, err = tx.Subnets(); err != nil {
		return nil, err
	}
	addrs, err := tx.MachineAddresses(in.Machine.ID)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		r.held[a.IP] = a
	}
	return r, nil
}

// bootSubnet finds the subnet the machine booted from: the one holding an
// address it had there, looked for where it is most certain first.
func (r *resolver) bootSubnet() (store.Subnet, bool) {
	if r.bootLooked {
		if r.boot == nil {
			return store.Subnet{}, false
		}
		return *r.boot, true
	}
	r.bootLooked = true
	var bootNIC string
	var bootIPs []string
	for i, n := range r.in.Inventory.NICs {
		if m, _ := store.NormalizeMAC(n.MAC); m != "" && m == r.bootMAC {
			bootNIC, bootIPs = n.Name, r.in.Inventory.NICs[i].IPs
			break
		}
	}
	type seen struct {
		addr netip.Addr
		why  string
	}
	var sources [][]seen
	var rec []seen
	for _, a := range sortedAddrs(r.held) {
		if bootNIC != "" && a.Interface == bootNIC && a.How != store.HowAdopted {
			rec = append(rec, seen{a.IP, fmt.Sprintf("IPAM records %s (%s) on %s", a.IP, a.How, bootNIC)})
		}
	}
	sources = append(sources, rec)
	var nicIPs []seen
	for _, s := range bootIPs {
		if a, ok := looseAddr(s); ok {
			nicIPs = append(nicIPs, seen{a, fmt.Sprintf("the boot NIC %s had %s at commissioning", bootNIC, a)})
		}
	}
	sources = append(sources, nicIPs)
	var machineIPs []seen
	for _, s := range r.in.Machine.IPs {
		if a, ok := looseAddr(s); ok {
			machineIPs = append(machineIPs, seen{a, fmt.Sprintf("the machine reported %s at commissioning", a)})
		}
	}
	sources = append(sources, machineIPs)
	if r.bootMAC != "" {
		var leased []seen
		if ls, err := r.tx.LeasesByMAC(r.bootMAC); err == nil {
			for _, l := range ls {
				leased = append(leased, seen{l.IP, fmt.Sprintf("DHCP leased %s to the boot MAC %s", l.IP, r.bootMAC)})
			}
		}
		sources = append(sources, leased)
	}
	for _, src := range sources {
		// IPv4 first: PXE boots over IPv4, and a dual-stack VLAN's IPv6
		// subnet joins through Default's "same VLAN" rule.
		slices.SortStableFunc(src, func(a, b seen) int {
			if a.addr.Is4() != b.addr.Is4() {
				if a.addr.Is4() {
					return -1
				}
				return 1
			}
			return 0
		})
		for _, c := range src {
			for i := range r.subnets {
				if r.subnets[i].CIDR.Contains(c.addr) {
					r.boot = &r.subnets[i]
					r.bootWhy = fmt.Sprintf("boot subnet %s: %s", r.boot.CIDR, c.why)
					return *r.boot, true
				}
			}
		}
	}
	return store.Subnet{}, false
}

func sortedAddrs(m map[netip.Addr]store.Address) []store.Address {
	out := make([]store.Address, 0, len(m))
	for _, a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b store.Address) int { return a.IP.Compare(b.IP) })
	return out
}

// looseAddr reads an address an agent reported, with or without a prefix.
func looseAddr(s string) (netip.Addr, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr().Unmap(), true
	}
	a, err := netip.ParseAddr(s)
	return a.Unmap(), err == nil && a.Zone() == ""
}

// refusal rewords an ipam or store refusal under a prefix, keeping its
// kind; anything else (a failed read) is passed on.
func refusal(prefix string, err error) error {
	switch {
	case errors.Is(err, store.ErrConflict):
		return conflict("%s: %s", prefix, store.Public(err))
	case errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrNotFound):
		return invalid("%s: %s", prefix, store.Public(err))
	}
	return err
}

// work is one layout interface being resolved.
type work struct {
	it      *Interface
	where   string
	nics    []*nic
	choices []Choice
	res     Resolved
}

func (r *resolver) resolve(l *Layout) (*Plan, error) {
	ws := make([]*work, len(l.Interfaces))
	for i := range l.Interfaces {
		ws[i] = &work{it: &l.Interfaces[i], where: l.Interfaces[i].where(i)}
	}
	if err := r.chooseNICs(ws); err != nil {
		return nil, err
	}
	if err := r.name(ws); err != nil {
		return nil, err
	}
	if err := r.links(ws); err != nil {
		return nil, err
	}
	p := &Plan{Machine: r.in.Machine.ID}
	if err := r.allocate(ws, p); err != nil {
		return nil, err
	}
	for _, w := range ws {
		p.Choices = append(p.Choices, w.choices...)
		p.Interfaces = append(p.Interfaces, w.res)
	}
	if r.bootWhy != "" {
		p.Notes = append(p.Notes, r.bootWhy)
	}
	hasAddr, hasGW := false, false
	for _, it := range p.Interfaces {
		for _, ln := range it.Links {
			hasAddr = hasAddr || ln.Address.IsValid()
			hasGW = hasGW || ln.DefaultGateway || ln.Mode == ModeDHCP
		}
	}
	if hasAddr && !hasGW {
		p.Notes = append(p.Notes, "no link says default_gateway (and none asks DHCP): the machine gets no default route")
	}
	return p, nil
}

// chooseNICs runs the explicit selectors first, in layout order, and then
// fastest and all over what they left, so that fastest:2 beside boot means
// the two fastest NICs other than the boot NIC.
func (r *resolver) chooseNICs(ws []*work) error {
	take := func(i int, w *work, sel string, n *nic, why string) error {
		if n.owner >= 0 {
			o := ws[n.owner]
			return invalid("%s: %s chooses %s, which %s has already: two interfaces cannot share a NIC", w.where, sel, n.name, o.where)
		}
		n.owner = i
		w.nics = append(w.nics, n)
		w.choices = append(w.choices, Choice{Interface: w.it.Name, Selector: sel, NIC: n.name, MAC: n.id(), Reason: why})
		return nil
	}
	selectors := func(w *work) []string {
		switch w.it.Type {
		case TypePhysical:
			return []string{w.it.Select}
		case TypeBond:
			return w.it.Members
		}
		return nil
	}
	for pass := 0; pass < 2; pass++ {
		for i, w := range ws {
			for _, raw := range selectors(w) {
				s, err := ParseSelector(raw)
				if err != nil {
					return invalid("%s: %s", w.where, store.Public(err))
				}
				if s.explicit() != (pass == 0) {
					continue
				}
				if s.explicit() {
					n, why, err := chooseExplicit(r.nics, s, r.bootMAC)
					if err != nil {
						return refusal(w.where, err)
					}
					if err := take(i, w, s.String(), n, why); err != nil {
						return err
					}
					continue
				}
				chosen, whys, err := chooseFree(r.nics, s)
				if err != nil {
					return refusal(w.where, err)
				}
				if w.it.Type == TypePhysical && len(chosen) != 1 {
					return invalid("%s: a physical interface has one NIC; %s chooses %d (make it a bond)", w.where, s, len(chosen))
				}
				for k, n := range chosen {
					if err := take(i, w, s.String(), n, whys[k]); err != nil {
						return err
					}
				}
			}
		}
	}
	for _, w := range ws {
		if w.it.Type == TypeBond && len(w.nics) < 2 {
			return invalid("%s: a bond with one member (%s) is no bond: its selectors (%s) found one NIC", w.where, w.nics[0].name, strings.Join(w.it.Members, ", "))
		}
	}
	return nil
}

// name gives every interface its name and checks that names are unique,
// that no rename takes the name of another NIC, and that each VLAN's
// parent is an interface of the layout.
func (r *resolver) name(ws []*work) error {
	taken := map[string]string{} // name → who has it
	claim := func(name, who string) error {
		if o, dup := taken[name]; dup {
			return invalid("%s: the name %s is %s's already", who, name, o)
		}
		taken[name] = who
		return nil
	}
	kinds := map[string]string{}
	ib := map[string]bool{}
	for _, w := range ws {
		it := w.it
		res := Resolved{Type: it.Type, MTU: it.MTU, VID: it.VID}
		switch it.Type {
		case TypePhysical:
			n := w.nics[0]
			res.Name = cmpOr(it.Name, n.name)
			if n.ib >= 0 {
				res.GUID = n.guid
			} else {
				res.MAC = n.mac
			}
			// Renaming onto the name of a NIC the layout leaves alone would
			// fail on the machine (that NIC keeps its name).
			for _, o := range r.nics {
				if o != n && o.owner < 0 && o.ib < 0 && o.name == res.Name {
					return invalid("%s: the name %s is the inventory's name of another NIC (%s), which keeps it", w.where, res.Name, o.mac)
				}
			}
			if res.Name != n.name {
				w.choices[0].Reason += "; the layout names it " + res.Name
			}
			w.choices[0].NIC = res.Name
			w.choices[0].Interface = res.Name
		case TypeBond:
			res.Name = it.Name
			res.Bond = it.Bond.filled()
			for k, n := range w.nics {
				res.Members = append(res.Members, Member{Name: n.name, MAC: n.mac})
				if err := claim(n.name, w.where+" member"); err != nil {
					return err
				}
				w.choices[k].Interface = res.Name
			}
		case TypeVLAN:
			res.Parent = it.Parent
			res.Name = cmpOr(it.Name, fmt.Sprintf("%s.%d", it.Parent, it.VID))
			if err := ipam.CheckIface(res.Name); err != nil {
				return invalid("%s: the default name %s is longer than an interface name may be (15): give the VLAN a name", w.where, res.Name)
			}
		}
		if err := claim(res.Name, w.where); err != nil {
			return err
		}
		kinds[res.Name] = it.Type
		ib[res.Name] = res.GUID != ""
		w.res = res
	}
	tags := map[string]bool{}
	for _, w := range ws {
		if w.it.Type != TypeVLAN {
			continue
		}
		switch kinds[w.res.Parent] {
		case TypePhysical, TypeBond:
			if ib[w.res.Parent] {
				return invalid("%s: parent %s is an InfiniBand port, which has partitions, not VLANs", w.where, w.res.Parent)
			}
		case TypeVLAN:
			return invalid("%s: parent %s is a VLAN; a VLAN sits on a physical interface or a bond", w.where, w.res.Parent)
		default:
			var have []string
			for _, o := range ws {
				if o.it.Type != TypeVLAN {
					have = append(have, o.res.Name)
				}
			}
			return invalid("%s: parent %s is not an interface of the layout (it has %s)", w.where, w.res.Parent, strings.Join(have, ", "))
		}
		key := fmt.Sprintf("%s/%d", w.res.Parent, w.res.VID)
		if tags[key] {
			return invalid("%s: %s carries VID %d twice", w.where, w.res.Parent, w.res.VID)
		}
		tags[key] = true
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (b *Bond) filled() Bond {
	var out Bond
	if b != nil {
		out = *b
	}
	out.Mode = b.mode()
	if out.MIIMonitor == 0 {
		out.MIIMonitor = defaultMIIMonitor
	}
	return out
}

// subnetOf finds a link's subnet.
func (r *resolver) subnetOf(ref string) (store.Subnet, error) {
	if ref == SubnetBoot {
		if s, ok := r.bootSubnet(); ok {
			return s, nil
		}
		return store.Subnet{}, invalid("subnet boot: the machine's boot subnet is not known (no address it booted or commissioned with, nor a DHCP lease of its boot MAC %s, is in a subnet of the model)", cmpOr(r.bootMAC, "(none)"))
	}
	p, err := parseSubnetRef(ref)
	if err != nil {
		return store.Subnet{}, err
	}
	for _, s := range r.subnets {
		if p.IsValid() && s.CIDR == p || !p.IsValid() && s.Name == ref {
			return s, nil
		}
	}
	if p.IsValid() {
		return store.Subnet{}, invalid("subnet %s does not exist (rollcall subnet add %s …)", p, p)
	}
	return store.Subnet{}, invalid("no subnet is named %s", ref)
}

// links finds every link's subnet and checks what needs the model: a
// VLAN's subnet is on its VID, one default gateway per family, each with a
// gateway, no subnet twice on one interface, MTUs that fit their parents.
func (r *resolver) links(ws []*work) error {
	gateways := map[bool]string{}
	byName := map[string]*work{}
	for _, w := range ws {
		byName[w.res.Name] = w
		dhcp := map[bool]bool{}
		subnets := map[netip.Prefix]bool{}
		for j, ln := range w.it.Links {
			lw := fmt.Sprintf("%s links[%d]", w.where, j)
			rl := ResolvedLink{Mode: ln.Mode, DefaultGateway: ln.DefaultGateway}
			switch {
			case ln.Subnet != "":
				s, err := r.subnetOf(ln.Subnet)
				if err != nil {
					return refusal(lw, err)
				}
				rl.Subnet = s
			case ln.Mode == ModeStatic:
				a, _ := parseAddress(ln.Address)
				s, ok := r.subnetHolding(a)
				if !ok {
					return invalid("%s: static address %s is in no subnet of the model", lw, a)
				}
				rl.Subnet = s
			}
			s := rl.Subnet
			if ln.Mode == ModeStatic {
				rl.Address, _ = parseAddress(ln.Address)
				if !s.CIDR.Contains(rl.Address) {
					return invalid("%s: static address %s is outside its subnet %s", lw, rl.Address, s.CIDR)
				}
			}
			if s.CIDR.IsValid() {
				if subnets[s.CIDR] {
					return invalid("%s: the interface has subnet %s twice", lw, s.CIDR)
				}
				subnets[s.CIDR] = true
				if w.it.Type == TypeVLAN && s.VID != w.res.VID {
					return invalid("%s: subnet %s is on VID %d of fabric %s, but %s tags %d", lw, s.CIDR, s.VID, s.Fabric, w.res.Name, w.res.VID)
				}
			}
			if ln.Mode == ModeDHCP {
				is6 := s.CIDR.IsValid() && s.CIDR.Addr().Is6()
				if dhcp[is6] {
					return invalid("%s: the interface asks DHCP for the same address family twice", lw)
				}
				dhcp[is6] = true
			}
			if ln.DefaultGateway {
				if !s.Gateway.IsValid() {
					return invalid("%s: default_gateway, but subnet %s has no gateway (rollcall subnet … -gateway)", lw, s.CIDR)
				}
				is6 := s.CIDR.Addr().Is6()
				if first, dup := gateways[is6]; dup {
					return invalid("%s: a second default gateway (the first is %s); one link per address family routes by default", lw, first)
				}
				gateways[is6] = lw
			}
			w.res.Links = append(w.res.Links, rl)
		}
		if w.res.MTU == 0 {
			w.res.MTU = r.modelMTU(w.res.Links)
		}
	}
	for _, w := range ws {
		if w.it.Type != TypeVLAN {
			continue
		}
		parent := byName[w.res.Parent].res.MTU
		if parent == 0 {
			parent = 1500 // the kernel's, for Ethernet
		}
		if w.res.MTU > parent {
			return invalid("%s: MTU %d is more than its parent %s's %d", w.where, w.res.MTU, w.res.Parent, parent)
		}
	}
	return nil
}

func (r *resolver) subnetHolding(a netip.Addr) (store.Subnet, bool) {
	for _, s := range r.subnets {
		if s.CIDR.Contains(a) {
			return s, true
		}
	}
	return store.Subnet{}, false
}

// modelMTU is the MTU the network model gives an interface: that of the
// VLAN of its first subnet, when the VLAN has one.
func (r *resolver) modelMTU(links []ResolvedLink) int {
	for _, ln := range links {
		if ln.Subnet.CIDR.IsValid() {
			if v, err := r.tx.VLAN(ln.Subnet.Fabric, ln.Subnet.VID); err == nil {
				return v.MTU
			}
			return 0
		}
	}
	return 0
}

// allocate chooses every address: pins and static addresses first, since
// they are fixed, then auto ones, which IPAM picks around them. Nothing is
// written: ipam.CheckClaim asks what Claim will check again at deployment.
func (r *resolver) allocate(ws []*work, p *Plan) error {
	planned := map[netip.Addr]bool{}
	byName := map[string]*work{}
	for _, w := range ws {
		byName[w.res.Name] = w
	}
	type slot struct{ w, link int }
	pinned := map[slot]Pin{}
	for _, pin := range r.in.Pins {
		pw := fmt.Sprintf("pin %s", pin)
		w, ok := byName[pin.Interface]
		if !ok {
			var have []string
			for _, o := range ws {
				have = append(have, o.res.Name)
			}
			return invalid("%s: the layout has no interface %s (it has %s)", pw, pin.Interface, strings.Join(have, ", "))
		}
		s, ok := r.subnetHolding(pin.Address)
		if !ok {
			return invalid("%s: %s is in no subnet of the model", pw, pin.Address)
		}
		found := false
		for j, ln := range w.res.Links {
			if ln.Subnet.CIDR != s.CIDR {
				continue
			}
			switch {
			case ln.Mode == ModeStatic && ln.Address != pin.Address:
				return invalid("%s: the layout gives %s the static address %s on %s", pw, pin.Interface, ln.Address, s.CIDR)
			case ln.Mode == ModeAuto, ln.Mode == ModeStatic:
			default:
				return invalid("%s: %s's link on %s is %s, which takes no address", pw, pin.Interface, s.CIDR, ln.Mode)
			}
			k := slot{slices.Index(ws, w), j}
			if o, dup := pinned[k]; dup {
				return invalid("%s: %s is pinned on %s already (%s)", pw, pin.Interface, s.CIDR, o.Address)
			}
			pinned[k] = pin
			found = true
		}
		if !found {
			return invalid("%s: the layout gives %s no link on %s, the pin's subnet (an auto link there takes the pin)", pw, pin.Interface, s.CIDR)
		}
	}
	// fixed checks a pin or a static address: the machine's already, or
	// free and allowed.
	fixed := func(lw string, w *work, a netip.Addr, s store.Subnet, how, why string) (Allocation, error) {
		al := Allocation{Interface: w.res.Name, IP: a, Subnet: s.CIDR, How: how, Reason: why}
		if planned[a] {
			return al, invalid("%s: %s is given to two links", lw, a)
		}
		if h, ok := r.held[a]; ok && h.How != store.HowAdopted && h.How != store.HowDHCP {
			if h.Interface != "" && h.Interface != w.res.Name {
				return al, conflict("%s: %s is the machine's already, on %s", lw, a, h.Interface)
			}
			al.Held, al.Reason = true, why+"; the machine holds it already ("+h.How+")"
			return al, nil
		}
		err := ipam.CheckClaim(r.tx, store.Address{IP: a, Subnet: s.CIDR, How: how, Machine: r.in.Machine.ID, Interface: w.res.Name})
		if err != nil {
			return al, refusal(fmt.Sprintf("%s: %s %s", lw, how, a), err)
		}
		return al, nil
	}
	var out []Allocation
	for pass := 0; pass < 2; pass++ {
		for i, w := range ws {
			for j := range w.res.Links {
				ln := &w.res.Links[j]
				lw := fmt.Sprintf("%s links[%d]", w.where, j)
				pin, isPinned := pinned[slot{i, j}]
				isFixed := isPinned || ln.Mode == ModeStatic
				if (ln.Mode != ModeAuto && ln.Mode != ModeStatic) || isFixed != (pass == 0) {
					continue
				}
				var al Allocation
				var err error
				switch {
				case isPinned:
					al, err = fixed(lw, w, pin.Address, ln.Subnet, store.HowPinned, "pinned (net set -static "+pin.String()+")")
				case ln.Mode == ModeStatic:
					al, err = fixed(lw, w, ln.Address, ln.Subnet, store.HowStatic, "the layout's static address")
				default:
					al, err = r.auto(lw, w, ln.Subnet, planned)
				}
				if err != nil {
					return err
				}
				planned[al.IP] = true
				ln.Address = al.IP
				out = append(out, al)
			}
		}
	}
	// In layout order, as an operator reads the plan.
	order := map[string]int{}
	for i, w := range ws {
		order[w.res.Name] = i
	}
	slices.SortStableFunc(out, func(a, b Allocation) int { return order[a.Interface] - order[b.Interface] })
	p.Addresses = out
	return nil
}

// auto gives an auto link the address the machine holds there already, or
// the one IPAM would hand out next.
func (r *resolver) auto(lw string, w *work, s store.Subnet, planned map[netip.Addr]bool) (Allocation, error) {
	for _, h := range sortedAddrs(r.held) {
		if h.Subnet == s.CIDR && h.Interface == w.res.Name && !planned[h.IP] &&
			(h.How == store.HowAuto || h.How == store.HowStatic || h.How == store.HowPinned) {
			return Allocation{Interface: w.res.Name, IP: h.IP, Subnet: s.CIDR, How: h.How, Held: true,
				Reason: fmt.Sprintf("the machine holds it on %s already (%s)", w.res.Name, h.How)}, nil
		}
	}
	a, err := ipam.PickSkipping(r.tx, s.CIDR, func(a netip.Addr) bool { return planned[a] })
	if err != nil {
		return Allocation{}, refusal(lw+": auto", err)
	}
	return Allocation{Interface: w.res.Name, IP: a, Subnet: s.CIDR, How: store.HowAuto,
		Reason: fmt.Sprintf("auto: the next free address IPAM hands out in %s", s.CIDR)}, nil
}
