package collect

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/rollcall/rollcall/store/inventory"
)

// cpuinfoProc is one "processor" block of /proc/cpuinfo.
type cpuinfoProc struct {
	id, physID, coreID int
	vendor, model      string
	mhz                float64
	flags              []string
}

func parseCPUInfo(b []byte) []cpuinfoProc {
	var out []cpuinfoProc
	cur := cpuinfoProc{id: -1, physID: -1, coreID: -1}
	flush := func() {
		if cur.id >= 0 {
			out = append(out, cur)
		}
		cur = cpuinfoProc{id: -1, physID: -1, coreID: -1}
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			if strings.TrimSpace(sc.Text()) == "" {
				flush()
			}
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "processor":
			if cur.id >= 0 {
				flush()
			}
			cur.id, _ = strconv.Atoi(v)
		case "physical id":
			cur.physID, _ = strconv.Atoi(v)
		case "core id":
			cur.coreID, _ = strconv.Atoi(v)
		case "vendor_id":
			cur.vendor = v
		case "model name":
			cur.model = v
		case "cpu MHz":
			cur.mhz, _ = strconv.ParseFloat(v, 64)
		case "flags":
			cur.flags = strings.Fields(v)
		}
	}
	flush()
	return out
}

// collectCPUs groups logical CPUs into sockets. Topology comes from
// /sys/devices/system/cpu/cpuN/topology (online CPUs only), falling back to
// /proc/cpuinfo's physical/core ids; NUMA placement from the cpuN/nodeM links
// or /sys/devices/system/node/nodeM/cpulist.
func collectCPUs(fs sysfs, r *inventory.Report) error {
	raw, err := os.ReadFile(fs.path("/proc/cpuinfo"))
	if err != nil {
		return fmt.Errorf("cpuinfo: %w", err)
	}
	procs := parseCPUInfo(raw)
	if len(procs) == 0 {
		return fmt.Errorf("cpuinfo: no processor entries")
	}
	nodeOf := cpuNodes(fs)
	type socket struct {
		cpu     inventory.CPU
		cores   map[int]bool
		maxKHz  int64
		haveMHz bool
	}
	sockets := map[int]*socket{}
	for _, p := range procs {
		base := fmt.Sprintf("/sys/devices/system/cpu/cpu%d", p.id)
		if fs.int(base+"/online", 1) == 0 {
			continue
		}
		pkg := int(fs.int(base+"/topology/physical_package_id", int64(p.physID)))
		core := int(fs.int(base+"/topology/core_id", int64(p.coreID)))
		if pkg < 0 {
			pkg = 0
		}
		if core < 0 {
			core = p.id
		}
		s := sockets[pkg]
		if s == nil {
			node, ok := nodeOf[p.id]
			if !ok {
				node = 0
			}
			s = &socket{cpu: inventory.CPU{Socket: pkg, Vendor: p.vendor, Model: p.model, NUMANode: node, Flags: p.flags}, cores: map[int]bool{}}
			sockets[pkg] = s
		}
		s.cores[core] = true
		s.cpu.Threads++
		if khz := fs.int(base+"/cpufreq/cpuinfo_max_freq", 0); khz > s.maxKHz {
			s.maxKHz = khz
		}
		if !s.haveMHz && p.mhz > 0 {
			s.cpu.MHz, s.haveMHz = int(math.Round(p.mhz)), true
		}
	}
	ids := make([]int, 0, len(sockets))
	for id := range sockets {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		s := sockets[id]
		s.cpu.Cores = len(s.cores)
		if s.maxKHz > 0 { // the rated maximum, not the clock of the moment
			s.cpu.MHz = int(s.maxKHz / 1000)
		}
		r.CPUs = append(r.CPUs, s.cpu)
	}
	return nil
}

// cpuNodes maps logical CPU to NUMA node.
func cpuNodes(fs sysfs) map[int]int {
	out := map[int]int{}
	for _, n := range fs.list("/sys/devices/system/node") {
		id, ok := strings.CutPrefix(n, "node")
		node, err := strconv.Atoi(id)
		if !ok || err != nil {
			continue
		}
		for _, cpu := range parseCPUList(fs.str("/sys/devices/system/node/" + n + "/cpulist")) {
			out[cpu] = node
		}
	}
	return out
}

// parseCPUList reads the kernel's list format ("0-3,8,10-11").
func parseCPUList(s string) []int {
	var out []int
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > 1<<16 {
				continue
			}
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out
}

// collectMemory reads MemTotal and each NUMA node's MemTotal.
func collectMemory(fs sysfs, r *inventory.Report) error {
	raw, err := os.ReadFile(fs.path("/proc/meminfo"))
	if err != nil {
		return fmt.Errorf("meminfo: %w", err)
	}
	total := meminfoKB(string(raw), "MemTotal")
	if total <= 0 {
		return fmt.Errorf("meminfo: no MemTotal")
	}
	r.Memory.TotalBytes = total * 1024
	var nodes []int
	for _, n := range fs.list("/sys/devices/system/node") {
		if id, ok := strings.CutPrefix(n, "node"); ok {
			if i, err := strconv.Atoi(id); err == nil {
				nodes = append(nodes, i)
			}
		}
	}
	sort.Ints(nodes)
	for _, i := range nodes {
		// "Node 0 MemTotal:       32780260 kB"
		b := fs.str(fmt.Sprintf("/sys/devices/system/node/node%d/meminfo", i))
		kb := int64(0)
		for _, line := range strings.Split(b, "\n") {
			f := strings.Fields(line)
			if len(f) >= 4 && f[2] == "MemTotal:" {
				kb, _ = strconv.ParseInt(f[3], 10, 64)
			}
		}
		r.Memory.NUMANodes = append(r.Memory.NUMANodes, kb*1024)
	}
	return nil
}

func meminfoKB(s, key string) int64 {
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) != key {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		return n
	}
	return 0
}
