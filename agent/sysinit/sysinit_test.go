package sysinit

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A modules.dep cut from Debian's 6.1 kernel: each module's dependencies
// closest first.
const modulesDep = `kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
kernel/drivers/char/ipmi/ipmi_si.ko: kernel/drivers/char/ipmi/ipmi_msghandler.ko
kernel/drivers/char/ipmi/ipmi_devintf.ko: kernel/drivers/char/ipmi/ipmi_msghandler.ko
kernel/drivers/char/ipmi/ipmi_msghandler.ko:
kernel/drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.ko: kernel/drivers/net/ethernet/mellanox/mlxfw/mlxfw.ko kernel/drivers/pci/controller/pci-hyperv-intf.ko kernel/net/psample/psample.ko kernel/lib/objagg.ko
kernel/drivers/net/ethernet/mellanox/mlxfw/mlxfw.ko:
kernel/drivers/pci/controller/pci-hyperv-intf.ko:
kernel/net/psample/psample.ko:
kernel/lib/objagg.ko:
`

func TestLoadOrder(t *testing.T) {
	order, err := LoadOrder(modulesDep)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, m := range order {
		if _, dup := pos[m]; dup {
			t.Errorf("%s loaded twice", m)
		}
		pos[m] = i
	}
	if len(order) != 11 {
		t.Errorf("%d modules, want 11: %v", len(order), order)
	}
	for _, line := range strings.Split(strings.TrimSpace(modulesDep), "\n") {
		mod, deps, _ := strings.Cut(line, ":")
		for _, d := range strings.Fields(deps) {
			if pos[d] > pos[mod] {
				t.Errorf("%s loads before its dependency %s", mod, d)
			}
		}
	}
	if _, err := LoadOrder("a.ko: b.ko\nb.ko: a.ko\n"); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("cycle: %v", err)
	}
	if _, err := LoadOrder("garbage line\n"); err == nil {
		t.Error("no error for a line without a colon")
	}
}

func TestModuleName(t *testing.T) {
	got := []string{ModuleName("kernel/drivers/pci/controller/pci-hyperv-intf.ko"), ModuleName("x/mlx5_core.ko.xz"), ModuleName("ahci.ko")}
	if d := cmp.Diff([]string{"pci_hyperv_intf", "mlx5_core", "ahci"}, got); d != "" {
		t.Error(d)
	}
}
