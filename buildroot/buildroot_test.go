package buildroot

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/rollcall/rollcall/lab/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata goldens")

func TestGrubConfig(t *testing.T) {
	got, err := GrubConfig("v0.5.0", 3, "rollcall.setup=name=rc1,addr=10.0.2.15/24,gw=10.0.2.2")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "grub.cfg")
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(golden, []byte(got), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("grub.cfg differs from %s (go test -update rewrites it):\n%s", golden, got)
	}
	for _, bad := range []string{"a\nmenuentry x {", "x=$(reboot)", "a;b", `x="y"`, "}"} {
		if _, err := GrubConfig("v", 3, bad); err == nil {
			t.Errorf("append %q: no error", bad)
		}
	}
}

func TestClassify(t *testing.T) {
	for rel, want := range map[string]Class{
		"kernel/drivers/net/ethernet/broadcom/bnx2x/bnx2x.ko": ClassNIC,
		"kernel/drivers/net/ethernet/qlogic/qede/qede.ko":     ClassNIC,
		"kernel/drivers/net/virtio_net.ko":                    ClassNIC,
		"kernel/drivers/scsi/smartpqi/smartpqi.ko":            ClassStorage,
		"kernel/drivers/scsi/hpsa.ko":                         ClassStorage,
		"kernel/drivers/nvme/host/nvme.ko":                    ClassStorage,
		"kernel/drivers/block/virtio_blk.ko":                  ClassStorage,
		"kernel/drivers/scsi/virtio_scsi.ko":                  ClassStorage,
		"kernel/fs/ext4/ext4.ko":                              ClassStorage,
		"kernel/drivers/char/ipmi/ipmi_si.ko":                 ClassOther,
		"kernel/drivers/virtio/virtio_pci.ko":                 ClassOther,
		"kernel/lib/crc16.ko":                                 ClassOther,
	} {
		if got := Classify(rel); got != want {
			t.Errorf("Classify(%s) = %s, want %s", rel, got, want)
		}
	}
}

// moduleRoot is the module's directory (go test runs in the package's).
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// needBuildTools skips (or fails under CI) without what Build runs.
func needBuildTools(t *testing.T) {
	t.Helper()
	testenv.NeedTool(t, "xorriso", "grub-mkimage", "mkfs.vfat", "mmd", "mcopy", "apt-get", "dpkg-deb", "go")
	for _, f := range []string{ShimEFI, MokEFI, GrubCDEFI, filepath.Join(GrubPCDir, "boot_hybrid.img")} {
		testenv.NeedFile(t, "Debian's signed shim and GRUB and grub-pc-bin", f)
	}
	testenv.NeedFile(t, "Debian's ipxe", "/usr/lib/ipxe/undionly.kpxe")
}

// The smoke test of make iso (in make test): the ISO is built twice from
// the same inputs into different places and comes out the same bytes; it
// has both El Torito entries and the EFI partition, and its initramfs
// holds the init, rollcall, the drivers the ISO exists to carry with
// their aliases, and the iPXE binaries.
func TestBuildReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the ISO twice (about a minute)")
	}
	needBuildTools(t)
	root := moduleRoot(t)
	var sums []string
	var iso string
	for i := range 2 {
		dir := t.TempDir()
		r, err := Build(Config{Out: filepath.Join(dir, "rollcall.iso"), Source: root, Cache: filepath.Join(root, "bin", "iso", "debs"),
			Epoch: 1700000000, Version: "test", Timeout: 1})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		r.Print(&b)
		t.Logf("build %d:\n%s", i+1, b.String())
		sums = append(sums, r.SHA256)
		iso = r.ISO
		if r.Size > 100e6 {
			t.Errorf("ISO is %d bytes, over the 100 MB target", r.Size)
		}
		for _, cl := range []Class{ClassNIC, ClassStorage, ClassOther} {
			if r.Classes[cl].Modules == 0 {
				t.Errorf("no %s modules", cl)
			}
		}
	}
	if sums[0] != sums[1] {
		t.Fatalf("two builds differ: %s and %s", sums[0], sums[1])
	}

	out, err := exec.Command("xorriso", "-indev", iso, "-report_el_torito", "plain").CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso -report_el_torito: %v\n%s", err, out)
	}
	if s := string(out); !strings.Contains(s, "BIOS") || !strings.Contains(s, "UEFI") {
		t.Errorf("El Torito entries:\n%s", s)
	}
	if out, err := exec.Command("sgdisk", "-p", iso).CombinedOutput(); err == nil && !strings.Contains(string(out), "EF00") {
		t.Errorf("no EFI system partition for USB sticks:\n%s", out)
	}
	ext := t.TempDir()
	if out, err := exec.Command("xorriso", "-osirrox", "on", "-indev", iso, "-extract", "/live/initrd.img", filepath.Join(ext, "initrd.img"),
		"-extract", "/boot/grub/grub.cfg", filepath.Join(ext, "grub.cfg")).CombinedOutput(); err != nil {
		t.Fatalf("extract: %v\n%s", err, out)
	}
	files := readInitrd(t, filepath.Join(ext, "initrd.img"))
	for _, want := range []string{"init", "usr/bin/rollcall", "usr/lib/ipxe/undionly.kpxe", "usr/lib/ipxe/ipxe.efi", "etc/rollcall/version"} {
		if _, ok := files[want]; !ok {
			t.Errorf("initramfs lacks %s", want)
		}
	}
	var alias string
	for name, data := range files {
		if strings.HasSuffix(name, "/modules.alias") {
			alias = string(data)
		}
	}
	for _, m := range []string{"smartpqi", "hpsa", "bnx2x", "qede", "cxgb4", "mlx4_core", "virtio_net"} {
		if !strings.Contains(alias, " "+m+"\n") {
			t.Errorf("modules.alias names no device for %s", m)
		}
	}
	cfg, _ := os.ReadFile(filepath.Join(ext, "grub.cfg"))
	if !strings.Contains(string(cfg), "linux /live/vmlinuz "+BaseCmdline) {
		t.Errorf("grub.cfg:\n%s", cfg)
	}
}

// readInitrd decodes a zstd newc archive into name → data.
func readInitrd(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	buf := b.Bytes()
	out := map[string][]byte{}
	align := func(n int) int { return (n + 3) &^ 3 }
	for off := 0; off+110 <= len(buf); {
		if string(buf[off:off+6]) != "070701" {
			t.Fatalf("bad newc magic at %d", off)
		}
		field := func(i int) int {
			v, err := strconv.ParseUint(string(buf[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return int(v)
		}
		size, namesize := field(6), field(11)
		name := string(buf[off+110 : off+110+namesize-1])
		data := align(off + 110 + namesize)
		if name == "TRAILER!!!" {
			break
		}
		out[name] = buf[data : data+size]
		off = align(data + size)
	}
	return out
}
