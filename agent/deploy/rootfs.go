package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// volume is a place a root file system may be: a partition or an LVM
// logical volume, in bytes of the disk.
type volume struct {
	desc   string // "partition 1", "LVM vg/root"
	off    int64
	size   int64
	fstype string // ext4 or xfs
	label  string // the file system's label
	part   Partition
	lvName string
}

var rootNames = []string{"root", "rootfs", "cloudimg-rootfs"}
var rootLVNames = []string{"root", "lv_root", "rootlv"}

// probeFS names the file system at off by its superblock: ext2/3/4's magic
// 0xEF53 at byte 1080 (mounted as ext4, which reads all three), XFS's
// "XFSB" at 0. It returns the label too.
func probeFS(r io.ReaderAt, off int64) (fstype, label string) {
	b := make([]byte, 2048)
	if n, _ := r.ReadAt(b, off); n < len(b) {
		return "", ""
	}
	switch {
	case b[1080] == 0x53 && b[1081] == 0xEF:
		return "ext4", cstr(b[1024+120 : 1024+136])
	case bytes.Equal(b[:4], []byte("XFSB")):
		return "xfs", cstr(b[108:120])
	}
	return "", ""
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return strings.TrimSpace(string(b))
}

// rootMount is the deployed root, mounted read-write.
type rootMount struct {
	dir string
	vol volume
}

func (m *rootMount) close() error { return unmount(m.dir) }

// findRoot finds and mounts the image's root file system: a partition of
// the Discoverable Partitions type "Linux root (x86-64)" first, then one
// whose partition name or file system label is root, rootfs or
// cloudimg-rootfs, then any ext4 or XFS partition holding /etc/os-release;
// after the partitions, the linear logical volumes of LVM physical volumes
// (named root, lv_root or rootlv first, then by the same probe).
func findRoot(t *target, tab *Table, devDir, dir string, log *slog.Logger) (*rootMount, error) {
	var fss, lvs []volume
	var tried []string
	for _, p := range tab.Partitions {
		fstype, label := probeFS(t, p.Start)
		if fstype != "" {
			fss = append(fss, volume{desc: fmt.Sprintf("partition %d", p.Number), off: p.Start, size: p.Size, fstype: fstype, label: label, part: p})
			continue
		}
		head := make([]byte, 4*lvmSector)
		if _, err := t.ReadAt(head, p.Start); err != nil || !IsLVM(head) {
			continue
		}
		found, skipped, err := ReadLVM(io.NewSectionReader(t, p.Start, p.Size), p.Size)
		if err != nil {
			tried = append(tried, fmt.Sprintf("partition %d (LVM: %v)", p.Number, err))
			continue
		}
		tried = append(tried, skipped...)
		for _, lv := range found {
			off := p.Start + lv.Offset
			fstype, label := probeFS(t, off)
			desc := fmt.Sprintf("LVM %s/%s on partition %d", lv.VG, lv.Name, p.Number)
			if fstype == "" {
				tried = append(tried, desc+" (no ext4 or XFS)")
				continue
			}
			lvs = append(lvs, volume{desc: desc, off: off, size: lv.Size, fstype: fstype, label: label, part: p, lvName: lv.Name})
		}
	}
	// Candidates in order of how sure they are; sure ones are taken
	// without the probe.
	type cand struct {
		v    volume
		sure string
	}
	var order []cand
	seen := map[string]bool{}
	add := func(v volume, sure string) {
		if !seen[v.desc] {
			seen[v.desc] = true
			order = append(order, cand{v, sure})
		}
	}
	for _, v := range fss {
		if v.part.Type == TypeLinuxRootX64 {
			add(v, "its type is Linux root (x86-64)")
		}
	}
	for _, v := range fss {
		if slices.Contains(rootNames, strings.ToLower(v.part.Name)) {
			add(v, fmt.Sprintf("its partition name is %q", v.part.Name))
		} else if slices.Contains(rootNames, strings.ToLower(v.label)) {
			add(v, fmt.Sprintf("its file system label is %q", v.label))
		}
	}
	for _, v := range fss {
		add(v, "")
	}
	for _, v := range lvs {
		if slices.Contains(rootLVNames, strings.ToLower(v.lvName)) {
			add(v, fmt.Sprintf("its logical volume is named %q", v.lvName))
		}
	}
	for _, v := range lvs {
		add(v, "")
	}
	for _, c := range order {
		if err := mountVolume(devDir, t.f, c.v.off, c.v.size, c.v.fstype, dir, c.sure == ""); err != nil {
			tried = append(tried, fmt.Sprintf("%s (%s: %v)", c.v.desc, c.v.fstype, err))
			continue
		}
		has := hasOSRelease(dir)
		if c.sure != "" {
			if !has {
				log.Warn("root file system has no os-release", "volume", c.v.desc)
			}
			log.Info("root file system", "volume", c.v.desc, "fstype", c.v.fstype, "why", c.sure)
			return &rootMount{dir: dir, vol: c.v}, nil
		}
		if err := unmount(dir); err != nil {
			return nil, err
		}
		if !has {
			tried = append(tried, fmt.Sprintf("%s (%s, no /etc/os-release)", c.v.desc, c.v.fstype))
			continue
		}
		// The probe mounted it read-only: again, read-write.
		if err := mountVolume(devDir, t.f, c.v.off, c.v.size, c.v.fstype, dir, false); err != nil {
			return nil, err
		}
		log.Info("root file system", "volume", c.v.desc, "fstype", c.v.fstype, "why", "it holds /etc/os-release")
		return &rootMount{dir: dir, vol: c.v}, nil
	}
	if len(tried) == 0 {
		tried = append(tried, fmt.Sprintf("%d partitions, none ext4, XFS or LVM", len(tab.Partitions)))
	}
	return nil, fmt.Errorf("%w; tried %s", errNoRoot, strings.Join(tried, "; "))
}

var errNoRoot = errors.New("no root file system found")

// hasOSRelease looks for os-release without following a symlink out of
// the image (on most systems /etc/os-release links to ../usr/lib/os-release).
func hasOSRelease(dir string) bool {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return false
	}
	defer r.Close()
	for _, p := range []string{"etc/os-release", "usr/lib/os-release"} {
		if fi, err := r.Stat(p); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// osRelease reads ID and ID_LIKE from the image's os-release.
func osRelease(dir string) (id string, like []string) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return "", nil
	}
	defer r.Close()
	for _, p := range []string{"etc/os-release", "usr/lib/os-release"} {
		f, err := r.Open(p)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(f, 64<<10))
		f.Close()
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
			if !ok {
				continue
			}
			v = strings.ToLower(strings.Trim(v, `"'`))
			switch k {
			case "ID":
				id = v
			case "ID_LIKE":
				like = strings.Fields(v)
			}
		}
		return id, like
	}
	return "", nil
}

// mountDir is where the root goes under the work directory.
func mountDir(work string) string { return filepath.Join(work, "root") }
