//go:build ignore

// mkfixtures writes the sysfs/procfs fixture trees the collectors are
// tested on: server2s (a 2-socket rack server), gpunode (GPUs and
// InfiniBand) and vm (a QEMU q35 guest as the lab boots it). They follow
// the layout of real trees (ghw's snapshots, a QEMU guest), cut down to a
// few CPUs so that the committed files stay small.
//
//	go run agent/testdata/mkfixtures.go   # from the repository root
package main

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	base := "agent/testdata"
	for _, t := range []struct {
		name  string
		build func(*tree)
	}{{"server2s", server2s}, {"gpunode", gpunode}, {"vm", vm}} {
		root := filepath.Join(base, t.name)
		if err := os.RemoveAll(root); err != nil {
			log.Fatal(err)
		}
		t.build(&tree{root: root})
	}
}

type tree struct{ root string }

func (t *tree) file(p, content string) {
	full := filepath.Join(t.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		log.Fatal(err)
	}
}

// files writes one value per file under dir; a value without a newline
// gets one, as sysfs attributes end in one.
func (t *tree) files(dir string, kv map[string]string) {
	for k, v := range kv {
		if !strings.HasSuffix(v, "\n") {
			v += "\n"
		}
		t.file(filepath.Join(dir, k), v)
	}
}

// link makes p a relative symlink to target (given from the root).
func (t *tree) link(p, target string) {
	full := filepath.Join(t.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		log.Fatal(err)
	}
	rel, err := filepath.Rel(filepath.Dir(p), target)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.Symlink(rel, full); err != nil {
		log.Fatal(err)
	}
}

// pci adds a PCI function at dev ("pci0000:00/0000:00:02.0") with its
// /sys/bus/pci/devices link.
func (t *tree) pci(dev, vendor, device, class, subv, subd, numa, driver string) string {
	p := "sys/devices/" + dev
	t.files(p, map[string]string{
		"vendor": "0x" + vendor, "device": "0x" + device, "class": "0x" + class,
		"subsystem_vendor": "0x" + subv, "subsystem_device": "0x" + subd, "numa_node": numa,
	})
	if driver != "" {
		t.link(p+"/driver", "sys/bus/pci/drivers/"+driver)
	}
	t.link("sys/bus/pci/devices/"+filepath.Base(dev), p)
	return p
}

// nic adds a network interface under a device path.
func (t *tree) nic(devPath, name, mac, speed, carrier string, extra map[string]string) {
	p := devPath + "/net/" + name
	kv := map[string]string{"address": mac, "type": "1", "mtu": "1500", "carrier": carrier, "operstate": map[string]string{"1": "up", "0": "down"}[carrier]}
	if speed != "" {
		kv["speed"] = speed
	}
	for k, v := range extra {
		kv[k] = v
	}
	t.files(p, kv)
	t.link(p+"/device", devPath)
	t.link("sys/class/net/"+name, p)
}

// block adds a whole disk.
func (t *tree) block(devPath, name string, sectors int64, rotational bool, kv map[string]string) {
	p := devPath + "/block/" + name
	rot := "0"
	if rotational {
		rot = "1"
	}
	all := map[string]string{"size": fmt.Sprint(sectors), "removable": "0", "queue/rotational": rot}
	for k, v := range kv {
		all[k] = v
	}
	t.link(p+"/device", devPath)
	t.files(p, all)
	t.link("sys/block/"+name, p)
}

