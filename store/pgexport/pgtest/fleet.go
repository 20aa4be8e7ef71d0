package pgtest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store/inventory"
)

// Hardware the generator picks from: parts found in real fleets, with the
// numbers their firmware and kernels report.
type platform struct {
	vendor, product, board string
	sockets, slots         int
}

var platforms = []platform{
	{"Dell Inc.", "PowerEdge R650", "0PYXKY", 2, 32},
	{"Dell Inc.", "PowerEdge R750xa", "0VKXYX", 2, 32},
	{"Supermicro", "SYS-120U-TNR", "X12DPU-6", 2, 32},
	{"HPE", "ProLiant DL380 Gen10 Plus", "ProLiant DL380 Gen10 Plus", 2, 32},
	{"Lenovo", "ThinkSystem SR650 V2", "7Z73CTO1WW", 2, 32},
	{"Supermicro", "AS-2124GQ-NART", "H12DSG-Q-CPU6", 2, 32},
	{"Dell Inc.", "PowerEdge R6525", "0GWC8R", 2, 32},
}

type cpuPart struct {
	vendor, model string
	cores, mhz    int
}

var cpuParts = []cpuPart{
	{"GenuineIntel", "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", 32, 2000},
	{"GenuineIntel", "Intel(R) Xeon(R) Gold 5318Y CPU @ 2.10GHz", 24, 2100},
	{"GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+", 56, 2000},
	{"AuthenticAMD", "AMD EPYC 7763 64-Core Processor", 64, 2450},
	{"AuthenticAMD", "AMD EPYC 7543 32-Core Processor", 32, 2800},
}

var cpuFlags = []string{"fpu", "vme", "de", "pse", "tsc", "msr", "pae", "mce", "cx8", "apic", "sep", "mtrr",
	"pge", "mca", "cmov", "pat", "pse36", "clflush", "mmx", "fxsr", "sse", "sse2", "ht", "syscall", "nx",
	"pdpe1gb", "rdtscp", "lm", "constant_tsc", "rep_good", "nopl", "xtopology", "nonstop_tsc", "cpuid",
	"aperfmperf", "pni", "pclmulqdq", "monitor", "ssse3", "fma", "cx16", "sse4_1", "sse4_2", "x2apic",
	"movbe", "popcnt", "aes", "xsave", "avx", "f16c", "rdrand", "lahf_lm", "abm", "3dnowprefetch",
	"cpuid_fault", "ssbd", "ibrs", "ibpb", "stibp", "fsgsbase", "bmi1", "avx2", "smep", "bmi2", "erms",
	"invpcid", "rdseed", "adx", "smap", "clflushopt", "clwb", "sha_ni", "xsaveopt", "xsavec", "xgetbv1",
	"xsaves", "umip", "vaes", "vpclmulqdq", "rdpid", "md_clear", "arch_capabilities"}

type gpuPart struct {
	vendor, model, device string
	mb                    int64
}

var gpuParts = []gpuPart{
	{"NVIDIA", "NVIDIA A100-SXM4-80GB", "20b2", 81920},
	{"NVIDIA", "NVIDIA H100 80GB HBM3", "2330", 81559},
	{"NVIDIA", "NVIDIA L40S", "26b9", 46068},
	{"AMD", "AMD Instinct MI210", "740f", 65520},
}

var diskParts = []struct {
	model string
	size  int64
	rot   bool
	tran  string
}{
	{"SAMSUNG MZ7L3480HCHQ-00A07", 480103981056, false, "sata"},
	{"MICRON_5300_MTFDDAK960TDS", 960197124096, false, "sata"},
	{"KIOXIA KPM6XRUG1T92", 1920383410176, false, "sas"},
	{"ST8000NM000A-2KE101", 8001563222016, true, "sata"},
	{"WDC WUH721816AL5204", 16000900661248, true, "sas"},
}

var nicParts = []struct {
	driver, firmware, vendor, device, name string
	speed                                  int
}{
	{"i40e", "8.70 0x8000c40f 1.3179.0", "8086", "1572", "Ethernet Controller X710 for 10GbE SFP+", 10000},
	{"ice", "4.20 0x80017785 1.3236.0", "8086", "159b", "Ethernet Controller E810-XXV for SFP", 25000},
	{"mlx5_core", "22.36.1010 (MT_0000000359)", "15b3", "101d", "MT2892 Family [ConnectX-6 Dx]", 100000},
	{"bnxt_en", "222.1.68.0/pkg 22.21.06.80", "14e4", "16d7", "BCM57414 NetXtreme-E 10Gb/25Gb", 25000},
}

