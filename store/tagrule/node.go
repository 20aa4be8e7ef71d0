package tagrule

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// Node is what a rule sees as .Node: a machine as its record (the
// inventory summary, location, manual tags) and its last inventory report
// describe it. Numbers are 0 and strings empty when not known (a machine
// never commissioned).
//
// The fields come from the machine record, so evaluating them over a
// whole fleet reads no inventory. The methods (PCIVendors, PCIDevices,
// IBGUIDs, CPUVendor, Arch) need the report: a rule that uses them makes
// its Node read the facts once, through the function NodeOf was given.
type Node struct {
	Name         string // the operator's name for the machine (a DNS label), "" when none
	Serial       string // system serial number
	Manufacturer string // SMBIOS system manufacturer ("Dell Inc.", "Supermicro")
	Product      string // SMBIOS product ("PowerEdge R650")

	CPUModel string // the first socket's model name
	Sockets  int    // CPU packages
	Cores    int    // physical cores, all sockets
	Threads  int    // hardware threads, all sockets
	CPUs     int    // logical CPUs the kernel sees (MAAS's cpu_count): Threads

	MemoryMiB int64 // memory the kernel sees, in MiB (2^20 bytes)
	MemoryGiB int64 // the same in GiB (2^30 bytes), rounded down

	Disks     int      // block devices, NVMe namespaces included
	DiskBytes int64    // their total size in bytes
	DiskGiB   int64    // the same in GiB, rounded down
	NVMe      int      // NVMe controllers
	NICs      int      // network interfaces
	GPUs      int      // accelerators
	GPUModels []string // distinct GPU models, sorted ("NVIDIA H100 80GB HBM3")
	IBHCAs    int      // InfiniBand host channel adapters
	TPM       string   // TPM version ("2.0"), "" without a TPM

	// OS is the operating system deployed on the machine: empty until
	// deployment records one (later work).
	OS string

	Building string // location (Machine.Location)
	Room     string
	Rack     string
	Unit     int // lowest rack unit, 0 when not known
	AssetTag string

	// Tags are the tags an operator gave the machine, sorted. The tags
	// rules gave it are not here: no rule depends on another's outcome.
	Tags []string

	facts  func() (Facts, error)
	loaded bool
	f      Facts
	err    error
}

// Facts are what a rule may ask of the inventory report beyond the
// summary the machine record keeps.
type Facts struct {
	CPUVendor  string   // the CPUs' vendor id (GenuineIntel, AuthenticAMD), "" when the agent saw none
	PCIVendors []string // distinct vendor ids of the PCI functions, 4 lowercase hex digits, sorted
	PCIDevices []string // distinct vendor:device ids ("10de:20b2"), sorted
	IBGUIDs    []string // InfiniBand node GUIDs, lowercase, in the report's order
}

// NodeOf describes a machine record for rules. facts returns its
// inventory facts (DecodeFacts of the stored report, or FactsOf of a
// report in hand); nil when it has none, which the methods then give as
// empty.
func NodeOf(m store.Machine, facts func() (Facts, error)) *Node {
	s := m.Summary
	return &Node{
		Name: m.Name, Serial: m.Serial, Manufacturer: s.Manufacturer, Product: s.Product,
		CPUModel: s.CPUModel, Sockets: s.Sockets, Cores: s.Cores, Threads: s.Threads, CPUs: s.Threads,
		MemoryMiB: s.MemoryBytes >> 20, MemoryGiB: s.MemoryBytes >> 30,
		Disks: s.Disks, DiskBytes: s.DiskBytes, DiskGiB: s.DiskBytes >> 30, NVMe: s.NVMe, NICs: s.NICs,
		GPUs: s.GPUs, GPUModels: s.GPUModels, IBHCAs: s.IBHCAs, TPM: s.TPM,
		Building: m.Location.Building, Room: m.Location.Room, Rack: m.Location.Rack, Unit: m.Location.Unit,
		AssetTag: m.Location.AssetTag, Tags: m.Tags,
		facts: facts,
	}
}

func (n *Node) load() (Facts, error) {
	if !n.loaded {
		n.loaded = true
		if n.facts != nil {
			n.f, n.err = n.facts()
		}
	}
	return n.f, n.err
}

// PCIVendors are the distinct vendor ids of the machine's PCI functions
// (4 lowercase hex digits, sorted; pciVendor asks for one).
func (n *Node) PCIVendors() ([]string, error) { f, err := n.load(); return f.PCIVendors, err }

// PCIDevices are the distinct vendor:device ids of its PCI functions.
func (n *Node) PCIDevices() ([]string, error) { f, err := n.load(); return f.PCIDevices, err }