// cpus writes /proc/cpuinfo and the topology of sockets × cores × threads,
// numbered as Linux numbers them (all first threads, then the siblings).
func (t *tree) cpus(vendor, model, mhz, flags string, sockets, cores, threads int, maxKHz string, nodeOfSocket func(int) int, family, modelNum, stepping string) {
	var b strings.Builder
	n := 0
	cpulists := map[int][]string{}
	for th := 0; th < threads; th++ {
		for s := 0; s < sockets; s++ {
			for c := 0; c < cores; c++ {
				fmt.Fprintf(&b, "processor\t: %d\nvendor_id\t: %s\ncpu family\t: %s\nmodel\t\t: %s\nmodel name\t: %s\nstepping\t: %s\ncpu MHz\t\t: %s\ncache size\t: 1024 KB\nphysical id\t: %d\nsiblings\t: %d\ncore id\t\t: %d\ncpu cores\t: %d\napicid\t\t: %d\nfpu\t\t: yes\nflags\t\t: %s\nbogomips\t: 4000.00\n\n",
					n, vendor, family, modelNum, model, stepping, mhz, s, cores*threads, c, cores, s*64+c*2+th, flags)
				cpu := fmt.Sprintf("sys/devices/system/cpu/cpu%d", n)
				t.files(cpu+"/topology", map[string]string{"physical_package_id": fmt.Sprint(s), "core_id": fmt.Sprint(c)})
				if n != 0 {
					t.files(cpu, map[string]string{"online": "1"})
				}
				if maxKHz != "" {
					t.files(cpu+"/cpufreq", map[string]string{"cpuinfo_max_freq": maxKHz})
				}
				node := nodeOfSocket(s)
				t.link(fmt.Sprintf("%s/node%d", cpu, node), fmt.Sprintf("sys/devices/system/node/node%d", node))
				cpulists[node] = append(cpulists[node], fmt.Sprint(n))
				n++
			}
		}
	}
	t.file("proc/cpuinfo", b.String())
	t.files("sys/devices/system/cpu", map[string]string{"online": fmt.Sprintf("0-%d", n-1), "possible": fmt.Sprintf("0-%d", n-1)})
	for node, l := range cpulists {
		t.files(fmt.Sprintf("sys/devices/system/node/node%d", node), map[string]string{"cpulist": strings.Join(l, ",")})
	}
}

func (t *tree) meminfo(totalKB int64, nodesKB ...int64) {
	t.file("proc/meminfo", fmt.Sprintf("MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\nBuffers:            2048 kB\nCached:           131072 kB\n", totalKB, totalKB-204800, totalKB-102400))
	for i, kb := range nodesKB {
		t.file(fmt.Sprintf("sys/devices/system/node/node%d/meminfo", i),
			fmt.Sprintf("Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\nNode %d MemUsed:        %d kB\n", i, kb, i, kb-102400, i, 102400))
	}
}

func (t *tree) dmiID(kv map[string]string) { t.files("sys/class/dmi/id", kv) }

// --- SMBIOS table builder (DSP0134) ---

type structure struct {
	f    []byte
	strs []string
}

func newStruct(typ byte, length int, handle uint16) *structure {
	s := &structure{f: make([]byte, length)}
	s.f[0], s.f[1] = typ, byte(length)
	binary.LittleEndian.PutUint16(s.f[2:], handle)
	return s
}

func (s *structure) b(off int, v byte) *structure { s.f[off] = v; return s }
func (s *structure) w(off int, v uint16) *structure {
	binary.LittleEndian.PutUint16(s.f[off:], v)
	return s
}
func (s *structure) d(off int, v uint32) *structure {
	binary.LittleEndian.PutUint32(s.f[off:], v)
	return s
}
func (s *structure) s(off int, v string) *structure {
	if v != "" {
		s.strs = append(s.strs, v)
		s.f[off] = byte(len(s.strs))
	}
	return s
}

// uuid stores a UUID with the first three fields little-endian (2.6+).
func (s *structure) uuid(off int, u string) *structure {
	b, err := hex.DecodeString(strings.ReplaceAll(u, "-", ""))
	if err != nil || len(b) != 16 {
		log.Fatalf("bad uuid %q", u)
	}
	b[0], b[1], b[2], b[3] = b[3], b[2], b[1], b[0]
	b[4], b[5] = b[5], b[4]
	b[6], b[7] = b[7], b[6]
	copy(s.f[off:], b)
	return s
}

func (s *structure) bytes() []byte {
	out := append([]byte(nil), s.f...)
	if len(s.strs) == 0 {
		return append(out, 0, 0)
	}
	for _, str := range s.strs {
		out = append(out, str...)
		out = append(out, 0)
	}
	return append(out, 0)
}

func table(ss ...*structure) []byte {
	var out []byte
	for _, s := range ss {
		out = append(out, s.bytes()...)
	}
	return append(out, newStruct(127, 4, 0xfeff).bytes()...)
}

func bios(vendor, version, date string) *structure {
	return newStruct(0, 0x18, 0).s(4, vendor).s(5, version).w(6, 0xf000).s(8, date).b(9, 0xff).d(0x0a, 0x08).b(0x14, 1).b(0x15, 0)
}

func system(manu, product, version, serial, uuid, sku, family string) *structure {
	return newStruct(1, 0x1b, 0x100).s(4, manu).s(5, product).s(6, version).s(7, serial).uuid(8, uuid).b(0x18, 6).s(0x19, sku).s(0x1a, family)
}

