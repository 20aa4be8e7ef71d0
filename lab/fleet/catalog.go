package fleet

import (
	"strconv"
	"strings"
)

// CPU flag lists as /proc/cpuinfo prints them on these parts (Linux 6.x).

var flagsCommonIntel = strings.Fields(`fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca
cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm
constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni
pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid dca sse4_1
sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm
3dnowprefetch cpuid_fault epb cat_l3 cdp_l3 invpcid_single intel_ppin ssbd mba ibrs ibpb stibp
ibrs_enhanced tpr_shadow vnmi flexpriority ept vpid ept_ad fsgsbase tsc_adjust bmi1 hle avx2
smep bmi2 erms invpcid cqm mpx rdt_a avx512f avx512dq rdseed adx smap clflushopt clwb intel_pt
avx512cd avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total
cqm_mbm_local dtherm ida arat pln pts hwp hwp_act_window hwp_epp hwp_pkg_req pku ospke`)

var flagsCascadeLake = append(append([]string{}, flagsCommonIntel...), strings.Fields(`avx512_vnni
md_clear flush_l1d arch_capabilities`)...)

var flagsIceLake = append(append([]string{}, flagsCommonIntel...), strings.Fields(`avx512ifma
sha_ni split_lock_detect wbnoinvd avx512vbmi umip avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni
avx512_bitalg tme avx512_vpopcntdq la57 rdpid fsrm md_clear pconfig flush_l1d
arch_capabilities`)...)

var flagsSapphireRapids = append(append([]string{}, flagsIceLake...), strings.Fields(`avx_vnni
avx512_bf16 cldemote movdiri movdir64b enqcmd serialize tsxldtrk amx_bf16 avx512_fp16 amx_tile
amx_int8 bus_lock_detect waitpkg user_shstk xfd hfi vnmi_vpid ibt`)...)

var flagsRome = strings.Fields(`fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov
pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm
constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid aperfmperf rapl pni pclmulqdq monitor
ssse3 fma cx16 sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm cmp_legacy
svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw ibs skinit wdt tce topoext
perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 hw_pstate ssbd mba ibrs ibpb
stibp vmmcall fsgsbase bmi1 avx2 smep bmi2 cqm rdt_a rdseed adx smap clflushopt clwb sha_ni
xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local clzero irperf
xsaveerptr rdpru wbnoinvd amd_ppin arat npt lbrv svm_lock nrip_save tsc_scale vmcb_clean
flushbyasid decodeassists pausefilter pfthreshold avic v_vmsave_vmload vgif v_spec_ctrl umip
rdpid overflow_recov succor smca sme sev sev_es`)

// cpuModel is one processor SKU.
type cpuModel struct {
	vendor, model string
	cores, mhz    int
	flags         []string
	memMTs        int
	memType       string
}

var (
	xeonGold6338 = cpuModel{"GenuineIntel", "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", 32, 2000, flagsIceLake, 3200, "DDR4"}
	xeonGold6330 = cpuModel{"GenuineIntel", "Intel(R) Xeon(R) Gold 6330 CPU @ 2.00GHz", 28, 2000, flagsIceLake, 2933, "DDR4"}
	xeonGold6342 = cpuModel{"GenuineIntel", "Intel(R) Xeon(R) Gold 6342 CPU @ 2.80GHz", 24, 2800, flagsIceLake, 3200, "DDR4"}
	xeonGold5318 = cpuModel{"GenuineIntel", "Intel(R) Xeon(R) Gold 5318Y CPU @ 2.10GHz", 24, 2100, flagsIceLake, 2933, "DDR4"}
	xeonGold5317 = cpuModel{"GenuineIntel", "Intel(R) Xeon(R) Gold 5317 CPU @ 3.00GHz", 12, 3000, flagsIceLake, 2933, "DDR4"}
	xeonGold6248 = cpuModel{"GenuineIntel", "Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz", 24, 3000, flagsCascadeLake, 2933, "DDR4"}
	xeonGold6230 = cpuModel{"GenuineIntel", "Intel(R) Xeon(R) Gold 6230R CPU @ 2.10GHz", 26, 2100, flagsCascadeLake, 2933, "DDR4"}
	xeonPlat8480 = cpuModel{"GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+", 56, 2000, flagsSapphireRapids, 4800, "DDR5"}
	xeonPlat8468 = cpuModel{"GenuineIntel", "Intel(R) Xeon(R) Platinum 8468", 48, 2100, flagsSapphireRapids, 4800, "DDR5"}
	epyc7742     = cpuModel{"AuthenticAMD", "AMD EPYC 7742 64-Core Processor", 64, 2250, flagsRome, 3200, "DDR4"}
)

