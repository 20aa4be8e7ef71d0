// Package deployimage builds the disk images the deploy tests write to a
// machine and boot, offline and without mounting anything: a raw GPT disk
// of 512-byte sectors with
//
//	1  BIOS boot (ef02)   GRUB's i386-pc core image; boot.img in the protective MBR
//	2  ESP (ef00, FAT)    GRUB for x86_64-efi (grub-mkstandalone) as EFI/BOOT/BOOTX64.EFI and EFI/debian/grubx64.efi
//	3  root               GPT type "Linux root (x86-64)", file system label "root"
//
// so that SeaBIOS and OVMF both boot it. GRUB finds the root by its file
// system UUID and reads /boot/grub/grub.cfg there. The default image
// ("tiny") has Debian's kernel (from the package images/debkernel fetches,
// as the commissioning image does) and an initrd whose /init is tinyinit: it
// reads the NoCloud seed, sets the hostname, phones home, writes MarkerPath
// and powers off. The Debian image (Options.Debian, `make e2e-full`) is a
// root made by mmdebstrap from Debian's packages with real cloud-init, and
// comes with a qcow2 copy.
//
// Build keeps its result under bin/deploy-image, keyed by every input (the
// options, the kernel package's file, tinyinit's binary, the GRUB and
// e2fsprogs versions), so a second run returns at once.
package deployimage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/rollcall/rollcall/images/debkernel"
)

// MarkerPath is the file tinyinit writes on the root when it booted from
// the disk: "booted from disk", then "key: value" lines (firmware,
// instance-id, hostname, fqdn, phone-home) and "error: …" when a step
// failed.
const MarkerPath = "/var/lib/rollcall/booted-from-disk"

// SeedDir is where the deploy agent writes the NoCloud seed on the root.
const SeedDir = "/var/lib/cloud/seed/nocloud"

// Layout, in 512-byte sectors.
const (
	Sector       = 512
	biosStart    = 2048 // 1 MiB: BIOS boot partition, 1 MiB
	biosSectors  = 2048
	espStart     = biosStart + biosSectors
	espSectors   = 32 << 11 // 32 MiB
	rootStart    = espStart + espSectors
	gptTailRoom  = 34  // sgdisk's backup entries and header
	builderEpoch = "4" // bump when the layout or the recipe changes
)

// Options choose the image. The zero value is the tiny ext4 image.
type Options struct {
	// Dir keeps built images (default: the module's bin/deploy-image).
	Dir string
	// DebCache keeps downloaded .deb files (default: the module's
	// bin/image/debs, shared with `make image`).
	DebCache string
	// Size of the disk in bytes: default 128 MiB (tiny ext4), 352 MiB
	// (tiny XFS: mkfs.xfs refuses file systems under 300 MB), 2 GiB
	// (Debian). At most 256 MiB for the tiny ext4 image.
	Size int64
	// RootFS is "ext4" (default) or "xfs" (the tiny image only).
	RootFS string
	// Debian builds the root with mmdebstrap (real cloud-init, systemd,
	// sshd) instead of the tiny init; Suite names the Debian release
	// (default: the host's).
	Debian bool
	Suite  string
	// KernelPackage for the tiny image (default linux-image-amd64).
	KernelPackage string
	// Log receives progress lines (default: discarded).
	Log io.Writer
}

// Image is a built image.
type Image struct {
	Path  string // the raw disk
	QCOW2 string // a qcow2 copy (Debian images only)
	// RootUUID is the root file system's UUID, DiskGUID the GPT disk GUID.
	RootUUID, DiskGUID string
	Key                string // the cache key
	Cached             bool   // found in Dir, not built now
	Took               time.Duration
}

// Build returns the raw image for opts, building it unless Dir has it.
func Build(ctx context.Context, opts Options) (string, error) {
	img, err := BuildImage(ctx, opts)
	if err != nil {
		return "", err
	}
	return img.Path, nil
}

