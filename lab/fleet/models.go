package fleet

import (
	"fmt"

	"github.com/rollcall/rollcall/store/inventory"
)

// Add-in and onboard devices.
var (
	matroxW3  = pdev{"102b", "0536", "0x030000", vMatrox, "Integrated Matrox G200eW3 Graphics Controller", "mgag200", "", ""}
	matroxH3  = pdev{"102b", "0538", "0x030000", vMatrox, "MGA G200eH3", "mgag200", "", ""}
	ast1150   = pdev{"1a03", "1150", "0x060400", vASPEED, "AST1150 PCI-to-PCI Bridge", "", "", ""}
	astVGA    = pdev{"1a03", "2000", "0x030000", vASPEED, "ASPEED Graphics Family", "ast", "", ""}
	ilo5Slave = pdev{"103c", "3306", "0xff0000", vHPE, "Integrated Lights-Out Standard Slave Instrumentation & System Support", "", "", ""}
	ilo5Mgmt  = pdev{"103c", "3307", "0x088000", vHPE, "Integrated Lights-Out Standard Management Processor Support and Messaging", "hpilo", "", ""}
	ilo5USB   = pdev{"103c", "22f6", "0x0c0320", vHPE, "iLO5 Virtual USB Controller", "ehci-pci", "", ""}
	bcm57414  = pdev{"14e4", "16d7", "0x020000", vBroadcom, "BCM57414 NetXtreme-E 10Gb/25Gb RDMA Ethernet Controller", "bnxt_en", "", ""}
	bcm5720   = pdev{"14e4", "165f", "0x020000", vBroadcom, "NetXtreme BCM5720 Gigabit Ethernet PCIe", "tg3", "", ""}
	e810xxv   = pdev{"8086", "159b", "0x020000", vIntel, "Ethernet Controller E810-XXV for SFP", "ice", "", ""}
	xxv710    = pdev{"8086", "158b", "0x020000", vIntel, "Ethernet Controller XXV710 for 25GbE SFP28", "i40e", "8086", "0001"}
	i350      = pdev{"8086", "1521", "0x020000", vIntel, "I350 Gigabit Network Connection", "igb", "", ""}
	i210      = pdev{"8086", "1533", "0x020000", vIntel, "I210 Gigabit Network Connection", "igb", "", ""}
	cx4lx     = pdev{"15b3", "1015", "0x020000", vMellanox, "MT27710 Family [ConnectX-4 Lx]", "mlx5_core", "15b3", "0003"}
	cx6lx     = pdev{"15b3", "101f", "0x020000", vMellanox, "MT2894 Family [ConnectX-6 Lx]", "mlx5_core", "15b3", "0016"}
	cx6dx     = pdev{"15b3", "101d", "0x020000", vMellanox, "MT2892 Family [ConnectX-6 Dx]", "mlx5_core", "15b3", "0008"}
	cx6ib     = pdev{"15b3", "101b", "0x020700", vMellanox, "MT28908 Family [ConnectX-6]", "mlx5_core", "15b3", "0007"}
	cx7ib     = pdev{"15b3", "1021", "0x020700", vMellanox, "MT2910 Family [ConnectX-7]", "mlx5_core", "15b3", "0041"}
	perc755   = pdev{"1000", "10e2", "0x010400", vLSI, "MegaRAID 12GSAS/PCIe Secure SAS39xx", "megaraid_sas", "1028", "1ae0"}
	mr416i    = pdev{"1000", "10e2", "0x010400", vLSI, "MegaRAID 12GSAS/PCIe Secure SAS39xx", "megaraid_sas", "1590", "02ac"}
	sas3808   = pdev{"1000", "00e6", "0x010700", vLSI, "Fusion-MPT 12GSAS/PCIe Secure SAS38xx", "mpt3sas", "15d9", "1c7c"}
	sas3008   = pdev{"1000", "0097", "0x010700", vLSI, "SAS3008 PCI-Express Fusion-MPT SAS-3", "mpt3sas", "15d9", "0808"}
	bossS2    = pdev{"1b4b", "9230", "0x010400", vMarvell, "88SE9230 PCIe 2.0 x2 4-port SATA 6 Gb/s RAID Controller", "ahci", "1028", "2435"}
	boss2     = pdev{"1b4b", "2241", "0x010802", vMarvell, "88NR2241 Non-Volatile memory controller", "nvme", "1028", "2151"}
	kioxiaCM6 = pdev{"1e0f", "0007", "0x010802", vKioxia, "NVMe SSD Controller Cx6", "nvme", "1028", "2078"}
	pm1733    = pdev{"144d", "a824", "0x010802", vSamsung, "NVMe SSD Controller PM173X", "nvme", "144d", "a801"}
	pm9a3     = pdev{"144d", "a80a", "0x010802", vSamsung, "NVMe SSD Controller PM9A1/PM9A3/980PRO", "nvme", "144d", "a813"}
	pm983     = pdev{"144d", "a808", "0x010802", vSamsung, "NVMe SSD Controller SM981/PM981/PM983", "nvme", "144d", "a801"}
	hpeNVMe   = pdev{"144d", "a824", "0x010802", vSamsung, "NVMe SSD Controller PM173X", "nvme", "1590", "0294"}
	p5520     = pdev{"8086", "0b60", "0x010802", vIntel, "NVMe DC SSD [3DNAND, Sentinel Rock Controller]", "nvme", "8086", "8008"}
	a100      = pdev{"10de", "20b2", "0x030200", vNVIDIA, "GA100 [A100 SXM4 80GB]", "nvidia", "10de", "147f"}
	h100      = pdev{"10de", "2330", "0x030200", vNVIDIA, "GH100 [H100 SXM5 80GB]", "nvidia", "10de", "16c1"}
	nvswA100  = pdev{"10de", "1af1", "0x068000", vNVIDIA, "GA100 [A100 NVSwitch]", "nvidia-nvswitch", "10de", "1652"}
	nvswH100  = pdev{"10de", "22a3", "0x068000", vNVIDIA, "GH100 [H100 NVSwitch]", "nvidia-nvswitch", "10de", "1796"}
	pex88096  = pdev{"1000", "c010", "0x060400", vLSI, "PEX880xx PCIe Gen 4 Switch", "pcieport", "1000", "a064"}
	pex88mgmt = pdev{"1000", "00b2", "0x058000", vLSI, "PCIe Switch management endpoint", "", "1000", "a064"}
	pex89144  = pdev{"1000", "c030", "0x060400", vLSI, "PEX890xx PCIe Gen 5 Switch", "pcieport", "1000", "a0a4"}
	pex89mgmt = pdev{"1000", "00b5", "0x058000", vLSI, "PEX890xx PCIe Gen 5 Switch management endpoint", "", "1000", "a0a4"}
)

