package deploy

import (
	"errors"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/store/inventory"
)

// The disks of a VM the e2e test builds: a target, a bigger second disk and
// a USB decoy, plus what a real server adds (a 4Kn disk, a read-only LUN,
// an SD card slot).
var vmDisks = []inventory.Disk{
	{Name: "vda", SizeBytes: 10 << 30, Serial: "rc-vda-1", Transport: "virtio", ByPath: "pci-0000:00:03.0"},
	{Name: "nvme0n1", SizeBytes: 40 << 30, Serial: "rc-nvme-1", WWN: "eui.0025388b91b0ab13", Transport: "nvme", ByPath: "pci-0000:00:05.0-nvme-1"},
	{Name: "sda", SizeBytes: 8 << 30, Serial: "usb-decoy", Transport: "usb", Removable: true},
	{Name: "sdb", SizeBytes: 6 << 30, Serial: "4kn-1", WWN: "naa.5000c500a1b2c3d4", Transport: "sas", LogicalBlockSize: 4096},
	{Name: "sdc", SizeBytes: 5 << 30, Serial: "ro-lun", Transport: "scsi", ReadOnly: true},
	{Name: "mmcblk0", SizeBytes: 4 << 30, Transport: "mmc", Removable: true},
}

func TestChooseDisk(t *testing.T) {
	const raw = 3 << 30
	cases := map[string]struct {
		disks  []inventory.Disk
		want   string
		sector int
		name   string // chosen
		rule   string // part of the rule
		err    string // part of the refusal
	}{
		"smallest that fits":        {disks: vmDisks, name: "vda", rule: RuleSmallest},
		"by name":                   {disks: vmDisks, want: "nvme0n1", name: "nvme0n1", rule: "name nvme0n1"},
		"by /dev name":              {disks: vmDisks, want: "/dev/nvme0n1", name: "nvme0n1", rule: RuleNamed},
		"by serial":                 {disks: vmDisks, want: "rc-nvme-1", name: "nvme0n1", rule: "serial"},
		"by wwn":                    {disks: vmDisks, want: "eui.0025388b91b0ab13", name: "nvme0n1", rule: "WWN"},
		"by path":                   {disks: vmDisks, want: "/dev/disk/by-path/pci-0000:00:03.0", name: "vda", rule: "by-path"},
		"named removable card":      {disks: vmDisks, want: "mmcblk0", name: "mmcblk0", rule: RuleNamed},
		"usb named":                 {disks: vmDisks, want: "sda", err: "on USB"},
		"read-only named":           {disks: vmDisks, want: "sdc", err: "read-only"},
		"4Kn named, 512-byte image": {disks: vmDisks, want: "sdb", err: "4096-byte logical blocks; the image has 512-byte sectors"},
		"4Kn image picks the 4Kn":   {disks: vmDisks, sector: 4096, name: "sdb", rule: RuleSmallest},
		"unknown name":              {disks: vmDisks, want: "sdz", err: `no disk of the machine is "sdz"`},
		"usb only":                  {disks: vmDisks[2:3], err: "sda (on USB: never a deployment's target)"},
		"too small":                 {disks: []inventory.Disk{{Name: "vda", SizeBytes: 1 << 30}}, err: "1.0 GiB is smaller than the image's 3.0 GiB"},
		"no inventory":              {err: "lists no disk"},
		"ambiguous serial":          {disks: []inventory.Disk{{Name: "nvme0n1", SizeBytes: 8 << 30, Serial: "S1"}, {Name: "nvme0n2", SizeBytes: 8 << 30, Serial: "S1"}}, want: "S1", err: "serial of 2 disks"},
		"tie by name":               {disks: []inventory.Disk{{Name: "vdb", SizeBytes: 8 << 30}, {Name: "vda", SizeBytes: 8 << 30}}, name: "vda"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := ChooseDisk(c.disks, c.want, raw, c.sector)
			if c.err != "" {
				var de *DiskError
				if !errors.As(err, &de) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %+v, %v; want a refusal with %q", d, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Name != c.name || !strings.Contains(d.Rule, c.rule) {
				t.Fatalf("chose %s (%s), want %s (%s)", d.Name, d.Rule, c.name, c.rule)
			}
			for _, in := range c.disks {
				if in.Name == d.Name && (d.Serial != in.Serial || d.WWN != in.WWN || d.Size != in.SizeBytes || d.ByPath != in.ByPath) {
					t.Errorf("job disk %+v does not carry the inventory's identity %+v", d, in)
				}
			}
		})
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{512: "512 B", 3 << 30: "3.0 GiB", 1920383410176: "1.7 TiB", 1536: "1.5 KiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
