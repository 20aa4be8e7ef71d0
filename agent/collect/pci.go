package collect

import (
	"bufio"
	"os"
	"strings"

	"github.com/rollcall/rollcall/store/inventory"
)

// collectPCI lists every PCI function with its IDs, class, NUMA node and
// driver, and picks the GPUs out of them: display controllers (class 03h)
// from NVIDIA, AMD and Intel. A BMC's VGA function (ASPEED, Matrox) is
// class 03h too but is no accelerator; it stays in the PCI list only.
func (c *collector) collectPCI(fs sysfs, r *inventory.Report) error {
	names := fs.list("/sys/bus/pci/devices")
	if names == nil {
		// No PCI bus (some VMs, s390x) is not an error.
		return nil
	}
	ids := c.pciNames(fs)
	for _, addr := range names {
		base := "/sys/bus/pci/devices/" + addr
		d := inventory.PCIDevice{
			Address:     addr,
			VendorID:    hexID(fs.str(base + "/vendor")),
			DeviceID:    hexID(fs.str(base + "/device")),
			Class:       hexID(fs.str(base + "/class")),
			SubVendorID: hexID(fs.str(base + "/subsystem_vendor")),
			SubDeviceID: hexID(fs.str(base + "/subsystem_device")),
			Driver:      fs.link(base + "/driver"),
			// -1: the kernel knows no NUMA affinity (single-node machines).
			NUMANode: int(fs.int(base+"/numa_node", -1)),
		}
		d.Vendor, d.Device = ids.lookup(d.VendorID, d.DeviceID)
		r.PCI = append(r.PCI, d)
		if strings.HasPrefix(d.Class, "03") && gpuVendors[d.VendorID] != "" {
			g := inventory.GPU{Vendor: gpuVendors[d.VendorID], Model: d.Device, PCIAddress: addr, NUMANode: d.NUMANode}
			if g.Model == "" {
				g.Model = d.VendorID + ":" + d.DeviceID
			}
			// amdgpu publishes its VRAM size; NVIDIA's driver is not in the
			// image, so NVIDIA memory stays unknown.
			if vram := fs.int(base+"/mem_info_vram_total", 0); vram > 0 {
				g.MemoryMB = vram >> 20
			}
			r.GPUs = append(r.GPUs, g)
		}
	}
	return nil
}

var gpuVendors = map[string]string{"10de": "NVIDIA", "1002": "AMD", "8086": "Intel"}

// pciIDs names vendors and devices: the machine's pci.ids when the image
// carries one, else a small built-in table of what servers usually hold.
type pciIDs struct {
	vendors map[string]string
	devices map[string]string // "vvvv:dddd"
}

func (p pciIDs) lookup(v, d string) (string, string) {
	return p.vendors[v], p.devices[v+":"+d]
}

func (c *collector) pciNames(fs sysfs) pciIDs {
	for _, f := range []string{"/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids", "/usr/share/pci.ids"} {
		if ids, ok := loadPCIIDs(fs.path(f)); ok {
			return ids
		}
	}
	return builtinPCIIDs
}

// loadPCIIDs parses the pci.ids format: "vvvv  Vendor", "\tdddd  Device",
// "\t\tsubv subd  Subsystem" (ignored), "C cc  Class" (the class section
// ends the vendor list).
func loadPCIIDs(path string) (pciIDs, bool) {
	f, err := os.Open(path)
	if err != nil {
		return pciIDs{}, false
	}
	defer f.Close()
	ids := pciIDs{vendors: map[string]string{}, devices: map[string]string{}}
	vendor := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if strings.HasPrefix(line, "C ") {
			break
		}
		switch {
		case strings.HasPrefix(line, "\t\t"):
		case line[0] == '\t':
			if vendor != "" && len(line) > 7 {
				ids.devices[vendor+":"+strings.ToLower(line[1:5])] = strings.TrimSpace(line[5:])
			}
		case len(line) > 6:
			vendor = strings.ToLower(line[:4])
			ids.vendors[vendor] = strings.TrimSpace(line[4:])
		}
	}
	return ids, len(ids.vendors) > 0
}

