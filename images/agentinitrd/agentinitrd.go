// Package agentinitrd makes Rollcall's own initrd: the agent
// (agent/cmd/rollcall-agent, static) as /init and the kernel modules it
// loads, with their dependencies, from the kernel the image boots. Nothing
// else: no shell, no udev, no firmware files. The commissioning image
// (images/commissioning/build) and the stateless compute image
// (images/compute-debian13) are both made with it; they differ in the
// kernel and in the modules they ask for. The result depends only on its
// inputs (the initramfs writer sorts entries and fixes times; the agent is
// built with -trimpath and no build ID).
//
// The builders run from the module's directory (go run ./images/…), where
// the agent's package path resolves.
package agentinitrd

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/rollcall/rollcall/images/debkernel"
	"github.com/rollcall/rollcall/images/initramfs"
)

// NICModules are the network drivers every Rollcall initrd brings: virtio
// and NICs from 1G to 100G. Their dependencies come along from modules.dep.
var NICModules = []string{
	"virtio_net", "virtio_pci",
	"e1000", "e1000e", "igb", "ixgbe", "i40e", "ice", "tg3", "bnxt_en", "mlx5_core",
}

// CommissioningModules are what the commissioning image loads: the NICs;
// disks (SATA, SAS, NVMe, virtio); InfiniBand (mlx5_ib makes
// /sys/class/infiniband); the host's IPMI interface (/dev/ipmi0) and the
// TPM; for deploy mode, loop devices and the file systems of the root it
// writes (ext4 asks for crc32c through modprobe, which the image lacks:
// load crc32c_generic up front), and efivarfs for the UEFI boot entry (a
// module in Debian's kernel); USB mass storage (xHCI), so that the
// inventory lists USB sticks and the deploy disk choice can refuse them;
// squashfs and overlayfs, so that the same image also boots a stateless
// root (rollcall.mode=stateless: the test image of lab/statelessimage).
var CommissioningModules = concat(NICModules, []string{
	"virtio_blk", "virtio_scsi",
	"mlx5_ib",
	"ahci", "sd_mod", "nvme", "mpt3sas", "megaraid_sas",
	"ipmi_msghandler", "ipmi_si", "ipmi_devintf",
	"tpm_tis", "tpm_crb",
	"loop", "ext4", "xfs", "crc32c_generic", "efivarfs",
	"xhci_pci", "usb_storage",
	"squashfs", "overlay",
})

// StatelessModules are what a stateless image's initrd loads to fetch its
// root into RAM and mount it (agent/stateless): the NICs, loop devices,
// squashfs and overlayfs. The booted system loads the rest itself, from the
// root's own /lib/modules.
var StatelessModules = concat(NICModules, []string{"loop", "squashfs", "overlay"})

func concat(a, b []string) []string { return append(append([]string(nil), a...), b...) }

// Options say what goes into the initrd.
type Options struct {
	Kernel  *debkernel.Kernel // whose modules are packed (debkernel.Fetch or Installed)
	Modules []string          // module names; their dependencies come along
	Agent   []byte            // the agent binary: BuildAgent's
	// Release is the VERSION_ID of etc/os-release, Name its NAME
	// ("Rollcall commissioning").
	Name, Release string
	// PCIIDs is a pci.ids file to include for PCI names ("" or absent:
	// none).
	PCIIDs string
	MTime  int64 // time stamp of every entry
}

// Initrd is a built initrd.
type Initrd struct {
	Data        []byte   // gzip-compressed newc
	ModuleFiles []string // relative to the kernel's ModDir
	ModuleBytes int
}

// Build writes the initrd in memory.
func Build(o Options) (*Initrd, error) {
	if o.Kernel == nil || len(o.Agent) == 0 {
		return nil, fmt.Errorf("initrd: a kernel and an agent are needed")
	}
	files, depOut, err := o.Kernel.Modules(o.Modules)
	if err != nil {
		return nil, fmt.Errorf("initrd: %w", err)
	}
	version := o.Kernel.Version
	entries := []initramfs.Entry{
		{Name: "init", Mode: 0o755, Type: initramfs.TypeFile, Data: o.Agent},
		{Name: "dev/console", Mode: 0o600, Type: initramfs.TypeChar, Major: 5, Minor: 1},
		{Name: "dev", Mode: 0o755, Type: initramfs.TypeDir},
		{Name: "proc", Mode: 0o755, Type: initramfs.TypeDir},
		{Name: "sys", Mode: 0o755, Type: initramfs.TypeDir},
		{Name: "run", Mode: 0o755, Type: initramfs.TypeDir},
		{Name: "tmp", Mode: 0o1777, Type: initramfs.TypeDir},
		{Name: "etc/os-release", Mode: 0o644, Type: initramfs.TypeFile, Data: []byte("NAME=\"" + o.Name + "\"\nID=rollcall\nVERSION_ID=" + o.Release + "\n")},
		{Name: "lib/modules/" + version + "/modules.dep", Mode: 0o644, Type: initramfs.TypeFile, Data: []byte(depOut)},
	}
	out := &Initrd{ModuleFiles: files}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(o.Kernel.ModDir, f))
		if err != nil {
			return nil, fmt.Errorf("initrd: %w", err)
		}
		out.ModuleBytes += len(b)
		entries = append(entries, initramfs.Entry{Name: "lib/modules/" + version + "/" + f, Mode: 0o644, Type: initramfs.TypeFile, Data: b})
	}
	if o.PCIIDs != "" {
		if b, err := os.ReadFile(o.PCIIDs); err == nil {
			entries = append(entries, initramfs.Entry{Name: "usr/share/misc/pci.ids", Mode: 0o644, Type: initramfs.TypeFile, Data: b})
		}
	}
	var buf bytes.Buffer
	if err := initramfs.Write(&buf, entries, o.MTime); err != nil {
		return nil, fmt.Errorf("initrd: %w", err)
	}
	out.Data = buf.Bytes()
	return out, nil
}

// Version names the checkout the binaries are built from: git describe,
// or "dev" outside a repository.
func Version() string {
	v := strings.TrimSpace(debkernel.Output("git", "describe", "--always", "--dirty"))
	if v == "" {
		return "dev"
	}
	return v
}

// BuildAgent builds the agent for the initrd's /init and returns it.
func BuildAgent(dir, version string) ([]byte, error) {
	out := filepath.Join(dir, "rollcall-agent")
	if err := GoBuild("./agent/cmd/rollcall-agent", out, version); err != nil {
		return nil, err
	}
	return os.ReadFile(out)
}

// GoBuild builds the command pkg as a static linux/amd64 binary at out,
// reproducibly (-trimpath, no VCS stamp, no build ID), with version as the
// agent's Version: the images' binaries (the agent, rollcall-overlay).
func GoBuild(pkg, out, version string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X github.com/rollcall/rollcall/agent.Version="+version,
		"-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	return nil
}
