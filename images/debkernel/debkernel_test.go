package debkernel

import (
	"os"
	"path/filepath"
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

// An installed kernel (a root mmdebstrap made) brings depmod's
// modules.dep, with compressed modules: Modules follows it rather than
// reading each module's .modinfo.
func TestInstalled(t *testing.T) {
	root := t.TempDir()
	version := "6.12.118+deb13-amd64"
	modDir := filepath.Join(root, "usr/lib/modules", version)
	for name, data := range map[string]string{
		"boot/vmlinuz-" + version: "kernel",
		"usr/lib/modules/" + version + "/modules.dep": "kernel/fs/squashfs/squashfs.ko.xz:\n" +
			"kernel/drivers/net/virtio_net.ko.xz: kernel/drivers/net/net_failover.ko.xz kernel/net/core/failover.ko.xz\n" +
			"kernel/drivers/net/net_failover.ko.xz: kernel/net/core/failover.ko.xz\n" +
			"kernel/net/core/failover.ko.xz:\n" +
			"kernel/drivers/block/loop.ko.xz:\n",
		"usr/lib/modules/" + version + "/modules.builtin": "kernel/drivers/virtio/virtio_pci.ko\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("usr/lib", filepath.Join(root, "lib")); err != nil { // merged /usr
		t.Fatal(err)
	}
	k, err := Installed(root)
	if err != nil {
		t.Fatal(err)
	}
	if k.Version != version || k.Vmlinuz != filepath.Join(root, "boot", "vmlinuz-"+version) || k.Package != "linux-image-"+version {
		t.Errorf("kernel %+v", k)
	}
	if _, err := os.Stat(filepath.Join(k.ModDir, "modules.dep")); err != nil {
		t.Errorf("ModDir %s: %v (want %s through the lib symlink)", k.ModDir, err, modDir)
	}
	files, dep, err := k.Modules([]string{"virtio_net", "virtio_pci", "squashfs"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kernel/drivers/net/net_failover.ko.xz", "kernel/drivers/net/virtio_net.ko.xz", "kernel/fs/squashfs/squashfs.ko.xz", "kernel/net/core/failover.ko.xz"}
	if d := cmp.Diff(want, files); d != "" {
		t.Errorf("files (-want +got):\n%s", d)
	}
	if strings.Contains(dep, "loop") || !strings.Contains(dep, "kernel/fs/squashfs/squashfs.ko.xz: \n") {
		t.Errorf("modules.dep:\n%s", dep)
	}
	if _, _, err := k.Modules([]string{"nosuch"}); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("a module the kernel lacks: %v", err)
	}

	// Two kernels: which one the image boots is not guessed.
	if err := os.WriteFile(filepath.Join(root, "boot", "vmlinuz-6.12.0-1-amd64"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Installed(root); err == nil || !strings.Contains(err.Error(), "found 2") {
		t.Errorf("two kernels: %v", err)
	}
	if _, err := Installed(t.TempDir()); err == nil {
		t.Error("no kernel: no error")
	}
}
