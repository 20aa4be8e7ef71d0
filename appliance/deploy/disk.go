// Package deploy holds the decisions a deployment makes before anything is
// written, as pure functions of the machine's records (no I/O): which disk
// (ChooseDisk), and the cloud-init NoCloud seed the agent writes into the
// installed system (UserData, MetaData; network-config comes from the
// machine's interface layout, ipam/layout). The API calls them when it
// makes a job (the disk and rule are shown before anything is written)
// and when the agent asks for its job.
package deploy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// Disk rules, as the job and the CLI show them.
const (
	RuleNamed    = "named by the operator"
	RuleSmallest = "the smallest non-removable, writable disk that fits"
)

// DiskError is a refusal of the disk choice, written for the operator:
// what was asked, and each disk with the reason it does not do.
type DiskError struct{ Msg string }

func (e *DiskError) Error() string { return e.Msg }

// ChooseDisk picks the disk a deployment writes. want is the operator's
// -disk: a name (sda, /dev/sda), a serial, a WWN or a by-path name
// (/dev/disk/by-path/pci-…); "" lets the rule choose: the smallest disk
// that holds rawSize and is neither removable, read-only nor on USB, its
// logical block size the image's (ties by name). A disk named by the
// operator is held to the same limits except removability: a USB disk is
// never a target (the appliance's own boot stick is one). The result
// carries the serial and WWN, which stay when names move between boots.
func ChooseDisk(disks []inventory.Disk, want string, rawSize int64, sectorSize int) (store.JobDisk, error) {
	sectorSize = cmp.Or(sectorSize, 512)
	if len(disks) == 0 {
		return store.JobDisk{}, &DiskError{"the machine's inventory lists no disk: re-commission it"}
	}
	if want != "" {
		return chooseNamed(disks, want, rawSize, sectorSize)
	}
	var fits []inventory.Disk
	var why []string
	for _, d := range disks {
		if reason := unfit(d, rawSize, sectorSize, false); reason != "" {
			why = append(why, d.Name+" ("+reason+")")
			continue
		}
		fits = append(fits, d)
	}
	if len(fits) == 0 {
		return store.JobDisk{}, &DiskError{fmt.Sprintf("no disk can take an image of %s: %s", Size(rawSize), strings.Join(why, "; "))}
	}
	slices.SortFunc(fits, func(a, b inventory.Disk) int {
		return cmp.Or(cmp.Compare(a.SizeBytes, b.SizeBytes), cmp.Compare(a.Name, b.Name))
	})
	rule := fmt.Sprintf("%s (%s of %d disks)", RuleSmallest, Size(fits[0].SizeBytes), len(disks))
	return jobDisk(fits[0], rule), nil
}

func chooseNamed(disks []inventory.Disk, want string, rawSize int64, sectorSize int) (store.JobDisk, error) {
	ref := strings.TrimPrefix(strings.TrimPrefix(want, "/dev/disk/by-path/"), "/dev/")
	var hits []inventory.Disk
	how := ""
	for _, by := range []struct {
		name string
		of   func(inventory.Disk) string
	}{
		{"name", func(d inventory.Disk) string { return d.Name }},
		{"serial", func(d inventory.Disk) string { return d.Serial }},
		{"WWN", func(d inventory.Disk) string { return d.WWN }},
		{"by-path name", func(d inventory.Disk) string { return d.ByPath }},
	} {
		for _, d := range disks {
			if v := by.of(d); v != "" && (v == ref || v == want) {
				hits = append(hits, d)
			}
		}
		if len(hits) > 0 {
			how = by.name
			break
		}
	}
	switch {
	case len(hits) == 0:
		var names []string
		for _, d := range disks {
			names = append(names, describe(d))
		}
		return store.JobDisk{}, &DiskError{fmt.Sprintf("no disk of the machine is %q (by name, serial, WWN or by-path); it has %s", store.Clip(want), strings.Join(names, ", "))}
	case len(hits) > 1:
		var names []string
		for _, d := range hits {
			names = append(names, d.Name)
		}
		return store.JobDisk{}, &DiskError{fmt.Sprintf("%q is the %s of %d disks (%s): name one by its name or WWN", store.Clip(want), how, len(hits), strings.Join(names, ", "))}
	}
	d := hits[0]
	if reason := unfit(d, rawSize, sectorSize, true); reason != "" {
		return store.JobDisk{}, &DiskError{fmt.Sprintf("disk %s cannot take the image: %s", d.Name, reason)}
	}
	return jobDisk(d, fmt.Sprintf("%s (%s %s)", RuleNamed, how, store.Clip(want))), nil
}

// unfit says why a disk cannot be written, "" when it can.
func unfit(d inventory.Disk, rawSize int64, sectorSize int, named bool) string {
	lbs := cmp.Or(d.LogicalBlockSize, 512)
	switch {
	case d.Transport == "usb":
		return "on USB: never a deployment's target"
	case d.ReadOnly:
		return "read-only"
	case d.Removable && !named:
		return "removable"
	case d.SizeBytes < rawSize:
		return fmt.Sprintf("%s is smaller than the image's %s", Size(d.SizeBytes), Size(rawSize))
	case lbs != sectorSize:
		return fmt.Sprintf("%d-byte logical blocks; the image has %d-byte sectors, so its partition table would not be valid there", lbs, sectorSize)
	}
	return ""
}

func jobDisk(d inventory.Disk, rule string) store.JobDisk {
	return store.JobDisk{
		Name: d.Name, Serial: d.Serial, WWN: d.WWN, ByPath: d.ByPath, Size: d.SizeBytes,
		LogicalBlockSize: d.LogicalBlockSize, Rule: rule,
	}
}

func describe(d inventory.Disk) string {
	s := d.Name + " " + Size(d.SizeBytes)
	if d.Serial != "" {
		s += " serial " + d.Serial
	}
	return s
}

// Size prints a byte count in binary units, one decimal.
func Size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
