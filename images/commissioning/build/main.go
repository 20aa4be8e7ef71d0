// Command build makes the commissioning image: Debian's kernel (vmlinuz)
// and an initramfs (initrd.img) holding the agent as /init and the kernel
// modules it needs with their dependencies. Nothing else: no shell, no udev,
// no firmware files (images/agentinitrd, which the compute image's initrd
// is made with too). The initramfs depends only on its inputs (sorted
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
	"crypto/sha256"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rollcall/rollcall/images/agentinitrd"
	"github.com/rollcall/rollcall/images/debkernel"
)

func main() {
	out := flag.String("out", "bin/image", "output directory for vmlinuz and initrd.img")
	pkg := flag.String("package", "linux-image-amd64", "Debian kernel package (a metapackage is followed to the kernel it depends on)")
	cache := flag.String("cache", "", "directory that keeps downloaded .deb files (default OUT/debs)")
	mods := flag.String("modules", strings.Join(agentinitrd.CommissioningModules, ","), "kernel modules to include, comma-separated")
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

	k, err := debkernel.Fetch(pkg, cache, filepath.Join(work, "kernel"))
	if err != nil {
		return err
	}
	vmlinuz, err := os.ReadFile(k.Vmlinuz)
	if err != nil {
		return err
	}

	gitVersion := agentinitrd.Version()
	initBin, err := agentinitrd.BuildAgent(work, gitVersion)
	if err != nil {
		return err
	}
	initrd, err := agentinitrd.Build(agentinitrd.Options{Kernel: k, Modules: want, Agent: initBin,
		Name: "Rollcall commissioning", Release: gitVersion, PCIIDs: pciIDs, MTime: mtime})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "vmlinuz"), vmlinuz, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "initrd.img"), initrd.Data, 0o644); err != nil {
		return err
	}
	mb := func(n int) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
	fmt.Printf("kernel      %s (%s)\n", k.Package, k.Version)
	fmt.Printf("agent       %s, %s\n", gitVersion, mb(len(initBin)))
	fmt.Printf("modules     %d files, %s (%s asked for)\n", len(initrd.ModuleFiles), mb(initrd.ModuleBytes), fmt.Sprint(len(want)))
	fmt.Printf("vmlinuz     %s  sha256 %x\n", mb(len(vmlinuz)), sha256.Sum256(vmlinuz))
	fmt.Printf("initrd.img  %s  sha256 %x\n", mb(len(initrd.Data)), sha256.Sum256(initrd.Data))
	fmt.Printf("image size  %s in %s (target ≤ 60 MB)\n", mb(len(vmlinuz)+len(initrd.Data)), out)
	return nil
}