func board(manu, product, version, serial, asset string) *structure {
	return newStruct(2, 0x0f, 0x200).s(4, manu).s(5, product).s(6, version).s(7, serial).s(8, asset).b(9, 1).w(0x0b, 0x300).b(0x0d, 0x0a)
}

func chassis(manu string, typ byte, serial, asset string) *structure {
	return newStruct(3, 0x16, 0x300).s(4, manu).b(5, typ).s(7, serial).s(8, asset).b(9, 3).b(0xa, 3).b(0xb, 3).b(0xc, 3)
}

// dimm builds a type 17 of the given length (0x28 for 2.8, 0x54 for 3.2,
// 0x5c for 3.3); sizeMB 0 is an empty slot.
func dimm(length int, handle uint16, locator, bank string, sizeMB uint32, memType, form byte, speed uint16, manu, serial, part string) *structure {
	s := newStruct(17, length, handle).w(4, 0x1000).w(6, 0xfffe).w(8, 72).w(0x0a, 64).b(0x0e, form).s(0x10, locator).s(0x11, bank).b(0x12, memType)
	switch {
	case sizeMB == 0:
		s.w(0x0c, 0)
		s.w(0x08, 0xffff).w(0x0a, 0xffff)
		s.s(0x17, "NO DIMM").s(0x18, "NO DIMM").s(0x1a, "NO DIMM")
		return s
	case sizeMB >= 0x7fff:
		s.w(0x0c, 0x7fff).d(0x1c, sizeMB)
	default:
		s.w(0x0c, uint16(sizeMB))
	}
	s.w(0x13, 0x80).w(0x15, speed).s(0x17, manu).s(0x18, serial).s(0x1a, part).b(0x1b, 2)
	if length >= 0x22 {
		s.w(0x20, speed)
	}
	return s
}

// --- the machines ---

const xeonFlags = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid dca sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch cpuid_fault epb cat_l3 invpcid_single intel_ppin ssbd mba ibrs ibpb stibp ibrs_enhanced tpr_shadow vnmi flexpriority ept vpid ept_ad fsgsbase tsc_adjust bmi1 hle avx2 smep bmi2 erms invpcid rtm cqm rdt_a avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb intel_pt avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local split_lock_detect wbnoinvd dtherm ida arat pln pts avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg tme avx512_vpopcntdq la57 rdpid fsrm md_clear pconfig flush_l1d arch_capabilities"

const epycFlags = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid aperfmperf rapl pni pclmulqdq monitor ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw ibs skinit wdt tce topoext perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 invpcid_single hw_pstate ssbd mba ibrs ibpb stibp vmmcall fsgsbase bmi1 avx2 smep bmi2 invpcid cqm rdt_a rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local clzero irperf xsaveerptr rdpru wbnoinvd amd_ppin arat npt lbrv svm_lock nrip_save tsc_scale vmcb_clean flushbyasid decodeassists pausefilter pfthreshold v_vmsave_vmload vgif v_spec_ctrl umip pku ospke vaes vpclmulqdq rdpid overflow_recov succor smca"

const qemuFlags = "fpu de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx lm constant_tsc nopl xtopology cpuid tsc_known_freq pni cx16 x2apic hypervisor lahf_lm cpuid_fault pti"