// BuildImage is Build with everything it knows about the result.
func BuildImage(ctx context.Context, opts Options) (*Image, error) {
	start := time.Now()
	b, err := newBuilder(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(b.work)
	img, err := b.build()
	if err != nil {
		return nil, fmt.Errorf("deploy image: %w", err)
	}
	img.Took = time.Since(start)
	return img, nil
}

type builder struct {
	ctx    context.Context
	opts   Options
	module string // the module's directory
	work   string
	log    io.Writer
}

func newBuilder(ctx context.Context, opts Options) (*builder, error) {
	b := &builder{ctx: ctx, opts: opts, log: opts.Log}
	if b.log == nil {
		b.log = io.Discard
	}
	if b.opts.RootFS == "" {
		b.opts.RootFS = "ext4"
	}
	switch {
	case b.opts.RootFS != "ext4" && b.opts.RootFS != "xfs":
		return nil, fmt.Errorf("deploy image: root file system %q (want ext4 or xfs)", b.opts.RootFS)
	case b.opts.Debian && b.opts.RootFS != "ext4":
		return nil, errors.New("deploy image: the Debian image has an ext4 root only")
	}
	if b.opts.Size == 0 {
		switch {
		case b.opts.Debian:
			b.opts.Size = 2 << 30
		case b.opts.RootFS == "xfs":
			b.opts.Size = 352 << 20
		default:
			b.opts.Size = 128 << 20
		}
	}
	minSize := int64(rootStart+gptTailRoom)*Sector + 48<<20
	switch {
	case b.opts.Size%(1<<20) != 0:
		return nil, fmt.Errorf("deploy image: size %d is not a whole number of MiB", b.opts.Size)
	case b.opts.Size < minSize:
		return nil, fmt.Errorf("deploy image: size %d MiB (at least %d MiB)", b.opts.Size>>20, minSize>>20+1)
	case !b.opts.Debian && b.opts.RootFS == "ext4" && b.opts.Size > 256<<20:
		return nil, fmt.Errorf("deploy image: size %d MiB (the tiny image is at most 256 MiB)", b.opts.Size>>20)
	}
	if b.opts.KernelPackage == "" {
		b.opts.KernelPackage = "linux-image-amd64"
	}
	mod, err := ModuleDir()
	if err != nil {
		return nil, err
	}
	b.module = mod
	if b.opts.Dir == "" {
		b.opts.Dir = filepath.Join(mod, "bin", "deploy-image")
	}
	if b.opts.DebCache == "" {
		b.opts.DebCache = filepath.Join(mod, "bin", "image", "debs")
	}
	if b.opts.Debian && b.opts.Suite == "" {
		b.opts.Suite = hostSuite()
		if b.opts.Suite == "" {
			return nil, errors.New("deploy image: no Debian suite given and /etc/os-release names none")
		}
	}
	if b.work, err = os.MkdirTemp("", "rollcall-deploy-image-"); err != nil {
		return nil, err
	}
	return b, nil
}

// ModuleDir is the directory of the module this package belongs to, found
// with `go env GOMOD` from the working directory (tests run in their
// package's directory).
func ModuleDir() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("deploy image: not inside the rollcall module (go env GOMOD: %q, %v)", gomod, err)
	}
	return filepath.Dir(gomod), nil
}

func hostSuite() string {
	b, _ := os.ReadFile("/etc/os-release")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VERSION_CODENAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// key names the image by its inputs.
func (b *builder) key(inputs map[string]string) string {
	inputs["epoch"] = builderEpoch
	inputs["size"] = fmt.Sprint(b.opts.Size)
	inputs["rootfs"] = b.opts.RootFS
	inputs["grub"] = debkernel.Output("dpkg-query", "-W", "grub-pc-bin", "grub-efi-amd64-bin", "grub-common")
	inputs["e2fsprogs"] = debkernel.Output("dpkg-query", "-W", "e2fsprogs", "xfsprogs", "mtools", "dosfstools")
	j, _ := json.Marshal(inputs) // maps marshal sorted
	s := sha256.Sum256(j)
	return hex.EncodeToString(s[:8])
}

// uuid derives a stable UUID (version 4 form) from the key and a name.
func uuid(key, name string) string {
	s := sha256.Sum256([]byte(key + "/" + name))
	s[6] = s[6]&0x0f | 0x40
	s[8] = s[8]&0x3f | 0x80
	h := hex.EncodeToString(s[:16])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func (b *builder) build() (*Image, error) {
	if b.opts.Debian {
		return b.buildDebian()
	}
	return b.buildTiny()
}

// logf writes one progress line.
func (b *builder) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "deploy-image: "+format+"\n", args...)
}

// run runs a tool, its output in the error when it fails.
func (b *builder) run(dir, name string, args ...string) error {
	cmd := exec.CommandContext(b.ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(out, 4096))
	}
	return nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// cached returns the image in dir when a complete one is there. Its
// files are dir's, whatever image.json says: a cache copied from another
// checkout (or worktree) names the files where it was built.
func cached(dir string) (*Image, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "image.json"))
	if err != nil {
		return nil, false
	}
	var img Image
	if json.Unmarshal(b, &img) != nil || img.Path == "" {
		return nil, false
	}
	img.Path = filepath.Join(dir, filepath.Base(img.Path))
	if img.QCOW2 != "" {
		img.QCOW2 = filepath.Join(dir, filepath.Base(img.QCOW2))
		if _, err := os.Stat(img.QCOW2); err != nil {
			return nil, false
		}
	}
	if _, err := os.Stat(img.Path); err != nil {
		return nil, false
	}
	img.Cached = true
	return &img, true
}

// publish moves a finished build from tmp to dir, the place the key
// names: a reader sees either nothing or a whole image.
func publish(tmp, dir string, img *Image) (*Image, error) {
	final := *img
	rel := func(p string) string {
		if p == "" {
			return ""
		}
		return filepath.Join(dir, filepath.Base(p))
	}
	final.Path, final.QCOW2 = rel(img.Path), rel(img.QCOW2)
	j, _ := json.MarshalIndent(final, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "image.json"), j, 0o644); err != nil {
		return nil, err
	}
	if other, ok := cached(dir); ok { // another build of the same key won
		os.RemoveAll(tmp)
		return other, nil
	}
	os.RemoveAll(dir) // a half-written one
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	return &final, nil
}

// prune removes older builds of the same kind (their inputs changed: a new
// kernel, a new tinyinit), keeping keep.
func prune(dir, prefix, keep string) {
	old, _ := filepath.Glob(filepath.Join(dir, prefix+"*"))
	for _, o := range old {
		if o != keep && !strings.Contains(filepath.Base(o), ".tmp-") {
			os.RemoveAll(o)
		}
	}
}