// dimmPart is a registered DIMM as SMBIOS names it.
type dimmPart struct {
	manufacturer, part string
	sizeMB             int64
}

var ddr4Parts = []dimmPart{
	{"Samsung", "M393A4K40EB3-CWE", 32768},
	{"Samsung", "M393A8G40AB2-CWE", 65536},
	{"SK Hynix", "HMA84GR7CJR4N-XN", 32768},
	{"SK Hynix", "HMAA8GR7CJR4N-XN", 65536},
	{"Micron Technology", "36ASF4G72PZ-3G2R1", 32768},
	{"Micron Technology", "36ASF8G72PZ-3G2F1", 65536},
}

var ddr5Parts = []dimmPart{
	{"Samsung", "M321R8GA0BB0-CQKZJ", 65536},
	{"SK Hynix", "HMCG94MEBRA123N", 65536},
	{"Micron Technology", "MTC40F2046S1RC48BA1", 65536},
}

// diskModel is a drive as the kernel names it.
type diskModel struct {
	model     string
	sizeBytes int64
	transport string
	rot       bool
	wwnPrefix string // NAA-5 + OUI, as lsblk prints it
	serial    func(r randSource) string
}

// randSource is the part of *rand.Rand the catalog needs.
type randSource interface {
	IntN(n int) int
	Uint64() uint64
}

func alnum(r randSource, n int, alphabet string) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

const (
	upperDigits = "0123456789ABCDEFGHJKLMNPQRSTVWXYZ"
	digits      = "0123456789"
	hexUpper    = "0123456789ABCDEF"
)

var (
	hddSeagate = diskModel{"ST18000NM004J", 18000207937536, "sas", true, "0x5000c500", func(r randSource) string { return "ZR5" + alnum(r, 5, upperDigits) }}
	hddWDC     = diskModel{"WUH721818AL5204", 18000207937536, "sas", true, "0x5000cca2", func(r randSource) string { return "3RG" + alnum(r, 5, upperDigits) }}
	hddToshiba = diskModel{"MG09SCA18TE", 18000207937536, "sas", true, "0x50000399", func(r randSource) string { return alnum(r, 4, digits) + "A0" + alnum(r, 2, upperDigits) + "FJDH" }}

	ssdDellSATA = diskModel{"MZ7L3480HCHQ0D3", 480103981056, "sata", false, "0x5002538f", func(r randSource) string { return "S6JVNE0T" + alnum(r, 6, digits) }}
	ssdHPESATA  = diskModel{"VK000480GZCNE", 480103981056, "sata", false, "0x500a0751", func(r randSource) string { return "2205" + alnum(r, 8, hexUpper) }}
	ssdSMCSATA  = diskModel{"SAMSUNG MZ7LH960HAJR-00005", 960197124096, "sata", false, "0x5002538e", func(r randSource) string { return "S45NNE0N" + alnum(r, 6, digits) }}
)

// nvmeModel is an NVMe controller model.
type nvmeModel struct {
	model, firmware string
	nsBytes         int64
	serial          func(r randSource) string
	eui             func(r randSource) string
	nguid           func(r randSource) string
}

