package collect

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rollcall/rollcall/store/inventory"
)

// collectDisks lists whole block devices backed by hardware. Devices with no
// "device" link (loop, ram, zram, dm-*, md*) are software and skipped, as
// are optical drives and zero-sized devices (an empty card reader).
func collectDisks(fs sysfs, r *inventory.Report) error {
	names := fs.list("/sys/block")
	if names == nil {
		return fmt.Errorf("/sys/block: not readable")
	}
	for _, name := range names {
		base := "/sys/block/" + name
		if !fs.exists(base+"/device") || strings.HasPrefix(name, "sr") {
			continue
		}
		size := fs.int(base+"/size", 0) * 512 // always 512-byte units
		if size <= 0 {
			continue
		}
		devPath := fs.resolve(base + "/device")
		d := inventory.Disk{
			Name: name, SizeBytes: size,
			Model:      strings.Join(strings.Fields(fs.str(base+"/device/model")), " "),
			Rotational: fs.int(base+"/queue/rotational", 0) == 1,
			Removable:  fs.int(base+"/removable", 0) == 1,
			Transport:  transportOf(name, devPath),
		}
		d.Serial = firstNonEmpty(fs.str(base+"/device/serial"), fs.str(base+"/serial"), vpdSerial(fs.str(base+"/device/vpd_pg80")))
		if d.Serial == "" && d.Transport == "usb" {
			d.Serial = usbSerial(fs, devPath)
		}
		d.WWN = wwnOf(firstNonEmpty(fs.str(base+"/wwid"), fs.str(base+"/device/wwid")))
		d.ReadOnly = fs.int(base+"/ro", 0) == 1
		if lbs := fs.int(base+"/queue/logical_block_size", 0); lbs >= 512 && lbs <= 64<<10 {
			d.LogicalBlockSize = int(lbs)
		}
		d.ByPath = byPathOf(name, d.Transport, fs.pciAddress(base+"/device"), fs.int(base+"/nsid", 0))
		r.Disks = append(r.Disks, d)
	}
	return nil
}

// usbSerial is a USB disk's serial number: the iSerial string of the USB
// device it hangs off (the nearest ancestor of its SCSI device with an
// idVendor file), which the kernel shows in that device's serial file.
func usbSerial(fs sysfs, devPath string) string {
	for p := devPath; p != "" && p != "/" && p != "."; p = filepath.Dir(p) {
		if fs.exists(p + "/idVendor") {
			return strings.TrimSpace(fs.str(p + "/serial"))
		}
	}
	return ""
}

// transportOf tells the bus from the device's sysfs path: SATA disks hang
// under an ataN port, SAS ones under an end_device, virtio under virtioN.
func transportOf(name, devPath string) string {
	switch {
	case strings.HasPrefix(name, "nvme"):
		return "nvme"
	case strings.Contains(devPath, "/virtio"):
		return "virtio"
	case strings.Contains(devPath, "/usb"):
		return "usb"
	case strings.Contains(devPath, "/ata"):
		return "sata"
	case strings.Contains(devPath, "/end_device-"), strings.Contains(devPath, "/sas_"):
		return "sas"
	case strings.HasPrefix(name, "mmcblk"):
		return "mmc"
	case strings.HasPrefix(name, "sd"):
		return "scsi"
	}
	return ""
}

// byPathOf is udev's path_id name for the disks whose name it can be told
// from without udev: a virtio-blk disk is its PCI function
// (pci-0000:00:03.0), an NVMe namespace its controller's function and
// namespace ID (pci-0000:00:05.0-nvme-1). SCSI, SATA and USB paths depend
// on udev's version: left out rather than guessed.
func byPathOf(name, transport, pci string, nsid int64) string {
	if pci == "" {
		return ""
	}
	switch transport {
	case "virtio":
		return "pci-" + pci
	case "nvme":
		if nsid <= 0 {
			// nvme0n1 → 1, when the kernel has no nsid file.
			if i := strings.LastIndexByte(name, 'n'); i > 0 {
				fmt.Sscan(name[i+1:], &nsid)
			}
		}
		if nsid > 0 {
			return fmt.Sprintf("pci-%s-nvme-%d", pci, nsid)
		}
	}
	return ""
}

// vpdSerial extracts the Unit Serial Number from a raw VPD page 80h (SPC-4
// §7.8.18: 4-byte header, then ASCII).
func vpdSerial(s string) string {
	if len(s) < 5 || s[1] != 0x80 {
		return ""
	}
	return strings.TrimSpace(s[4:])
}

// wwnOf normalises the kernel's wwid ("naa.5000c500a1b2c3d4",
// "eui.0025388b91b0ab13", "t10.ATA ...") to the NAA/EUI hex with its
// scheme; T10 vendor IDs are not world-wide names and are dropped.
func wwnOf(wwid string) string {
	wwid = strings.TrimSpace(wwid)
	for _, p := range []string{"naa.", "eui.", "nvme.", "0x"} {
		if strings.HasPrefix(wwid, p) {
			if p == "0x" {
				return "naa." + wwid[2:]
			}
			return wwid
		}
	}
	return ""
}

// collectNVMe lists NVMe controllers with their namespaces.
func collectNVMe(fs sysfs, r *inventory.Report) error {
	for _, ctrl := range fs.list("/sys/class/nvme") {
		base := "/sys/class/nvme/" + ctrl
		c := inventory.NVMe{
			Name: ctrl, Model: fs.str(base + "/model"), Serial: fs.str(base + "/serial"),
			Firmware:   fs.str(base + "/firmware_rev"),
			PCIAddress: firstNonEmpty(pciOnly(fs.str(base+"/address")), fs.pciAddress(base+"/device")),
		}
		for _, ns := range fs.list(base) {
			// nvme0n1, or nvme0c0n1 for a path of a multipath namespace.
			if !strings.HasPrefix(ns, ctrl+"n") && !strings.HasPrefix(ns, ctrl+"c") {
				continue
			}
			if !fs.exists(base + "/" + ns + "/size") {
				continue
			}
			nb := base + "/" + ns
			c.Namespaces = append(c.Namespaces, inventory.NVMeNamespace{
				Name: ns, SizeBytes: fs.int(nb+"/size", 0) * 512,
				EUI64: hexCompact(fs.str(nb + "/eui")), NGUID: hexCompact(fs.str(nb + "/nguid")),
			})
		}
		sort.Slice(c.Namespaces, func(i, j int) bool { return c.Namespaces[i].Name < c.Namespaces[j].Name })
		r.NVMe = append(r.NVMe, c)
	}
	return nil
}

func pciOnly(s string) string {
	if isPCIAddress(s) {
		return s
	}
	return ""
}

// hexCompact turns "00 25 38 8b …" or "0025-388b" into "0025388b…"; an
// all-zero identifier means "not reported" and becomes "".
func hexCompact(s string) string {
	s = strings.NewReplacer(" ", "", "-", "", ":", "").Replace(strings.ToLower(s))
	if strings.Trim(s, "0") == "" {
		return ""
	}
	return s
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
