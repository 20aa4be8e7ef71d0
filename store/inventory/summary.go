package inventory

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
)

// Summary is what lists and filters need of an inventory, kept on the
// machine record so that a list never reads the whole report.
type Summary struct {
	Manufacturer string   `json:"manufacturer,omitempty"`
	Product      string   `json:"product,omitempty"`
	CPUModel     string   `json:"cpu_model,omitempty"`
	Sockets      int      `json:"sockets,omitempty"`
	Cores        int      `json:"cores,omitempty"`
	Threads      int      `json:"threads,omitempty"`
	MemoryBytes  int64    `json:"memory_bytes,omitempty"`
	DIMMs        int      `json:"dimms,omitempty"`
	Disks        int      `json:"disks,omitempty"`
	DiskBytes    int64    `json:"disk_bytes,omitempty"`
	NVMe         int      `json:"nvme,omitempty"`
	NICs         int      `json:"nics,omitempty"`
	GPUs         int      `json:"gpus,omitempty"`
	GPUModels    []string `json:"gpu_models,omitempty"`
	IBHCAs       int      `json:"ib_hcas,omitempty"`
	TPM          string   `json:"tpm,omitempty"`
}

// Summarize derives the summary of a report.
func Summarize(r *Report) Summary {
	s := Summary{
		Manufacturer: r.System.Manufacturer, Product: r.System.Product,
		Sockets: len(r.CPUs), Disks: len(r.Disks), NVMe: len(r.NVMe), NICs: len(r.NICs),
		GPUs: len(r.GPUs), IBHCAs: len(r.IB), MemoryBytes: r.Memory.TotalBytes,
	}
	for _, c := range r.CPUs {
		if s.CPUModel == "" {
			s.CPUModel = c.Model
		}
		s.Cores += c.Cores
		s.Threads += c.Threads
	}
	var dimmBytes int64
	for _, d := range r.DIMMs {
		if d.SizeMB > 0 {
			s.DIMMs++
			dimmBytes += d.SizeMB << 20
		}
	}
	if s.MemoryBytes == 0 {
		s.MemoryBytes = dimmBytes
	}
	for _, d := range r.Disks {
		s.DiskBytes += d.SizeBytes
	}
	models := map[string]bool{}
	for _, g := range r.GPUs {
		if g.Model != "" && !models[g.Model] {
			models[g.Model] = true
			s.GPUModels = append(s.GPUModels, g.Model)
		}
	}
	sort.Strings(s.GPUModels)
	if r.TPM != nil {
		s.TPM = r.TPM.Version
	}
	return s
}

// Validate checks a report and normalises what the server relies on (MACs,
// UUID). It returns every problem found, joined, so an agent author sees them
// all at once.
func Validate(r *Report) error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if r.Version != SchemaVersion {
		add("version: %d is not supported (this server reads version %d)", r.Version, SchemaVersion)
	}
	if r.System.UUID != "" {
		if u := NormalizeUUID(r.System.UUID); u == "" {
			add("system.uuid: %q is not a UUID", clip(r.System.UUID))
		} else {
			r.System.UUID = u
		}
	}
	if r.BootMAC != "" {
		if m, err := normMAC(r.BootMAC); err != nil {
			add("boot_mac: %v", err)
		} else {
			r.BootMAC = m
		}
	}
	for i := range r.NICs {
		if m, err := normMAC(r.NICs[i].MAC); err != nil {
			add("nics[%d].mac: %v", i, err)
		} else {
			r.NICs[i].MAC = m
		}
	}
	if err := CheckLimits(r); err != nil {
		add("%v", err)
	}
	for i, d := range r.Disks {
		if d.SizeBytes < 0 {
			add("disks[%d].size_bytes: negative", i)
		}
	}
	for i, d := range r.DIMMs {
		if d.SizeMB < 0 {
			add("dimms[%d].size_mb: negative", i)
		}
	}
	if r.Memory.TotalBytes < 0 {
		add("memory.total_bytes: negative")
	}
	if len(errs) == 0 && Key(r.System.UUID, r.System.Serial, r.BootMAC) == "" && len(r.NICs) == 0 {
		add("report names no identity: no usable system.uuid, system.serial, boot_mac or NIC MAC")
	}
	return errors.Join(errs...)
}

// MACs lists the report's NIC MACs, boot MAC first, without duplicates.
func MACs(r *Report) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range append([]string{r.BootMAC}, nicMACs(r)...) {
		if m != "" && !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

func nicMACs(r *Report) []string {
	out := make([]string, 0, len(r.NICs))
	for _, n := range r.NICs {
		out = append(out, n.MAC)
	}
	return out
}

func normMAC(s string) (string, error) {
	hw, err := net.ParseMAC(strings.TrimSpace(s))
	if err != nil || len(hw) != 6 {
		return "", fmt.Errorf("%q is not a 48-bit MAC address", clip(s))
	}
	return hw.String(), nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
