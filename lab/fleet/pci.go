package fleet

import (
	"fmt"

	"github.com/rollcall/rollcall/store/inventory"
)

// pdev is a PCI function's identity as lspci -nnk names it.
type pdev struct {
	vid, did, class, vendor, name, driver string
	svid, sdid                            string // "" for the board's own subsystem IDs
}

const (
	vIntel    = "Intel Corporation"
	vAMD      = "Advanced Micro Devices, Inc. [AMD]"
	vBroadcom = "Broadcom Inc. and subsidiaries"
	vLSI      = "Broadcom / LSI"
	vMellanox = "Mellanox Technologies"
	vNVIDIA   = "NVIDIA Corporation"
	vSamsung  = "Samsung Electronics Co Ltd"
	vMatrox   = "Matrox Electronics Systems Ltd."
	vASPEED   = "ASPEED Technology, Inc."
	vHPE      = "Hewlett-Packard Company"
	vMarvell  = "Marvell Technology Group Ltd."
	vKioxia   = "KIOXIA Corporation"
)

// fn places a function relative to a root bus: busOff 0 is the root bus
// itself, higher offsets are the host's internal buses behind it.
type fn struct {
	busOff, d, f int
	dev          pdev
}

// platform is a CPU generation's host PCI topology: the root buses of each
// socket's IIO stacks, the functions every stack shows, the chipset and the
// uncore configuration devices.
type platform struct {
	roots    [2][]int
	uncore   [2][]int
	stack    []fn // on every root bus
	first    []fn // on each socket's first root bus
	pch      []fn // socket 0's first root bus only
	unc      []fn // on every uncore bus
	rootPort pdev
	portAt   func(k int) (d, f int)
	pchPort  pdev
	pchPorts [][2]int // device.function of the chipset's root ports
}

func intelPort(first int) func(k int) (int, int) {
	return func(k int) (int, int) { return first + k, 0 }
}

// Ice Lake SP (Xeon Gold 5300/6300) with the C620A chipset.
var iceLake = func() *platform {
	p := &platform{
		roots:  [2][]int{{0x00, 0x15, 0x26, 0x37, 0x48, 0x59, 0x6a}, {0x80, 0x97, 0xa8, 0xb9, 0xca, 0xdb, 0xec}},
		uncore: [2][]int{{0x7e}, {0xfe}},
		stack: []fn{
			{0, 0, 0, pdev{"8086", "09a2", "0x088000", vIntel, "Ice Lake Memory Map/VT-d", "", "", ""}},
			{0, 0, 1, pdev{"8086", "09a4", "0x088000", vIntel, "Ice Lake Mesh 2 PCIe", "", "", ""}},
			{0, 0, 2, pdev{"8086", "09a3", "0x088000", vIntel, "Ice Lake RAS", "", "", ""}},
			{0, 0, 4, pdev{"8086", "0998", "0x060000", vIntel, "Ice Lake IEH", "", "", ""}},
		},
		rootPort: pdev{"8086", "347a", "0x060400", vIntel, "Ice Lake PCI Express Root Port A", "pcieport", "", ""},
		portAt:   intelPort(2),
		pchPort:  pdev{"8086", "a190", "0x060400", vIntel, "C620 Series Chipset Family PCI Express Root Port #1", "pcieport", "", ""},
		pchPorts: [][2]int{{0x1c, 0}, {0x1c, 4}, {0x1c, 5}},
	}
	for f := range 8 {
		p.first = append(p.first, fn{0, 1, f, pdev{"8086", "0b00", "0x088000", vIntel, "Ice Lake CBDMA [QuickData Technology]", "ioatdma", "", ""}})
	}
	p.pch = lewisburg("C620 Series Chipset Family", "a1cb", "C621A LPC/eSPI Controller")
	p.unc = uncoreList("Ice Lake", 0x3440)
	return p
}()

