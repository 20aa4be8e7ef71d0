// Command build makes the commissioning image: Debian's kernel (vmlinuz)
// and an initramfs (initrd.img) holding the agent as /init and the kernel
// modules it needs with their dependencies. Nothing else: no shell, no udev,
// no firmware files. The initramfs depends only on its inputs (sorted
// entries, fixed times, a gzip header without name or time), so the same
// kernel package and agent source give the same bytes.
//
//	go run ./images/commissioning/build -out bin/image      # make image
//
// The kernel comes from the linux-image-amd64 package through apt-get
// download and dpkg-deb -x (no installation); run apt-get update first on a
// fresh machine.
package main

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Modules the image loads: NICs from virtio to 100G, disks (SATA, SAS,
// NVMe, virtio), InfiniBand (mlx5_ib makes /sys/class/infiniband), the
// host's IPMI interface (/dev/ipmi0) and the TPM; for deploy mode, loop
// devices and the file systems of the root it writes (ext4 asks for crc32c
// through modprobe, which the image lacks: load crc32c_generic up front),
// and efivarfs for the UEFI boot entry (a module in Debian's kernel).
// Their dependencies come along from modules.dep.
var defaultModules = []string{
	"virtio_net", "virtio_blk", "virtio_pci", "virtio_scsi",
	"e1000", "e1000e", "igb", "ixgbe", "i40e", "ice", "tg3", "bnxt_en", "mlx5_core", "mlx5_ib",
	"ahci", "sd_mod", "nvme", "mpt3sas", "megaraid_sas",
	"ipmi_msghandler", "ipmi_si", "ipmi_devintf",
	"tpm_tis", "tpm_crb",
	"loop", "ext4", "xfs", "crc32c_generic", "efivarfs",
}

func main() {
	out := flag.String("out", "bin/image", "output directory for vmlinuz and initrd.img")
	pkg := flag.String("package", "linux-image-amd64", "Debian kernel package (a metapackage is followed to the kernel it depends on)")
	cache := flag.String("cache", "", "directory that keeps downloaded .deb files (default OUT/debs)")
	mods := flag.String("modules", strings.Join(defaultModules, ","), "kernel modules to include, comma-separated")
	pciIDs := flag.String("pci-ids", "/usr/share/misc/pci.ids", "pci.ids to include for PCI names (skipped when absent; empty for none)")
	epoch := flag.Int64("mtime", 0, "time stamp of every initramfs entry (default SOURCE_DATE_EPOCH or 0)")
	flag.Parse()
	log.SetFlags(0)
	if *cache == "" {
		*cache = filepath.Join(*out, "debs")
	}
	if *epoch == 0 {
		if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
			fmt.Sscan(s, epoch)
		}
	}
	start := time.Now()
	if err := build(*out, *pkg, *cache, strings.Split(*mods, ","), *pciIDs, *epoch); err != nil {
		log.Fatalf("image: %v", err)
	}
	log.Printf("image: built in %s", time.Since(start).Round(time.Second))
}