func server2s(t *tree) {
	uuid := "4c4c4544-0058-4b10-8032-b7c04f514833"
	var dimms []*structure
	h := uint16(0x1100)
	for _, bank := range []string{"A", "B"} {
		for i := 1; i <= 8; i++ {
			loc := fmt.Sprintf("%s%d", bank, i)
			if i <= 4 {
				dimms = append(dimms, dimm(0x5c, h, loc, "Not Specified", 32768, 0x1a, 0x09, 3200, "00AD063200AD", fmt.Sprintf("8C%s%02d1A", bank, i), "HMA84GR7DJR4N-XN"))
			} else {
				dimms = append(dimms, dimm(0x5c, h, loc, "Not Specified", 0, 0x02, 0x02, 0, "", "", ""))
			}
			h++
		}
	}
	t.file("sys/firmware/dmi/tables/DMI", string(table(append([]*structure{
		bios("Dell Inc.", "1.10.2", "02/14/2023"),
		system("Dell Inc.", "PowerEdge R650", "Not Specified", "7XK2QH3", uuid, "SKU=0A1B;ModelName=PowerEdge R650", "PowerEdge"),
		board("Dell Inc.", "0JMK61", "A01", ".7XK2QH3.CNCMS0032100AB.", ""),
		chassis("Dell Inc.", 0x17, "7XK2QH3", ""),
	}, dimms...)...)))
	t.file("sys/firmware/dmi/tables/smbios_entry_point", "_SM3_\x00\x18\x03\x03\x00\x01\x00")
	t.dmiID(map[string]string{"sys_vendor": "Dell Inc.", "product_name": "PowerEdge R650", "product_serial": "7XK2QH3", "product_uuid": uuid, "board_vendor": "Dell Inc.", "board_name": "0JMK61", "chassis_type": "23", "bios_vendor": "Dell Inc.", "bios_version": "1.10.2", "bios_date": "02/14/2023"})

	t.cpus("GenuineIntel", "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", "2000.000", xeonFlags, 2, 4, 2, "3200000", func(s int) int { return s }, "6", "106", "6")
	t.meminfo(263518412, 131608720, 131909692)

	// Chipset SATA with an SSD; a SAS HBA with a disk; an NVMe drive; a loop device.
	sata := t.pci("pci0000:00/0000:00:17.0", "8086", "a182", "010601", "1028", "0a6b", "0", "ahci")
	t.block(sata+"/ata1/host0/target0:0:0/0:0:0:0", "sda", 937703088, false, map[string]string{
		"device/model": "MZ7L3480HCHQ-00A07", "device/vendor": "ATA     ", "device/wwid": "naa.5002538f4251c7a2",
		"device/vpd_pg80": "\x00\x80\x00\x0eS6KNNE0T103456",
	})
	hba := t.pci("pci0000:16/0000:16:02.0/0000:18:00.0", "1000", "0097", "010700", "1028", "1f53", "0", "mpt3sas")
	t.block(hba+"/host1/port-1:0/end_device-1:0/target1:0:0/1:0:0:0", "sdb", 15628053168, true, map[string]string{
		"device/model": "ST8000NM001A", "device/vendor": "SEAGATE ", "device/wwid": "naa.5000c500c8a1b2c3",
		"device/vpd_pg80": "\x00\x80\x00\x14ZA1B2C3D0000C1234ABC",
	})
	nvme := t.pci("pci0000:b0/0000:b0:02.0/0000:b1:00.0", "144d", "a824", "010802", "1028", "2113", "1", "nvme")
	ctrl := nvme + "/nvme/nvme0"
	t.files(ctrl, map[string]string{"model": "Dell Ent NVMe PM1733a RI 1.92TB", "serial": "S6CRNA0T123456", "firmware_rev": "2.1.0", "address": "0000:b1:00.0"})
	t.link(ctrl+"/device", nvme)
	t.link("sys/class/nvme/nvme0", ctrl)
	t.files(ctrl+"/nvme0n1", map[string]string{"size": "3750748848", "removable": "0", "queue/rotational": "0", "wwid": "eui.36344730521234560025384500000001", "eui": "00 25 38 45 00 00 00 01", "nguid": "36344730-5212-3456-0025-384500000001"})
	t.link(ctrl+"/nvme0n1/device", ctrl)
	t.link("sys/block/nvme0n1", ctrl+"/nvme0n1")
	t.files("sys/devices/virtual/block/loop0", map[string]string{"size": "131072", "removable": "0"})
	t.link("sys/block/loop0", "sys/devices/virtual/block/loop0")

	// Two LOM ports (tg3), one of them cabled; a dual 25G E810 with SR-IOV.
	lom0 := t.pci("pci0000:00/0000:00:1c.5/0000:04:00.0", "14e4", "165f", "020000", "1028", "0a6b", "0", "tg3")
	lom1 := t.pci("pci0000:00/0000:00:1c.5/0000:04:00.1", "14e4", "165f", "020000", "1028", "0a6b", "0", "tg3")
	t.nic(lom0, "eno1", "b0:7b:25:d4:6e:10", "1000", "1", nil)
	t.nic(lom1, "eno2", "b0:7b:25:d4:6e:11", "", "0", nil)
	e0 := t.pci("pci0000:30/0000:30:02.0/0000:31:00.0", "8086", "159b", "020000", "8086", "0003", "0", "ice")
	e1 := t.pci("pci0000:30/0000:30:02.0/0000:31:00.1", "8086", "159b", "020000", "8086", "0003", "0", "ice")
	t.files(e0, map[string]string{"sriov_totalvfs": "128", "sriov_numvfs": "0"})
	t.files(e1, map[string]string{"sriov_totalvfs": "128", "sriov_numvfs": "4"})
	t.nic(e0, "ens1f0", "40:a6:b7:3c:1e:a0", "25000", "1", map[string]string{"mtu": "9000"})
	t.nic(e1, "ens1f1", "40:a6:b7:3c:1e:a1", "25000", "1", nil)
	t.files("sys/devices/virtual/net/lo", map[string]string{"address": "00:00:00:00:00:00", "type": "772", "mtu": "65536"})
	t.link("sys/class/net/lo", "sys/devices/virtual/net/lo")
	t.files("sys/devices/virtual/net/bond0", map[string]string{"address": "b0:7b:25:d4:6e:10", "type": "1", "mtu": "1500"})
	t.link("sys/class/net/bond0", "sys/devices/virtual/net/bond0")

	t.pci("pci0000:00/0000:00:00.0", "8086", "09a2", "088000", "8086", "0000", "0", "")
	t.pci("pci0000:00/0000:00:1c.5", "8086", "a195", "060400", "1028", "0a6b", "0", "pcieport")
	t.pci("pci0000:00/0000:00:1c.4/0000:03:00.0", "102b", "0536", "030000", "1028", "0a6b", "0", "mgag200")

	tpm := "sys/devices/platform/MSFT0101:00/tpm/tpm0"
	t.files(tpm, map[string]string{"tpm_version_major": "2"})
	t.files("sys/devices/platform/MSFT0101:00", map[string]string{"description": "TPM 2.0 Device"})
	t.link(tpm+"/device", "sys/devices/platform/MSFT0101:00")
	t.link("sys/class/tpm/tpm0", tpm)
}