var builtinPCIIDs = pciIDs{
	vendors: map[string]string{
		"8086": "Intel Corporation", "10de": "NVIDIA Corporation", "1002": "Advanced Micro Devices, Inc. [AMD/ATI]",
		"1022": "Advanced Micro Devices, Inc. [AMD]", "15b3": "Mellanox Technologies", "14e4": "Broadcom Inc. and subsidiaries",
		"1000": "Broadcom / LSI", "1077": "QLogic Corp.", "19a2": "Emulex Corporation", "1924": "Solarflare Communications",
		"1af4": "Red Hat, Inc.", "1b36": "Red Hat, Inc.", "1234": "QEMU", "15ad": "VMware", "1d0f": "Amazon.com, Inc.",
		"144d": "Samsung Electronics Co Ltd", "1344": "Micron Technology Inc", "1e0f": "KIOXIA Corporation",
		"1c5c": "SK hynix", "8088": "Wangxun Technology", "1a03": "ASPEED Technology, Inc.", "102b": "Matrox Electronics Systems Ltd.",
		"9005": "Adaptec", "19e5": "Huawei Technologies Co., Ltd.", "1bb1": "Seagate Technology PLC", "1cc4": "Union Memory (Shenzhen)",
		"1028": "Dell", "103c": "Hewlett-Packard Company", "1590": "Hewlett Packard Enterprise", "17aa": "Lenovo", "15d9": "Super Micro Computer Inc",
	},
	devices: map[string]string{
		"10de:1db1": "GV100GL [Tesla V100 SXM2 16GB]", "10de:1db4": "GV100GL [Tesla V100 PCIe 16GB]",
		"10de:1db5": "GV100GL [Tesla V100 SXM2 32GB]", "10de:1eb8": "TU104GL [Tesla T4]", "10de:15f8": "GP100GL [Tesla P100 PCIe 16GB]",
		"10de:20b0": "GA100 [A100 SXM4 40GB]", "10de:20b2": "GA100 [A100 SXM4 80GB]", "10de:20b5": "GA100 [A100 PCIe 80GB]",
		"10de:20f1": "GA100 [A100 PCIe 40GB]", "10de:2236": "GA102GL [A10]", "10de:26b9": "AD102GL [L40S]",
		"10de:2330": "GH100 [H100 SXM5 80GB]", "10de:2331": "GH100 [H100 PCIe]", "10de:2335": "GH100 [H200 SXM 141GB]",
		"1002:740f": "Aldebaran/MI200 [Instinct MI210]", "1002:740c": "Aldebaran/MI200 [Instinct MI250X/MI250]", "1002:74a1": "Aqua Vanjaram [Instinct MI300X]",
		"15b3:1017": "MT27800 Family [ConnectX-5]", "15b3:1019": "MT28800 Family [ConnectX-5 Ex]", "15b3:101b": "MT28908 Family [ConnectX-6]",
		"15b3:101d": "MT2892 Family [ConnectX-6 Dx]", "15b3:1021": "MT2910 Family [ConnectX-7]", "15b3:a2d6": "MT42822 BlueField-2 integrated ConnectX-6 Dx network controller",
		"8086:1521": "I350 Gigabit Network Connection", "8086:1533": "I210 Gigabit Network Connection", "8086:1572": "Ethernet Controller X710 for 10GbE SFP+",
		"8086:1583": "Ethernet Controller XL710 for 40GbE QSFP+", "8086:158b": "Ethernet Controller XXV710 for 25GbE SFP28",
		"8086:1592": "Ethernet Controller E810-C for QSFP", "8086:159b": "Ethernet Controller E810-XXV for SFP", "8086:10fb": "82599ES 10-Gigabit SFI/SFP+ Network Connection",
		"8086:1528": "Ethernet Controller 10-Gigabit X540-AT2", "8086:1563": "Ethernet Controller X550", "8086:37d2": "Ethernet Connection X722 for 10GBASE-T",
		"8086:10d3": "82574L Gigabit Network Connection", "8086:100e": "82540EM Gigabit Ethernet Controller", "8086:154c": "Ethernet Virtual Function 700 Series",
		"8086:0a54": "NVMe Datacenter SSD [3DNAND, Beta Rock Controller]", "8086:2922": "82801IR/IO/IH (ICH9R/DO/DH) 6 port SATA Controller [AHCI mode]",
		"8086:29c0": "82G33/G31/P35/P31 Express DRAM Controller", "8086:2918": "82801IB (ICH9) LPC Interface Controller", "8086:2930": "82801I (ICH9 Family) SMBus Controller",
		"8086:1237": "440FX - 82441FX PMC [Natoma]", "8086:7000": "82371SB PIIX3 ISA [Natoma/Triton II]", "8086:7010": "82371SB PIIX3 IDE [Natoma/Triton II]",
		"8086:7113": "82371AB/EB/MB PIIX4 ACPI", "8086:a1d2": "C620 Series Chipset Family SSATA Controller [AHCI mode]",
		"8086:a182": "C620 Series Chipset Family SATA Controller [AHCI mode]", "8086:2020": "Sky Lake-E DMI3 Registers",
		"14e4:16d7": "BCM57414 NetXtreme-E 10Gb/25Gb RDMA Ethernet Controller", "14e4:1750": "BCM57508 NetXtreme-E 10Gb/25Gb/40Gb/50Gb/100Gb/200Gb Ethernet",
		"14e4:165f": "NetXtreme BCM5720 Gigabit Ethernet PCIe", "1000:0097": "SAS3008 PCI-Express Fusion-MPT SAS-3", "1000:10e2": "MegaRAID 12GSAS/PCIe Secure SAS39xx",
		"144d:a808": "NVMe SSD Controller SM981/PM981/PM983", "144d:a824": "NVMe SSD Controller PM173X", "1344:51a2": "7450 PRO NVMe SSD",
		"1af4:1000": "Virtio network device", "1af4:1001": "Virtio block device", "1af4:1041": "Virtio 1.0 network device", "1af4:1042": "Virtio 1.0 block device",
		"1af4:1048": "Virtio 1.0 SCSI", "1af4:1050": "Virtio 1.0 GPU", "1af4:1045": "Virtio 1.0 memory balloon", "1af4:1044": "Virtio 1.0 RNG",
		"1af4:1043": "Virtio 1.0 console", "1b36:0010": "QEMU NVM Express Controller", "1b36:000c": "QEMU PCIe Root port", "1b36:000d": "QEMU XHCI Host Controller",
		"1234:1111": "QEMU Virtual Video Controller", "1a03:2000": "ASPEED Graphics Family", "102b:0536": "Integrated Matrox G200eW3 Graphics Controller",
	},
}
