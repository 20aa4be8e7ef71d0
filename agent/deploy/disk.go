package deploy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Device is the disk a job writes: a block device, or a regular file in
// tests (Path is then the file and Name its base name).
type Device struct {
	Name       string // kernel name: sda, nvme0n1
	Path       string // /dev/sda
	Size       int64  // bytes
	SectorSize int    // logical block size in bytes
	Serial     string
	WWN        string
}

// Sectors is the disk's size in logical sectors.
func (d Device) Sectors() int64 { return d.Size / int64(d.SectorSize) }

// ErrNoDisk: no disk matches the job's serial or WWN.
var ErrNoDisk = errors.New("no disk matches the job")

// Resolve finds the block device a job names among root/sys/block. A disk
// is matched by serial or WWN (the names sdX change between boots); only
// when the job carries neither, by name and exact size. It never returns a
// removable, read-only or USB disk, one with another logical sector size
// than the image, or one smaller than the image: each is refused with the
// reason. sectorSize and need are the image's (0: not checked).
func Resolve(root string, ref DiskRef, sectorSize int, need int64) (Device, error) {
	sysBlock := filepath.Join(root, "sys/block")
	ents, err := os.ReadDir(sysBlock)
	if err != nil {
		return Device{}, fmt.Errorf("resolve disk: %w", err)
	}
	var matches []Device
	var seen []string
	for _, e := range ents {
		base := filepath.Join(sysBlock, e.Name())
		if _, err := os.Stat(filepath.Join(base, "device")); err != nil {
			continue // loop, ram, dm-*, md*: no hardware behind them
		}
		d := Device{
			Name:       e.Name(),
			Path:       filepath.Join(root, "dev", e.Name()),
			Size:       readInt(filepath.Join(base, "size")) * 512, // always 512-byte units
			SectorSize: int(readInt(filepath.Join(base, "queue/logical_block_size"))),
			Serial:     firstNonEmpty(readStr(filepath.Join(base, "device/serial")), readStr(filepath.Join(base, "serial"))),
			WWN:        firstNonEmpty(readStr(filepath.Join(base, "wwid")), readStr(filepath.Join(base, "device/wwid"))),
		}
		seen = append(seen, fmt.Sprintf("%s (serial %q, wwn %q)", d.Name, d.Serial, d.WWN))
		switch {
		case ref.Serial != "" && d.Serial == strings.TrimSpace(ref.Serial):
		case ref.WWN != "" && d.WWN != "" && normWWN(d.WWN) == normWWN(ref.WWN):
		case ref.Serial == "" && ref.WWN == "" && d.Name == ref.Name && (ref.Size == 0 || ref.Size == d.Size):
		default:
			continue
		}
		if err := usable(base, d, sectorSize, need); err != nil {
			return Device{}, err
		}
		matches = append(matches, d)
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		sort.Strings(seen)
		return Device{}, fmt.Errorf("%w (serial %q, wwn %q, name %q); disks here: %s", ErrNoDisk, ref.Serial, ref.WWN, ref.Name, strings.Join(seen, ", "))
	}
	var names []string
	for _, m := range matches {
		names = append(names, m.Name)
	}
	return Device{}, fmt.Errorf("resolve disk: %d disks match (serial %q, wwn %q): %s; refusing to guess", len(matches), ref.Serial, ref.WWN, strings.Join(names, ", "))
}

// usable refuses a disk that must never be written.
func usable(base string, d Device, sectorSize int, need int64) error {
	if readInt(filepath.Join(base, "removable")) == 1 {
		return fmt.Errorf("disk %s (serial %q) is removable: refusing to write it", d.Name, d.Serial)
	}
	if readInt(filepath.Join(base, "ro")) == 1 {
		return fmt.Errorf("disk %s (serial %q) is read-only", d.Name, d.Serial)
	}
	if link, err := filepath.EvalSymlinks(filepath.Join(base, "device")); err == nil && strings.Contains(link, "/usb") {
		return fmt.Errorf("disk %s (serial %q) is on USB: refusing to write it", d.Name, d.Serial)
	}
	if d.SectorSize <= 0 {
		return fmt.Errorf("disk %s: no logical block size in sysfs", d.Name)
	}
	if sectorSize > 0 && d.SectorSize != sectorSize {
		return fmt.Errorf("disk %s has %d-byte logical sectors and the image was made for %d-byte sectors: "+
			"its partition table would not be found there (a %d-byte image on a %dn disk); use an image made for %d-byte sectors",
			d.Name, d.SectorSize, sectorSize, sectorSize, d.SectorSize/1024, d.SectorSize)
	}
	if need > 0 && d.Size < need {
		return fmt.Errorf("disk %s is %d bytes, smaller than the image (%d bytes)", d.Name, d.Size, need)
	}
	return nil
}

// normWWN compares WWNs without their scheme ("naa.", "eui.", "0x") or case.
func normWWN(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	for _, p := range []string{"naa.", "eui.", "nvme.", "0x"} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

func readStr(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func readInt(path string) int64 {
	n, _ := strconv.ParseInt(readStr(path), 10, 64)
	return n
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