// Cascade Lake (Xeon Gold 6200R) with the C621 chipset.
var cascadeLake = func() *platform {
	p := &platform{
		roots:  [2][]int{{0x00, 0x17, 0x3a, 0x5d}, {0x80, 0x85, 0xae, 0xd7}},
		uncore: [2][]int{{0x16}, {0x84}},
		stack: []fn{
			{0, 5, 0, pdev{"8086", "2024", "0x088000", vIntel, "Sky Lake-E MM/Vt-d Configuration Registers", "", "", ""}},
			{0, 5, 2, pdev{"8086", "2025", "0x088000", vIntel, "Sky Lake-E RAS", "", "", ""}},
			{0, 5, 4, pdev{"8086", "2026", "0x080020", vIntel, "Sky Lake-E IOAPIC", "", "", ""}},
			{0, 8, 0, pdev{"8086", "2014", "0x088000", vIntel, "Sky Lake-E Ubox Registers", "", "", ""}},
		},
		rootPort: pdev{"8086", "2030", "0x060400", vIntel, "Sky Lake-E PCI Express Root Port A", "pcieport", "", ""},
		portAt:   intelPort(0),
		pchPort:  pdev{"8086", "a190", "0x060400", vIntel, "C620 Series Chipset Family PCI Express Root Port #1", "pcieport", "", ""},
		pchPorts: [][2]int{{0x1c, 0}, {0x1c, 4}, {0x1c, 5}},
	}
	for f := range 8 {
		p.first = append(p.first, fn{0, 4, f, pdev{"8086", "2021", "0x088000", vIntel, "Sky Lake-E CBDMA Registers", "ioatdma", "", ""}})
	}
	p.first = append(p.first, fn{0, 0, 0, pdev{"8086", "2020", "0x060000", vIntel, "Sky Lake-E DMI3 Registers", "", "", ""}})
	p.pch = lewisburg("C620 Series Chipset Family", "a1c1", "C621 Series Chipset LPC/eSPI Controller")
	p.unc = uncoreList("Sky Lake-E", 0x2040)
	return p
}()

// Sapphire Rapids (Xeon Platinum 8400) with the C741 chipset.
var sapphireRapids = func() *platform {
	p := &platform{
		roots:    iceLake.roots,
		uncore:   iceLake.uncore,
		stack:    iceLake.stack,
		rootPort: pdev{"8086", "352a", "0x060400", vIntel, "Sapphire Rapids PCI Express Root Port", "pcieport", "", ""},
		portAt:   intelPort(2),
		pchPort:  pdev{"8086", "1bb8", "0x060400", vIntel, "Emmitsburg (C740 Family) PCI Express Root Port #9", "pcieport", "", ""},
		pchPorts: [][2]int{{0x1c, 0}, {0x1c, 4}, {0x1c, 5}},
	}
	p.first = []fn{
		{0, 1, 0, pdev{"8086", "0b25", "0x088000", vIntel, "Data Streaming Accelerator (DSA)", "idxd", "", ""}},
		{0, 2, 0, pdev{"8086", "0cfe", "0x088000", vIntel, "In-Memory Analytics Accelerator (IAA)", "idxd", "", ""}},
		{0, 3, 0, pdev{"8086", "4940", "0x0b4000", vIntel, "4xxx Series QAT", "4xxx", "", ""}},
	}
	p.pch = []fn{
		{0, 0x11, 0, pdev{"8086", "1bf8", "0xff0000", vIntel, "Emmitsburg (C740 Family) MROM", "", "", ""}},
		{0, 0x11, 5, pdev{"8086", "1bd2", "0x010601", vIntel, "Emmitsburg (C740 Family) sSATA Controller [AHCI mode]", "ahci", "", ""}},
		{0, 0x14, 0, pdev{"8086", "1bcd", "0x0c0330", vIntel, "Emmitsburg (C740 Family) USB 3.2 Gen 1 xHCI Controller", "xhci_hcd", "", ""}},
		{0, 0x14, 2, pdev{"8086", "1bce", "0x050000", vIntel, "Emmitsburg (C740 Family) Shared SRAM", "", "", ""}},
		{0, 0x16, 0, pdev{"8086", "1be0", "0x078000", vIntel, "Emmitsburg (C740 Family) CSMI #1", "mei_me", "", ""}},
		{0, 0x16, 1, pdev{"8086", "1be1", "0x078000", vIntel, "Emmitsburg (C740 Family) CSMI #2", "", "", ""}},
		{0, 0x16, 4, pdev{"8086", "1be4", "0x078000", vIntel, "Emmitsburg (C740 Family) CSMI #3", "", "", ""}},
		{0, 0x17, 0, pdev{"8086", "1ba2", "0x010601", vIntel, "Emmitsburg (C740 Family) SATA Controller [AHCI mode]", "ahci", "", ""}},
		{0, 0x1f, 0, pdev{"8086", "1b81", "0x060100", vIntel, "Emmitsburg (C740 Family) LPC/eSPI Controller", "", "", ""}},
		{0, 0x1f, 2, pdev{"8086", "1bd6", "0x058000", vIntel, "Emmitsburg (C740 Family) Power Management Controller", "", "", ""}},
		{0, 0x1f, 4, pdev{"8086", "1bc9", "0x0c0500", vIntel, "Emmitsburg (C740 Family) SMBus", "i801_smbus", "", ""}},
		{0, 0x1f, 5, pdev{"8086", "1bca", "0x0c8000", vIntel, "Emmitsburg (C740 Family) SPI Controller", "intel-spi", "", ""}},
	}
	p.unc = uncoreList("Sapphire Rapids", 0x3240)
	return p
}()

