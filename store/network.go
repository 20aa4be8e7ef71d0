package store

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"time"
)

// The network model, as in MAAS: fabric → VLAN → subnet → ranges, and the
// address records IPAM keeps. Consistency rules (overlaps, ranges inside
// their subnet) are checked by package ipam inside the state machine; the
// store only keeps records and their indexes.

var (
	bucketNet       = []byte("net")                  // fabrics, VLANs, subnets, ranges
	bucketAddresses = []byte("addresses")            // 16-byte address → Address
	bucketAddrByMac = []byte("addresses.by_machine") // machine + "\x00" + 16-byte address
)

// TableNetwork names the network model for blocking queries and exports.
const TableNetwork = "network"

// Fabric kinds.
const (
	FabricEthernet   = "ethernet"
	FabricInfiniband = "infiniband"
)

// Fabric is a switched layer-2 domain.
type Fabric struct {
	Name    string    `json:"name"`
	Kind    string    `json:"kind"`
	Created time.Time `json:"created"`
	Index   uint64    `json:"index"`
}

// DHCP modes of a VLAN.
const (
	DHCPOff   = "off"
	DHCPFull  = "full"
	DHCPProxy = "proxy"
)

// VLANServer is an appliance node that serves DHCP/PXE on a VLAN, on one of
// its network interfaces (empty: the interface that holds an address in one
// of the VLAN's subnets, found when the node starts serving).
type VLANServer struct {
	Node  string `json:"node"`
	Iface string `json:"iface"`
}

// Boot loaders of a VLAN (VLAN.BootLoader).
const (
	BootLoaderIPXE     = "ipxe"
	BootLoaderPXELinux = "pxelinux"
)

// VLAN is a VID on a fabric (a partition key on InfiniBand).
type VLAN struct {
	Fabric  string       `json:"fabric"`
	VID     int          `json:"vid"`
	MTU     int          `json:"mtu"`
	DHCP    string       `json:"dhcp"`
	Servers []VLANServer `json:"servers,omitempty"`
	// BootLoader is what BIOS PXE firmware on this VLAN is handed:
	// BootLoaderIPXE (also when empty) or BootLoaderPXELinux, for racks
	// whose NICs cannot run iPXE.
	BootLoader string `json:"boot_loader,omitempty"`
	// Implicit marks a VLAN created by `subnet add` naming a VID that had
	// no VLAN yet (as MAAS does); `vlan add` may then take it over.
	Implicit bool      `json:"implicit,omitempty"`
	Created  time.Time `json:"created"`
	Index    uint64    `json:"index"`
}

// Subnet purposes.
var Purposes = []string{"provisioning", "mgmt", "bmc", "storage", "ib", "other"}

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

// Range kinds.
const (
	RangeDynamic  = "dynamic"
	RangeReserved = "reserved"
	RangeStatic   = "static"
)

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