// Firmware strings as ethtool -i prints them.
const (
	fwBnxt  = "227.0.131.0/pkg 22.71.3"
	fwTg3   = "FFV22.71.3 bc 5720-v1.39"
	fwIce   = "4.20 0x8001778b 1.3346.0"
	fwI40e  = "9.20 0x8000d8c5 1.3179.0"
	fwIgb   = "1.63, 0x800009fa"
	fwCX4   = "14.32.1010 (MT_2420110034)"
	fwCX6Lx = "26.36.1010 (MT_0000000531)"
	fwCX6Dx = "22.36.1010 (MT_0000000359)"
	fwCX6   = "20.35.2000 (MT_0000000223)"
	fwCX7   = "28.39.1002 (MT_0000000838)"
)

// enp is the predictable name of a PCI network function.
func enp(a string, np bool) string {
	var bus, dev, fn int
	fmt.Sscanf(a, "0000:%x:%x.%d", &bus, &dev, &fn)
	s := fmt.Sprintf("enp%ds%df%d", bus, dev, fn)
	if np {
		s += fmt.Sprintf("np%d", fn)
	}
	return s
}

// nicPair adds a two-port card (or LOM) behind bus b.
func (g *gen) nicPair(b, socket int, d pdev, names [2]string, driver, fw string, speed, sriov int, mgmt bool) {
	for f := range 2 {
		a := g.pci.add(b, 0, f, d, socket)
		name := names[f]
		if name == "" {
			name = enp(a, driver == "mlx5_core" || driver == "bnxt_en")
		}
		// Of a 1G pair only the first port is cabled.
		g.nic(nicSpec{name: name, addr: a, driver: driver, fw: fw, speed: speed, sriov: sriov, mgmt: mgmt, noLink: mgmt && f == 1})
	}
}

