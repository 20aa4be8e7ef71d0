// Package fleet is a fleet simulator: a deterministic generator of
// realistic commissioning inventories (the body of POST
// /api/v1/commission) for load tests and benchmarks.
//
// Generate(seed, i) returns machine i of the fleet named by seed; the same
// (seed, i) always gives the same report, and machines are independent, so a
// benchmark can generate them in any order or in parallel. The fleet mixes
// three real shapes (see Shapes): 2-socket Xeon Gold servers, 8-GPU nodes
// with InfiniBand, and 36-bay storage nodes. Their DMI identities follow the
// vendors' formats (Dell service tags and the UUIDs derived from them, HPE
// ASCII-encoded UUIDs, Supermicro's "0123456789" version string) and are
// unique within a fleet for i below 16,777,216 (the MACs are
// 02:ss:ii:ii:ii:nn, locally administered, with ii the machine number).
// The CPU flag lists and PCI trees are copied from the real parts, which is
// what makes a report ~50 KB of JSON on average, as real agents send.
package fleet

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/rollcall/rollcall/store/inventory"
)

// Shape is one kind of machine in the fleet.
type Shape struct {
	Name        string   // server, gpu, storage
	Percent     int      // share of the fleet
	Description string   // what a machine of this shape carries
	Models      []string // the systems it is modelled on
}

var shapeTable = []Shape{
	{"server", 60, "2-socket Xeon Gold (Ice Lake / Cascade Lake), 24-32 DIMM slots, 2-4 SSDs, 2×25G + 2×1G, TPM 2.0, IPMI BMC",
		[]string{"Dell PowerEdge R650", "HPE ProLiant DL380 Gen10 Plus", "Supermicro SYS-1029U-TN10RT"}},
	{"gpu", 20, "8 SXM GPUs (A100/H100) behind 4 PCIe switches with NVSwitches, 4 InfiniBand HCAs (ConnectX-6/7), NVMe, 2 sockets",
		[]string{"NVIDIA DGX A100", "Dell PowerEdge XE9680", "Supermicro SYS-821GE-TNHR"}},
	{"storage", 20, "36 rotational SAS HDDs with WWNs behind a SAS HBA, 2 NVMe controllers with namespaces, 2×25G + 2×1G",
		[]string{"Supermicro SSG-640P-E1CR36H", "Supermicro SSG-6049P-E1CR36L"}},
}

// Shapes lists the fleet's machine shapes and their shares.
func Shapes() []Shape {
	out := slices.Clone(shapeTable)
	for k := range out {
		out[k].Models = slices.Clone(out[k].Models)
	}
	return out
}

// ShapeOf is the shape of machine i in the fleet named by seed.
func ShapeOf(seed uint64, i int) string { return newGen(seed, i).shape }

// Generate returns machine i of the fleet named by seed. The report passes
// inventory.Validate unchanged (MACs and UUIDs are already normalised).
func Generate(seed uint64, i int) inventory.Report {
	if i < 0 {
		panic(fmt.Sprintf("fleet: negative machine number %d", i))
	}
	g := newGen(seed, i)
	switch g.shape {
	case "server":
		[]func(){g.dellR650, g.hpeDL380, g.smc1029U}[g.model]()
	case "gpu":
		[]func(){g.dgxA100, g.dellXE9680, g.smc821GE}[g.model]()
	default:
		[]func(){g.smc640P, g.smc6049P}[g.model]()
	}
	g.finish()
	return g.rep
}

// Size is the length of the report's JSON encoding, as an agent uploads it.
func Size(r inventory.Report) int {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	return len(b)
}

