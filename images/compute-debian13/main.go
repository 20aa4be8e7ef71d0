// Command compute-debian13 builds Rollcall's stateless compute image: a
// Debian 13 (trixie) root with slurmd, munge, rdma-core, the NFS client,
// sshd and the overlay client, from Debian's packages and nothing else
// (mmdebstrap through images/debroot), as
//
//	OUT/vmlinuz              the root's kernel
//	OUT/initrd.img           Rollcall's initrd (images/agentinitrd): the agent as /init with
//	                         this kernel's loop, squashfs, overlay and NIC modules
//	OUT/filesystem.squashfs  the root (zstd), /lib/modules kept for the booted system
//	OUT/packages.txt         what the root has installed
//	OUT/SHA256SUMS
//
// ready for `rollcall image import compute-debian13 -kernel OUT/vmlinuz
// -initrd OUT/initrd.img -squashfs OUT/filesystem.squashfs`:
//
//	go run ./images/compute-debian13 -out bin/image-compute   # make image-compute
//
// The root is made a template for many nodes: no SSH host keys, no
// machine-id, no munge key, no apt lists; each node's own come from the
// appliance through rollcall-overlay.service (`rollcall-overlay apply
// system`, before munge, slurmd and ssh) and the refresh timer (`apply
// runtime` a minute after boot, then every five minutes). Its files are
// packages.list and includes/ here. With the same SOURCE_DATE_EPOCH (default:
// the last commit's time) and the same mirror content the files come out
// the same, as far as mmdebstrap allows. It runs as root (mmdebstrap
// --mode=root, chroot), from the module's directory.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rollcall/rollcall/images/agentinitrd"
	"github.com/rollcall/rollcall/images/debkernel"
	"github.com/rollcall/rollcall/images/debroot"
)

// Name is the image's name in Rollcall (rollcall image import NAME).
const Name = "compute-debian13"

// Suite is Debian 13.
const Suite = "trixie"

// The files the build writes.
const (
	KernelFile   = "vmlinuz"
	InitrdFile   = "initrd.img"
	SquashfsFile = "filesystem.squashfs"
	PackagesFile = "packages.txt"
	SumsFile     = "SHA256SUMS"
)

type config struct {
	out, cache string
	mirror     string
	security   string
	components []string
	extra      []string
	epoch      int64
	zstdLevel  int
}