func dellLocator(k int) (string, string) {
	return fmt.Sprintf("%c%d", 'A'+k/16, k%16+1), "Not Specified"
}

func smcLocator(perSocket int) func(k int) (string, string) {
	return func(k int) (string, string) {
		s, c := k/perSocket, k%perSocket
		ch, d := c/2, c%2
		return fmt.Sprintf("P%d-DIMM%c%d", s+1, 'A'+ch, d+1), fmt.Sprintf("P%d_Node%d_Channel%d_Dimm%d", s, s, ch, d)
	}
}

// ---- servers ----

func (g *gen) dellR650() {
	tag := g.dellTag()
	g.rep.System = inventory.System{Manufacturer: "Dell Inc.", Product: "PowerEdge R650", Serial: tag, UUID: dellUUID(tag),
		SKU: "SKU=0A6B;ModelName=PowerEdge R650", Family: "PowerEdge"}
	g.rep.Baseboard = inventory.Baseboard{Manufacturer: "Dell Inc.", Product: "0Y2K8N", Version: "A01",
		Serial: "." + tag + ".CNFCP00" + alnum(g.r, 7, upperDigits) + "."}
	g.rep.Chassis = inventory.Chassis{Manufacturer: "Dell Inc.", Type: "Rack Mount Chassis", Serial: tag}
	g.rep.BIOS = inventory.BIOS{Vendor: "Dell Inc.", Version: g.pick("1.8.2", "1.9.2", "1.10.2"), Date: g.biosDate()}
	cpu := []cpuModel{xeonGold6338, xeonGold6330, xeonGold6342, xeonGold5318}[g.r.IntN(4)]
	g.cpus(cpu, 2)
	g.dimms(cpu, ddr4Parts, 32, []int{16, 32}[g.r.IntN(2)], dellLocator)
	g.pci = newPCITree(iceLake, "1028", "0a6b", 2)
	g.pci.add(g.pci.chipsetSlot(), 0, 0, matroxW3, 0)
	ocp := g.pci.slot(0)
	lom := g.pci.chipsetSlot()
	g.nicPair(ocp, 0, bcm57414, [2]string{"eno12399np0", "eno12409np1"}, "bnxt_en", fwBnxt, 25000, 8, false)
	g.nicPair(lom, 0, bcm5720, [2]string{"eno8303", "eno8403"}, "tg3", fwTg3, 1000, 0, true)
	g.pci.add(g.pci.slot(0), 0, 0, perc755, 0)
	g.pci.add(g.pci.slot(1), 0, 0, bossS2, 1) // BOSS-S2: the two SATA boot SSDs below
	g.disk(ssdDellSATA)
	g.disk(ssdDellSATA)
	for range g.r.IntN(3) {
		a := g.pci.add(g.pci.slot(1), 0, 0, kioxiaCM6, 1)
		g.nvme(nvmeDellKioxia, a, 1)
	}
	g.rep.TPM = &inventory.TPM{Version: "2.0", Manufacturer: "NTC"}
}