func build(out, pkg, cache string, want []string, pciIDs string, mtime int64) error {
	for _, d := range []string{out, cache} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	work, err := os.MkdirTemp("", "rollcall-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	deb, kpkg, err := kernelDeb(pkg, cache)
	if err != nil {
		return err
	}
	root := filepath.Join(work, "kernel")
	if err := run("", "dpkg-deb", "-x", deb, root); err != nil {
		return err
	}
	version := strings.TrimPrefix(kpkg, "linux-image-")
	version = strings.TrimSuffix(version, "-unsigned")
	modDir := filepath.Join(root, "lib/modules", version)
	if _, err := os.Stat(modDir); err != nil {
		return fmt.Errorf("%s has no lib/modules/%s: %w", kpkg, version, err)
	}
	vmlinuz, err := os.ReadFile(filepath.Join(root, "boot", "vmlinuz-"+version))
	if err != nil {
		return err
	}

	agent := filepath.Join(work, "init")
	gitVersion := strings.TrimSpace(output("git", "describe", "--always", "--dirty"))
	if gitVersion == "" {
		gitVersion = "dev"
	}
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X github.com/rollcall/rollcall/agent.Version="+gitVersion,
		"-o", agent, "./agent/cmd/rollcall-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build agent: %w", err)
	}
	initBin, err := os.ReadFile(agent)
	if err != nil {
		return err
	}

	// The package ships no modules.dep (depmod writes it on install):
	// derive it from each module's .modinfo "depends=".
	dep, err := modulesDep(modDir)
	if err != nil {
		return err
	}
	builtin, _ := os.ReadFile(filepath.Join(modDir, "modules.builtin"))
	files, depOut, missing := moduleClosure(dep, string(builtin), want)
	if len(missing) > 0 {
		return fmt.Errorf("modules not in %s: %s", kpkg, strings.Join(missing, ", "))
	}
	entries := []Entry{
		{Name: "init", Mode: 0o755, Type: typeFile, Data: initBin},
		{Name: "dev/console", Mode: 0o600, Type: typeChar, Major: 5, Minor: 1},
		{Name: "dev", Mode: 0o755, Type: typeDir},
		{Name: "proc", Mode: 0o755, Type: typeDir},
		{Name: "sys", Mode: 0o755, Type: typeDir},
		{Name: "run", Mode: 0o755, Type: typeDir},
		{Name: "tmp", Mode: 0o1777, Type: typeDir},
		{Name: "etc/os-release", Mode: 0o644, Type: typeFile, Data: []byte("NAME=\"Rollcall commissioning\"\nID=rollcall\nVERSION_ID=" + gitVersion + "\n")},
		{Name: "lib/modules/" + version + "/modules.dep", Mode: 0o644, Type: typeFile, Data: []byte(depOut)},
	}
	var modBytes int
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(modDir, f))
		if err != nil {
			return err
		}
		modBytes += len(b)
		entries = append(entries, Entry{Name: "lib/modules/" + version + "/" + f, Mode: 0o644, Type: typeFile, Data: b})
	}
	if pciIDs != "" {
		if b, err := os.ReadFile(pciIDs); err == nil {
			entries = append(entries, Entry{Name: "usr/share/misc/pci.ids", Mode: 0o644, Type: typeFile, Data: b})
		}
	}
	var initrd bytes.Buffer
	if err := WriteInitramfs(&initrd, entries, mtime); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "vmlinuz"), vmlinuz, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "initrd.img"), initrd.Bytes(), 0o644); err != nil {
		return err
	}
	mb := func(n int) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
	fmt.Printf("kernel      %s (%s)\n", kpkg, version)
	fmt.Printf("agent       %s, %s\n", gitVersion, mb(len(initBin)))
	fmt.Printf("modules     %d files, %s (%s asked for)\n", len(files), mb(modBytes), fmt.Sprint(len(want)))
	fmt.Printf("vmlinuz     %s  sha256 %x\n", mb(len(vmlinuz)), sha256.Sum256(vmlinuz))
	fmt.Printf("initrd.img  %s  sha256 %x\n", mb(initrd.Len()), sha256.Sum256(initrd.Bytes()))
	fmt.Printf("image size  %s in %s (target ≤ 60 MB)\n", mb(len(vmlinuz)+initrd.Len()), out)
	return nil
}

// kernelDeb downloads pkg into cache (unless there) and follows a
// metapackage (linux-image-amd64) to the versioned kernel package it
// depends on. It returns the .deb's path and the kernel package's name.
func kernelDeb(pkg, cache string) (string, string, error) {
	for range 3 {
		deb, err := download(pkg, cache)
		if err != nil {
			return "", "", err
		}
		if strings.Contains(output("dpkg-deb", "-c", deb), "/boot/vmlinuz-") {
			return deb, pkg, nil
		}
		depends := strings.TrimSpace(output("dpkg-deb", "-f", deb, "Depends"))
		next := strings.Fields(strings.Split(depends, ",")[0])
		if len(next) == 0 || !strings.HasPrefix(next[0], "linux-image-") {
			return "", "", fmt.Errorf("%s: no kernel in it and no linux-image dependency (Depends: %q)", pkg, depends)
		}
		pkg = next[0]
	}
	return "", "", fmt.Errorf("%s: metapackages nest too deep", pkg)
}