func hexN(r randSource, n int) string { return strings.ToLower(alnum(r, n, hexUpper)) }

var (
	nvmeSamsungPM9A3 = nvmeModel{"SAMSUNG MZQL23T8HCLS-00A07", "GDC5602Q", 3840755982336,
		func(r randSource) string { return "S64HNE0T" + alnum(r, 6, digits) },
		func(r randSource) string { return "002538b" + hexN(r, 9) },
		func(r randSource) string { return "36344730" + hexN(r, 8) + "0025384" + hexN(r, 9) }}
	nvmeSamsungPM1733 = nvmeModel{"SAMSUNG MZWLJ3T8HBLS-00007", "EPK9CB5Q", 3840755982336,
		func(r randSource) string { return "S4YPNE0R" + alnum(r, 6, digits) },
		func(r randSource) string { return "002538b" + hexN(r, 9) },
		func(r randSource) string { return "36345030" + hexN(r, 8) + "0025384" + hexN(r, 9) }}
	nvmeSamsungPM983 = nvmeModel{"SAMSUNG MZ1LB1T9HALS-00007", "EDA7602Q", 1920383410176,
		func(r randSource) string { return "S436NC0R" + alnum(r, 6, digits) },
		func(r randSource) string { return "002538b" + hexN(r, 9) },
		func(r randSource) string { return "" }}
	nvmeSolidigmP5520 = nvmeModel{"INTEL SSDPF2KX038T1", "9CV10410", 3840755982336,
		func(r randSource) string { return "PHAX" + alnum(r, 4, digits) + "00" + alnum(r, 2, digits) + "3P8CGN" },
		func(r randSource) string { return "0000000000000000" },
		func(r randSource) string { return "01000000000000005cd2e4" + hexN(r, 10) }}
	nvmeDellKioxia = nvmeModel{"Dell Ent NVMe v2 AGN RI U.2 1.92TB", "2.2.0", 1920383410176,
		func(r randSource) string { return "X2" + alnum(r, 2, digits) + "A0" + alnum(r, 4, upperDigits) + "1E8" },
		func(r randSource) string { return "8ce38e" + hexN(r, 10) },
		func(r randSource) string { return "8ce38e" + hexN(r, 26) }}
	nvmeDellBOSSN1 = nvmeModel{"Dell BOSS-N1", "2.1.13.2025", 960197124096,
		func(r randSource) string { return "CN0" + alnum(r, 5, upperDigits) + "FCP00" + alnum(r, 5, digits) },
		func(r randSource) string { return "" },
		func(r randSource) string { return "" }}
	nvmeHPE = nvmeModel{"MO001600KXPTR", "HPK3", 1600321314816,
		func(r randSource) string { return "S5ZNNA0" + alnum(r, 7, digits) },
		func(r randSource) string { return "002538b" + hexN(r, 9) },
		func(r randSource) string { return "35504e30" + hexN(r, 8) + "0025384" + hexN(r, 9) }}
)

// switchVendor is a top-of-rack switch family, for LLDP.
type switchVendor struct {
	ouiMAC   string
	portID   func(port int) string
	sysFmt   string
	portDesc func(host string, nic int) string
}

var switchVendors = []switchVendor{
	{"3c:2c:30", func(p int) string { return "ethernet1/1/" + strconv.Itoa(p) }, "leaf%03d-%s.dc1", func(h string, n int) string { return h + " nic" + strconv.Itoa(n) }},
	{"44:4c:a8", func(p int) string { return "Ethernet" + strconv.Itoa(p) }, "r%03d-tor-%s", func(h string, n int) string { return h + ":" + strconv.Itoa(n) }},
	{"00:3a:7d", func(p int) string { return "Eth1/" + strconv.Itoa(p) }, "dc1-r%03d-n9k-%s", func(h string, n int) string { return "to " + h + " port " + strconv.Itoa(n) }},
}