func (g *gen) hpeDL380() {
	serial := g.hpeSerial()
	const sku = "P24842-B21"
	g.rep.System = inventory.System{Manufacturer: "HPE", Product: "ProLiant DL380 Gen10 Plus", Serial: serial, UUID: hpeUUID(sku, serial),
		SKU: sku, Family: "ProLiant"}
	g.rep.Baseboard = inventory.Baseboard{Manufacturer: "HPE", Product: "ProLiant DL380 Gen10 Plus", Serial: serial}
	g.rep.Chassis = inventory.Chassis{Manufacturer: "HPE", Type: "Rack Mount Chassis", Serial: serial}
	g.rep.BIOS = inventory.BIOS{Vendor: "HPE", Version: "U46", Date: g.biosDate()}
	cpu := []cpuModel{xeonGold6338, xeonGold6330, xeonGold6342}[g.r.IntN(3)]
	g.cpus(cpu, 2)
	g.dimms(cpu, ddr4Parts, 32, []int{16, 32}[g.r.IntN(2)], func(k int) (string, string) {
		return fmt.Sprintf("PROC %d DIMM %d", k/16+1, k%16+1), "Not Specified"
	})
	g.pci = newPCITree(iceLake, "1590", "0327", 2)
	ilo := g.pci.chipsetSlot()
	g.pci.add(ilo, 0, 0, ilo5Slave, 0)
	g.pci.add(ilo, 0, 1, matroxH3, 0)
	g.pci.add(ilo, 0, 2, ilo5Mgmt, 0)
	g.pci.add(ilo, 0, 4, ilo5USB, 0)
	g.nicPair(g.pci.slot(0), 0, e810xxv, [2]string{"ens1f0", "ens1f1"}, "ice", fwIce, 25000, 64, false)
	g.nicPair(g.pci.chipsetSlot(), 0, bcm5720, [2]string{"eno1", "eno2"}, "tg3", fwTg3, 1000, 0, true)
	g.pci.add(g.pci.slot(0), 0, 0, mr416i, 0)
	g.disk(ssdHPESATA)
	g.disk(ssdHPESATA)
	for range g.r.IntN(3) {
		a := g.pci.add(g.pci.slot(1), 0, 0, hpeNVMe, 1)
		g.nvme(nvmeHPE, a, 1)
	}
	g.rep.TPM = &inventory.TPM{Version: "2.0", Manufacturer: "NTC"}
}

func (g *gen) smcSystem(product, board, biosVendor, biosVersion string) {
	serial := g.smcSerial()
	g.rep.System = inventory.System{Manufacturer: "Supermicro", Product: product, Version: "0123456789", Serial: serial,
		UUID: g.randUUID(), SKU: "To be filled by O.E.M.", Family: "To be filled by O.E.M."}
	g.rep.Baseboard = inventory.Baseboard{Manufacturer: "Supermicro", Product: board, Version: "1.10",
		Serial: "WM" + fmt.Sprint(19+g.r.IntN(5)) + "AS" + alnum(g.r, 6, digits), AssetTag: "Base Board Asset Tagging"}
	g.rep.Chassis = inventory.Chassis{Manufacturer: "Supermicro", Type: "Main Server Chassis", Serial: "C" + alnum(g.r, 4, digits) + "LK" + alnum(g.r, 2, digits) + "A" + alnum(g.r, 5, digits), AssetTag: "To be filled by O.E.M."}
	g.rep.BIOS = inventory.BIOS{Vendor: biosVendor, Version: biosVersion, Date: g.biosDate()}
}

// smcVGA adds the BMC's video behind its bridge.
func (g *gen) smcVGA() {
	b := g.pci.chipsetSlot()
	g.pci.add(b, 0, 0, ast1150, 0)
	g.pci.add(g.pci.bus(g.pci.p.roots[0][0]), 0, 0, astVGA, 0)
}

