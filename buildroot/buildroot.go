// Package buildroot builds the appliance ISO: one hybrid image that boots
// on BIOS (GRUB's El Torito image, and its MBR for a USB stick) and UEFI
// (Debian's signed shim and GRUB on an EFI system partition image, so
// Secure Boot works), from a CD, a BMC's virtual media or a USB stick.
// It holds Debian's kernel and an initramfs whose /init is our own Go
// program (buildroot/initsys) with `rollcall` as the service, the full
// server NIC and storage driver set loaded by modalias, the firmware those
// drivers name when the build is given it, the commissioning image and the
// iPXE binaries.
//
// The build is offline apart from Debian's kernel package (apt-get
// download, cached) and reproducible: sorted entries, times from
// SOURCE_DATE_EPOCH, a FAT image made with fixed serial and times, and
// xorriso, which honours SOURCE_DATE_EPOCH.
//
// Phase 1 of issue 21 is this live ISO; installing to disk (the layout is
// planned by buildroot/disklayout), A/B slots and the trial boot
// (buildroot/grubenv) are phase 2 and not built yet.
package buildroot

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/rollcall/rollcall/images/debkernel"
	"github.com/rollcall/rollcall/images/initramfs"
)

// Config says what to build.
type Config struct {
	Out           string // the ISO file to write
	Source        string // the module's root, where go build runs (default ".")
	Cache         string // keeps downloaded .deb files
	KernelPackage string // default linux-image-amd64
	Commissioning string // a directory with vmlinuz and initrd.img ("" leaves it out)
	IPXEDir       string // default /usr/lib/ipxe ("-" leaves them out)
	FirmwareDir   string // a lib/firmware tree to take the drivers' firmware from ("" none)
	Append        string // added to the default entry's kernel command line (unattended answers)
	Timeout       int    // GRUB menu seconds
	Epoch         int64  // every time stamp (SOURCE_DATE_EPOCH)
	Version       string // what the ISO says it is
	Log           io.Writer
}

// Signed boot files from Debian's shim-signed and grub-efi-amd64-signed.
var (
	ShimEFI     = "/usr/lib/shim/shimx64.efi.signed"
	MokEFI      = "/usr/lib/shim/mmx64.efi.signed"
	GrubCDEFI   = "/usr/lib/grub/x86_64-efi-signed/gcdx64.efi.signed"
	GrubPCDir   = "/usr/lib/grub/i386-pc"
	ipxeBinName = []string{"undionly.kpxe", "ipxe.efi", "snponly.efi", "ipxe.pxe"}
)

// BaseCmdline is every entry's kernel command line: both consoles (the
// last is /dev/console, where the init writes), and a reboot 10 s after
// a panic.
const BaseCmdline = "console=tty0 console=ttyS0,115200n8 panic=10 loglevel=4"

// Report is what a build made.
type Report struct {
	ISO      string
	Size     int64
	SHA256   string
	Kernel   string // the kernel package
	Classes  map[Class]ClassCount
	Firmware FirmwareCount
	Initrd   int64
	Parts    []Part // the ISO's files and their sizes
	Took     time.Duration
}

// ClassCount is one class of modules.
type ClassCount struct {
	Modules int
	Bytes   int64
}

// FirmwareCount is how much of the firmware the drivers name is carried.
type FirmwareCount struct {
	Named, Found int
	Bytes        int64
	Dir          string
}

// Part is one file of the image.
type Part struct {
	Name  string
	Bytes int64
}

//go:embed templates/grub.cfg
var grubTemplate string

var grubCfg = template.Must(template.New("grub.cfg").Parse(grubTemplate))

// GrubConfig renders the ISO's grub.cfg.
func GrubConfig(version string, timeout int, appendArgs string) (string, error) {
	cmdline := BaseCmdline
	if a := strings.TrimSpace(appendArgs); a != "" {
		if strings.ContainsAny(a, "\n\"'\\;{}$`") {
			return "", fmt.Errorf("kernel command line %q: no newlines, quotes, backslashes, ';', '{', '}', '$' or '`' (GRUB would read them as script)", a)
		}
		cmdline += " " + a
	}
	var b strings.Builder
	err := grubCfg.Execute(&b, struct {
		Version, Cmdline, BaseCmdline string
		Timeout                       int
	}{version, cmdline, BaseCmdline, timeout})
	return b.String(), err
}