// gen builds one machine.
type gen struct {
	seed  uint64
	i     int
	r     *rand.Rand
	shape string
	model int
	rep   inventory.Report
	pci   *pciTree
	nics  int
	host  string
	rack  int
	unit  int
}

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func newGen(seed uint64, i int) *gen {
	g := &gen{seed: seed, i: i, r: rand.New(rand.NewPCG(mix64(seed), mix64(uint64(i)^0x5851f42d4c957f2d)))}
	u := g.r.IntN(100)
	acc := 0
	for _, s := range shapeTable {
		acc += s.Percent
		if u < acc {
			g.shape = s.Name
			g.model = g.r.IntN(len(s.Models))
			break
		}
	}
	g.rack, g.unit = i/40, i%40+1
	g.host = fmt.Sprintf("r%03du%02d", g.rack, g.unit)
	g.rep = inventory.Report{
		Version:   inventory.SchemaVersion,
		Collected: time.Date(2025, 6, 2, 8, 0, 0, 0, time.UTC).Add(time.Duration(i)*7*time.Second + time.Duration(g.r.IntN(5000))*time.Millisecond),
		Agent:     "rollcall-agent/0.4.1",
	}
	return g
}

// perm maps i to [0, m) injectively (for i < m): an affine permutation whose
// offset depends on the seed, so serials look scattered but never repeat.
func (g *gen) perm(m uint64, salt uint64) uint64 {
	const a = 2654435761 // prime, so coprime with the 2^k·3^k·5^k moduli used here
	hi, lo := bits.Mul64(a, uint64(g.i)%m)
	v := bits.Rem64(hi, lo, m)
	return (v + mix64(g.seed^salt)%m) % m
}

const base36 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"

func encode(v uint64, n int, alphabet string) string {
	b := make([]byte, n)
	for k := n - 1; k >= 0; k-- {
		b[k] = alphabet[v%uint64(len(alphabet))]
		v /= uint64(len(alphabet))
	}
	return string(b)
}

func pow(b, e uint64) uint64 {
	out := uint64(1)
	for range e {
		out *= b
	}
	return out
}

// dellTag is a 7-character service tag.
func (g *gen) dellTag() string { return encode(g.perm(pow(36, 7), 0xde11), 7, base36) }

// dellUUID is the system UUID Dell firmware derives from the service tag.
func dellUUID(tag string) string {
	c := []byte(tag)
	return fmt.Sprintf("4c4c4544-00%02x-%02x10-80%02x-%02xc04f%02x%02x%02x", c[1], c[2], c[3], c[0]|0x80, c[4], c[5], c[6])
}

// hpeSerial is a 10-character HPE serial number.
func (g *gen) hpeSerial() string { return "CZJ" + encode(g.perm(pow(36, 7), 0x49e), 7, base36) }

// hpeUUID is HPE's ASCII encoding of the product number and serial.
func hpeUUID(product, serial string) string {
	b := []byte(product[:6] + serial)
	return strings.ToLower(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
}

// smcSerial is a Supermicro system serial.
func (g *gen) smcSerial() string {
	d := encode(g.perm(pow(10, 9), 0x5c), 9, digits)
	return "S" + d[:3] + "X" + d[3:5] + "A" + d[5:]
}

// nvidiaSerial is a DGX serial (13 digits).
func (g *gen) nvidiaSerial() string { return "1563" + encode(g.perm(pow(10, 9), 0xd6c), 9, digits) }

// randUUID is a firmware-generated UUID: random, with a first field unique
// within the fleet.
func (g *gen) randUUID() string {
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", g.perm(1<<32, 0x01d), g.r.IntN(1<<16),
		0x1000|g.r.IntN(1<<12), 0x8000|g.r.IntN(1<<14), g.r.Uint64()&(1<<48-1))
}

// mac is the machine's k-th MAC: locally administered, unique per machine.
func (g *gen) mac(k int) string {
	return fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", byte(mix64(g.seed)), byte(g.i>>16), byte(g.i>>8), byte(g.i), byte(k))
}

func (g *gen) pick(choices ...string) string { return choices[g.r.IntN(len(choices))] }

func (g *gen) biosDate() string {
	return fmt.Sprintf("%02d/%02d/%d", 1+g.r.IntN(12), 1+g.r.IntN(28), 2022+g.r.IntN(3))
}