func (g *gen) smc1029U() {
	g.smcSystem("SYS-1029U-TN10RT", "X11DPU", "American Megatrends Inc.", g.pick("3.6", "3.8a"))
	cpu := []cpuModel{xeonGold6248, xeonGold6230}[g.r.IntN(2)]
	g.cpus(cpu, 2)
	g.dimms(cpu, ddr4Parts, 24, []int{12, 24}[g.r.IntN(2)], smcLocator(12))
	g.pci = newPCITree(cascadeLake, "15d9", "095d", 2)
	g.smcVGA()
	g.nicPair(g.pci.slot(0), 0, cx4lx, [2]string{"ens3f0np0", "ens3f1np1"}, "mlx5_core", fwCX4, 25000, 8, false)
	g.nicPair(g.pci.chipsetSlot(), 0, i350, [2]string{"eno1", "eno2"}, "igb", fwIgb, 1000, 7, true)
	g.disk(ssdSMCSATA)
	g.disk(ssdSMCSATA)
	for range g.r.IntN(3) {
		a := g.pci.add(g.pci.slot(1), 0, 0, pm9a3, 1)
		g.nvme(nvmeSamsungPM9A3, a, 1)
	}
	g.rep.TPM = &inventory.TPM{Version: "2.0", Manufacturer: "IFX"}
}

// ---- GPU nodes ----

type gpuKit struct {
	gpu, nvsw, sw, swMgmt, hca pdev
	gpuModel                   string
	gpuMemMB                   int64
	nvswitches                 int
	hcaModel, hcaFW, rate      string
	hcaPorts                   int
	guidOUI                    string
}

var (
	kitA100 = gpuKit{a100, nvswA100, pex88096, pex88mgmt, cx6ib, "NVIDIA A100-SXM4-80GB", 81920, 6,
		"MCX653106A-HDAT", fwCX6, "200 Gb/sec (4X HDR)", 2, "b8cef603"}
	kitH100 = gpuKit{h100, nvswH100, pex89144, pex89mgmt, cx7ib, "NVIDIA H100 80GB HBM3", 81559, 4,
		"MCX75310AAS-NEAT", fwCX7, "400 Gb/sec (4X NDR)", 1, "946dae03"}
)

// hgx adds the GPU baseboard: four PCIe switches, each with two GPUs, one
// HCA, one data NVMe drive and its share of the NVSwitches, plus the
// downstream ports left empty as on the real board.
func (g *gen) hgx(k gpuKit, data nvmeModel, dataDev pdev) {
	nvsw := k.nvswitches
	for s := range 4 {
		socket := s / 2
		down := g.pci.pcieSwitch(socket, k.sw, k.swMgmt, 8)
		for j := range 2 {
			a := g.pci.add(down[j], 0, 0, k.gpu, socket)
			g.rep.GPUs = append(g.rep.GPUs, inventory.GPU{Vendor: "NVIDIA", Model: k.gpuModel, PCIAddress: a, MemoryMB: k.gpuMemMB, NUMANode: socket})
		}
		h := len(g.rep.IB)
		hca := inventory.IBHCA{Name: fmt.Sprintf("mlx5_%d", h), Model: k.hcaModel, Firmware: k.hcaFW}
		for p := range k.hcaPorts {
			a := g.pci.add(down[2], 0, p, k.hca, socket)
			if p == 0 {
				hca.PCIAddress = a
			}
		}
		base := uint64(g.perm(1<<21, 0x1b))<<3 | uint64(h)<<1
		hca.NodeGUID = guid(k.guidOUI, base)
		for p := 1; p <= k.hcaPorts; p++ {
			state := "ACTIVE"
			if g.r.IntN(50) == 0 {
				state = "DOWN"
			}
			hca.Ports = append(hca.Ports, inventory.IBPort{Number: p, GUID: guid(k.guidOUI, base+uint64(p-1)), State: state, Rate: k.rate, LinkLayer: "InfiniBand"})
		}
		g.rep.IB = append(g.rep.IB, hca)
		a := g.pci.add(down[3], 0, 0, dataDev, socket)
		g.nvme(data, a, 1)
		for j := 4; j < 8 && nvsw > 0 && j < 4+(k.nvswitches+3)/4; j++ {
			g.pci.add(down[j], 0, 0, k.nvsw, socket)
			nvsw--
		}
	}
}

// guid prints a 64-bit GUID as sysfs does: "b8ce:f603:00a1:b2c4".
func guid(oui string, low uint64) string {
	v := fmt.Sprintf("%s%08x", oui, low&0xffffffff)
	return v[0:4] + ":" + v[4:8] + ":" + v[8:12] + ":" + v[12:16]
}