// Build makes the ISO.
func Build(c Config) (*Report, error) {
	start := time.Now()
	if c.Source == "" {
		c.Source = "."
	}
	if c.KernelPackage == "" {
		c.KernelPackage = "linux-image-amd64"
	}
	if c.IPXEDir == "" {
		c.IPXEDir = "/usr/lib/ipxe"
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	grub, err := GrubConfig(c.Version, c.Timeout, c.Append)
	if err != nil {
		return nil, err
	}
	for _, tool := range []string{"xorriso", "grub-mkimage", "mkfs.vfat", "mmd", "mcopy", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is missing (Debian: xorriso, grub-common, dosfstools, mtools)", tool)
		}
	}
	for _, f := range []string{ShimEFI, MokEFI, GrubCDEFI, filepath.Join(GrubPCDir, "boot_hybrid.img")} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%s is missing (Debian: shim-signed, grub-efi-amd64-signed, grub-pc-bin)", f)
		}
	}
	work, err := os.MkdirTemp("", "rollcall-iso-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	logf := func(format string, args ...any) { fmt.Fprintf(c.Log, "iso: "+format+"\n", args...) }

	k, err := debkernel.Fetch(c.KernelPackage, c.Cache, filepath.Join(work, "kernel"))
	if err != nil {
		return nil, err
	}
	logf("kernel %s", k.Package)
	r := &Report{ISO: c.Out, Kernel: k.Package, Classes: map[Class]ClassCount{}}

	entries, err := c.initrdEntries(k, work, r, logf)
	if err != nil {
		return nil, err
	}
	var cpio bytes.Buffer
	if err := initramfs.WriteNewc(&cpio, entries, c.Epoch); err != nil {
		return nil, err
	}
	var initrd bytes.Buffer
	zw, err := zstd.NewWriter(&initrd, zstd.WithEncoderLevel(zstd.SpeedBetterCompression), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(cpio.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	r.Initrd = int64(initrd.Len())
	logf("initramfs %s (%s unpacked)", mb(int64(initrd.Len())), mb(int64(cpio.Len())))

	tree := filepath.Join(work, "iso")
	vmlinuz, err := os.ReadFile(k.Vmlinuz)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		".disk/info":                  []byte("Rollcall " + c.Version + "\n"),
		"boot/grub/grub.cfg":          []byte(grub),
		"live/vmlinuz":                vmlinuz,
		"live/initrd.img":             initrd.Bytes(),
		"rollcall/version":            []byte(c.Version + "\n"),
		"boot/grub/i386-pc/.keep-dir": nil,
	}
	for name, b := range files {
		if err := writeFile(filepath.Join(tree, name), b); err != nil {
			return nil, err
		}
	}
	os.Remove(filepath.Join(tree, "boot/grub/i386-pc/.keep-dir"))
	if err := biosImage(filepath.Join(tree, "boot/grub/i386-pc/eltorito.img")); err != nil {
		return nil, err
	}
	if err := efiImage(filepath.Join(tree, "boot/grub/efi.img"), work, c.Epoch); err != nil {
		return nil, err
	}
	if err := xorriso(tree, c.Out, c.Epoch); err != nil {
		return nil, err
	}
	for _, name := range []string{"live/vmlinuz", "live/initrd.img", "boot/grub/efi.img", "boot/grub/i386-pc/eltorito.img"} {
		if st, err := os.Stat(filepath.Join(tree, name)); err == nil {
			r.Parts = append(r.Parts, Part{name, st.Size()})
		}
	}
	iso, err := os.ReadFile(c.Out)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(iso)
	r.Size, r.SHA256, r.Took = int64(len(iso)), hex.EncodeToString(sum[:]), time.Since(start)
	return r, nil
}

// initrdEntries gathers the initramfs: the init, rollcall, the driver set
// with modules.dep and modules.alias, their firmware, the commissioning
// image and the iPXE binaries.
func (c Config) initrdEntries(k *debkernel.Kernel, work string, r *Report, logf func(string, ...any)) ([]initramfs.Entry, error) {
	file := func(name string, mode uint32, data []byte) initramfs.Entry {
		return initramfs.Entry{Name: name, Mode: mode, Type: initramfs.TypeFile, Data: data}
	}
	dir := func(name string, mode uint32) initramfs.Entry {
		return initramfs.Entry{Name: name, Mode: mode, Type: initramfs.TypeDir}
	}
	entries := []initramfs.Entry{
		{Name: "dev/console", Mode: 0o600, Type: initramfs.TypeChar, Major: 5, Minor: 1},
		dir("dev", 0o755), dir("proc", 0o755), dir("sys", 0o755), dir("run", 0o755), dir("tmp", 0o1777),
		dir("data", 0o750), dir("root", 0o700), dir("etc/rollcall", 0o755),
		file("etc/rollcall/version", 0o644, []byte(c.Version+"\n")),
		file("etc/os-release", 0o644, []byte("NAME=\"Rollcall\"\nID=rollcall\nVERSION_ID="+c.Version+"\nPRETTY_NAME=\"Rollcall "+c.Version+"\"\n")),
		file("etc/hostname", 0o644, []byte("rollcall\n")),
		file("etc/resolv.conf", 0o644, nil),
	}
	for _, b := range []struct{ name, pkg string }{{"init", "./buildroot/cmd/rollcall-init"}, {"usr/bin/rollcall", "./appliance/cmd/rollcall"}} {
		out := filepath.Join(work, filepath.Base(b.name))
		if err := goBuild(c.Source, b.pkg, out, c.Version); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(out)
		if err != nil {
			return nil, err
		}
		logf("%s %s", b.name, mb(int64(len(data))))
		entries = append(entries, file(b.name, 0o755, data))
	}

	names, err := selectModules(k.ModDir, driverSet)
	if err != nil {
		return nil, err
	}
	mods, dep, err := k.Modules(names)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, m := range mods {
		have[moduleName(m)] = true
	}
	var missing []string
	for _, m := range mustCarry {
		if !have[m] {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s lacks drivers the ISO must carry: %s", k.Package, strings.Join(missing, ", "))
	}
	alias, fwNames, err := debkernel.ModulesAlias(k.ModDir, mods)
	if err != nil {
		return nil, err
	}
	base := "lib/modules/" + k.Version + "/"
	entries = append(entries, file(base+"modules.dep", 0o644, []byte(dep)), file(base+"modules.alias", 0o644, []byte(alias)))
	for _, m := range mods {
		b, err := os.ReadFile(filepath.Join(k.ModDir, m))
		if err != nil {
			return nil, err
		}
		cl := Classify(m)
		cc := r.Classes[cl]
		cc.Modules++
		cc.Bytes += int64(len(b))
		r.Classes[cl] = cc
		entries = append(entries, file(base+m, 0o644, b))
	}

	seenFW := map[string]bool{}
	var fwList []string
	for _, list := range fwNames {
		for _, f := range list {
			if !seenFW[f] {
				seenFW[f] = true
				fwList = append(fwList, f)
			}
		}
	}
	sort.Strings(fwList)
	r.Firmware = FirmwareCount{Named: len(fwList), Dir: c.FirmwareDir}
	if c.FirmwareDir != "" {
		for _, f := range fwList {
			for _, suffix := range []string{"", ".xz"} { // the kernel reads .xz firmware itself
				b, err := os.ReadFile(filepath.Join(c.FirmwareDir, f+suffix))
				if err != nil {
					continue
				}
				r.Firmware.Found++
				r.Firmware.Bytes += int64(len(b))
				entries = append(entries, file("lib/firmware/"+f+suffix, 0o644, b))
				break
			}
		}
	}

	if c.Commissioning != "" {
		for _, f := range []string{"vmlinuz", "initrd.img"} {
			b, err := os.ReadFile(filepath.Join(c.Commissioning, f))
			if err != nil {
				return nil, fmt.Errorf("commissioning image: %w (make image builds it)", err)
			}
			entries = append(entries, file("usr/share/rollcall/commissioning/"+f, 0o644, b))
		}
	}
	if c.IPXEDir != "-" {
		n := 0
		for _, f := range ipxeBinName {
			b, err := os.ReadFile(filepath.Join(c.IPXEDir, f)) // follows Debian's links into /boot
			if err != nil {
				continue
			}
			n++
			entries = append(entries, file("usr/lib/ipxe/"+f, 0o644, b))
		}
		if n == 0 {
			return nil, fmt.Errorf("no iPXE binaries in %s (Debian: ipxe)", c.IPXEDir)
		}
	}
	return entries, nil
}

// goBuild builds a static, reproducible binary of pkg.
func goBuild(src, pkg, out, version string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -buildid=", "-o", out, pkg)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// biosModules go into GRUB's BIOS core image: the ISO's file system and
// partition tables (CD and USB stick), the serial console, linux.
var biosModules = []string{"biosdisk", "iso9660", "part_msdos", "part_gpt", "normal", "linux", "serial", "terminal",
	"echo", "test", "search", "search_fs_file", "configfile", "gzio", "zstd", "boot", "all_video", "font", "gfxterm"}

func biosImage(out string) error {
	args := append([]string{"-O", "i386-pc-eltorito", "-d", GrubPCDir, "-p", "/boot/grub", "-o", out}, biosModules...)
	if b, err := exec.Command("grub-mkimage", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("grub-mkimage: %w\n%s", err, b)
	}
	return nil
}

// efiImage writes the EFI system partition image El Torito and the USB
// stick's GPT point at: shim as the fallback loader, GRUB (Debian's
// signed CD build, which finds the ISO by /.disk/info) beside it, and
// MokManager. mkfs.vfat --invariant fixes the serial and times, and
// mcopy -m keeps the files' times, which are set to the epoch first.
func efiImage(out, work string, epoch int64) error {
	stage := filepath.Join(work, "esp")
	files := map[string]string{"BOOTX64.EFI": ShimEFI, "grubx64.efi": GrubCDEFI, "mmx64.efi": MokEFI}
	var size int64
	for name, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		size += int64(len(b))
		if err := writeFile(filepath.Join(stage, name), b); err != nil {
			return err
		}
		t := time.Unix(epoch, 0)
		if err := os.Chtimes(filepath.Join(stage, name), t, t); err != nil {
			return err
		}
	}
	kib := (size*5/4)/1024 + 512
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	env := append(os.Environ(), "SOURCE_DATE_EPOCH="+strconv.FormatInt(epoch, 10), "MTOOLS_SKIP_CHECK=1")
	steps := [][]string{
		{"mkfs.vfat", "--invariant", "-n", "ROLLCALL", "-C", out, strconv.FormatInt(kib, 10)},
		{"mmd", "-i", out, "::/EFI", "::/EFI/BOOT"},
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		steps = append(steps, []string{"mcopy", "-m", "-i", out, filepath.Join(stage, n), "::/EFI/BOOT/" + n})
	}
	for _, s := range steps {
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Env = env
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(s, " "), err, b)
		}
	}
	return nil
}

