package deploy

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/lab/testenv"
)

func TestResolve(t *testing.T) {
	root := "testdata/sysfs"
	cases := map[string]struct {
		ref    DiskRef
		sector int
		need   int64
		want   string // device name
		err    string
	}{
		"by serial":                        {ref: DiskRef{Serial: "QM00001"}, sector: 512, want: "sda"},
		"by WWN, other scheme and case":    {ref: DiskRef{WWN: "0x5000C500A1B2C3D4"}, sector: 512, want: "sda"},
		"nvme by its own wwid":             {ref: DiskRef{WWN: "eui.0025388b91b0ab13"}, sector: 4096, want: "nvme0n1"},
		"serial padded by the firmware":    {ref: DiskRef{Serial: "S6CRNA0T123456"}, sector: 4096, want: "nvme0n1"},
		"a stale name loses to the serial": {ref: DiskRef{Serial: "QM00001", Name: "vda"}, sector: 512, want: "sda"},
		"by name and size without serial":  {ref: DiskRef{Name: "vda", Size: 41943040 * 512}, sector: 512, want: "vda"},
		"name with another size":           {ref: DiskRef{Name: "vda", Size: 1}, err: "no disk matches"},
		"removable":                        {ref: DiskRef{Serial: "USB-DECOY-01"}, err: "removable"},
		"read-only":                        {ref: DiskRef{Serial: "RO-DISK-7"}, err: "read-only"},
		"USB behind a non-removable flag":  {ref: DiskRef{Serial: "USBHDD-9"}, err: "on USB"},
		"4Kn disk, 512-byte image":         {ref: DiskRef{Serial: "S6CRNA0T123456"}, sector: 512, err: "4096-byte logical sectors"},
		"too small":                        {ref: DiskRef{Serial: "QM00001"}, sector: 512, need: 1 << 40, err: "smaller than the image"},
		"two disks with one serial":        {ref: DiskRef{Serial: "twin"}, err: "2 disks match"},
		"nothing matches":                  {ref: DiskRef{Serial: "nope"}, err: "no disk matches"},
		"loop devices are never disks":     {ref: DiskRef{Name: "loop0"}, err: "no disk matches"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := Resolve(root, tc.ref, tc.sector, tc.need)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Name != tc.want || d.Path != filepath.Join(root, "dev", tc.want) {
				t.Errorf("got %+v, want %s", d, tc.want)
			}
		})
	}
}