// download fetches the candidate version of pkg with apt-get download,
// keeping it in cache: the .deb file name carries the version, so a new
// kernel in the archive is a new file.
func download(pkg, cache string) (string, error) {
	version := ""
	for _, line := range strings.Split(output("apt-cache", "policy", pkg), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate:"); ok {
			version = strings.TrimSpace(v)
		}
	}
	if version == "" || version == "(none)" {
		return "", fmt.Errorf("apt knows no %s (run apt-get update)", pkg)
	}
	// apt-get download names the file pkg_version_arch.deb, with ':' as %3a.
	pattern := filepath.Join(cache, pkg+"_"+strings.ReplaceAll(version, ":", "%3a")+"_*.deb")
	if m, _ := filepath.Glob(pattern); len(m) > 0 {
		return m[0], nil
	}
	abs, err := filepath.Abs(cache)
	if err != nil {
		return "", err
	}
	if err := run(abs, "apt-get", "download", "-q", pkg+"="+version); err != nil {
		return "", err
	}
	m, _ := filepath.Glob(pattern)
	if len(m) == 0 {
		return "", fmt.Errorf("apt-get download %s left no %s", pkg, pattern)
	}
	return m[0], nil
}

// moduleClosure picks the wanted modules and everything they depend on
// from modules.dep. It returns the files (sorted), the modules.dep lines for
// them, and the wanted names found neither as modules nor built in.
func moduleClosure(dep, builtin string, want []string) (files []string, depOut string, missing []string) {
	deps := map[string][]string{}
	byName := map[string]string{}
	for _, line := range strings.Split(dep, "\n") {
		mod, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
		byName[moduleName(mod)] = mod
	}
	isBuiltin := map[string]bool{}
	for _, line := range strings.Split(builtin, "\n") {
		if line != "" {
			isBuiltin[moduleName(line)] = true
		}
	}
	picked := map[string]bool{}
	var add func(string)
	add = func(m string) {
		if picked[m] {
			return
		}
		picked[m] = true
		for _, d := range deps[m] {
			add(d)
		}
	}
	for _, w := range want {
		w = strings.ReplaceAll(strings.TrimSpace(w), "-", "_")
		if w == "" {
			continue
		}
		if m, ok := byName[w]; ok {
			add(m)
		} else if !isBuiltin[w] {
			missing = append(missing, w)
		}
	}
	for m := range picked {
		files = append(files, m)
	}
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "%s: %s\n", f, strings.Join(deps[f], " "))
	}
	return files, b.String(), missing
}

// modulesDep writes modules.dep lines ("kernel/a.ko: kernel/b.ko") for
// every module under dir from the "depends=" entry of its .modinfo section,
// which modpost fills from the symbols the module uses.
func modulesDep(dir string) (string, error) {
	byName := map[string]string{}
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, rel)
			byName[moduleName(rel)] = rel
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		deps, err := modinfoDepends(filepath.Join(dir, f))
		if err != nil {
			return "", fmt.Errorf("%s: %w", f, err)
		}
		var paths []string
		for _, d := range deps {
			p, ok := byName[strings.ReplaceAll(d, "-", "_")]
			if !ok {
				return "", fmt.Errorf("%s depends on %s, which is not in the package", f, d)
			}
			paths = append(paths, p)
		}
		fmt.Fprintf(&b, "%s: %s\n", f, strings.Join(paths, " "))
	}
	return b.String(), nil
}

func modinfoDepends(file string) ([]string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, nil
	}
	data, err := sec.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			var out []string
			for _, d := range strings.Split(string(v), ",") {
				if d != "" {
					out = append(out, d)
				}
			}
			return out, nil
		}
	}
	return nil, nil
}

func moduleName(file string) string {
	b := filepath.Base(file)
	if i := strings.Index(b, ".ko"); i >= 0 {
		b = b[:i]
	}
	return strings.ReplaceAll(b, "-", "_")
}

func run(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

func output(name string, args ...string) string {
	b, _ := exec.Command(name, args...).Output()
	return string(b)
}