// cpus adds the sockets.
func (g *gen) cpus(c cpuModel, sockets int) {
	for s := range sockets {
		g.rep.CPUs = append(g.rep.CPUs, inventory.CPU{
			Socket: s, Vendor: c.vendor, Model: c.model, Cores: c.cores, Threads: 2 * c.cores,
			MHz: c.mhz, NUMANode: s, Flags: slices.Clone(c.flags),
		})
	}
}

// dimms fills every slot; populated slots take one part throughout, as a
// vendor ships them. fill is the number of populated slots (balanced: the
// first of each channel pair first).
func (g *gen) dimms(c cpuModel, parts []dimmPart, slots, fill int, locator func(k int) (loc, bank string)) {
	part := parts[g.r.IntN(len(parts))]
	var total int64
	for k := range slots {
		loc, bank := locator(k)
		d := inventory.DIMM{Locator: loc, BankLocator: bank}
		populated := fill == slots || (fill*2 == slots && k%2 == 0)
		if populated {
			d.SizeMB, d.SpeedMTs, d.Type, d.FormFactor = part.sizeMB, c.memMTs, c.memType, "DIMM"
			d.Manufacturer, d.PartNumber, d.Serial = part.manufacturer, part.part, alnum(g.r, 8, hexUpper)
			total += part.sizeMB << 20
		}
		g.rep.DIMMs = append(g.rep.DIMMs, d)
	}
	// The kernel sees a little less than what is installed.
	seen := (total - total/60) &^ 4095
	g.rep.Memory = inventory.Memory{TotalBytes: seen, NUMANodes: []int64{seen / 2, seen - seen/2}}
}

// nicSpec describes an interface; the first one is the boot interface.
type nicSpec struct {
	name, addr, driver, fw string
	speed                  int
	sriov                  int
	mgmt                   bool // 1G, cabled to the out-of-band switch
	noLink                 bool // not cabled
}

func (g *gen) nic(s nicSpec) {
	k := g.nics
	g.nics++
	n := inventory.NIC{
		Name: s.name, MAC: g.mac(k), Driver: s.driver, Firmware: s.fw, SpeedMbps: s.speed,
		Link: !s.noLink, MTU: 1500, PCIAddress: s.addr, SRIOVTotal: s.sriov,
	}
	if !s.mgmt {
		n.MTU = 9000
	}
	if s.noLink {
		n.SpeedMbps = 0
	}
	if g.rep.BootMAC == "" {
		g.rep.BootMAC = n.MAC
		ip := netip.AddrFrom4([4]byte{10, 64 + byte(g.i>>16)&63, byte(g.i >> 8), byte(g.i)})
		n.IPs = []string{ip.String(), linkLocal(n.MAC)}
	}
	g.rep.NICs = append(g.rep.NICs, n)
	if s.noLink {
		return
	}
	// Data ports go to the rack's two leaves (first port a, second b), the
	// 1G port to the out-of-band switch; 40 machines to a rack.
	v := switchVendors[g.rack%len(switchVendors)]
	side, port := k%2, g.unit
	if s.mgmt {
		side = 2
	}
	sw := g.rack*3 + side
	g.rep.LLDP = append(g.rep.LLDP, inventory.LLDP{
		Interface:       s.name,
		ChassisID:       fmt.Sprintf("%s:%02x:%02x:%02x", v.ouiMAC, byte(sw>>16), byte(sw>>8), byte(sw)),
		PortID:          v.portID(port),
		SystemName:      fmt.Sprintf(v.sysFmt, g.rack, []string{"a", "b", "oob"}[side]),
		PortDescription: v.portDesc(g.host, k),
		VLAN:            map[bool]int{true: 10, false: 100}[s.mgmt],
	})
}

