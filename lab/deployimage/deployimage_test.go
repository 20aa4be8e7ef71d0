package deployimage

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/lab/deployimage/gpt"
	"github.com/rollcall/rollcall/lab/testenv"
)

// The disk is laid out with the real tools (sgdisk, mkfs.ext4 -d,
// mkfs.vfat and mtools, grub-mkimage and grub-mkstandalone) and read back
// with others: the GPT by this module's reader, the ESP by mdir, the root
// by debugfs, the boot sectors byte by byte against what grub-bios-setup
// writes. Booting it is lab/e2e's TestDeployImageBoots.
func TestAssemble(t *testing.T) {
	testenv.NeedTool(t, "sgdisk", "mkfs.ext4", "debugfs", "mkfs.vfat", "mmd", "mcopy", "mdir", "grub-mkimage", "grub-mkstandalone")
	testenv.NeedFile(t, "GRUB for BIOS (Debian package grub-pc-bin)", "/usr/lib/grub/i386-pc/boot.img")
	testenv.NeedFile(t, "GRUB for UEFI (Debian package grub-efi-amd64-bin)", "/usr/lib/grub/x86_64-efi/linux.mod")
	b, err := newBuilder(context.Background(), Options{Size: 96 << 20, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(b.work)
	key := "test"
	rootUUID := uuid(key, "rootfs")
	tree := filepath.Join(b.work, "tree")
	os.MkdirAll(filepath.Join(tree, "boot/grub"), 0o755)
	os.WriteFile(filepath.Join(tree, "boot/grub/grub.cfg"), []byte(grubConfig(rootUUID, "t", "/boot/vmlinuz", "/boot/initrd.img", "")), 0o644)
	core, efi, err := b.grubImages(rootUUID)
	if err != nil {
		t.Fatal(err)
	}
	esp, root, disk := filepath.Join(b.work, "esp.img"), filepath.Join(b.work, "root.img"), filepath.Join(b.work, "disk.raw")
	if err := b.makeESP(esp, efi, key); err != nil {
		t.Fatal(err)
	}
	if err := b.makeExt4(root, tree, (96<<11-gptTailRoom-rootStart+1)*Sector, rootUUID); err != nil {
		t.Fatal(err)
	}
	if err := b.assemble(disk, key, gpt.TypeRootAMD64, core, esp, root); err != nil {
		t.Fatal(err)
	}

	f, err := os.Open(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := gpt.Read(f, Sector)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, p := range tab.Partitions {
		types = append(types, p.Type)
	}
	if want := []string{gpt.TypeBIOSBoot, gpt.TypeESP, gpt.TypeRootAMD64}; strings.Join(types, " ") != strings.Join(want, " ") {
		t.Errorf("partition types %v, want %v", types, want)
	}
	if tab.DiskGUID != uuid(key, "disk") {
		t.Errorf("disk GUID %s", tab.DiskGUID)
	}

	// Sector 0: boot.img's code, the protective MBR's table, the pointer to
	// core.img, the drive check nop'ed.
	mbr := make([]byte, Sector)
	f.ReadAt(mbr, 0)
	bootImg, _ := os.ReadFile("/usr/lib/grub/i386-pc/boot.img")
	if !bytes.Equal(mbr[0x66+2:0x1b8], bootImg[0x66+2:0x1b8]) || !bytes.Equal(mbr[:3], bootImg[:3]) {
		t.Error("sector 0 does not hold boot.img's code")
	}
	if mbr[0x1be+4] != 0xee || mbr[510] != 0x55 || mbr[511] != 0xaa {
		t.Errorf("protective MBR lost: type %#x, signature %x", mbr[0x1be+4], mbr[510:])
	}
	if lba := binary.LittleEndian.Uint64(mbr[0x5c:]); lba != biosStart || mbr[0x64] != 0xff || mbr[0x66] != 0x90 || mbr[0x67] != 0x90 {
		t.Errorf("boot.img fields: core at %d, drive %#x, check %x", lba, mbr[0x64], mbr[0x66:0x68])
	}
	// The BIOS boot partition: core.img whose first blocklist names the rest.
	coreImg, _ := os.ReadFile(core)
	got := make([]byte, len(coreImg))
	f.ReadAt(got, biosStart*Sector)
	if !bytes.Equal(got[Sector:], coreImg[Sector:]) {
		t.Error("core.img is not in the BIOS boot partition")
	}
	bl := got[Sector-12 : Sector]
	if start, n, seg := binary.LittleEndian.Uint64(bl), binary.LittleEndian.Uint16(bl[8:]), binary.LittleEndian.Uint16(bl[10:]); start != biosStart+1 ||
		int(n) != (len(coreImg)+Sector-1)/Sector-1 || seg != 0x820 {
		t.Errorf("blocklist start %d len %d segment %#x (core.img %d bytes)", start, n, seg, len(coreImg))
	}

	// The ESP, through mtools at its offset.
	out, err := exec.Command("mdir", "-b", "-i", disk+"@@"+itoa(espStart*Sector), "::/EFI/BOOT", "::/EFI/debian").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "BOOTX64.EFI") || !strings.Contains(string(out), "grubx64.efi") {
		t.Errorf("mdir ESP: %v\n%s", err, out)
	}

	// The root, through debugfs; a seed written mount-free reads back.
	ctx := context.Background()
	if cfg, err := ReadFile(ctx, disk, "/boot/grub/grub.cfg"); err != nil || !strings.Contains(string(cfg), "search --no-floppy --fs-uuid --set=root "+rootUUID) {
		t.Errorf("grub.cfg: %v\n%s", err, cfg)
	}
	seed := map[string][]byte{SeedDir + "/meta-data": []byte("instance-id: i-1\n"), SeedDir + "/user-data": []byte("#cloud-config\n")}
	for range 2 { // the second time replaces
		if err := WriteFiles(ctx, disk, seed); err != nil {
			t.Fatal(err)
		}
	}
	if md, err := ReadFile(ctx, disk, SeedDir+"/meta-data"); err != nil || string(md) != "instance-id: i-1\n" {
		t.Errorf("meta-data read back %q, %v", md, err)
	}
	if _, err := ReadFile(ctx, disk, "/no/such/file"); err == nil {
		t.Error("reading a missing file succeeded")
	}
	if err := WriteFiles(ctx, disk, map[string][]byte{"/a b": nil}); err == nil {
		t.Error("a name with a blank was accepted")
	}
}

func TestOptions(t *testing.T) {
	for name, o := range map[string]Options{
		"rootfs":     {RootFS: "btrfs"},
		"debian xfs": {Debian: true, RootFS: "xfs"},
		"too small":  {Size: 16 << 20},
		"too big":    {Size: 512 << 20},
		"not in MiB": {Size: 100<<20 + 1},
	} {
		if _, err := newBuilder(context.Background(), o); err == nil {
			t.Errorf("%s: %+v accepted", name, o)
		}
	}
}

// The prototype mkfs.xfs reads recreates the tree; a name it cannot carry
// is refused.
func TestXFSProto(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "boot/grub"), 0o755)
	os.WriteFile(filepath.Join(dir, "boot/grub/grub.cfg"), []byte("x"), 0o600)
	os.Symlink("boot/grub/grub.cfg", filepath.Join(dir, "link"))
	p, err := xfsProto(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "/dev/null\n0 0\nd--755 0 0\n boot d--755 0 0\n  grub d--755 0 0\n   grub.cfg ---600 0 0 " + filepath.Join(dir, "boot/grub/grub.cfg") +
		"\n  $\n $\n link l--777 0 0 boot/grub/grub.cfg\n$\n"
	if p != want {
		t.Errorf("proto:\n%s\nwant:\n%s", p, want)
	}
	os.WriteFile(filepath.Join(dir, "a b"), nil, 0o644)
	if _, err := xfsProto(dir); err == nil {
		t.Error("a name with a blank was accepted")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A cache directory copied from elsewhere (another worktree) is found with
// its own files, not the ones its image.json names; one missing a file is
// not a cache.
func TestCachedRelocated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "debian-x-0123")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	j := `{"Path": "/elsewhere/bin/deploy-image/debian-x-0123/disk.raw", "QCOW2": "/elsewhere/bin/deploy-image/debian-x-0123/disk.qcow2", "Key": "0123"}`
	if err := os.WriteFile(filepath.Join(dir, "image.json"), []byte(j), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "disk.raw"), []byte("raw"), 0o644); err != nil {
		t.Fatal(err)
	}
	if img, ok := cached(dir); ok {
		t.Fatalf("a cache without its qcow2 was taken: %+v", img)
	}
	if err := os.WriteFile(filepath.Join(dir, "disk.qcow2"), []byte("qcow2"), 0o644); err != nil {
		t.Fatal(err)
	}
	img, ok := cached(dir)
	if !ok {
		t.Fatal("the copied cache was not found")
	}
	if img.Path != filepath.Join(dir, "disk.raw") || img.QCOW2 != filepath.Join(dir, "disk.qcow2") || !img.Cached || img.Key != "0123" {
		t.Errorf("cached = %+v, want the files in %s", img, dir)
	}
}