// IBGUIDs are the node GUIDs of its InfiniBand adapters.
func (n *Node) IBGUIDs() ([]string, error) { f, err := n.load(); return f.IBGUIDs, err }

// CPUVendor is its CPUs' vendor id (GenuineIntel, AuthenticAMD).
func (n *Node) CPUVendor() (string, error) { f, err := n.load(); return f.CPUVendor, err }

// Arch is x86_64 when its CPUs carry an x86 vendor id, else "": the agent
// reports no architecture of its own yet.
func (n *Node) Arch() (string, error) {
	f, err := n.load()
	if err != nil {
		return "", err
	}
	switch f.CPUVendor {
	case "GenuineIntel", "AuthenticAMD", "HygonGenuine", "CentaurHauls", "  Shanghai  ":
		return "x86_64", nil
	}
	return "", nil
}

// FactsOf derives the facts of a report.
func FactsOf(r *inventory.Report) Facts {
	var f Facts
	for _, c := range r.CPUs {
		if c.Vendor != "" {
			f.CPUVendor = c.Vendor
			break
		}
	}
	vendors, devices := map[string]bool{}, map[string]bool{}
	for _, d := range r.PCI {
		v, dev := strings.ToLower(d.VendorID), strings.ToLower(d.DeviceID)
		if v == "" {
			continue
		}
		vendors[v] = true
		if dev != "" {
			devices[v+":"+dev] = true
		}
	}
	f.PCIVendors, f.PCIDevices = sortedSet(vendors), sortedSet(devices)
	for _, h := range r.IB {
		if h.NodeGUID != "" {
			f.IBGUIDs = append(f.IBGUIDs, strings.ToLower(h.NodeGUID))
		}
	}
	return f
}

func sortedSet(m map[string]bool) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// factsDoc is the part of a stored report the facts come from, field by
// field: decoding only these skips the rest of the ~50 KB document (CPU
// flags, DIMMs, disks) without building it. Its JSON names are the
// report's (TestDecodeFactsIsFactsOf holds them to it).
type factsDoc struct {
	CPUs []struct {
		Vendor string `json:"vendor"`
	} `json:"cpus"`
	IB []struct {
		NodeGUID string `json:"node_guid"`
	} `json:"infiniband"`
	PCI []struct {
		VendorID string `json:"vendor_id"`
		DeviceID string `json:"device_id"`
	} `json:"pci"`
}

// DecodeFacts derives the facts of a stored report (the JSON
// store.Tx.Inventory returns).
func DecodeFacts(doc []byte) (Facts, error) {
	var d factsDoc
	if err := json.Unmarshal(doc, &d); err != nil {
		return Facts{}, fmt.Errorf("read the inventory report: %w", err)
	}
	r := inventory.Report{CPUs: make([]inventory.CPU, len(d.CPUs)), IB: make([]inventory.IBHCA, len(d.IB)), PCI: make([]inventory.PCIDevice, len(d.PCI))}
	for i, c := range d.CPUs {
		r.CPUs[i].Vendor = c.Vendor
	}
	for i, h := range d.IB {
		r.IB[i].NodeGUID = h.NodeGUID
	}
	for i, p := range d.PCI {
		r.PCI[i].VendorID, r.PCI[i].DeviceID = p.VendorID, p.DeviceID
	}
	return FactsOf(&r), nil
}

// FactsCache keeps machines' facts between evaluations on one node: a
// rule that asks for them over a fleet otherwise reads every machine's
// report (about a millisecond each), every time a tag is saved. An entry
// holds until the machine is commissioned again (its Commissioned time
// changes) or is forgotten. It is the proposer's, never replicated state.
// Safe for concurrent use.
type FactsCache struct {
	mu sync.Mutex
	m  map[string]cachedFacts
}

type cachedFacts struct {
	commissioned time.Time
	f            Facts
}

// Facts returns m's facts from the cache, or from load (kept when it
// succeeds).
func (c *FactsCache) Facts(m store.Machine, load func() (Facts, error)) (Facts, error) {
	c.mu.Lock()
	e, ok := c.m[m.ID]
	c.mu.Unlock()
	if ok && e.commissioned.Equal(m.Commissioned) {
		return e.f, nil
	}
	f, err := load()
	if err != nil {
		return f, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]cachedFacts{}
	}
	c.m[m.ID] = cachedFacts{m.Commissioned, f}
	c.mu.Unlock()
	return f, nil
}

// Retain forgets every machine for which keep is false (machines deleted
// since they were cached).
func (c *FactsCache) Retain(keep func(id string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.m {
		if !keep(id) {
			delete(c.m, id)
		}
	}
}

// Len is how many machines the cache holds.
func (c *FactsCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
