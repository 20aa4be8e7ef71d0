package disklayout

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/lab/deployimage/gpt"
	"github.com/rollcall/rollcall/lab/testenv"
)

func TestPlan(t *testing.T) {
	for name, c := range map[string]struct {
		disk   int64
		sector int
	}{
		"16 GB stick, 512": {16_000_000_000, 512},
		"smallest, 512":    {MinDisk, 512},
		"480 GB SSD, 4Kn":  {480_103_981_056, 4096},
		"odd size, 512":    {MinDisk + 12345*512 + 7, 512},
	} {
		t.Run(name, func(t *testing.T) {
			l, err := Plan(c.disk, c.sector)
			if err != nil {
				t.Fatal(err)
			}
			s := int64(c.sector)
			wantNames := []string{NameBIOS, NameESP, NameSlotA, NameSlotB, NameData}
			if len(l.Partitions) != len(wantNames) {
				t.Fatalf("%d partitions", len(l.Partitions))
			}
			entrySectors := (16384 + s - 1) / s
			lastUsable := c.disk/s - 2 - entrySectors
			prevEnd := int64(33)
			for i, p := range l.Partitions {
				if p.Name != wantNames[i] || p.Number != i+1 {
					t.Errorf("partition %d is %d %s", i, p.Number, p.Name)
				}
				if p.FirstLBA*s%align != 0 {
					t.Errorf("%s starts at LBA %d, not on a MiB", p.Name, p.FirstLBA)
				}
				if p.FirstLBA <= prevEnd || p.LastLBA < p.FirstLBA {
					t.Errorf("%s [%d, %d] overlaps or is empty (previous ends at %d)", p.Name, p.FirstLBA, p.LastLBA, prevEnd)
				}
				prevEnd = p.LastLBA
			}
			if prevEnd > lastUsable {
				t.Errorf("data ends at %d, past the last usable LBA %d", prevEnd, lastUsable)
			}
			if lastUsable-prevEnd >= align/s {
				t.Errorf("data leaves %d sectors unused at the end", lastUsable-prevEnd)
			}
			for name, size := range map[string]int64{NameBIOS: SizeBIOS, NameESP: SizeESP, NameSlotA: SizeSlot, NameSlotB: SizeSlot} {
				if p, _ := l.ByName(name); p.Size(c.sector) != size {
					t.Errorf("%s is %d bytes, want %d", name, p.Size(c.sector), size)
				}
			}
			if p, _ := l.ByName(NameData); p.Size(c.sector) < MinData {
				t.Errorf("data is %d bytes", p.Size(c.sector))
			}
		})
	}
}

func TestPlanRefuses(t *testing.T) {
	if _, err := Plan(MinDisk-1, 512); err == nil || !strings.Contains(err.Error(), "needs at least") {
		t.Errorf("a small disk: %v", err)
	}
	if _, err := Plan(64<<30, 520); err == nil {
		t.Error("sector size 520: no error")
	}
}

// sgdisk writes the plan onto a sparse file; the GPT read back (by the
// deploy image's independent reader) is the plan, and sgdisk's own check
// finds no problem.
func TestSgdisk(t *testing.T) {
	testenv.NeedTool(t, "sgdisk")
	l, err := Plan(20<<30, 512)
	if err != nil {
		t.Fatal(err)
	}
	img := writeLayout(t, l, 20<<30)
	out, err := exec.Command("sgdisk", "--verify", img).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "No problems found") {
		t.Fatalf("sgdisk --verify: %v\n%s", err, out)
	}
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := gpt.Read(f, 512)
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Partitions) != len(l.Partitions) {
		t.Fatalf("read %d partitions", len(tab.Partitions))
	}
	for i, p := range tab.Partitions {
		w := l.Partitions[i]
		if p.Name != w.Name || p.Type != w.Type || int64(p.FirstLBA) != w.FirstLBA || int64(p.LastLBA) != w.LastLBA {
			t.Errorf("partition %d: read %+v, planned %+v", i+1, p, w)
		}
	}
}

func writeLayout(t *testing.T, l Layout, size int64) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sgdisk", append(l.SgdiskArgs(), img)...).CombinedOutput(); err != nil {
		t.Fatalf("sgdisk %v: %v\n%s", l.SgdiskArgs(), err, out)
	}
	return img
}

// FindByName over a /sys/class/block tree as the kernel writes it (the
// uevent lines of a disk and its partitions). A real loop device would be
// better, but this machine's kernel does not scan a loop device's
// partitions (partscan is 1, no loopNpM appears); the VM boot test runs
// Debian's kernel, which does.
func TestFindByName(t *testing.T) {
	sys := t.TempDir()
	dev := func(name, uevent string) {
		if err := os.MkdirAll(filepath.Join(sys, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sys, name, "uevent"), []byte(uevent), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dev("sda", "MAJOR=8\nMINOR=0\nDEVNAME=sda\nDEVTYPE=disk\nDISKSEQ=9\n")
	dev("sda1", "MAJOR=8\nMINOR=1\nDEVNAME=sda1\nDEVTYPE=partition\nDISKSEQ=9\nPARTN=1\nPARTNAME=rollcall-bios\n")
	dev("sda5", "MAJOR=8\nMINOR=5\nDEVNAME=sda5\nDEVTYPE=partition\nDISKSEQ=9\nPARTN=5\nPARTNAME=rollcall-data\n")
	dev("nvme0n1p2", "MAJOR=259\nMINOR=2\nDEVNAME=nvme0n1p2\nDEVTYPE=partition\nPARTN=2\nPARTNAME=rollcall-a\n")
	if got, err := FindByName(sys, NameData); err != nil || got != "/dev/sda5" {
		t.Errorf("FindByName(%s) = %q, %v", NameData, got, err)
	}
	if got, err := FindByName(sys, NameSlotA); err != nil || got != "/dev/nvme0n1p2" {
		t.Errorf("FindByName(%s) = %q, %v", NameSlotA, got, err)
	}
	if _, err := FindByName(sys, "rollcall-nosuch"); err == nil {
		t.Error("an absent name: no error")
	}
	dev("sdb5", "DEVNAME=sdb5\nDEVTYPE=partition\nPARTNAME=rollcall-data\n")
	if _, err := FindByName(sys, NameData); err == nil || !strings.Contains(err.Error(), "/dev/sda5, /dev/sdb5") {
		t.Errorf("two partitions of one name: %v", err)
	}
}