// Contains reports whether a falls in the range.
func (r Range) Contains(a netip.Addr) bool {
	return r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// How an address came to be used.
const (
	HowAuto     = "auto"     // allocated from a static range (or outside dynamic/reserved)
	HowStatic   = "static"   // given explicitly by an operator
	HowPinned   = "pinned"   // fixed to a machine interface
	HowDHCP     = "dhcp"     // leased by DHCP
	HowReserved = "reserved" // a named single address, never handed out
	HowAdopted  = "adopted"  // a machine already had it when the subnet was defined
)

// Address is one used address.
type Address struct {
	IP        netip.Addr   `json:"ip"`
	Subnet    netip.Prefix `json:"subnet"`
	How       string       `json:"how"`
	Machine   string       `json:"machine,omitempty"`
	Interface string       `json:"interface,omitempty"`
	Name      string       `json:"name,omitempty"` // reserved addresses
	Created   time.Time    `json:"created"`
	Index     uint64       `json:"index"`
}

func fabricKey(name string) string { return "fabric/" + name }
func vlanKey(fabric string, vid int) string {
	return "vlan/" + fabric + "/" + fmt.Sprintf("%04d", vid)
}
func subnetKey(p netip.Prefix) string {
	return "subnet/" + string(addrKey(p.Addr())) + strconv.Itoa(p.Bits())
}
func rangeKey(p netip.Prefix, first netip.Addr) string {
	return "range/" + string(addrKey(p.Addr())) + strconv.Itoa(p.Bits()) + "/" + string(addrKey(first))
}

// addrKey is an address as 16 bytes (IPv4 mapped), so keys sort by address.
func addrKey(a netip.Addr) []byte {
	b := a.As16()
	return b[:]
}

func (t *Tx) netPut(key string, v any) error {
	if err := t.putJSON(bucketNet, key, v); err != nil {
		return err
	}
	if err := t.logChange("net", hex.EncodeToString([]byte(key)), OpPut); err != nil {
		return err
	}
	return t.touch(TableNetwork)
}

func (t *Tx) netDel(key string) error {
	if err := t.del(bucketNet, key); err != nil {
		return err
	}
	if err := t.logChange("net", hex.EncodeToString([]byte(key)), OpDelete); err != nil {
		return err
	}
	return t.touch(TableNetwork)
}

// NetRecord reads a network model record by its change-log key (the bucket
// key, hex-encoded: it holds raw address bytes) into v.
func (t *Tx) NetRecord(key string, v any) error {
	k, err := hex.DecodeString(key)
	if err != nil {
		return Errorf(ErrInvalid, "network record key %q", key)
	}
	return t.getJSON(bucketNet, string(k), v)
}

// Fabric returns one fabric.
func (t *Tx) Fabric(name string) (Fabric, error) {
	var f Fabric
	if err := t.getJSON(bucketNet, fabricKey(name), &f); err != nil {
		return f, lookupError(err, "fabric %q", name)
	}
	return f, nil
}

// Fabrics lists fabrics by name.
func (t *Tx) Fabrics() ([]Fabric, error) { return listNet[Fabric](t, "fabric/") }

// PutFabric writes a fabric.
func (t *Tx) PutFabric(f Fabric) error { f.Index = t.Index; return t.netPut(fabricKey(f.Name), f) }

// DeleteFabric removes a fabric record.
func (t *Tx) DeleteFabric(name string) error { return t.netDel(fabricKey(name)) }

// VLAN returns one VLAN.
func (t *Tx) VLAN(fabric string, vid int) (VLAN, error) {
	var v VLAN
	if err := t.getJSON(bucketNet, vlanKey(fabric, vid), &v); err != nil {
		return v, lookupError(err, "vlan %s/%d", fabric, vid)
	}
	return v, nil
}

// VLANs lists VLANs, by fabric then VID.
func (t *Tx) VLANs() ([]VLAN, error) { return listNet[VLAN](t, "vlan/") }

// PutVLAN writes a VLAN.
func (t *Tx) PutVLAN(v VLAN) error { v.Index = t.Index; return t.netPut(vlanKey(v.Fabric, v.VID), v) }

// DeleteVLAN removes a VLAN record.
func (t *Tx) DeleteVLAN(fabric string, vid int) error { return t.netDel(vlanKey(fabric, vid)) }

// Subnet returns one subnet.
func (t *Tx) Subnet(p netip.Prefix) (Subnet, error) {
	var s Subnet
	if err := t.getJSON(bucketNet, subnetKey(p), &s); err != nil {
		return s, lookupError(err, "subnet %s", p)
	}
	return s, nil
}

// Subnets lists subnets by address.
func (t *Tx) Subnets() ([]Subnet, error) { return listNet[Subnet](t, "subnet/") }

// PutSubnet writes a subnet.
func (t *Tx) PutSubnet(s Subnet) error { s.Index = t.Index; return t.netPut(subnetKey(s.CIDR), s) }

// DeleteSubnet removes a subnet record (its ranges and addresses are the
// caller's to remove first).
func (t *Tx) DeleteSubnet(p netip.Prefix) error { return t.netDel(subnetKey(p)) }

// Ranges lists a subnet's ranges by first address; an invalid prefix lists
// every range.
func (t *Tx) Ranges(p netip.Prefix) ([]Range, error) {
	prefix := "range/"
	if p.IsValid() {
		prefix += string(addrKey(p.Addr())) + strconv.Itoa(p.Bits()) + "/"
	}
	return listNet[Range](t, prefix)
}

// PutRange writes a range.
func (t *Tx) PutRange(r Range) error {
	r.Index = t.Index
	return t.netPut(rangeKey(r.Subnet, r.First), r)
}

// DeleteRange removes the range of subnet p starting at first.
func (t *Tx) DeleteRange(p netip.Prefix, first netip.Addr) error {
	var r Range
	if err := t.getJSON(bucketNet, rangeKey(p, first), &r); err != nil {
		return lookupError(err, "range %s in %s", first, p)
	}
	return t.netDel(rangeKey(p, first))
}

func listNet[T any](t *Tx, prefix string) ([]T, error) {
	var out []T
	err := forEachJSON(t, bucketNet, prefix, func(_ string, v *T) error {
		out = append(out, *v)
		return nil
	})
	return out, err
}

// Address returns the record of a used address.
func (t *Tx) Address(a netip.Addr) (Address, error) {
	var rec Address
	b := t.tx.Bucket(bucketAddresses).Get(addrKey(a))
	if b == nil {
		return rec, Errorf(ErrNotFound, "address %s", a)
	}
	return rec, json.Unmarshal(b, &rec)
}

// AddressUsed reports whether an address has a record.
func (t *Tx) AddressUsed(a netip.Addr) bool {
	return t.tx.Bucket(bucketAddresses).Get(addrKey(a)) != nil
}

// PutAddress records a used address. It refuses one already used.
func (t *Tx) PutAddress(a Address) error {
	if !t.write {
		return ErrReadOnly
	}
	if t.AddressUsed(a.IP) {
		old, _ := t.Address(a.IP)
		who := old.Machine
		if who == "" {
			who = old.Name
		}
		return Errorf(ErrConflict, "address %s is already in use (%s %s)", a.IP, old.How, who)
	}
	a.Index = t.Index
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketAddresses).Put(addrKey(a.IP), b); err != nil {
		return err
	}
	if a.Machine != "" {
		if err := t.tx.Bucket(bucketAddrByMac).Put(append([]byte(a.Machine+"\x00"), addrKey(a.IP)...), nil); err != nil {
			return err
		}
	}
	if err := t.logChange("addresses", a.IP.String(), OpPut); err != nil {
		return err
	}
	return t.touch(TableNetwork)
}

