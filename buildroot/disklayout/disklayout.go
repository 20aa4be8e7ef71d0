// Package disklayout plans the installed appliance's disk: a GPT with a
// BIOS boot partition (GRUB's core image on BIOS machines), an EFI system
// partition (GRUB for UEFI and its environment block, which selects the
// slot), two system slots A and B (each a kernel, an initramfs and a
// manifest: one runs, the other takes the next upgrade) and a data
// partition for the store, the Raft log, certificates and caches.
// Partitions are found by their GPT names, never by device names, which
// change between boots.
//
// Phase 1 (this package) is the plan, as numbers and as sgdisk arguments,
// and the lookup by name; the installer that writes it, the slot images
// and the trial boot are phase 2 of issue 21 and not built yet.
package disklayout

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// GPT partition type GUIDs.
const (
	TypeBIOSBoot = "21686148-6449-6e6f-744e-656564454649"
	TypeESP      = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"
	TypeLinux    = "0fc63daf-8483-4772-8e79-3d69d8477de4"
)

// The partition names the appliance looks for.
const (
	NameBIOS  = "rollcall-bios"
	NameESP   = "rollcall-esp"
	NameSlotA = "rollcall-a"
	NameSlotB = "rollcall-b"
	NameData  = "rollcall-data"
)

const mib = 1 << 20

// Sizes of the fixed partitions. A slot holds a kernel, an initramfs and
// a manifest (the slot image targets ≤ 60 MB): 1 GiB leaves room for
// years of growth. The data partition takes the rest, at least MinData.
const (
	SizeBIOS = 1 * mib
	SizeESP  = 128 * mib
	SizeSlot = 1024 * mib
	MinData  = 4096 * mib
	align    = 1 * mib
)

// Partition is one planned partition, in sectors (LastLBA inclusive).
type Partition struct {
	Number   int
	Name     string
	Type     string
	FirstLBA int64
	LastLBA  int64
}

// Size is the partition's size in bytes for a sector size.
func (p Partition) Size(sector int) int64 { return (p.LastLBA - p.FirstLBA + 1) * int64(sector) }

// Layout is a disk's plan.
type Layout struct {
	SectorSize int
	Sectors    int64 // the disk's size in sectors
	Partitions []Partition
}

// MinDisk is the smallest disk Plan accepts, in bytes: the fixed
// partitions, MinData, the alignment gap before the first partition and
// the backup table at the end.
const MinDisk = align + SizeBIOS + SizeESP + 2*SizeSlot + MinData + align

// Plan lays the partitions out on a disk of diskBytes with logical
// sectors of sector bytes (512 or 4096): every partition starts on a MiB
// boundary; the data partition ends on one, before the backup table.
func Plan(diskBytes int64, sector int) (Layout, error) {
	if sector != 512 && sector != 4096 {
		return Layout{}, fmt.Errorf("disk layout: sector size %d, want 512 or 4096", sector)
	}
	if diskBytes < MinDisk {
		return Layout{}, fmt.Errorf("disk layout: the disk holds %s, the appliance needs at least %s (two %s slots and %s of data)",
			human(diskBytes), human(MinDisk), human(SizeSlot), human(MinData))
	}
	s := int64(sector)
	total := diskBytes / s
	// The backup header is the last sector; its entry array (128 entries
	// of 128 bytes) sits right before it.
	entrySectors := (128*128 + s - 1) / s
	lastUsable := total - 2 - entrySectors
	l := Layout{SectorSize: sector, Sectors: total}
	next := align / s
	add := func(name, typ string, bytes int64) {
		first := next
		last := first + bytes/s - 1
		l.Partitions = append(l.Partitions, Partition{Number: len(l.Partitions) + 1, Name: name, Type: typ, FirstLBA: first, LastLBA: last})
		next = last + 1
	}
	add(NameBIOS, TypeBIOSBoot, SizeBIOS)
	add(NameESP, TypeESP, SizeESP)
	add(NameSlotA, TypeLinux, SizeSlot)
	add(NameSlotB, TypeLinux, SizeSlot)
	end := (lastUsable + 1) / (align / s) * (align / s) // first sector past the data, MiB-aligned
	add(NameData, TypeLinux, (end-next)*s)
	return l, nil
}

// ByName finds a planned partition by its GPT name.
func (l Layout) ByName(name string) (Partition, bool) {
	for _, p := range l.Partitions {
		if p.Name == name {
			return p, true
		}
	}
	return Partition{}, false
}

// SgdiskArgs are the arguments that make sgdisk write the layout onto a
// device (append the device): a fresh GPT, then each partition's place,
// type and name.
func (l Layout) SgdiskArgs() []string {
	args := []string{"--clear"}
	for _, p := range l.Partitions {
		n := strconv.Itoa(p.Number)
		args = append(args,
			"--new="+n+":"+strconv.FormatInt(p.FirstLBA, 10)+":"+strconv.FormatInt(p.LastLBA, 10),
			"--typecode="+n+":"+p.Type,
			"--change-name="+n+":"+p.Name)
	}
	return args
}

// FindByName returns the block device (/dev/NAME) of the partition named
// name, from the PARTNAME= lines the kernel puts in each partition's
// uevent under sysBlock (/sys/class/block): no udev, no device names
// assumed. Two partitions of that name (the appliance's disk and a second
// disk once installed to) are an error naming both, since picking one
// could run a node on the wrong data.
func FindByName(sysBlock, name string) (string, error) {
	ents, err := os.ReadDir(sysBlock)
	if err != nil {
		return "", err
	}
	var found []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(sysBlock, e.Name(), "uevent"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PARTNAME="); ok && v == name {
				found = append(found, "/dev/"+e.Name())
			}
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no partition named %s", name)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%d partitions named %s (%s): detach the other disk", len(found), name, strings.Join(found, ", "))
}

func human(n int64) string {
	if n >= 1<<30 {
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	}
	return strconv.FormatInt(n/mib, 10) + " MiB"
}