func (g *gen) dgxA100() {
	serial := g.nvidiaSerial()
	g.rep.System = inventory.System{Manufacturer: "NVIDIA", Product: "DGXA100 920-23687-2530-000", Serial: serial, UUID: g.randUUID(),
		SKU: "920-23687-2530-000", Family: "DGX"}
	g.rep.Baseboard = inventory.Baseboard{Manufacturer: "NVIDIA", Product: "DGXA100", Version: "A02", Serial: "1572" + alnum(g.r, 9, digits)}
	g.rep.Chassis = inventory.Chassis{Manufacturer: "NVIDIA", Type: "Rack Mount Chassis", Serial: serial}
	g.rep.BIOS = inventory.BIOS{Vendor: "American Megatrends Inc.", Version: g.pick("1.21", "1.25"), Date: g.biosDate()}
	g.cpus(epyc7742, 2)
	g.dimms(epyc7742, []dimmPart{ddr4Parts[1], ddr4Parts[3], ddr4Parts[5]}, 32, 32, func(k int) (string, string) {
		return fmt.Sprintf("CPU%d_DIMM_%c%d", k/16, 'A'+k%16/2, k%2), fmt.Sprintf("P%d CHANNEL %c", k/16, 'A'+k%16/2)
	})
	g.pci = newPCITree(rome, "10de", "1485", 2)
	g.smcVGA()
	g.hgx(kitA100, nvmeSamsungPM1733, pm1733)
	g.nicPair(g.pci.slot(1), 1, cx6dx, [2]string{}, "mlx5_core", fwCX6Dx, 100000, 8, false)
	g.nic(nicSpec{name: "enp226s0", addr: g.pci.add(g.pci.chipsetSlot(), 0, 0, i210, 0), driver: "igb", fw: fwIgb, speed: 1000, mgmt: true})
	for range 2 {
		a := g.pci.add(g.pci.slot(0), 0, 0, pm983, 0)
		g.nvme(nvmeSamsungPM983, a, 1)
	}
	g.rep.TPM = &inventory.TPM{Version: "2.0", Manufacturer: "IFX"}
}

func (g *gen) dellXE9680() {
	tag := g.dellTag()
	g.rep.System = inventory.System{Manufacturer: "Dell Inc.", Product: "PowerEdge XE9680", Serial: tag, UUID: dellUUID(tag),
		SKU: "SKU=0B24;ModelName=PowerEdge XE9680", Family: "PowerEdge"}
	g.rep.Baseboard = inventory.Baseboard{Manufacturer: "Dell Inc.", Product: "0K0HGD", Version: "A00",
		Serial: "." + tag + ".CNFCP00" + alnum(g.r, 7, upperDigits) + "."}
	g.rep.Chassis = inventory.Chassis{Manufacturer: "Dell Inc.", Type: "Rack Mount Chassis", Serial: tag}
	g.rep.BIOS = inventory.BIOS{Vendor: "Dell Inc.", Version: g.pick("1.5.6", "1.6.10"), Date: g.biosDate()}
	g.cpus(xeonPlat8480, 2)
	g.dimms(xeonPlat8480, ddr5Parts, 32, 32, dellLocator)
	g.pci = newPCITree(sapphireRapids, "1028", "0b24", 2)
	g.pci.add(g.pci.chipsetSlot(), 0, 0, matroxW3, 0)
	g.hgx(kitH100, nvmeDellKioxia, kioxiaCM6)
	g.nicPair(g.pci.slot(0), 0, bcm57414, [2]string{"eno12399np0", "eno12409np1"}, "bnxt_en", fwBnxt, 25000, 8, false)
	g.nicPair(g.pci.chipsetSlot(), 0, bcm5720, [2]string{"eno8303", "eno8403"}, "tg3", fwTg3, 1000, 0, true)
	boss := g.pci.add(g.pci.slot(0), 0, 0, boss2, 0)
	g.nvme(nvmeDellBOSSN1, boss, 1)
	g.rep.TPM = &inventory.TPM{Version: "2.0", Manufacturer: "NTC"}
}