// DeleteAddress releases an address.
func (t *Tx) DeleteAddress(a netip.Addr) error {
	rec, err := t.Address(a)
	if err != nil {
		return err
	}
	if rec.Machine != "" {
		if err := t.tx.Bucket(bucketAddrByMac).Delete(append([]byte(rec.Machine+"\x00"), addrKey(a)...)); err != nil {
			return err
		}
	}
	if err := t.tx.Bucket(bucketAddresses).Delete(addrKey(a)); err != nil {
		return err
	}
	if err := t.logChange("addresses", a.String(), OpDelete); err != nil {
		return err
	}
	return t.touch(TableNetwork)
}

// Addresses lists used addresses inside p (every address when p is not
// valid), in address order, at most limit (0: all).
func (t *Tx) Addresses(p netip.Prefix, limit int) ([]Address, error) {
	var out []Address
	c := t.tx.Bucket(bucketAddresses).Cursor()
	var k, v []byte
	if p.IsValid() {
		k, v = c.Seek(addrKey(p.Masked().Addr()))
	} else {
		k, v = c.First()
	}
	for ; k != nil; k, v = c.Next() {
		a := netip.AddrFrom16([16]byte(k)).Unmap()
		if p.IsValid() && !p.Contains(a) {
			break
		}
		var rec Address
		if err := json.Unmarshal(v, &rec); err != nil {
			return nil, fmt.Errorf("decode address %s: %w", a, err)
		}
		out = append(out, rec)
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	return out, nil
}

// AddressesBetween calls fn for each used address in [first, last], in
// order, until fn returns false.
func (t *Tx) AddressesBetween(first, last netip.Addr, fn func(Address) bool) error {
	c := t.tx.Bucket(bucketAddresses).Cursor()
	end := addrKey(last)
	for k, v := c.Seek(addrKey(first)); k != nil && string(k) <= string(end); k, v = c.Next() {
		var rec Address
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("decode address: %w", err)
		}
		if !fn(rec) {
			return nil
		}
	}
	return nil
}

