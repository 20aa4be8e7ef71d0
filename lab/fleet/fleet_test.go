package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/rollcall/rollcall/store/inventory"
)

func mustJSON(t *testing.T, r inventory.Report) []byte {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDeterministic(t *testing.T) {
	for i := range 300 {
		a, b := mustJSON(t, Generate(42, i)), mustJSON(t, Generate(42, i))
		if !bytes.Equal(a, b) {
			t.Fatalf("machine %d: two runs with seed 42 differ", i)
		}
		if c := mustJSON(t, Generate(43, i)); bytes.Equal(a, c) {
			t.Fatalf("machine %d: seeds 42 and 43 give the same report", i)
		}
	}
	// Order does not matter: machine 7 is the same whether generated first
	// or after others.
	late := mustJSON(t, Generate(42, 7))
	if !bytes.Equal(late, mustJSON(t, Generate(42, 7))) {
		t.Fatal("machine 7 depends on generation order")
	}
}

// TestFleet checks 10,000 machines: each passes inventory.Validate without
// being changed by it, identities never repeat, and each shape has what it
// promises.
func TestFleet(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 2000
	}
	seen := map[string]string{} // value → machine that used it
	unique := func(i int, kind, v string) {
		if v == "" {
			t.Errorf("machine %d: empty %s", i, kind)
			return
		}
		k := kind + "=" + v
		if prev, ok := seen[k]; ok {
			t.Errorf("machine %d: %s %s already used by %s", i, kind, v, prev)
		}
		seen[k] = fmt.Sprint(i)
	}
	shapes := map[string]int{}
	for i := range n {
		r := Generate(1, i)
		before := mustJSON(t, r)
		if err := inventory.Validate(&r); err != nil {
			t.Fatalf("machine %d (%s) fails validation: %v", i, r.System.Product, err)
		}
		if !bytes.Equal(before, mustJSON(t, r)) {
			t.Fatalf("machine %d: Validate normalised something; the generator should emit normal forms", i)
		}
		if !inventory.RealUUID(r.System.UUID) || !inventory.RealSerial(r.System.Serial) {
			t.Fatalf("machine %d: uuid %q / serial %q taken for a placeholder", i, r.System.UUID, r.System.Serial)
		}
		unique(i, "uuid", r.System.UUID)
		unique(i, "serial", r.System.Serial)
		unique(i, "key", inventory.Key(r.System.UUID, r.System.Serial, r.BootMAC))
		for _, nic := range r.NICs {
			unique(i, "mac", nic.MAC)
		}
		unique(i, "mac", r.BMC.MAC)
		unique(i, "bmc address", r.BMC.Address)
		if len(r.BMC.Password) != 16 || r.BMC.User != "commissioner" || r.BMC.Driver != "ipmi" {
			t.Fatalf("machine %d: BMC block %+v", i, *r.BMC)
		}
		for _, hca := range r.IB {
			unique(i, "guid", hca.NodeGUID)
		}
		if r.TPM == nil || r.TPM.Version != "2.0" {
			t.Fatalf("machine %d: no TPM 2.0", i)
		}
		checkShape(t, i, &r)
		shapes[ShapeOf(1, i)]++
	}
	for _, s := range Shapes() {
		got := 100 * shapes[s.Name] / n
		if got < s.Percent-3 || got > s.Percent+3 {
			t.Errorf("shape %s: %d%% of the fleet, want about %d%%", s.Name, got, s.Percent)
		}
	}
}

func checkShape(t *testing.T, i int, r *inventory.Report) {
	t.Helper()
	pci := map[string]inventory.PCIDevice{}
	for _, d := range r.PCI {
		if _, dup := pci[d.Address]; dup {
			t.Fatalf("machine %d: PCI address %s twice", i, d.Address)
		}
		pci[d.Address] = d
	}
	ref := func(what, a, vendor string) {
		d, ok := pci[a]
		if !ok {
			t.Fatalf("machine %d: %s at %s, which is not in the PCI list", i, what, a)
		}
		if vendor != "" && d.VendorID != vendor {
			t.Fatalf("machine %d: %s at %s has PCI vendor %s, want %s", i, what, a, d.VendorID, vendor)
		}
	}
	for _, n := range r.NICs {
		ref("NIC "+n.Name, n.PCIAddress, "")
	}
	for _, n := range r.NVMe {
		ref("NVMe "+n.Name, n.PCIAddress, "")
		if len(n.Namespaces) == 0 {
			t.Fatalf("machine %d: %s without namespaces", i, n.Name)
		}
	}
	for _, g := range r.GPUs {
		ref("GPU", g.PCIAddress, "10de")
	}
	for _, h := range r.IB {
		ref("HCA "+h.Name, h.PCIAddress, "15b3")
		if len(h.Ports) == 0 || h.Ports[0].GUID == "" {
			t.Fatalf("machine %d: HCA %s without ports", i, h.Name)
		}
	}
	if len(r.CPUs) != 2 || len(r.CPUs[0].Flags) < 100 {
		t.Fatalf("machine %d: %d CPUs, %d flags", i, len(r.CPUs), len(r.CPUs[0].Flags))
	}
	if len(r.LLDP) == 0 {
		t.Fatalf("machine %d: no LLDP neighbours", i)
	}
	switch ShapeOf(1, i) {
	case "server":
		if len(r.DIMMs) < 24 || len(r.NICs) != 4 || len(r.Disks) < 2 || len(r.Disks) > 4 || len(r.PCI) < 60 {
			t.Fatalf("machine %d (server): %d DIMM slots, %d NICs, %d disks, %d PCI functions", i, len(r.DIMMs), len(r.NICs), len(r.Disks), len(r.PCI))
		}
	case "gpu":
		if len(r.GPUs) != 8 || len(r.IB) != 4 || len(r.PCI) < 150 {
			t.Fatalf("machine %d (gpu): %d GPUs, %d HCAs, %d PCI functions", i, len(r.GPUs), len(r.IB), len(r.PCI))
		}
	case "storage":
		rot := 0
		for _, d := range r.Disks {
			if d.Rotational && d.WWN != "" {
				rot++
			}
		}
		if rot != 36 || len(r.NVMe) != 2 {
			t.Fatalf("machine %d (storage): %d rotational disks with WWNs, %d NVMe controllers", i, rot, len(r.NVMe))
		}
	default:
		t.Fatalf("machine %d: unknown shape", i)
	}
}

// TestSize keeps the reports the size real agents send: ~50 KB of JSON on
// average, most of it CPU flags and the PCI list.
func TestSize(t *testing.T) {
	total, lo, hi := 0, 1<<30, 0
	for i := range 100 {
		s := Size(Generate(7, i))
		total += s
		lo, hi = min(lo, s), max(hi, s)
	}
	mean := total / 100
	t.Logf("100 machines: mean %d bytes, min %d, max %d", mean, lo, hi)
	if mean < 35<<10 || mean > 70<<10 {
		t.Fatalf("mean report is %d bytes, want 35-70 KB", mean)
	}
}

func BenchmarkGenerate(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		Generate(1, i)
	}
}