// xorriso writes the hybrid ISO as grub-mkrescue lays it out (El Torito
// BIOS and EFI entries, GRUB's hybrid MBR, the EFI image as a GPT
// partition for USB sticks), with every date from the epoch.
func xorriso(tree, out string, epoch int64) error {
	t := time.Unix(epoch, 0)
	err := filepath.Walk(tree, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, t, t)
	})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	os.Remove(out)
	cmd := exec.Command("xorriso", "-as", "mkisofs", "-graft-points", "-V", "ROLLCALL", "-r", "-J",
		"-b", "boot/grub/i386-pc/eltorito.img", "-no-emul-boot", "-boot-load-size", "4", "-boot-info-table",
		"--grub2-boot-info", "--grub2-mbr", filepath.Join(GrubPCDir, "boot_hybrid.img"),
		"--efi-boot", "boot/grub/efi.img", "-efi-boot-part", "--efi-boot-image", "--protective-msdos-label",
		"-o", out, tree)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+strconv.FormatInt(epoch, 10))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("xorriso: %w\n%s", err, b)
	}
	return nil
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// Print writes the report as the build shows it.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "kernel      %s\n", r.Kernel)
	for _, cl := range []Class{ClassNIC, ClassStorage, ClassOther} {
		cc := r.Classes[cl]
		fmt.Fprintf(w, "%-11s %4d modules, %s\n", cl, cc.Modules, mb(cc.Bytes))
	}
	switch {
	case r.Firmware.Dir == "":
		fmt.Fprintf(w, "firmware    none carried: the drivers name %d files (build with -firmware DIR, a lib/firmware tree from Debian's firmware packages)\n", r.Firmware.Named)
	default:
		fmt.Fprintf(w, "firmware    %d of the %d files the drivers name, %s, from %s\n", r.Firmware.Found, r.Firmware.Named, mb(r.Firmware.Bytes), r.Firmware.Dir)
	}
	for _, p := range r.Parts {
		fmt.Fprintf(w, "%-31s %s\n", p.Name, mb(p.Bytes))
	}
	fmt.Fprintf(w, "ISO         %s, %s (target ≤ 100 MB), sha256 %s\n", r.ISO, mb(r.Size), r.SHA256)
	fmt.Fprintf(w, "built in    %s\n", r.Took.Round(100*time.Millisecond))
}