func gpunode(t *tree) {
	uuid := "a8e3b3d2-58c9-11ec-8000-3cecef6a1b2c"
	t.file("sys/firmware/dmi/tables/DMI", string(table(
		bios("American Megatrends International, LLC.", "2.4a", "06/02/2022"),
		system("Supermicro", "AS -4124GO-NART", "0123456789", "S488372X1A15623", uuid, "To be filled by O.E.M.", "Server"),
		board("Supermicro", "H12DSG-O-CPU", "1.01", "UM21AS000123", "Base Board Asset Tag"),
		chassis("Supermicro", 0x11, "C4180LK12AB0123", "Chassis Asset Tag"),
		dimm(0x54, 0x1100, "P1-DIMMA1", "P0_Node0_Channel0_Dimm0", 65536, 0x1a, 0x09, 3200, "Samsung", "H0L1A2B3", "M393A8G40AB2-CWE    "),
		dimm(0x54, 0x1101, "P1-DIMMB1", "P0_Node0_Channel1_Dimm0", 65536, 0x1a, 0x09, 3200, "Samsung", "H0L1A2B4", "M393A8G40AB2-CWE    "),
		dimm(0x54, 0x1102, "P1-DIMMC1", "P0_Node0_Channel2_Dimm0", 0, 0x02, 0x02, 0, "", "", ""),
		dimm(0x54, 0x1103, "P1-DIMMD1", "P0_Node0_Channel3_Dimm0", 0, 0x02, 0x02, 0, "", "", ""),
	)))
	t.file("sys/firmware/dmi/tables/smbios_entry_point", "_SM3_\x00\x18\x03\x02\x00\x01\x00")
	t.dmiID(map[string]string{"sys_vendor": "Supermicro", "product_name": "AS -4124GO-NART", "product_serial": "S488372X1A15623", "product_uuid": strings.ToUpper(uuid), "chassis_type": "17"})

	t.cpus("AuthenticAMD", "AMD EPYC 7543 32-Core Processor", "2794.748", epycFlags, 1, 4, 2, "", func(int) int { return 0 }, "25", "1", "1")
	t.meminfo(131733524, 131733524)

	nvme := t.pci("pci0000:40/0000:40:01.1/0000:41:00.0", "144d", "a824", "010802", "144d", "a801", "0", "nvme")
	ctrl := nvme + "/nvme/nvme0"
	t.files(ctrl, map[string]string{"model": "SAMSUNG MZWLJ3T8HBLS-00007", "serial": "S5RXNE0R700123", "firmware_rev": "EPK9CB5Q"})
	t.link(ctrl+"/device", nvme)
	t.link("sys/class/nvme/nvme0", ctrl)
	for i, sectors := range []string{"7099998208", "390625000"} {
		ns := fmt.Sprintf("nvme0n%d", i+1)
		t.files(ctrl+"/"+ns, map[string]string{"size": sectors, "removable": "0", "queue/rotational": "0", "wwid": fmt.Sprintf("eui.3656303054%010d", i+1), "nguid": fmt.Sprintf("36563030-5470-0123-0025-38%010d", i+1), "eui": "00 00 00 00 00 00 00 00"})
		t.link(ctrl+"/"+ns+"/device", ctrl)
		t.link("sys/block/"+ns, ctrl+"/"+ns)
	}

	x710 := t.pci("pci0000:60/0000:60:03.1/0000:61:00.0", "8086", "1572", "020000", "15d9", "0000", "0", "i40e")
	t.files(x710, map[string]string{"sriov_totalvfs": "64", "sriov_numvfs": "0"})
	t.nic(x710, "enp97s0f0", "3c:ec:ef:6a:1b:2c", "10000", "1", nil)

	for i, addr := range []string{"c1", "c2"} {
		dev := t.pci(fmt.Sprintf("pci0000:c0/0000:c0:01.%d/0000:%s:00.0", i+1, addr), "15b3", "101b", "020700", "15b3", "0007", "0", "mlx5_core")
		hca := fmt.Sprintf("%s/infiniband/mlx5_%d", dev, i)
		guid := fmt.Sprintf("b859:9f03:00d4:5e6%d", i)
		t.files(hca, map[string]string{"node_guid": guid, "fw_ver": "20.31.1014", "hca_type": "MT4123", "board_id": "MT_0000000223", "node_type": "1: CA"})
		state, rate := "4: ACTIVE", "200 Gb/sec (4X HDR)"
		if i == 1 {
			state, rate = "1: DOWN", "10 Gb/sec (4X SDR)"
		}
		t.files(hca+"/ports/1", map[string]string{"state": state, "rate": rate, "link_layer": "InfiniBand", "phys_state": "5: LinkUp", "gids/0": "fe80:0000:0000:0000:" + guid})
		t.link(hca+"/device", dev)
		t.link(fmt.Sprintf("sys/class/infiniband/mlx5_%d", i), hca)
		// IPoIB: ARPHRD_INFINIBAND (32), 20-byte hardware address.
		p := fmt.Sprintf("%s/net/ib%d", dev, i)
		t.files(p, map[string]string{"address": fmt.Sprintf("00:00:10:49:fe:80:00:00:00:00:00:00:b8:59:9f:03:00:d4:5e:6%d", i), "type": "32", "mtu": "2044", "carrier": "1"})
		t.link(p+"/device", dev)
		t.link(fmt.Sprintf("sys/class/net/ib%d", i), p)
	}

	for _, g := range []struct{ dev, node string }{
		{"pci0000:00/0000:00:01.1/0000:01:00.0", "0"}, {"pci0000:20/0000:20:01.1/0000:23:00.0", "0"},
		{"pci0000:80/0000:80:01.1/0000:81:00.0", "0"}, {"pci0000:a0/0000:a0:01.1/0000:a3:00.0", "0"},
	} {
		t.pci(g.dev, "10de", "20b2", "030200", "10de", "147f", g.node, "")
	}
	t.pci("pci0000:60/0000:60:05.2/0000:63:00.0", "1a03", "2000", "030000", "15d9", "1b0e", "0", "ast")
	t.pci("pci0000:00/0000:00:00.0", "1022", "1480", "060000", "1022", "1480", "0", "")

	tpm := "sys/devices/pnp0/00:05/tpm/tpm0"
	t.files(tpm, map[string]string{"tpm_version_major": "1"})
	t.files("sys/devices/pnp0/00:05", map[string]string{"caps": "Manufacturer: 0x49465800\nTCG version: 1.2\nFirmware version: 6.40"})
	t.link(tpm+"/device", "sys/devices/pnp0/00:05")
	t.link("sys/class/tpm/tpm0", tpm)
}

