package debkernel

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestModuleClosure(t *testing.T) {
	dep := "kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko\n" +
		"kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko\n" +
		"kernel/net/core/failover.ko:\n" +
		"kernel/drivers/net/ethernet/intel/igb/igb.ko: kernel/drivers/dca/dca.ko\n" +
		"kernel/drivers/dca/dca.ko:\n" +
		"kernel/drivers/pci/controller/pci-hyperv-intf.ko:\n"
	files, depOut, missing := ModuleClosure(dep, "kernel/drivers/virtio/virtio_pci.ko\n", []string{"virtio_net", "virtio_pci", "pci_hyperv_intf", "nosuch"})
	if d := cmp.Diff([]string{"kernel/drivers/net/net_failover.ko", "kernel/drivers/net/virtio_net.ko", "kernel/drivers/pci/controller/pci-hyperv-intf.ko", "kernel/net/core/failover.ko"}, files); d != "" {
		t.Errorf("files (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"nosuch"}, missing); d != "" {
		t.Errorf("missing: %s", d)
	}
	if !strings.Contains(depOut, "kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko\n") || strings.Contains(depOut, "igb") {
		t.Errorf("modules.dep:\n%s", depOut)
	}
}