// Rome (EPYC 7002) with its integrated FCH.
var rome = func() *platform {
	p := &platform{
		roots:    [2][]int{{0x00, 0x20, 0x40, 0x60}, {0x80, 0xa0, 0xc0, 0xe0}},
		rootPort: pdev{"1022", "1483", "0x060400", vAMD, "Starship/Matisse GPP Bridge", "pcieport", "", ""},
		portAt:   func(k int) (int, int) { return 1 + 2*(k/4), 1 + k%4 },
	}
	p.stack = []fn{
		{0, 0, 0, pdev{"1022", "1480", "0x060000", vAMD, "Starship/Matisse Root Complex", "", "", ""}},
		{0, 0, 2, pdev{"1022", "1481", "0x080600", vAMD, "Starship/Matisse IOMMU", "", "", ""}},
	}
	for _, d := range []int{1, 2, 3, 4, 5, 7, 8} {
		p.stack = append(p.stack, fn{0, d, 0, pdev{"1022", "1482", "0x060000", vAMD, "Starship/Matisse PCIe Dummy Host Bridge", "", "", ""}})
	}
	p.stack = append(p.stack,
		fn{0, 7, 1, pdev{"1022", "1484", "0x060400", vAMD, "Starship/Matisse Internal PCIe GPP Bridge 0 to bus[E:B]", "pcieport", "", ""}},
		fn{0, 8, 1, pdev{"1022", "1484", "0x060400", vAMD, "Starship/Matisse Internal PCIe GPP Bridge 0 to bus[E:B]", "pcieport", "", ""}},
		fn{1, 0, 0, pdev{"1022", "148a", "0x130000", vAMD, "Starship/Matisse PCIe Dummy Function", "", "", ""}},
		fn{1, 0, 2, pdev{"1022", "1498", "0x108000", vAMD, "Starship/Matisse PTDMA", "ptdma", "", ""}},
		fn{2, 0, 0, pdev{"1022", "1485", "0x130000", vAMD, "Starship/Matisse Reserved SPP", "", "", ""}},
		fn{2, 0, 2, pdev{"1022", "1498", "0x108000", vAMD, "Starship/Matisse PTDMA", "ptdma", "", ""}},
	)
	p.first = []fn{
		{2, 0, 1, pdev{"1022", "1486", "0x108000", vAMD, "Starship/Matisse Cryptographic Coprocessor PSPCPP", "ccp", "", ""}},
		{2, 0, 3, pdev{"1022", "148c", "0x0c0330", vAMD, "Starship USB 3.0 Host Controller", "xhci_hcd", "", ""}},
	}
	p.pch = []fn{
		{0, 0x14, 0, pdev{"1022", "790b", "0x0c0500", vAMD, "FCH SMBus Controller", "piix4_smbus", "", ""}},
		{0, 0x14, 3, pdev{"1022", "790e", "0x060100", vAMD, "FCH LPC Bridge", "", "", ""}},
	}
	for _, d := range []int{0x18, 0x19} {
		for f := range 8 {
			p.pch = append(p.pch, fn{0, d, f, pdev{"1022", fmt.Sprintf("%04x", 0x1490+f), "0x060000", vAMD, fmt.Sprintf("Starship Device 24; Function %d", f), "", "", ""}})
		}
	}
	p.pchPort = p.rootPort
	p.pchPorts = [][2]int{{3, 1}, {3, 2}, {3, 3}}
	return p
}()