func vm(t *tree) {
	uuid := "8f0c7a2e-3b1d-4e5f-9a6b-1c2d3e4f5a6b"
	t.file("sys/firmware/dmi/tables/DMI", string(table(
		bios("SeaBIOS", "1.16.2-debian-1.16.2-1", "04/01/2014"),
		system("QEMU", "Standard PC (Q35 + ICH9, 2009)", "pc-q35-7.2", "RC-VM-0001", uuid, "", ""),
		chassis("QEMU", 0x01, "", ""),
		dimm(0x28, 0x1100, "DIMM 0", "", 2048, 0x07, 0x09, 0, "QEMU", "", ""),
	)))
	t.file("sys/firmware/dmi/tables/smbios_entry_point", "_SM_\x00\x1f\x02\x08")
	t.dmiID(map[string]string{"sys_vendor": "QEMU", "product_name": "Standard PC (Q35 + ICH9, 2009)", "product_version": "pc-q35-7.2", "product_serial": "RC-VM-0001", "product_uuid": uuid, "chassis_vendor": "QEMU", "chassis_type": "1", "bios_vendor": "SeaBIOS"})

	t.cpus("GenuineIntel", "QEMU Virtual CPU version 2.5+", "2399.998", qemuFlags, 1, 2, 1, "", func(int) int { return 0 }, "15", "107", "1")
	t.meminfo(2013204, 2013204)

	t.pci("pci0000:00/0000:00:00.0", "8086", "29c0", "060000", "1af4", "1100", "-1", "")
	t.pci("pci0000:00/0000:00:01.0", "1234", "1111", "030000", "1af4", "1100", "-1", "bochs-drm")
	net0 := t.pci("pci0000:00/0000:00:02.0", "1af4", "1000", "020000", "1af4", "0001", "-1", "virtio-pci")
	t.link(net0+"/virtio0/driver", "sys/bus/virtio/drivers/virtio_net")
	t.nic(net0+"/virtio0", "enp0s2", "52:54:00:12:34:56", "-1", "1", nil)
	blk := t.pci("pci0000:00/0000:00:03.0", "1af4", "1001", "010000", "1af4", "0002", "-1", "virtio-pci")
	t.block(blk+"/virtio1", "vda", 20971520, true, map[string]string{"serial": "rc-vda-1"})
	t.link(blk+"/virtio1/driver", "sys/bus/virtio/drivers/virtio_blk")
	e1000e := t.pci("pci0000:00/0000:00:04.0", "8086", "10d3", "020000", "1af4", "1100", "-1", "e1000e")
	t.nic(e1000e, "enp0s4", "52:54:00:12:34:57", "1000", "1", nil)
	nvme := t.pci("pci0000:00/0000:00:05.0", "1b36", "0010", "010802", "1af4", "1100", "-1", "nvme")
	ctrl := nvme + "/nvme/nvme0"
	t.files(ctrl, map[string]string{"model": "QEMU NVMe Ctrl", "serial": "rc-nvme-1", "firmware_rev": "7.2.4", "address": "0000:00:05.0"})
	t.link(ctrl+"/device", nvme)
	t.link("sys/class/nvme/nvme0", ctrl)
	t.files(ctrl+"/nvme0n1", map[string]string{"size": "2097152", "removable": "0", "queue/rotational": "0",
		"wwid": "nvme.1b36-72632d6e766d652d31-51454d55204e564d65204374726c-00000001", "eui": "00 00 00 00 00 00 00 00", "nguid": "00000000-0000-0000-0000-000000000000"})
	t.link(ctrl+"/nvme0n1/device", ctrl)
	t.link("sys/block/nvme0n1", ctrl+"/nvme0n1")
	ahci := t.pci("pci0000:00/0000:00:1f.2", "8086", "2922", "010601", "1af4", "1100", "-1", "ahci")
	t.files(ahci+"/ata3/host2/target2:0:0/2:0:0:0/block/sr0", map[string]string{"size": "2097151", "removable": "1"})
	t.link(ahci+"/ata3/host2/target2:0:0/2:0:0:0/block/sr0/device", ahci+"/ata3/host2/target2:0:0/2:0:0:0")
	t.link("sys/block/sr0", ahci+"/ata3/host2/target2:0:0/2:0:0:0/block/sr0")
	t.files("sys/devices/virtual/net/lo", map[string]string{"address": "00:00:00:00:00:00", "type": "772", "mtu": "65536"})
	t.link("sys/class/net/lo", "sys/devices/virtual/net/lo")
}
