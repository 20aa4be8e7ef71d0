package deploy

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf16"

	"github.com/rollcall/rollcall/lab/testenv"
)

// Test disk images, built with the real tools (sgdisk, mkfs.ext4 -d,
// mkfs.xfs, mkfs.fat + mtools, pvcreate/vgcreate/vgcfgrestore) and cached
// for the test binary's run.

const imgMiB = 1 << 20

// imgSpec describes a GPT test image: BIOS boot, an ESP, and a root.
type imgSpec struct {
	name      string
	sizeMiB   int64
	rootType  string // sgdisk type code: 8304 Linux root (x86-64), 8300 Linux filesystem, 8e00 LVM
	rootName  string // GPT partition name
	fs        string // ext4, xfs or lvm (an ext4 LV named root next to a swap LV)
	fsLabel   string
	osRelease string
	noESP     bool
}

// builtImage is an image and what the tests check against.
type builtImage struct {
	path      string
	rawSHA    string
	rawSize   int64
	rootStart int64 // bytes: the partition holding the root (or the PV)
	rootSize  int64
	fsStart   int64 // bytes: the root file system itself (the LV for lvm)
	fsSize    int64
	espGUID   string
	espFirst  uint64
	espCount  uint64
}

var (
	imgMu    sync.Mutex
	imgCache = map[string]*builtImage{}
	imgDir   string
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "rollcall-deploy-test-")
	if err != nil {
		panic(err)
	}
	imgDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "LVM_SUPPRESS_FD_WARNINGS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// buildImage makes (once) the image spec describes.
func buildImage(t *testing.T, spec imgSpec) *builtImage {
	t.Helper()
	imgMu.Lock()
	defer imgMu.Unlock()
	if b, ok := imgCache[spec.name]; ok {
		return b
	}
	testenv.NeedTool(t, "sgdisk", "mkfs.ext4", "mkfs.fat", "mmd", "mcopy")
	dir := filepath.Join(imgDir, spec.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "disk.img")
	mkSparse(t, img, spec.sizeMiB*imgMiB)
	args := []string{"-o", "-n", "1:2048:+1M", "-t", "1:ef02", "-c", "1:bios"}
	if !spec.noESP {
		args = append(args, "-n", "2:0:+16M", "-t", "2:ef00", "-c", "2:ESP")
	}
	args = append(args, "-n", "3:0:0", "-t", "3:"+spec.rootType, "-c", "3:"+spec.rootName, img)
	run(t, "sgdisk", args...)
	b := &builtImage{path: img, rawSize: spec.sizeMiB * imgMiB}
	first, last, _ := sgdiskInfo(t, img, 3)
	b.rootStart, b.rootSize = int64(first)*512, int64(last-first+1)*512
	if !spec.noESP {
		f, l, guid := sgdiskInfo(t, img, 2)
		b.espFirst, b.espCount, b.espGUID = f, l-f+1, guid
		copyInto(t, img, int64(f)*512, buildESP(t, dir, int64(l-f+1)*512))
	}
	rootDir := filepath.Join(dir, "rootdir")
	for p, data := range map[string]string{
		"etc/os-release":                            spec.osRelease,
		"etc/hostname":                              "localhost\n",
		"etc/cloud/cloud.cfg.d/00-image.cfg":        "# from the image\n",
		"var/lib/cloud/seed/nocloud/network-config": "version: 2 # the image's own, must go\n",
	} {
		writeFile(t, filepath.Join(rootDir, p), data)
	}
	switch spec.fs {
	case "ext4":
		part := filepath.Join(dir, "root.img")
		mkExt4(t, part, b.rootSize, rootDir, spec.fsLabel)
		copyInto(t, img, b.rootStart, part)
		b.fsStart, b.fsSize = b.rootStart, b.rootSize
	case "xfs":
		part := filepath.Join(dir, "root.img")
		mkXFS(t, part, b.rootSize, rootDir, spec.fsLabel)
		copyInto(t, img, b.rootStart, part)
		b.fsStart, b.fsSize = b.rootStart, b.rootSize
	case "lvm":
		part := filepath.Join(dir, "pv.img")
		off, size := mkLVM(t, part, b.rootSize, rootDir, spec.name)
		copyInto(t, img, b.rootStart, part)
		b.fsStart, b.fsSize = b.rootStart+off, size
	}
	b.rawSHA = sha256File(t, img)
	imgCache[spec.name] = b
	return b
}