// MachineAddresses lists the addresses recorded for a machine.
func (t *Tx) MachineAddresses(machine string) ([]Address, error) {
	var out []Address
	p := []byte(machine + "\x00")
	c := t.tx.Bucket(bucketAddrByMac).Cursor()
	for k, _ := c.Seek(p); k != nil && hasPrefix(k, p); k, _ = c.Next() {
		a := netip.AddrFrom16([16]byte(k[len(p):])).Unmap()
		rec, err := t.Address(a)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// NextFree returns the first address in [from, to] that has no record,
// skipping used ones with a cursor (cost grows with the run of used
// addresses after from, not with the subnet's size).
func (t *Tx) NextFree(from, to netip.Addr) (netip.Addr, bool) {
	c := t.tx.Bucket(bucketAddresses).Cursor()
	cand := from
	for k, _ := c.Seek(addrKey(from)); ; k, _ = c.Next() {
		if !cand.IsValid() || to.Less(cand) {
			return netip.Addr{}, false
		}
		if k == nil {
			return cand, true
		}
		used := netip.AddrFrom16([16]byte(k))
		if cand.Is4() {
			used = used.Unmap()
		}
		if used != cand {
			return cand, true
		}
		cand = cand.Next()
	}
}

// AllocHint is the lowest address of a span that may still be free: every
// address from the span's start up to it is in use. IPAM keeps it so that an
// allocation does not walk the addresses already handed out.
func (t *Tx) AllocHint(span string) (netip.Addr, bool) {
	b := t.tx.Bucket(bucketNet).Get([]byte("hint/" + span))
	if len(b) != 16 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom16([16]byte(b)), true
}

// SetAllocHint records a span's hint (see AllocHint).
func (t *Tx) SetAllocHint(span string, a netip.Addr) error {
	if !t.write {
		return ErrReadOnly
	}
	return t.tx.Bucket(bucketNet).Put([]byte("hint/"+span), addrKey(a))
}

// DeleteAllocHints forgets the hints of every span whose name starts with
// prefix.
func (t *Tx) DeleteAllocHints(prefix string) error {
	if !t.write {
		return ErrReadOnly
	}
	return t.deletePrefix(bucketNet, "hint/"+prefix)
}

// DHCPServed is one IPv4 subnet a node serves DHCP on: its VLAN, the
// interface the VLAN names for the node ("" for the one holding an address
// in the subnet) and the subnet.
type DHCPServed struct {
	VLAN   VLAN
	Iface  string
	Subnet Subnet
}

// DHCPServedBy lists the IPv4 subnets of every VLAN whose DHCP servers name
// node (DHCP not off), by VLAN then subnet.
func (t *Tx) DHCPServedBy(node string) ([]DHCPServed, error) {
	vlans, err := t.VLANs()
	if err != nil {
		return nil, err
	}
	subnets, err := t.Subnets()
	if err != nil {
		return nil, err
	}
	var out []DHCPServed
	for _, v := range vlans {
		if v.DHCP == DHCPOff {
			continue
		}
		for _, srv := range v.Servers {
			if srv.Node != node {
				continue
			}
			for _, s := range subnets {
				if s.Fabric == v.Fabric && s.VID == v.VID && s.CIDR.Addr().Is4() {
					out = append(out, DHCPServed{VLAN: v, Iface: srv.Iface, Subnet: s})
				}
			}
		}
	}
	return out, nil
}