func (g *gen) smc821GE() {
	g.smcSystem("SYS-821GE-TNHR", "X13DEG-OAD", "American Megatrends International, LLC.", g.pick("2.0", "2.1"))
	g.cpus(xeonPlat8468, 2)
	g.dimms(xeonPlat8468, ddr5Parts, 32, 32, smcLocator(16))
	g.pci = newPCITree(sapphireRapids, "15d9", "1c32", 2)
	g.smcVGA()
	g.hgx(kitH100, nvmeSamsungPM9A3, pm9a3)
	g.nicPair(g.pci.slot(1), 1, cx6lx, [2]string{}, "mlx5_core", fwCX6Lx, 25000, 8, false)
	g.nicPair(g.pci.chipsetSlot(), 0, i350, [2]string{"eno1", "eno2"}, "igb", fwIgb, 1000, 7, true)
	for range 2 {
		a := g.pci.add(g.pci.slot(0), 0, 0, pm9a3, 0)
		g.nvme(nvmeSamsungPM9A3, a, 1)
	}
	g.rep.TPM = &inventory.TPM{Version: "2.0", Manufacturer: "IFX"}
}

// ---- storage nodes ----

// hdds adds n drives of one model, as a storage node is bought.
func (g *gen) hdds(n int) {
	m := []diskModel{hddSeagate, hddWDC, hddToshiba}[g.r.IntN(3)]
	for range n {
		g.disk(m)
	}
}

func (g *gen) smc640P() {
	g.smcSystem("SSG-640P-E1CR36H", "X12DPi-NT6", "American Megatrends International, LLC.", g.pick("1.4", "1.4b"))
	cpu := []cpuModel{xeonGold5317, xeonGold5318}[g.r.IntN(2)]
	g.cpus(cpu, 2)
	g.dimms(cpu, ddr4Parts, 16, 16, smcLocator(8))
	g.pci = newPCITree(iceLake, "15d9", "1c48", 2)
	g.smcVGA()
	g.nicPair(g.pci.slot(0), 0, cx6lx, [2]string{}, "mlx5_core", fwCX6Lx, 25000, 8, false)
	g.nicPair(g.pci.chipsetSlot(), 0, i350, [2]string{"eno1", "eno2"}, "igb", fwIgb, 1000, 7, true)
	g.pci.add(g.pci.slot(0), 0, 0, sas3808, 0)
	g.hdds(36)
	for s := range 2 {
		a := g.pci.add(g.pci.slot(s), 0, 0, p5520, s)
		g.nvme(nvmeSolidigmP5520, a, 1+g.r.IntN(2))
	}
	g.rep.TPM = &inventory.TPM{Version: "2.0", Manufacturer: "IFX"}
}

func (g *gen) smc6049P() {
	g.smcSystem("SSG-6049P-E1CR36L", "X11DSC+", "American Megatrends Inc.", g.pick("3.4", "3.6"))
	cpu := []cpuModel{xeonGold6230, xeonGold6248}[g.r.IntN(2)]
	g.cpus(cpu, 2)
	g.dimms(cpu, ddr4Parts, 24, 12, smcLocator(12))
	g.pci = newPCITree(cascadeLake, "15d9", "0a68", 2)
	g.smcVGA()
	g.nicPair(g.pci.slot(0), 0, xxv710, [2]string{}, "i40e", fwI40e, 25000, 64, false)
	g.nicPair(g.pci.chipsetSlot(), 0, i350, [2]string{"eno1", "eno2"}, "igb", fwIgb, 1000, 7, true)
	g.pci.add(g.pci.slot(0), 0, 0, sas3008, 0)
	g.hdds(36)
	for s := range 2 {
		a := g.pci.add(g.pci.slot(s), 0, 0, pm9a3, s)
		g.nvme(nvmeSamsungPM9A3, a, 1+g.r.IntN(2))
	}
	g.rep.TPM = &inventory.TPM{Version: "2.0", Manufacturer: "IFX"}
}
