package agentinitrd

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/images/debkernel"
	"github.com/rollcall/rollcall/lab/testenv"
)

// fakeRoot is an installed kernel as debkernel.Installed finds it: depmod's
// modules.dep over compressed modules.
func fakeRoot(t *testing.T, version string) *debkernel.Kernel {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"boot/vmlinuz-" + version: "kernel",
		"lib/modules/" + version + "/modules.dep": "kernel/fs/squashfs/squashfs.ko.xz:\n" +
			"kernel/fs/overlayfs/overlay.ko.xz:\n" +
			"kernel/drivers/block/loop.ko.xz:\n" +
			"kernel/drivers/net/virtio_net.ko.xz: kernel/drivers/net/net_failover.ko.xz kernel/net/core/failover.ko.xz\n" +
			"kernel/drivers/net/net_failover.ko.xz: kernel/net/core/failover.ko.xz\n" +
			"kernel/net/core/failover.ko.xz:\n" +
			"kernel/sound/snd.ko.xz:\n",
		"lib/modules/" + version + "/modules.builtin": "kernel/drivers/virtio/virtio_pci.ko\n",
	}
	for _, m := range []string{"fs/squashfs/squashfs", "fs/overlayfs/overlay", "drivers/block/loop", "drivers/net/virtio_net",
		"drivers/net/net_failover", "net/core/failover", "sound/snd"} {
		files["lib/modules/"+version+"/kernel/"+m+".ko.xz"] = "module " + m
	}
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k, err := debkernel.Installed(root)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestBuild(t *testing.T) {
	cpio := testenv.NeedTool(t, "cpio")[0]
	version := "6.12.118+deb13-amd64"
	k := fakeRoot(t, version)
	opts := Options{Kernel: k, Modules: []string{"virtio_net", "virtio_pci", "loop", "squashfs", "overlay"},
		Agent: []byte("the agent"), Name: "Rollcall compute-debian13", Release: "v1", MTime: 1700000000}
	a, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Data, b.Data) {
		t.Error("the same inputs gave two initrds")
	}
	wantFiles := []string{"kernel/drivers/block/loop.ko.xz", "kernel/drivers/net/net_failover.ko.xz", "kernel/drivers/net/virtio_net.ko.xz",
		"kernel/fs/overlayfs/overlay.ko.xz", "kernel/fs/squashfs/squashfs.ko.xz", "kernel/net/core/failover.ko.xz"}
	if d := cmp.Diff(wantFiles, a.ModuleFiles); d != "" {
		t.Errorf("module files (-want +got):\n%s", d)
	}

	// cpio reads it back as the kernel would unpack it.
	zr, err := gzip.NewReader(bytes.NewReader(a.Data))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(cpio, "-i", "-d", "--quiet")
	cmd.Dir, cmd.Stdin = dir, bytes.NewReader(raw)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio: %v\n%s", err, out)
	}
	mod := "lib/modules/" + version + "/"
	for name, want := range map[string]string{
		"init":           "the agent",
		"etc/os-release": "NAME=\"Rollcall compute-debian13\"\nID=rollcall\nVERSION_ID=v1\n",
		mod + "kernel/fs/squashfs/squashfs.ko.xz": "module fs/squashfs/squashfs",
		mod + "modules.dep": "kernel/drivers/block/loop.ko.xz: \n" +
			"kernel/drivers/net/net_failover.ko.xz: kernel/net/core/failover.ko.xz\n" +
			"kernel/drivers/net/virtio_net.ko.xz: kernel/drivers/net/net_failover.ko.xz kernel/net/core/failover.ko.xz\n" +
			"kernel/fs/overlayfs/overlay.ko.xz: \n" +
			"kernel/fs/squashfs/squashfs.ko.xz: \n" +
			"kernel/net/core/failover.ko.xz: \n",
	} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q %v, want %q", name, got, err, want)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "init")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("init: %v %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(dir, mod, "kernel/sound/snd.ko.xz")); err == nil {
		t.Error("a module nobody asked for is in the initrd")
	}

	opts.Modules = append(opts.Modules, "nosuch")
	if _, err := Build(opts); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("a module the kernel lacks: %v", err)
	}
	if _, err := Build(Options{Kernel: k, Modules: []string{"loop"}}); err == nil {
		t.Error("no agent: no error")
	}
}

// The stateless initrd has what agent/stateless mounts the root with, and
// the NICs the commissioning image has.
func TestModuleLists(t *testing.T) {
	for _, m := range append([]string{"loop", "squashfs", "overlay"}, NICModules...) {
		if !slices.Contains(StatelessModules, m) {
			t.Errorf("StatelessModules lack %s", m)
		}
	}
	for _, m := range NICModules {
		if !slices.Contains(CommissioningModules, m) {
			t.Errorf("CommissioningModules lack %s", m)
		}
	}
	for name, list := range map[string][]string{"commissioning": CommissioningModules, "stateless": StatelessModules} {
		sorted := slices.Sorted(slices.Values(list))
		if len(slices.Compact(sorted)) != len(list) {
			t.Errorf("%s modules name one twice: %v", name, list)
		}
	}
}
