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
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/rollcall/rollcall/images/debkernel"
	"github.com/rollcall/rollcall/images/initramfs"
)

// Modules the image loads: NICs from virtio to 100G, disks (SATA, SAS,
// NVMe, virtio), InfiniBand (mlx5_ib makes /sys/class/infiniband), the
// host's IPMI interface (/dev/ipmi0) and the TPM; for deploy mode, loop
// devices and the file systems of the root it writes (ext4 asks for crc32c
// through modprobe, which the image lacks: load crc32c_generic up front),
// and efivarfs for the UEFI boot entry (a module in Debian's kernel); USB
// mass storage (xHCI), so that the inventory lists USB sticks and the
// deploy disk choice can refuse them.
// Their dependencies come along from modules.dep.
var defaultModules = []string{
	"virtio_net", "virtio_blk", "virtio_pci", "virtio_scsi",
	"e1000", "e1000e", "igb", "ixgbe", "i40e", "ice", "tg3", "bnxt_en", "mlx5_core", "mlx5_ib",
	"ahci", "sd_mod", "nvme", "mpt3sas", "megaraid_sas",
	"ipmi_msghandler", "ipmi_si", "ipmi_devintf",
	"tpm_tis", "tpm_crb",
	"loop", "ext4", "xfs", "crc32c_generic", "efivarfs",
	"xhci_pci", "usb_storage",
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

	k, err := debkernel.Fetch(pkg, cache, filepath.Join(work, "kernel"))
	if err != nil {
		return err
	}
	kpkg, version, modDir := k.Package, k.Version, k.ModDir
	vmlinuz, err := os.ReadFile(k.Vmlinuz)
	if err != nil {
		return err
	}

	agent := filepath.Join(work, "init")
	gitVersion := strings.TrimSpace(debkernel.Output("git", "describe", "--always", "--dirty"))
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

	files, depOut, err := k.Modules(want)
	if err != nil {
		return err
	}
	entries := []initramfs.Entry{
		{Name: "init", Mode: 0o755, Type: initramfs.TypeFile, Data: initBin},
		{Name: "dev/console", Mode: 0o600, Type: initramfs.TypeChar, Major: 5, Minor: 1},
		{Name: "dev", Mode: 0o755, Type: initramfs.TypeDir},
		{Name: "proc", Mode: 0o755, Type: initramfs.TypeDir},
		{Name: "sys", Mode: 0o755, Type: initramfs.TypeDir},
		{Name: "run", Mode: 0o755, Type: initramfs.TypeDir},
		{Name: "tmp", Mode: 0o1777, Type: initramfs.TypeDir},
		{Name: "etc/os-release", Mode: 0o644, Type: initramfs.TypeFile, Data: []byte("NAME=\"Rollcall commissioning\"\nID=rollcall\nVERSION_ID=" + gitVersion + "\n")},
		{Name: "lib/modules/" + version + "/modules.dep", Mode: 0o644, Type: initramfs.TypeFile, Data: []byte(depOut)},
	}
	var modBytes int
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(modDir, f))
		if err != nil {
			return err
		}
		modBytes += len(b)
		entries = append(entries, initramfs.Entry{Name: "lib/modules/" + version + "/" + f, Mode: 0o644, Type: initramfs.TypeFile, Data: b})
	}
	if pciIDs != "" {
		if b, err := os.ReadFile(pciIDs); err == nil {
			entries = append(entries, initramfs.Entry{Name: "usr/share/misc/pci.ids", Mode: 0o644, Type: initramfs.TypeFile, Data: b})
		}
	}
	var initrd bytes.Buffer
	if err := initramfs.Write(&initrd, entries, mtime); err != nil {
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