func TestJobValidate(t *testing.T) {
	good := Job{ID: "j-1", Kind: KindDeploy, Disk: DiskRef{Serial: "s"},
		Image: Image{URL: "/os/blobs/x", SHA256: strings.Repeat("a", 64), RawSHA256: strings.Repeat("b", 64), Size: 10, RawSize: 1024, SectorSize: 512},
		Seed:  Seed{MetaData: "m", UserData: "u"}}
	if err := good.Validate(); err != nil {
		t.Fatalf("good job: %v", err)
	}
	cases := map[string]struct {
		mod  func(*Job)
		want string
	}{
		"no id":             {func(j *Job) { j.ID = "" }, "no id"},
		"no disk":           {func(j *Job) { j.Disk = DiskRef{} }, "names no disk"},
		"short hash":        {func(j *Job) { j.Image.SHA256 = "abc" }, "not 64 hex"},
		"odd sector":        {func(j *Job) { j.Image.SectorSize = 520 }, "sector_size 520"},
		"partial sector":    {func(j *Job) { j.Image.RawSize = 1000 }, "whole number"},
		"no user-data":      {func(j *Job) { j.Seed.UserData = "" }, "user-data"},
		"huge seed":         {func(j *Job) { j.Seed.UserData = strings.Repeat("x", maxSeedPart+1) }, "at most"},
		"unknown kind":      {func(j *Job) { j.Kind = "reimage" }, `kind "reimage"`},
		"unknown wipe":      {func(j *Job) { j.Kind, j.Wipe = KindRelease, "shred" }, `wipe "shred"`},
		"a label too long":  {func(j *Job) { j.EFILabel = strings.Repeat("é", 200) }, "efi_label"},
		"negative raw size": {func(j *Job) { j.Image.RawSize = -512 }, "positive"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := good
			tc.mod(&j)
			if err := j.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestDetectFormat(t *testing.T) {
	for head, want := range map[string]string{
		"\x28\xb5\x2f\xfd\x00": FormatZstd, "\x1f\x8b\x08": FormatGzip, "QFI\xfb\x00\x00\x00\x03": FormatQcow2,
		"\xfd7zXZ\x00": FormatXZ, "\xeb\x63\x90": FormatRaw, "\x00\x00\x00\x00": FormatRaw,
	} {
		if got := DetectFormat([]byte(head)); got != want {
			t.Errorf("DetectFormat(% x) = %s, want %s", head, got, want)
		}
	}
}

// TestMoveBackupGPT checks the move against sgdisk's own verifier: on a
// disk bigger than the image sgdisk -v reports the misplaced backup before
// and no problem after.
func TestMoveBackupGPT(t *testing.T) {
	sg := testenv.NeedTool(t, "sgdisk")[0]
	for _, grow := range []int64{0, 1, 10 << 20, 1 << 30} {
		p := filepath.Join(t.TempDir(), "disk")
		mkSparse(t, p, 32<<20)
		run(t, sg, "-o", "-n", "1:2048:+8M", "-t", "1:ef00", "-n", "2:0:0", "-t", "2:8304", "-c", "2:root", p)
		size := int64(32<<20) + grow*512/512
		if grow%512 != 0 {
			size = 32<<20 + 512 // one sector more
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		before, _ := exec.Command(sg, "-v", p).CombinedOutput()
		tab, err := ReadTable(f, size, 512)
		if err != nil {
			t.Fatal(err)
		}
		if len(tab.Partitions) != 2 || tab.Partitions[1].Type != TypeLinuxRootX64 || tab.Partitions[1].Name != "root" || tab.Partitions[0].Type != TypeESP {
			t.Errorf("partitions %+v", tab.Partitions)
		}
		moved, err := MoveBackupGPT(f, tab, size)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if moved != (size != 32<<20) {
			t.Errorf("grow %d: moved = %v", grow, moved)
		}
		after, _ := exec.Command(sg, "-v", p).CombinedOutput()
		if !strings.Contains(string(after), "No problems found") {
			t.Errorf("grow %d: sgdisk -v after the move:\n%s", grow, after)
		}
		if moved && strings.Contains(string(before), "No problems found") {
			t.Errorf("grow %d: sgdisk found nothing wrong before the move: the test proves nothing", grow)
		}
		if f, _ := os.Open(p); f != nil {
			if _, err := ReadTable(f, size, 512); err != nil {
				t.Errorf("grow %d: our reader rejects the moved table: %v", grow, err)
			}
			f.Close()
		}
	}
}

func TestReadTableRejects(t *testing.T) {
	sg := testenv.NeedTool(t, "sgdisk")[0]
	p := filepath.Join(t.TempDir(), "disk")
	mkSparse(t, p, 8<<20)
	run(t, sg, "-o", "-n", "1:2048:0", p)
	good, _ := os.ReadFile(p)
	cases := map[string]func([]byte){
		"header CRC":  func(b []byte) { b[512+24] ^= 1 },
		"entries CRC": func(b []byte) { b[1024+40] ^= 1 },
		"no GPT and no MBR": func(b []byte) {
			copy(b[512:520], "NOT PART")
			b[510] = 0
		},
		"protective MBR without a GPT": func(b []byte) { copy(b[512:520], "NOT PART") },
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			b := append([]byte(nil), good...)
			mod(b)
			if _, err := ReadTable(bytes.NewReader(b), int64(len(b)), 512); !errors.Is(err, ErrNoTable) {
				t.Errorf("err = %v, want ErrNoTable", err)
			}
		})
	}
}

// TestEncodeLoadOption compares with bytes laid out by hand from UEFI 2.10
// §3.1.3 and §10.3.5.1/§10.3.5.4, not produced by the encoder.
func TestEncodeLoadOption(t *testing.T) {
	p := Partition{Number: 1, FirstLBA: 2048, Sectors: 1024, GUID: "01234567-89ab-cdef-0011-223344556677"}
	got, err := EncodeLoadOption("ab", p, `\EFI\x.efi`)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"01000000",     // Attributes: LOAD_OPTION_ACTIVE
		"4800",         // FilePathListLength: 42 + 26 + 4 = 72
		"610062000000", // "ab\0" in UCS-2
		// Hard Drive node: type 4, subtype 1, length 42
		"0401", "2a00",
		"01000000",                         // partition number 1
		"0008000000000000",                 // start LBA 2048
		"0004000000000000",                 // size 1024 LBAs
		"67452301ab89efcd0011223344556677", // GUID, first three fields little-endian
		"02", "02",                         // GPT, GUID signature
		// File Path node: type 4, subtype 4, length 4 + 22 (10 characters and a NUL)
		"0404", "1a00",
		"5c00450046004900" + "5c0078002e00650066006900" + "0000", // \EFI \x.efi NUL
		"7fff0400", // End of hardware device path
	}, "")
	if hex.EncodeToString(got) != want {
		t.Errorf("load option\n got %x\nwant %s", got, want)
	}
	o, err := DecodeLoadOption(got)
	if err != nil || o.Description != "ab" || len(o.Path) != 72 {
		t.Errorf("decode: %+v %v", o, err)
	}
}

