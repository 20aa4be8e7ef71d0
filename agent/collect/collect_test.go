package collect

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rollcall/rollcall/store/inventory"
)

func fixture(name string) string { return filepath.Join("..", "testdata", name) }

func empty(loc, bank string) inventory.DIMM { return inventory.DIMM{Locator: loc, BankLocator: bank} }

// The fixture trees are written by agent/testdata/mkfixtures.go.
func TestCollectFixtures(t *testing.T) {
	hynix := func(loc, serial string) inventory.DIMM {
		return inventory.DIMM{Locator: loc, SizeMB: 32768, SpeedMTs: 3200, Type: "DDR4", FormFactor: "DIMM",
			Manufacturer: "00AD063200AD", PartNumber: "HMA84GR7DJR4N-XN", Serial: serial}
	}
	a100 := func(addr string) inventory.GPU {
		return inventory.GPU{Vendor: "NVIDIA", Model: "GA100 [A100 SXM4 80GB]", PCIAddress: addr, NUMANode: 0}
	}
	cases := map[string]struct {
		want     inventory.Report
		flags    int      // flags per CPU
		hasFlags []string // a few that must be there
		pci      int
		pciOne   inventory.PCIDevice
	}{
		"server2s": {
			want: inventory.Report{
				System: inventory.System{Manufacturer: "Dell Inc.", Product: "PowerEdge R650", Serial: "7XK2QH3",
					UUID: "4c4c4544-0058-4b10-8032-b7c04f514833", SKU: "SKU=0A1B;ModelName=PowerEdge R650", Family: "PowerEdge"},
				Baseboard: inventory.Baseboard{Manufacturer: "Dell Inc.", Product: "0JMK61", Version: "A01", Serial: ".7XK2QH3.CNCMS0032100AB."},
				Chassis:   inventory.Chassis{Manufacturer: "Dell Inc.", Type: "Rack Mount Chassis", Serial: "7XK2QH3"},
				BIOS:      inventory.BIOS{Vendor: "Dell Inc.", Version: "1.10.2", Date: "02/14/2023"},
				DIMMs: []inventory.DIMM{
					hynix("A1", "8CA011A"), hynix("A2", "8CA021A"), hynix("A3", "8CA031A"), hynix("A4", "8CA041A"),
					empty("A5", ""), empty("A6", ""), empty("A7", ""), empty("A8", ""),
					hynix("B1", "8CB011A"), hynix("B2", "8CB021A"), hynix("B3", "8CB031A"), hynix("B4", "8CB041A"),
					empty("B5", ""), empty("B6", ""), empty("B7", ""), empty("B8", ""),
				},
				CPUs: []inventory.CPU{
					{Socket: 0, Vendor: "GenuineIntel", Model: "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", Cores: 4, Threads: 8, MHz: 3200, NUMANode: 0},
					{Socket: 1, Vendor: "GenuineIntel", Model: "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", Cores: 4, Threads: 8, MHz: 3200, NUMANode: 1},
				},
				Memory: inventory.Memory{TotalBytes: 263518412 * 1024, NUMANodes: []int64{131608720 * 1024, 131909692 * 1024}},
				Disks: []inventory.Disk{
					{Name: "nvme0n1", SizeBytes: 3750748848 * 512, Model: "Dell Ent NVMe PM1733a RI 1.92TB", Serial: "S6CRNA0T123456", WWN: "eui.36344730521234560025384500000001", Transport: "nvme", ByPath: "pci-0000:b1:00.0-nvme-1"},
					{Name: "sda", SizeBytes: 937703088 * 512, Model: "MZ7L3480HCHQ-00A07", Serial: "S6KNNE0T103456", WWN: "naa.5002538f4251c7a2", Transport: "sata"},
					{Name: "sdb", SizeBytes: 15628053168 * 512, Model: "ST8000NM001A", Serial: "ZA1B2C3D0000C1234ABC", WWN: "naa.5000c500c8a1b2c3", Rotational: true, Transport: "sas"},
				},
				NVMe: []inventory.NVMe{{Name: "nvme0", Model: "Dell Ent NVMe PM1733a RI 1.92TB", Serial: "S6CRNA0T123456", Firmware: "2.1.0", PCIAddress: "0000:b1:00.0",
					Namespaces: []inventory.NVMeNamespace{{Name: "nvme0n1", SizeBytes: 3750748848 * 512, EUI64: "0025384500000001", NGUID: "36344730521234560025384500000001"}}}},
				NICs: []inventory.NIC{
					{Name: "eno1", MAC: "b0:7b:25:d4:6e:10", Driver: "tg3", SpeedMbps: 1000, Link: true, MTU: 1500, PCIAddress: "0000:04:00.0"},
					{Name: "eno2", MAC: "b0:7b:25:d4:6e:11", Driver: "tg3", MTU: 1500, PCIAddress: "0000:04:00.1"},
					{Name: "ens1f0", MAC: "40:a6:b7:3c:1e:a0", Driver: "ice", SpeedMbps: 25000, Link: true, MTU: 9000, PCIAddress: "0000:31:00.0", SRIOVTotal: 128},
					{Name: "ens1f1", MAC: "40:a6:b7:3c:1e:a1", Driver: "ice", SpeedMbps: 25000, Link: true, MTU: 1500, PCIAddress: "0000:31:00.1", SRIOVTotal: 128, SRIOVNum: 4},
				},
				TPM: &inventory.TPM{Version: "2.0"},
			},
			flags: 151, hasFlags: []string{"avx512f", "vmx", "aes"},
			pci:    10,
			pciOne: inventory.PCIDevice{Address: "0000:31:00.1", VendorID: "8086", DeviceID: "159b", Class: "020000", SubVendorID: "8086", SubDeviceID: "0003", Vendor: "Intel Corporation", Device: "Ethernet Controller E810-XXV for SFP", Driver: "ice", NUMANode: 0},
		},
		"gpunode": {
			want: inventory.Report{
				System: inventory.System{Manufacturer: "Supermicro", Product: "AS -4124GO-NART", Serial: "S488372X1A15623",
					UUID: "a8e3b3d2-58c9-11ec-8000-3cecef6a1b2c", Family: "Server"},
				Baseboard: inventory.Baseboard{Manufacturer: "Supermicro", Product: "H12DSG-O-CPU", Version: "1.01", Serial: "UM21AS000123"},
				Chassis:   inventory.Chassis{Manufacturer: "Supermicro", Type: "Main Server Chassis", Serial: "C4180LK12AB0123"},
				BIOS:      inventory.BIOS{Vendor: "American Megatrends International, LLC.", Version: "2.4a", Date: "06/02/2022"},
				DIMMs: []inventory.DIMM{
					{Locator: "P1-DIMMA1", BankLocator: "P0_Node0_Channel0_Dimm0", SizeMB: 65536, SpeedMTs: 3200, Type: "DDR4", FormFactor: "DIMM", Manufacturer: "Samsung", PartNumber: "M393A8G40AB2-CWE", Serial: "H0L1A2B3"},
					{Locator: "P1-DIMMB1", BankLocator: "P0_Node0_Channel1_Dimm0", SizeMB: 65536, SpeedMTs: 3200, Type: "DDR4", FormFactor: "DIMM", Manufacturer: "Samsung", PartNumber: "M393A8G40AB2-CWE", Serial: "H0L1A2B4"},
					empty("P1-DIMMC1", "P0_Node0_Channel2_Dimm0"), empty("P1-DIMMD1", "P0_Node0_Channel3_Dimm0"),
				},
				CPUs:   []inventory.CPU{{Socket: 0, Vendor: "AuthenticAMD", Model: "AMD EPYC 7543 32-Core Processor", Cores: 4, Threads: 8, MHz: 2795, NUMANode: 0}},
				Memory: inventory.Memory{TotalBytes: 131733524 * 1024, NUMANodes: []int64{131733524 * 1024}},
				Disks: []inventory.Disk{
					{Name: "nvme0n1", SizeBytes: 7099998208 * 512, Model: "SAMSUNG MZWLJ3T8HBLS-00007", Serial: "S5RXNE0R700123", WWN: "eui.36563030540000000001", Transport: "nvme", ByPath: "pci-0000:41:00.0-nvme-1"},
					{Name: "nvme0n2", SizeBytes: 390625000 * 512, Model: "SAMSUNG MZWLJ3T8HBLS-00007", Serial: "S5RXNE0R700123", WWN: "eui.36563030540000000002", Transport: "nvme", ByPath: "pci-0000:41:00.0-nvme-2"},
				},
				NVMe: []inventory.NVMe{{Name: "nvme0", Model: "SAMSUNG MZWLJ3T8HBLS-00007", Serial: "S5RXNE0R700123", Firmware: "EPK9CB5Q", PCIAddress: "0000:41:00.0",
					Namespaces: []inventory.NVMeNamespace{
						{Name: "nvme0n1", SizeBytes: 7099998208 * 512, NGUID: "36563030547001230025380000000001"},
						{Name: "nvme0n2", SizeBytes: 390625000 * 512, NGUID: "36563030547001230025380000000002"},
					}}},
				NICs: []inventory.NIC{{Name: "enp97s0f0", MAC: "3c:ec:ef:6a:1b:2c", Driver: "i40e", SpeedMbps: 10000, Link: true, MTU: 1500, PCIAddress: "0000:61:00.0", SRIOVTotal: 64}},
				IB: []inventory.IBHCA{
					{Name: "mlx5_0", NodeGUID: "b859:9f03:00d4:5e60", Model: "MT4123", Firmware: "20.31.1014", PCIAddress: "0000:c1:00.0",
						Ports: []inventory.IBPort{{Number: 1, GUID: "b859:9f03:00d4:5e60", State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)", LinkLayer: "InfiniBand"}}},
					{Name: "mlx5_1", NodeGUID: "b859:9f03:00d4:5e61", Model: "MT4123", Firmware: "20.31.1014", PCIAddress: "0000:c2:00.0",
						Ports: []inventory.IBPort{{Number: 1, GUID: "b859:9f03:00d4:5e61", State: "DOWN", Rate: "10 Gb/sec (4X SDR)", LinkLayer: "InfiniBand"}}},
				},
				GPUs: []inventory.GPU{a100("0000:01:00.0"), a100("0000:23:00.0"), a100("0000:81:00.0"), a100("0000:a3:00.0")},
				TPM:  &inventory.TPM{Version: "1.2", Manufacturer: "Infineon"},
			},
			flags: 137, hasFlags: []string{"svm", "avx2"},
			pci:    10,
			pciOne: inventory.PCIDevice{Address: "0000:63:00.0", VendorID: "1a03", DeviceID: "2000", Class: "030000", SubVendorID: "15d9", SubDeviceID: "1b0e", Vendor: "ASPEED Technology, Inc.", Device: "ASPEED Graphics Family", Driver: "ast", NUMANode: 0},
		},
		"vm": {
			want: inventory.Report{
				System:  inventory.System{Manufacturer: "QEMU", Product: "Standard PC (Q35 + ICH9, 2009)", Version: "pc-q35-7.2", Serial: "RC-VM-0001", UUID: "8f0c7a2e-3b1d-4e5f-9a6b-1c2d3e4f5a6b"},
				Chassis: inventory.Chassis{Manufacturer: "QEMU", Type: "Other"},
				BIOS:    inventory.BIOS{Vendor: "SeaBIOS", Version: "1.16.2-debian-1.16.2-1", Date: "04/01/2014"},
				DIMMs:   []inventory.DIMM{{Locator: "DIMM 0", SizeMB: 2048, Type: "RAM", FormFactor: "DIMM", Manufacturer: "QEMU"}},
				CPUs:    []inventory.CPU{{Socket: 0, Vendor: "GenuineIntel", Model: "QEMU Virtual CPU version 2.5+", Cores: 2, Threads: 2, MHz: 2400, NUMANode: 0}},
				Memory:  inventory.Memory{TotalBytes: 2013204 * 1024, NUMANodes: []int64{2013204 * 1024}},
				Disks: []inventory.Disk{
					{Name: "nvme0n1", SizeBytes: 1 << 30, Model: "QEMU NVMe Ctrl", Serial: "rc-nvme-1", WWN: "nvme.1b36-72632d6e766d652d31-51454d55204e564d65204374726c-00000001", Transport: "nvme", ByPath: "pci-0000:00:05.0-nvme-1"},
					{Name: "vda", SizeBytes: 10 << 30, Serial: "rc-vda-1", Rotational: true, Transport: "virtio", ByPath: "pci-0000:00:03.0"},
				},
				NVMe: []inventory.NVMe{{Name: "nvme0", Model: "QEMU NVMe Ctrl", Serial: "rc-nvme-1", Firmware: "7.2.4", PCIAddress: "0000:00:05.0",
					Namespaces: []inventory.NVMeNamespace{{Name: "nvme0n1", SizeBytes: 1 << 30}}}},
				NICs: []inventory.NIC{
					{Name: "enp0s2", MAC: "52:54:00:12:34:56", Driver: "virtio_net", Link: true, MTU: 1500, PCIAddress: "0000:00:02.0"},
					{Name: "enp0s4", MAC: "52:54:00:12:34:57", Driver: "e1000e", SpeedMbps: 1000, Link: true, MTU: 1500, PCIAddress: "0000:00:04.0"},
				},
			},
			flags: 37, hasFlags: []string{"hypervisor", "sse2"},
			pci:    7,
			pciOne: inventory.PCIDevice{Address: "0000:00:02.0", VendorID: "1af4", DeviceID: "1000", Class: "020000", SubVendorID: "1af4", SubDeviceID: "0001", Vendor: "Red Hat, Inc.", Device: "Virtio network device", Driver: "virtio-pci", NUMANode: -1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Collect(context.Background(), Options{Root: fixture(name)})
			if got.Version != inventory.SchemaVersion || got.Collected.IsZero() {
				t.Errorf("version %d, collected %v", got.Version, got.Collected)
			}
			for _, c := range got.CPUs {
				if len(c.Flags) != tc.flags {
					t.Errorf("socket %d: %d flags, want %d", c.Socket, len(c.Flags), tc.flags)
				}
				for _, f := range tc.hasFlags {
					if !slices.Contains(c.Flags, f) {
						t.Errorf("socket %d: flag %s missing", c.Socket, f)
					}
				}
			}
			if len(got.PCI) != tc.pci {
				t.Errorf("%d PCI devices, want %d", len(got.PCI), tc.pci)
			}
			if i := slices.IndexFunc(got.PCI, func(d inventory.PCIDevice) bool { return d.Address == tc.pciOne.Address }); i < 0 {
				t.Errorf("PCI %s missing", tc.pciOne.Address)
			} else if d := cmp.Diff(tc.pciOne, got.PCI[i]); d != "" {
				t.Errorf("PCI %s (-want +got):\n%s", tc.pciOne.Address, d)
			}
			tc.want.Version = inventory.SchemaVersion
			ignore := cmpopts.IgnoreFields(inventory.Report{}, "Collected", "PCI")
			if d := cmp.Diff(tc.want, *got, ignore, cmpopts.IgnoreFields(inventory.CPU{}, "Flags")); d != "" {
				t.Errorf("report (-want +got):\n%s", d)
			}
			// What the server will do with it: the report must validate and
			// name the machine by its UUID.
			if err := inventory.Validate(got); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

// Without a readable SMBIOS table (an old kernel, a locked-down VM) the
// basic fields still come from /sys/class/dmi/id; no DIMMs then, and the
// error says why.
func TestDMIFallbackToSysfs(t *testing.T) {
	root := t.TempDir()
	id := filepath.Join(root, "sys/class/dmi/id")
	if err := os.MkdirAll(id, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"sys_vendor": "HPE\n", "product_name": "ProLiant DL360 Gen10\n", "product_serial": "CZJ9320ABC\n",
		"product_uuid": "36383150-3630-5A43-4A39-333230414243\n", "board_vendor": "HPE\n", "chassis_type": "23\n",
		"bios_vendor": "HPE\n", "bios_version": "U32\n", "bios_date": "08/22/2023\n",
	} {
		if err := os.WriteFile(filepath.Join(id, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var r inventory.Report
	err := collectDMI(sysfs{root: root}, &r)
	if err == nil {
		t.Error("no error for a missing SMBIOS table")
	}
	want := inventory.Report{
		System:    inventory.System{Manufacturer: "HPE", Product: "ProLiant DL360 Gen10", Serial: "CZJ9320ABC", UUID: "36383150-3630-5a43-4a39-333230414243"},
		Baseboard: inventory.Baseboard{Manufacturer: "HPE"},
		Chassis:   inventory.Chassis{Type: "Rack Mount Chassis"},
		BIOS:      inventory.BIOS{Vendor: "HPE", Version: "U32", Date: "08/22/2023"},
	}
	if d := cmp.Diff(want, r); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// One collector failing does not stop the others, and says which failed.
func TestCollectorFailureIsRecorded(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sys/class/net"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/meminfo"), []byte("MemTotal: 1024 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := Collect(context.Background(), Options{Root: root})
	if r.Memory.TotalBytes != 1<<20 {
		t.Errorf("memory %d, want %d", r.Memory.TotalBytes, 1<<20)
	}
	var failed []string
	for _, e := range r.Errors {
		failed = append(failed, e.Collector)
	}
	want := []string{"dmi", "cpu", "disks"}
	if d := cmp.Diff(want, failed); d != "" {
		t.Errorf("failed collectors (-want +got):\n%s", d)
	}
}

func TestIdentity(t *testing.T) {
	r := Identity(Options{Root: fixture("vm")})
	if r.System.UUID != "8f0c7a2e-3b1d-4e5f-9a6b-1c2d3e4f5a6b" || r.System.Serial != "RC-VM-0001" || len(r.NICs) != 2 || len(r.Disks) != 0 {
		t.Errorf("identity: uuid %q serial %q, %d NICs, %d disks", r.System.UUID, r.System.Serial, len(r.NICs), len(r.Disks))
	}
}

func BenchmarkCollect(b *testing.B) {
	for _, name := range []string{"server2s", "gpunode", "vm"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				r := Collect(context.Background(), Options{Root: fixture(name)})
				if len(r.Errors) != 0 {
					b.Fatal(r.Errors)
				}
			}
		})
	}
}