// lewisburg is the C620-family chipset's functions on bus 0.
func lewisburg(fam, lpcID, lpcName string) []fn {
	return []fn{
		{0, 0x11, 0, pdev{"8086", "a1ec", "0xff0000", vIntel, fam + " MROM 0", "", "", ""}},
		{0, 0x11, 5, pdev{"8086", "a1d2", "0x010601", vIntel, fam + " SSATA Controller [AHCI mode]", "ahci", "", ""}},
		{0, 0x14, 0, pdev{"8086", "a1af", "0x0c0330", vIntel, fam + " USB 3.0 xHCI Controller", "xhci_hcd", "", ""}},
		{0, 0x14, 2, pdev{"8086", "a1b1", "0x118000", vIntel, fam + " Thermal Subsystem", "intel_pch_thermal", "", ""}},
		{0, 0x16, 0, pdev{"8086", "a1ba", "0x078000", vIntel, fam + " MEI Controller #1", "mei_me", "", ""}},
		{0, 0x16, 1, pdev{"8086", "a1bb", "0x078000", vIntel, fam + " MEI Controller #2", "", "", ""}},
		{0, 0x16, 4, pdev{"8086", "a1be", "0x078000", vIntel, fam + " MEI Controller #3", "", "", ""}},
		{0, 0x17, 0, pdev{"8086", "a182", "0x010601", vIntel, fam + " SATA Controller [AHCI mode]", "ahci", "", ""}},
		{0, 0x1f, 0, pdev{"8086", lpcID, "0x060100", vIntel, lpcName, "", "", ""}},
		{0, 0x1f, 2, pdev{"8086", "a1a1", "0x058000", vIntel, fam + " Power Management Controller", "", "", ""}},
		{0, 0x1f, 4, pdev{"8086", "a1a3", "0x0c0500", vIntel, fam + " SMBus", "i801_smbus", "", ""}},
		{0, 0x1f, 5, pdev{"8086", "a1a4", "0x0c8000", vIntel, fam + " SPI Controller", "intel-spi", "", ""}},
	}
}

// uncoreList is the per-socket configuration space of the uncore: Ubox,
// UPI links, mesh-to-memory and mesh-to-UPI agents, memory controllers,
// power control. Device IDs count up from base as on the real parts.
func uncoreList(gen string, base int) []fn {
	var out []fn
	id := base
	add := func(d, f int, name string) {
		out = append(out, fn{0, d, f, pdev{"8086", fmt.Sprintf("%04x", id), "0x088000", vIntel, gen + " " + name, "", "", ""}})
		id++
	}
	for f := range 4 {
		add(0, f, "Ubox Registers")
	}
	for link := range 3 {
		for f := range 3 {
			add(2+link, f, "UPI Link Registers")
		}
	}
	for k := range 3 {
		add(5+k, 0, "M2UPI Registers")
	}
	for k := range 4 {
		add(0x0c+k, 0, "Mesh to Memory Registers")
		add(0x1a+k, 0, "Integrated Memory Controller")
	}
	for f := range 6 {
		add(0x1e, f, "PCU Registers")
	}
	return out
}

