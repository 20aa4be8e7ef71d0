package buildroot

import (
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// The ISO's driver set: every wired NIC and storage driver Debian's kernel
// has (a server behind an HPE Smart Array, a Broadcom bnx2x, a QLogic
// qede, a Chelsio cxgb4 or a ConnectX-3 must come up), the file systems
// the appliance mounts, and what a server's console and health need (USB
// keyboards, IPMI, TPM, watchdogs). Paths are prefixes under
// lib/modules/VERSION; the init loads only what the hardware asks for, by
// modalias, so carrying more costs space, not boot time.
var driverSet = []string{
	// NIC
	"kernel/drivers/net/ethernet/", "kernel/drivers/net/virtio_net.ko", "kernel/drivers/net/vmxnet3/",
	"kernel/drivers/net/hyperv/", "kernel/drivers/net/xen-netfront.ko", "kernel/drivers/net/usb/",
	"kernel/drivers/net/bonding/", "kernel/drivers/net/team/", "kernel/drivers/net/phy/",
	"kernel/drivers/net/mdio/", "kernel/drivers/net/pcs/", "kernel/drivers/net/mii.ko", "kernel/drivers/net/mdio.ko",
	// storage
	"kernel/drivers/scsi/", "kernel/drivers/ata/", "kernel/drivers/nvme/", "kernel/drivers/block/",
	"kernel/drivers/md/", "kernel/drivers/usb/storage/", "kernel/drivers/cdrom/", "kernel/drivers/mmc/",
	"kernel/fs/ext4/", "kernel/fs/fat/", "kernel/fs/isofs/", "kernel/fs/efivarfs/",
	"kernel/fs/nls/nls_cp437.ko", "kernel/fs/nls/nls_ascii.ko", "kernel/fs/nls/nls_utf8.ko",
	// other: buses, console, BMC, TPM, watchdogs, checksums
	"kernel/drivers/virtio/", "kernel/drivers/usb/host/", "kernel/drivers/hid/usbhid/", "kernel/drivers/hid/hid-generic.ko",
	"kernel/drivers/hid/hid.ko", "kernel/drivers/char/ipmi/", "kernel/drivers/char/tpm/", "kernel/drivers/watchdog/",
	"kernel/crypto/crc32c_generic.ko",
}

// mustCarry are drivers the ISO exists to carry: a build without one of
// them fails.
var mustCarry = []string{"smartpqi", "hpsa", "megaraid_sas", "mpt3sas", "nvme", "ahci", "bnx2x", "qede", "cxgb4",
	"mlx4_en", "mlx5_core", "ice", "i40e", "ixgbe", "igb", "e1000e", "tg3", "bnxt_en", "virtio_net", "virtio_blk", "virtio_scsi", "e1000"}

// Class is the kind of driver a module is, for the build's report.
type Class string

const (
	ClassNIC     Class = "NIC"
	ClassStorage Class = "storage"
	ClassOther   Class = "other"
)

// Classify places a module (its path under lib/modules/VERSION).
func Classify(rel string) Class {
	switch {
	case strings.HasPrefix(rel, "kernel/drivers/net/"), strings.HasPrefix(rel, "kernel/drivers/infiniband/"):
		return ClassNIC
	case strings.HasPrefix(rel, "kernel/fs/"):
		return ClassStorage
	}
	for _, p := range []string{"scsi/", "ata/", "nvme/", "block/", "md/", "usb/storage/", "cdrom/", "mmc/"} {
		if strings.HasPrefix(rel, "kernel/drivers/"+p) {
			return ClassStorage
		}
	}
	if strings.HasSuffix(rel, "/virtio_blk.ko") || strings.HasSuffix(rel, "/virtio_scsi.ko") {
		return ClassStorage
	}
	return ClassOther
}

// selectModules lists the module names under modDir that the driver set
// names (the closure with their dependencies is taken later).
func selectModules(modDir string, set []string) ([]string, error) {
	var names []string
	err := filepath.WalkDir(modDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".ko") {
			return nil
		}
		rel, _ := filepath.Rel(modDir, p)
		rel = filepath.ToSlash(rel)
		for _, prefix := range set {
			if strings.HasPrefix(rel, prefix) {
				names = append(names, moduleName(rel))
				break
			}
		}
		return nil
	})
	sort.Strings(names)
	return names, err
}

func moduleName(rel string) string {
	b := filepath.Base(rel)
	b = strings.TrimSuffix(b, ".ko")
	return strings.ReplaceAll(b, "-", "_")
}