// Machine is the i-th machine of a fleet generated from seed: the same
// arguments give the same report.
func Machine(seed uint64, i int) inventory.Report {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	p := platforms[r.IntN(len(platforms))]
	cpu := cpuParts[r.IntN(len(cpuParts))]
	hexs := func(n int) string {
		const digits = "0123456789abcdef"
		b := make([]byte, n)
		for k := range b {
			b[k] = digits[r.IntN(16)]
		}
		return string(b)
	}
	mac := func(oui string) string {
		return fmt.Sprintf("%s:%02x:%02x:%02x", oui, r.IntN(256), r.IntN(256), r.IntN(256))
	}
	serial := fmt.Sprintf("%s%07d", []string{"CN", "SGH", "J30", "S4"}[r.IntN(4)], i)
	rep := inventory.Report{
		Version: inventory.SchemaVersion, Agent: "rollcall-agent 0.9.2",
		Collected: time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute),
		System: inventory.System{Manufacturer: p.vendor, Product: p.product, Version: "1.0",
			Serial: serial, UUID: fmt.Sprintf("%s-%s-4%s-a%s-%s", hexs(8), hexs(4), hexs(3), hexs(3), hexs(12)),
			SKU: "SKU=" + hexs(6), Family: "PowerEdge"},
		Baseboard: inventory.Baseboard{Manufacturer: p.vendor, Product: p.board, Version: "A01", Serial: "/" + serial + "/CNFCP00" + hexs(4)},
		Chassis:   inventory.Chassis{Manufacturer: p.vendor, Type: "Rack Mount Chassis", Serial: serial},
		BIOS:      inventory.BIOS{Vendor: p.vendor, Version: fmt.Sprintf("1.%d.%d", r.IntN(12), r.IntN(9)), Date: "08/14/2025"},
	}
	dimmGB := []int64{16, 32, 64, 128}[r.IntN(4)]
	populated := []int{8, 16, 32}[r.IntN(3)]
	var total int64
	for s := 0; s < p.slots; s++ {
		d := inventory.DIMM{Locator: fmt.Sprintf("%c%d", 'A'+s/8, s%8+1), BankLocator: fmt.Sprintf("P%d_Node%d_Channel%d_Dimm0", s/16, s/16, s%8),
			Type: "DDR4", FormFactor: "DIMM"}
		if s%(p.slots/populated) == 0 {
			d.SizeMB, d.SpeedMTs = dimmGB<<10, 3200
			d.Manufacturer, d.PartNumber, d.Serial = "Samsung", "M393A4K40DB3-CWE", hexs(8)
			total += d.SizeMB << 20
		}
		rep.DIMMs = append(rep.DIMMs, d)
	}
	rep.Memory = inventory.Memory{TotalBytes: total - 3<<30, NUMANodes: []int64{total/2 - 2<<30, total/2 - 1<<30}}
	for s := 0; s < p.sockets; s++ {
		rep.CPUs = append(rep.CPUs, inventory.CPU{Socket: s, Vendor: cpu.vendor, Model: cpu.model, Cores: cpu.cores,
			Threads: cpu.cores * 2, MHz: cpu.mhz, NUMANode: s, Flags: cpuFlags})
	}
	for d, n := 0, 1+r.IntN(8); d < n; d++ {
		part := diskParts[r.IntN(len(diskParts))]
		if d < 2 {
			part = diskParts[r.IntN(2)] // boot mirror: small SSDs
		}
		rep.Disks = append(rep.Disks, inventory.Disk{Name: fmt.Sprintf("sd%c", 'a'+d), SizeBytes: part.size, Model: part.model,
			Serial: hexs(12), WWN: "0x5000c500" + hexs(8), Rotational: part.rot, Transport: part.tran})
	}
	for n, k := 0, r.IntN(5); n < k; n++ {
		size := []int64{1920383410176, 3840755982336, 7681501126656}[r.IntN(3)]
		rep.NVMe = append(rep.NVMe, inventory.NVMe{Name: fmt.Sprintf("nvme%d", n), Model: "SAMSUNG MZQL23T8HCLS-00A07",
			Serial: "S64HNE0" + hexs(7), Firmware: "GDC5602Q", PCIAddress: fmt.Sprintf("0000:%02x:00.0", 0x81+n),
			Namespaces: []inventory.NVMeNamespace{{Name: fmt.Sprintf("nvme%dn1", n), SizeBytes: size, EUI64: hexs(16), NGUID: hexs(32)}}})
		rep.Disks = append(rep.Disks, inventory.Disk{Name: fmt.Sprintf("nvme%dn1", n), SizeBytes: size, Model: "SAMSUNG MZQL23T8HCLS-00A07", Transport: "nvme"})
	}
	nic := nicParts[r.IntN(len(nicParts))]
	oui := []string{"b4:96:91", "3c:fd:fe", "0c:42:a1", "bc:97:e1"}[r.IntN(4)]
	for n := 0; n < 2+2*r.IntN(2); n++ {
		addr := fmt.Sprintf("0000:%02x:00.%d", 0x31+n/2, n%2)
		x := inventory.NIC{Name: fmt.Sprintf("ens%df%d", 1+n/2, n%2), MAC: mac(oui), Driver: nic.driver, Firmware: nic.firmware,
			SpeedMbps: nic.speed, Link: n < 2, MTU: 1500, PCIAddress: addr, SRIOVTotal: 64}
		if n == 0 {
			x.IPs = []string{fmt.Sprintf("10.%d.%d.%d/16", 20, i/250, 1+i%250)}
		}
		rep.NICs = append(rep.NICs, x)
		rep.PCI = append(rep.PCI, inventory.PCIDevice{Address: addr, VendorID: nic.vendor, DeviceID: nic.device, Class: "020000",
			Vendor: "Intel Corporation", Device: nic.name, Driver: nic.driver, NUMANode: n / 2})
	}
	rep.BootMAC = rep.NICs[0].MAC
	gpus := []int{0, 0, 0, 4, 8}[r.IntN(5)]
	gpu := gpuParts[r.IntN(len(gpuParts))]
	for g := 0; g < gpus; g++ {
		addr := fmt.Sprintf("0000:%02x:00.0", 0x17+g*0x10)
		rep.GPUs = append(rep.GPUs, inventory.GPU{Vendor: gpu.vendor, Model: gpu.model, PCIAddress: addr, MemoryMB: gpu.mb, NUMANode: g * 2 / gpus})
		rep.PCI = append(rep.PCI, inventory.PCIDevice{Address: addr, VendorID: "10de", DeviceID: gpu.device, Class: "030200",
			SubVendorID: "10de", SubDeviceID: "1463", Vendor: gpu.vendor, Device: gpu.model, Driver: "nvidia", NUMANode: g * 2 / gpus})
	}
	if gpus > 0 || r.IntN(4) == 0 {
		for h := 0; h < max(1, gpus/2); h++ {
			guid := "b8:ce:f6:03:00:" + hexs(2) + ":" + hexs(2) + ":" + hexs(2)
			rep.IB = append(rep.IB, inventory.IBHCA{Name: fmt.Sprintf("mlx5_%d", h), NodeGUID: guid, Model: "MT4123 ConnectX-6",
				Firmware: "20.39.1002", PCIAddress: fmt.Sprintf("0000:%02x:00.0", 0x1a+h*0x10),
				Ports: []inventory.IBPort{{Number: 1, GUID: guid, State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)", LinkLayer: "InfiniBand"}}})
		}
	}
	for b := 0; b < 24; b++ { // root ports, bridges and chipset functions
		rep.PCI = append(rep.PCI, inventory.PCIDevice{Address: fmt.Sprintf("0000:%02x:%02x.0", b/8*0x40, b%8), VendorID: "8086",
			DeviceID: fmt.Sprintf("%04x", 0x347a+b), Class: "060400", Vendor: "Intel Corporation", Device: "PCI bridge", Driver: "pcieport", NUMANode: b / 12})
	}
	for l := 0; l < 2; l++ {
		rep.LLDP = append(rep.LLDP, inventory.LLDP{Interface: rep.NICs[l].Name, ChassisID: mac("00:1c:73"), PortID: fmt.Sprintf("Ethernet%d/%d", 1+i%48, l+1),
			SystemName: fmt.Sprintf("leaf%02d-%c", i/40, 'a'+l), PortDescription: "server " + serial, VLAN: 100})
	}
	if r.IntN(10) > 0 {
		rep.TPM = &inventory.TPM{Version: "2.0", Manufacturer: []string{"INTC", "IFX", "NTC"}[r.IntN(3)]}
	}
	if r.IntN(20) == 0 {
		rep.Errors = []inventory.CollectErr{{Collector: "lldp", Error: "no LLDP frame within 35s on ens2f1"}}
	}
	rep.BMC = &inventory.BMC{Driver: "ipmi", Address: fmt.Sprintf("10.30.%d.%d", i/250, 1+i%250), MAC: mac("d0:8e:79"), Channel: 1, UserID: 3, User: "rollcall", Source: "in-band"}
	return rep
}

// Commission is the command the API would propose for a report: the
// machine gets ID m-<12 hex of i>, the time is now, and the BMC carries a
// (fake) sealed password, which the export must never copy.
func Commission(rep inventory.Report, i int, now time.Time) (*raftfsm.Commission, error) {
	bmc := &raftfsm.BMC{Driver: rep.BMC.Driver, Address: rep.BMC.Address, MAC: rep.BMC.MAC, User: rep.BMC.User,
		PasswordSealed: []byte("SEALED-SECRET-" + ID(i)), PasswordAAD: "bmc-password/" + ID(i),
		Source: rep.BMC.Source, Settings: map[string]string{"privilege": "ADMINISTRATOR"}}
	doc := rep
	if doc.BMC != nil {
		b := *doc.BMC
		b.Password = ""
		doc.BMC = &b
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	macs := inventory.MACs(&rep)
	var ips []string
	for _, n := range rep.NICs {
		ips = append(ips, n.IPs...)
	}
	return &raftfsm.Commission{
		NewID: ID(i),
		Identity: raftfsm.Identity{Key: inventory.Key(rep.System.UUID, rep.System.Serial, rep.BootMAC),
			UUID: rep.System.UUID, Serial: rep.System.Serial, BootMAC: rep.BootMAC, MACs: macs},
		IPs: ips, Summary: raftfsm.SummaryBody(inventory.Summarize(&rep)), Inventory: raw, BMC: bmc, Node: "node1", Now: now,
	}, nil
}

// ID is the machine ID the generator gives machine i.
func ID(i int) string { return fmt.Sprintf("m-%012x", i+1) }