func main() {
	var c config
	flag.StringVar(&c.out, "out", "bin/image-compute", "output directory")
	flag.StringVar(&c.cache, "cache", "", `keeps Debian's .deb files between builds (default OUT/debs; "off" for none)`)
	flag.StringVar(&c.mirror, "mirror", "http://deb.debian.org/debian", "Debian mirror (trixie and trixie-updates)")
	flag.StringVar(&c.security, "security", "http://deb.debian.org/debian-security", `security archive (trixie-security; "" for none)`)
	components := flag.String("components", "main", "archive components, comma-separated (main,non-free-firmware for firmware packages)")
	extra := flag.String("extra", "", "packages beyond packages.list, comma-separated (firmware-misc-nonfree, …)")
	flag.Int64Var(&c.epoch, "epoch", 0, "time stamp of every file (default SOURCE_DATE_EPOCH, else the last commit's time)")
	flag.IntVar(&c.zstdLevel, "zstd", 15, "squashfs zstd level (1-22)")
	flag.Parse()
	log.SetFlags(0)
	c.components = strings.Split(*components, ",")
	if *extra != "" {
		c.extra = strings.Split(*extra, ",")
	}
	switch c.cache {
	case "":
		c.cache = filepath.Join(c.out, "debs")
	case "off":
		c.cache = ""
	}
	if c.epoch == 0 {
		c.epoch = defaultEpoch()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	if err := build(ctx, c); err != nil {
		log.Fatalf("%s: %v", Name, err)
	}
	log.Printf("%s: built in %s", Name, time.Since(start).Round(time.Second))
}

func defaultEpoch() int64 {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		s = strings.TrimSpace(debkernel.Output("git", "log", "-1", "--format=%ct"))
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func build(ctx context.Context, c config) error {
	// Everything that can be wrong with the input is found before the
	// minutes of work.
	packages, err := Packages(packageList, c.extra)
	if err != nil {
		return err
	}
	sources, err := Sources(Suite, c.mirror, c.security, c.components)
	if err != nil {
		return err
	}
	if c.zstdLevel < 1 || c.zstdLevel > 22 {
		return fmt.Errorf("-zstd %d: want 1 to 22", c.zstdLevel)
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root (mmdebstrap --mode=root, chroot for systemctl): run it as root")
	}
	for _, tool := range []string{"mmdebstrap", "mksquashfs", "chroot"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s: %w (apt-get install mmdebstrap squashfs-tools)", tool, err)
		}
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "rollcall-compute-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	version := agentinitrd.Version()
	step := stepper()

	overlay := filepath.Join(work, "rollcall-overlay")
	if err := agentinitrd.GoBuild("./agent/cmd/rollcall-overlay", overlay, version); err != nil {
		return err
	}
	overlayBin, err := os.ReadFile(overlay)
	if err != nil {
		return err
	}
	agentBin, err := agentinitrd.BuildAgent(work, version)
	if err != nil {
		return err
	}
	step("go build rollcall-overlay, rollcall-agent (%s)", version)

	tree := filepath.Join(work, "root")
	log.Printf("%s: mmdebstrap %s, %d packages and their dependencies, from %s", Name, Suite, len(packages), c.mirror)
	if err := debroot.Build(ctx, tree, debroot.Options{Suite: Suite, Sources: sources, Packages: packages,
		DpkgOpts: DpkgOpts, Cache: c.cache, Epoch: c.epoch, Log: os.Stderr}); err != nil {
		return err
	}
	step("mmdebstrap")

	k, err := debkernel.Installed(tree)
	if err != nil {
		return err
	}
	vmlinuz, err := os.ReadFile(k.Vmlinuz)
	if err != nil {
		return err
	}
	initrd, err := agentinitrd.Build(agentinitrd.Options{Kernel: k, Modules: agentinitrd.StatelessModules, Agent: agentBin,
		Name: "Rollcall " + Name, Release: version, MTime: c.epoch})
	if err != nil {
		return err
	}
	step("initrd: kernel %s, %d modules", k.Version, len(initrd.ModuleFiles))

	status, err := os.ReadFile(filepath.Join(tree, "var/lib/dpkg/status"))
	if err != nil {
		return err
	}
	if _, err := Dress(tree, overlayBin, Release(Name, version, k.Version, Suite)); err != nil {
		return err
	}
	if err := run(ctx, "chroot", append([]string{tree, "systemctl", "enable"}, enableUnits...)...); err != nil {
		return err
	}
	if err := run(ctx, "chroot", append([]string{tree, "systemctl", "disable"}, disableUnits...)...); err != nil {
		return err
	}
	step("dressed the root")

	squashfs := filepath.Join(work, SquashfsFile)
	// mksquashfs takes the time from its flags; SOURCE_DATE_EPOCH as well
	// would be refused.
	cmd := exec.CommandContext(ctx, "mksquashfs", tree, squashfs, "-noappend", "-quiet", "-no-progress",
		"-comp", "zstd", "-Xcompression-level", strconv.Itoa(c.zstdLevel),
		"-mkfs-time", strconv.FormatInt(c.epoch, 10), "-all-time", strconv.FormatInt(c.epoch, 10))
	cmd.Env = withoutEnv(os.Environ(), "SOURCE_DATE_EPOCH")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mksquashfs: %w\n%s", err, out)
	}
	step("mksquashfs (zstd %d)", c.zstdLevel)

	files := map[string]string{SquashfsFile: squashfs}
	for name, data := range map[string][]byte{KernelFile: vmlinuz, InitrdFile: initrd.Data, PackagesFile: Manifest(status)} {
		p := filepath.Join(work, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
		files[name] = p
	}
	sums, err := publish(c.out, files)
	if err != nil {
		return err
	}

	mb := func(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
	var total int64
	for _, name := range []string{KernelFile, InitrdFile, SquashfsFile} {
		st, err := os.Stat(filepath.Join(c.out, name))
		if err != nil {
			return err
		}
		total += st.Size()
		fmt.Printf("%-20s %9s  sha256 %s\n", name, mb(st.Size()), sums[name])
	}
	fmt.Printf("%-20s %9s  (kernel %s, %d modules in the initrd, %s; agent and overlay %s)\n", "image", mb(total),
		k.Version, len(initrd.ModuleFiles), mb(int64(initrd.ModuleBytes)), version)
	fmt.Printf("import: rollcall image import %s -kernel %s -initrd %s -squashfs %s\n", Name,
		filepath.Join(c.out, KernelFile), filepath.Join(c.out, InitrdFile), filepath.Join(c.out, SquashfsFile))
	return nil
}

// publish moves the built files into out and writes SHA256SUMS there, last
// (sha256sum -c reads it); it returns the sums by name.
func publish(out string, files map[string]string) (map[string]string, error) {
	sums := map[string]string{}
	var names []string
	for name, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		h := sha256.New()
		_, err = f.WriteTo(h)
		f.Close()
		if err != nil {
			return nil, err
		}
		sums[name] = fmt.Sprintf("%x", h.Sum(nil))
		names = append(names, name)
		if err := move(p, filepath.Join(out, name)); err != nil {
			return nil, err
		}
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&b, "%s  %s\n", sums[n], n)
	}
	return sums, os.WriteFile(filepath.Join(out, SumsFile), b.Bytes(), 0o644)
}

// move renames, or copies across file systems (the work directory is in
// the temporary directory), through a temporary name beside dst.
func move(src, dst string) error {
	if os.Rename(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := out.ReadFrom(in); err != nil {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}

// Manifest lists the installed packages, "name version arch" a line, sorted.
func Manifest(status []byte) []byte {
	var b bytes.Buffer
	for _, p := range debroot.Packages(status) {
		fmt.Fprintf(&b, "%s %s %s\n", p.Name, p.Version, p.Arch)
	}
	return b.Bytes()
}

// stepper logs each step with the time it took.
func stepper() func(format string, args ...any) {
	last := time.Now()
	return func(format string, args ...any) {
		log.Printf("%s: %s in %s", Name, fmt.Sprintf(format, args...), time.Since(last).Round(100*time.Millisecond))
		last = time.Now()
	}
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func withoutEnv(env []string, key string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, key+"=") {
			out = append(out, e)
		}
	}
	return out
}