func mkSparse(t testing.TB, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

var sgFirst = regexp.MustCompile(`First sector: (\d+)`)
var sgLast = regexp.MustCompile(`Last sector: (\d+)`)
var sgGUID = regexp.MustCompile(`Partition unique GUID: ([0-9A-Fa-f-]+)`)

// sgdiskInfo reads a partition's extent and GUID as sgdisk reports them.
func sgdiskInfo(t testing.TB, img string, n int) (first, last uint64, guid string) {
	t.Helper()
	out := run(t, "sgdisk", "-i", strconv.Itoa(n), img)
	f, l, g := sgFirst.FindStringSubmatch(out), sgLast.FindStringSubmatch(out), sgGUID.FindStringSubmatch(out)
	if f == nil || l == nil || g == nil {
		t.Fatalf("sgdisk -i %d: %s", n, out)
	}
	first, _ = strconv.ParseUint(f[1], 10, 64)
	last, _ = strconv.ParseUint(l[1], 10, 64)
	return first, last, strings.ToLower(g[1])
}

// copyInto writes the file src into dst at off.
func copyInto(t testing.TB, dst string, off int64, src string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(dst, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func mkExt4(t testing.TB, path string, size int64, dir, label string) {
	t.Helper()
	mkSparse(t, path, size)
	args := []string{"-q", "-F", "-d", dir}
	if label != "" {
		args = append(args, "-L", label)
	}
	run(t, "mkfs.ext4", append(args, path)...)
}

// mkXFS makes an XFS file system (populated through a mount: mkfs.xfs has
// no -d DIR here). mkfs.xfs refuses file systems under 300 MB unless run
// the way fstests runs it (TEST_DIR, TEST_DEV, QA_CHECK_FS set).
func mkXFS(t testing.TB, path string, size int64, dir, label string) {
	t.Helper()
	testenv.NeedRoot(t, "mounting an XFS image to fill it")
	testenv.NeedTool(t, "mkfs.xfs", "mount", "umount")
	mkSparse(t, path, size)
	args := []string{"-q", "-f"}
	if label != "" {
		args = append(args, "-L", label)
	}
	cmd := exec.Command("mkfs.xfs", append(args, path)...)
	cmd.Env = append(os.Environ(), "TEST_DIR=/tmp", "TEST_DEV="+path, "QA_CHECK_FS=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mkfs.xfs: %v\n%s", err, out)
	}
	mnt := t.TempDir()
	run(t, "mount", "-o", "loop,nouuid", path, mnt)
	run(t, "cp", "-a", dir+"/.", mnt)
	run(t, "umount", mnt)
}

// mkLVM makes a PV in path with VG name vg and two linear LVs, "swap" (two
// extents) then "root" (the rest, an ext4 holding dir). lvcreate needs
// device-mapper to activate what it creates, which this kernel lacks, so
// the LVs are written into the VG's metadata with vgcfgrestore, LVM's own
// tool for it. It returns where the root LV's bytes are in the PV, from
// LVM's reports (pvs, vgs), not from our parser.
func mkLVM(t testing.TB, path string, size int64, dir, vg string) (int64, int64) {
	t.Helper()
	testenv.NeedRoot(t, "a loop device for pvcreate")
	testenv.NeedTool(t, "losetup", "pvcreate", "vgcreate", "vgcfgbackup", "vgcfgrestore", "vgremove", "pvs", "vgs")
	vg = strings.NewReplacer("-", "", "_", "").Replace("rc" + vg)
	mkSparse(t, path, size)
	loop := strings.TrimSpace(run(t, "losetup", "-f", "--show", path))
	cfg := "--config=backup{backup=0 archive=0} devices{filter=[\"a|" + loop + "|\",\"r|.*|\"]}"
	defer func() {
		exec.Command("vgremove", cfg, "-ff", "-y", vg).Run()
		exec.Command("losetup", "-d", loop).Run()
	}()
	run(t, "pvcreate", cfg, "-ff", "-y", loop)
	run(t, "vgcreate", cfg, vg, loop)
	peStart := atoi(t, run(t, "pvs", cfg, "--noheadings", "--nosuffix", "--units", "b", "-o", "pe_start", loop))
	extent := atoi(t, run(t, "vgs", cfg, "--noheadings", "--nosuffix", "--units", "b", "-o", "vg_extent_size", vg))
	count := atoi(t, run(t, "vgs", cfg, "--noheadings", "-o", "vg_extent_count", vg))
	backup := filepath.Join(t.TempDir(), "vg.cfg")
	run(t, "vgcfgbackup", cfg, "-f", backup, vg)
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	lv := func(name string, start, n int64) string {
		return fmt.Sprintf(`
		%s {
			id = "%s"
			status = ["READ", "WRITE", "VISIBLE"]
			flags = []
			segment_count = 1
			segment1 {
				start_extent = 0
				extent_count = %d
				type = "striped"
				stripe_count = 1
				stripes = [
					"pv0", %d
				]
			}
		}`, name, lvmID(t), n, start)
	}
	lvs := "\n\tlogical_volumes {\n" + lv("swap", 0, 2) + lv("root", 2, count-2) + "\n\t}\n"
	end := strings.LastIndex(s, "}")
	s = s[:end] + lvs + "}\n"
	s = regexp.MustCompile(`seqno = (\d+)`).ReplaceAllString(s, "seqno = 99")
	if err := os.WriteFile(backup, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "vgcfgrestore", cfg, "-f", backup, vg)
	lvs2 := run(t, "lvs", cfg, "--noheadings", "-o", "lv_name", vg)
	if !strings.Contains(lvs2, "root") || !strings.Contains(lvs2, "swap") {
		t.Fatalf("vgcfgrestore did not create the LVs: %s", lvs2)
	}
	off, lvSize := peStart+2*extent, (count-2)*extent
	part := filepath.Join(t.TempDir(), "root.img")
	mkExt4(t, part, lvSize, dir, "")
	run(t, "losetup", "-d", loop)
	copyInto(t, path, off, part)
	return off, lvSize
}

func lvmID(t testing.TB) string {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 32)
	rand.Read(b)
	var s strings.Builder
	for i, c := range b {
		if i == 6 || i == 10 || i == 14 || i == 18 || i == 22 || i == 26 {
			s.WriteByte('-')
		}
		s.WriteByte(chars[int(c)%len(chars)])
	}
	return s.String()
}

func atoi(t testing.TB, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

// buildESP makes a FAT ESP the way Debian's looks: shim, its BOOTX64.CSV
// (UTF-16LE with a BOM), GRUB, and the removable-media fallback.
func buildESP(t testing.TB, dir string, size int64) string {
	t.Helper()
	p := filepath.Join(dir, "esp.img")
	mkSparse(t, p, size)
	run(t, "mkfs.fat", "-n", "ESP", p)
	run(t, "mmd", "-i", p, "::/EFI", "::/EFI/debian", "::/EFI/BOOT")
	for name, data := range map[string][]byte{
		"EFI/debian/shimx64.efi": []byte("MZ shim"),
		"EFI/debian/grubx64.efi": []byte("MZ grub"),
		"EFI/debian/BOOTX64.CSV": utf16le("shimx64.efi,debian,,This is the boot entry for debian\n"),
		"EFI/BOOT/BOOTX64.EFI":   []byte("MZ fallback"),
	} {
		local := filepath.Join(dir, strings.ReplaceAll(name, "/", "_"))
		if err := os.WriteFile(local, data, 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, "mcopy", "-i", p, local, "::/"+name)
	}
	return p
}

func utf16le(s string) []byte {
	b := []byte{0xFF, 0xFE}
	for _, c := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, c)
	}
	return b
}

