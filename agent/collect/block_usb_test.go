package collect

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rollcall/rollcall/store/inventory"
)

// A USB stick's serial is its USB device's iSerial (…/2-1/serial), not a
// SCSI attribute: the disk's sysfs tree as the kernel lays it out for
// usb-storage under xHCI.
func TestUSBDiskSerial(t *testing.T) {
	root := t.TempDir()
	usbDev := "sys/devices/pci0000:00/0000:00:04.0/usb2/2-1"
	scsi := usbDev + "/2-1:1.0/host0/target0:0:0/0:0:0:0"
	files := map[string]string{
		usbDev + "/idVendor": "46f4\n",
		usbDev + "/serial":   "RC-USB-DECOY\n",
		"sys/devices/pci0000:00/0000:00:04.0/usb2/serial": "0000:00:04.0\n", // the root hub's: not ours
		scsi + "/model":               "QEMU HARDDISK\n",
		scsi + "/block/sda/size":      "614400\n",
		scsi + "/block/sda/removable": "1\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "sys/block"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../devices/pci0000:00/0000:00:04.0/usb2/2-1/2-1:1.0/host0/target0:0:0/0:0:0:0/block/sda", filepath.Join(root, "sys/block/sda")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../0:0:0:0", filepath.Join(root, scsi, "block/sda/device")); err != nil {
		t.Fatal(err)
	}
	var r inventory.Report
	if err := collectDisks(sysfs{root: root}, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Disks) != 1 {
		t.Fatalf("disks %+v, want sda", r.Disks)
	}
	if d := r.Disks[0]; d.Name != "sda" || d.Transport != "usb" || !d.Removable || d.Serial != "RC-USB-DECOY" {
		t.Errorf("disk %+v, want sda usb removable with serial RC-USB-DECOY", d)
	}
}