// pciTree builds one machine's PCI device list.
type pciTree struct {
	p      *platform
	svid   string
	sdid   string
	devs   []inventory.PCIDevice
	next   map[int]int // root bus → next free bus number behind it
	ports  map[int]int // root bus → root ports used
	stack  [2]int      // round-robin position per socket
	pchUse int
}

func newPCITree(p *platform, svid, sdid string, sockets int) *pciTree {
	t := &pciTree{p: p, svid: svid, sdid: sdid, next: map[int]int{}, ports: map[int]int{}}
	for s := range sockets {
		for k, root := range p.roots[s] {
			maxOff := 0
			for _, f := range p.stack {
				t.fn(root, f, s)
				maxOff = max(maxOff, f.busOff)
			}
			if k == 0 {
				for _, f := range p.first {
					t.fn(root, f, s)
					maxOff = max(maxOff, f.busOff)
				}
				if s == 0 {
					for _, f := range p.pch {
						t.fn(root, f, s)
					}
				}
			}
			t.next[root] = root + maxOff + 1
		}
		for _, b := range p.uncore[s] {
			for _, f := range p.unc {
				t.fn(b, f, s)
			}
		}
	}
	return t
}

func (t *pciTree) fn(root int, f fn, numa int) string {
	return t.add(root+f.busOff, f.d, f.f, f.dev, numa)
}

func addr(bus, d, f int) string { return fmt.Sprintf("0000:%02x:%02x.%d", bus, d, f) }

func (t *pciTree) add(bus, d, f int, dev pdev, numa int) string {
	sv, sd := dev.svid, dev.sdid
	if sv == "" {
		sv, sd = t.svid, t.sdid
	}
	a := addr(bus, d, f)
	t.devs = append(t.devs, inventory.PCIDevice{
		Address: a, VendorID: dev.vid, DeviceID: dev.did, Class: dev.class,
		SubVendorID: sv, SubDeviceID: sd, Vendor: dev.vendor, Device: dev.name, Driver: dev.driver, NUMANode: numa,
	})
	return a
}

// slot adds a root port on one of the socket's stacks (never the chipset's
// stack) and returns the bus behind it.
func (t *pciTree) slot(socket int) int {
	roots := t.p.roots[socket]
	k := 1 + t.stack[socket]%(len(roots)-1)
	t.stack[socket]++
	root := roots[k]
	d, f := t.p.portAt(t.ports[root])
	t.ports[root]++
	t.add(root, d, f, t.p.rootPort, socket)
	return t.bus(root)
}

func (t *pciTree) bus(root int) int {
	b := t.next[root]
	t.next[root]++
	return b
}

// chipsetSlot adds one of the chipset's root ports (BMC video, LOM) and
// returns the bus behind it.
func (t *pciTree) chipsetSlot() int {
	root := t.p.roots[0][0]
	pp := t.p.pchPorts[t.pchUse%len(t.p.pchPorts)]
	t.pchUse++
	t.add(root, pp[0], pp[1], t.p.pchPort, 0)
	return t.bus(root)
}

// pcieSwitch adds a switch behind a root port: upstream port, management
// endpoint and nDown downstream ports; it returns the buses behind the
// downstream ports.
func (t *pciTree) pcieSwitch(socket int, up, mgmt pdev, nDown int) []int {
	ub := t.slot(socket)
	roots := t.p.roots[socket]
	root := roots[1+(t.stack[socket]-1)%(len(roots)-1)]
	t.add(ub, 0, 0, up, socket)
	t.add(ub, 0, 1, mgmt, socket)
	db := t.bus(root)
	var out []int
	for k := range nDown {
		t.add(db, k, 0, up, socket)
		out = append(out, t.bus(root))
	}
	return out
}