func sha256File(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// compressed returns the image compressed with the zstd CLI (-3, as the
// appliance does), gzip, or converted to qcow2.
func compressed(t *testing.T, b *builtImage, format string) string {
	t.Helper()
	imgMu.Lock()
	defer imgMu.Unlock()
	out := b.path + "." + format
	if _, err := os.Stat(out); err == nil {
		return out
	}
	switch format {
	case "zst":
		testenv.NeedTool(t, "zstd")
		run(t, "zstd", "-q", "-3", "-T0", "-f", b.path, "-o", out)
	case "gz":
		testenv.NeedTool(t, "gzip")
		gz := run(t, "sh", "-c", "gzip -1 -c "+b.path+" > "+out+" && echo ok")
		if !strings.Contains(gz, "ok") {
			t.Fatal(gz)
		}
	case "qcow2":
		testenv.NeedTool(t, "qemu-img")
		run(t, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", b.path, out)
	default:
		return b.path
	}
	return out
}

// randomImage is n bytes of random data: no table, no file system, and
// incompressible, so a stream of it takes a while.
func randomImage(t *testing.T, n int64) *builtImage {
	t.Helper()
	imgMu.Lock()
	defer imgMu.Unlock()
	name := fmt.Sprintf("random-%d", n)
	if b, ok := imgCache[name]; ok {
		return b
	}
	p := filepath.Join(imgDir, name+".img")
	buf := make([]byte, n)
	rand.Read(buf)
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	b := &builtImage{path: p, rawSize: n, rawSHA: sha256File(t, p)}
	imgCache[name] = b
	return b
}

// mountRO mounts [off, off+size) of the disk read-only with mount(8), to
// check what the agent wrote by a tool that is not the agent.
func mountRO(t *testing.T, disk string, off, size int64) string {
	t.Helper()
	dir := t.TempDir()
	run(t, "mount", "-o", fmt.Sprintf("ro,loop,offset=%d,sizelimit=%d", off, size), disk, dir)
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

// fillPattern writes a recognisable pattern over a file, to see later
// what was (not) touched.
func fillPattern(t testing.TB, p string, size int64) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte{0xA5}, imgMiB)
	for off := int64(0); off < size; off += imgMiB {
		if _, err := f.WriteAt(chunk[:min(imgMiB, size-off)], off); err != nil {
			t.Fatal(err)
		}
	}
}