func TestParseBootCSV(t *testing.T) {
	cases := map[string]struct {
		in     []byte
		loader string
		err    string
	}{
		"Debian's":            {in: utf16le("shimx64.efi,debian,,This is the boot entry for debian\n"), loader: "shimx64.efi"},
		"without a BOM, CRLF": {in: utf16le("shimx64.efi,rocky,,\r\n")[2:], loader: "shimx64.efi"},
		"blank lines first":   {in: utf16le("\n\nshim.efi,x\n"), loader: "shim.efi"},
		"a path is refused":   {in: utf16le(`..\..\evil.efi,x`), err: "not a file name"},
		"empty":               {in: utf16le(""), err: "empty"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l, _, err := ParseBootCSV(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || l != tc.loader {
				t.Errorf("= %q, %v; want %q", l, err, tc.loader)
			}
		})
	}
}

// TestFindLoader reads ESPs made by mkfs.fat and mtools (FAT12 and FAT32).
func TestFindLoader(t *testing.T) {
	testenv.NeedTool(t, "mkfs.fat", "mmd", "mcopy")
	cases := map[string]struct {
		fat   string
		files map[string][]byte
		want  string
	}{
		"shim from BOOTX64.CSV (FAT12)": {fat: "12", files: map[string][]byte{
			"EFI/rocky/BOOTX64.CSV": utf16le("shimx64.efi,Rocky Linux,,\n"), "EFI/rocky/shimx64.efi": []byte("MZ"),
			"EFI/BOOT/BOOTX64.EFI": []byte("MZ")}, want: `\EFI\rocky\shimx64.efi`},
		"the fallback path (FAT32)": {fat: "32", files: map[string][]byte{"EFI/BOOT/BOOTX64.EFI": []byte("MZ")}, want: `\EFI\BOOT\BOOTX64.EFI`},
		"grub of a distribution (FAT16)": {fat: "16", files: map[string][]byte{"EFI/ubuntu/grubx64.efi": []byte("MZ")},
			want: `\EFI\ubuntu\grubx64.efi`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "esp")
			size := map[string]int64{"12": 8 << 20, "16": 24 << 20, "32": 40 << 20}[tc.fat]
			mkSparse(t, p, size)
			run(t, "mkfs.fat", "-F", tc.fat, p)
			for name, data := range tc.files {
				d := filepath.Dir(name)
				exec.Command("mmd", "-i", p, "::/EFI").Run()
				exec.Command("mmd", "-i", p, "::/"+d).Run()
				local := filepath.Join(dir, filepath.Base(name))
				os.WriteFile(local, data, 0o644)
				run(t, "mcopy", "-o", "-i", p, local, "::/"+name)
			}
			f := mustOpen(t, p)
			got, err := FindLoader(f, size)
			if err != nil || got != tc.want {
				t.Errorf("= %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestLVMText(t *testing.T) {
	text := `vg0 {
	id = "x"
	extent_size = 8192 # 4 MiB
	physical_volumes { pv0 { id = "AAAAAA-BBBB-CCCC-DDDD-EEEE-FFFF-GGGGGG" pe_start = 2048 } }
	logical_volumes {
		root { segment_count = 1
			segment1 { start_extent = 0 extent_count = 10 type = "striped" stripe_count = 1 stripes = ["pv0", 3] } }
		mirrored { segment1 { start_extent = 0 extent_count = 1 type = "raid1" stripe_count = 2 } }
		split { segment1 { start_extent = 0 extent_count = 1 type = "striped" stripe_count = 1 stripes = ["pv0", 0] }
			segment2 { start_extent = 1 extent_count = 1 type = "striped" stripe_count = 1 stripes = ["pv0", 5] } }
	}
}
contents = "Text Format Volume Group"
`
	lvs, skipped, err := lvmVolumes([]byte(text), "AAAAAABBBBCCCCDDDDEEEEFFFFGGGGGG")
	if err != nil {
		t.Fatal(err)
	}
	if len(lvs) != 1 || lvs[0] != (LV{VG: "vg0", Name: "root", Offset: (2048 + 3*8192) * 512, Size: 10 * 8192 * 512}) {
		t.Errorf("lvs %+v", lvs)
	}
	if len(skipped) != 2 || !strings.Contains(strings.Join(skipped, " "), "raid1") || !strings.Contains(strings.Join(skipped, " "), "not contiguous") {
		t.Errorf("skipped %q", skipped)
	}
	for _, bad := range []string{`vg0 {`, `vg0 { a = }`, `vg0 { a = "x }`, `= 3`, strings.Repeat("a {", 100)} {
		if _, err := parseLVMText([]byte(bad)); err == nil {
			t.Errorf("parseLVMText(%q) accepted it", bad)
		}
	}
}

// The seed goes where cloud-init reads it, with the layout's udev rules in
// /etc/udev/rules.d; a rules path the server names anywhere else is not
// written.
func TestWriteSeedUdevRules(t *testing.T) {
	dir := t.TempDir()
	s := Seed{MetaData: "instance-id: j-1\n", UserData: "#cloud-config\n", NetworkConfig: "version: 2\n",
		UdevRules: "SUBSYSTEM==\"net\", ATTR{address}==\"52:54:00:00:00:01\", NAME=\"eno1\"\n", UdevRulesPath: "/etc/udev/rules.d/70-rollcall-net.rules"}
	wrote, err := writeSeed(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "etc/udev/rules.d/70-rollcall-net.rules"))
	if err != nil || string(got) != s.UdevRules {
		t.Fatalf("udev rules = %q, %v (wrote %v)", got, err, wrote)
	}
	for _, p := range []string{"/etc/passwd", "/etc/udev/rules.d/../../shadow.rules", "/etc/udev/rules.d/.rules", "/etc/udev/rules.d/x.conf", "etc/udev/rules.d/x.rules"} {
		if validUdevPath(p) {
			t.Errorf("validUdevPath(%q) = true", p)
		}
	}
}