// linkLocal is the EUI-64 IPv6 link-local address of a MAC.
func linkLocal(mac string) string {
	var b [6]byte
	fmt.Sscanf(mac, "%02x:%02x:%02x:%02x:%02x:%02x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5])
	a := [16]byte{0: 0xfe, 1: 0x80, 8: b[0] ^ 2, 9: b[1], 10: b[2], 11: 0xff, 12: 0xfe, 13: b[3], 14: b[4], 15: b[5]}
	return netip.AddrFrom16(a).String()
}

// sdName is the kernel's name for the k-th SCSI disk: sda … sdz, sdaa ….
func sdName(k int) string {
	s := ""
	for k++; k > 0; k = (k - 1) / 26 {
		s = string(rune('a'+(k-1)%26)) + s
	}
	return "sd" + s
}

func (g *gen) disk(m diskModel) {
	g.rep.Disks = append(g.rep.Disks, inventory.Disk{
		Name: sdName(len(g.rep.Disks) - g.nvmeDisks()), SizeBytes: m.sizeBytes, Model: m.model, Serial: m.serial(g.r),
		WWN: m.wwnPrefix + hexN(g.r, 8), Rotational: m.rot, Transport: m.transport,
	})
}

func (g *gen) nvmeDisks() int {
	n := 0
	for _, d := range g.rep.Disks {
		if d.Transport == "nvme" {
			n++
		}
	}
	return n
}

// nvme adds a controller with ns namespaces, and its namespaces as disks.
func (g *gen) nvme(m nvmeModel, pciAddr string, ns int) {
	k := len(g.rep.NVMe)
	c := inventory.NVMe{Name: fmt.Sprintf("nvme%d", k), Model: m.model, Serial: m.serial(g.r), Firmware: m.firmware, PCIAddress: pciAddr}
	for n := 1; n <= ns; n++ {
		size := (m.nsBytes / int64(ns)) &^ 4095
		nsp := inventory.NVMeNamespace{Name: fmt.Sprintf("nvme%dn%d", k, n), SizeBytes: size, EUI64: m.eui(g.r), NGUID: m.nguid(g.r)}
		c.Namespaces = append(c.Namespaces, nsp)
		var wwn string
		switch {
		case nsp.NGUID != "":
			wwn = "eui." + nsp.NGUID
		case nsp.EUI64 != "":
			wwn = "eui." + nsp.EUI64
		}
		g.rep.Disks = append(g.rep.Disks, inventory.Disk{
			Name: nsp.Name, SizeBytes: size, Model: m.model, Serial: c.Serial, WWN: wwn, Transport: "nvme",
		})
	}
	g.rep.NVMe = append(g.rep.NVMe, c)
}

// finish adds what every machine has: TPM, BMC, PCI list, and the
// occasional collector failure a real fleet shows.
func (g *gen) finish() {
	if g.rep.TPM == nil {
		g.rep.TPM = &inventory.TPM{Version: "2.0", Manufacturer: g.pick("NTC", "IFX", "STM")}
	}
	bmcIP := netip.AddrFrom4([4]byte{10, 128 + byte(g.i>>16)&63, byte(g.i >> 8), byte(g.i)})
	g.rep.BMC = &inventory.BMC{
		Driver: "ipmi", Address: bmcIP.String(), MAC: g.mac(0xfe), Channel: 1, UserID: 3,
		User: "commissioner", Password: alnum(g.r, 16, "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789-_.!"), Source: "in-band",
	}
	g.rep.PCI = g.pci.devs
	slices.SortFunc(g.rep.PCI, func(a, b inventory.PCIDevice) int { return strings.Compare(a.Address, b.Address) })
	if g.r.IntN(100) < 3 && len(g.rep.LLDP) > 1 {
		last := g.rep.LLDP[len(g.rep.LLDP)-1]
		g.rep.LLDP = g.rep.LLDP[:len(g.rep.LLDP)-1]
		g.rep.Errors = append(g.rep.Errors, inventory.CollectErr{Collector: "lldp", Error: "no LLDPDU received on " + last.Interface + " within 35s"})
	}
}
