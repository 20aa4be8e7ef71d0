package deploy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf16"
)

// A read-only FAT12/16/32 reader, enough to find the boot loader on an ESP
// without a vfat module (Microsoft's FAT specification, "FAT: General
// Overview of On-Disk Format", 2000). Boot sector: bytes per sector 11,
// sectors per cluster 13, reserved sectors 14, FAT count 16, root entries
// 17, total sectors 19 (16-bit) or 32, FAT size 22 (16-bit) or 36 (FAT32),
// FAT32 root cluster 44. The FAT type follows from the cluster count alone.

type fatFS struct {
	r          io.ReaderAt
	bps        int64 // bytes per sector
	spc        int64 // sectors per cluster
	fatStart   int64 // bytes
	rootStart  int64 // bytes (FAT12/16 fixed root directory)
	rootSize   int64
	dataStart  int64
	clusters   uint32
	bits       int // 12, 16 or 32
	rootClus   uint32
	fatEntries []byte // the first FAT (bounded)
}

type fatEntry struct {
	name    string
	dir     bool
	cluster uint32
	size    uint32
}

const maxFATBytes = 64 << 20 // a FAT32 of a 32 GiB ESP with 4K clusters is 32 MiB

func openFAT(r io.ReaderAt, size int64) (*fatFS, error) {
	b := make([]byte, 512)
	if _, err := r.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("read FAT boot sector: %w", err)
	}
	le := binary.LittleEndian
	if b[510] != 0x55 || b[511] != 0xAA {
		return nil, errors.New("FAT: no boot sector signature")
	}
	f := &fatFS{r: r, bps: int64(le.Uint16(b[11:])), spc: int64(b[13])}
	reserved, nfats, rootEnts := int64(le.Uint16(b[14:])), int64(b[16]), int64(le.Uint16(b[17:]))
	total := int64(le.Uint16(b[19:]))
	if total == 0 {
		total = int64(le.Uint32(b[32:]))
	}
	fatSz := int64(le.Uint16(b[22:]))
	if fatSz == 0 {
		fatSz = int64(le.Uint32(b[36:]))
	}
	switch f.bps {
	case 512, 1024, 2048, 4096:
	default:
		return nil, fmt.Errorf("FAT: %d bytes per sector", f.bps)
	}
	if f.spc == 0 || f.spc&(f.spc-1) != 0 || reserved == 0 || nfats == 0 || fatSz == 0 || total == 0 || total*f.bps > size {
		return nil, errors.New("FAT: boot sector does not describe a FAT file system")
	}
	f.fatStart = reserved * f.bps
	f.rootStart = f.fatStart + nfats*fatSz*f.bps
	f.rootSize = (rootEnts*32 + f.bps - 1) / f.bps * f.bps
	f.dataStart = f.rootStart + f.rootSize
	if f.dataStart >= total*f.bps {
		return nil, errors.New("FAT: no data area")
	}
	f.clusters = uint32((total*f.bps - f.dataStart) / (f.spc * f.bps))
	switch {
	case f.clusters < 4085:
		f.bits = 12
	case f.clusters < 65525:
		f.bits = 16
	default:
		f.bits = 32
		f.rootClus = le.Uint32(b[44:])
	}
	need := (int64(f.clusters) + 2) * int64(f.bits) / 8
	if need+2 > fatSz*f.bps || need > maxFATBytes {
		return nil, errors.New("FAT: the table is smaller than the cluster count needs")
	}
	f.fatEntries = make([]byte, need+2)
	if _, err := r.ReadAt(f.fatEntries, f.fatStart); err != nil {
		return nil, fmt.Errorf("read FAT: %w", err)
	}
	return f, nil
}

// next returns the cluster after c, and false at the end of the chain.
func (f *fatFS) next(c uint32) (uint32, bool) {
	le := binary.LittleEndian
	var n uint32
	switch f.bits {
	case 12:
		v := uint32(le.Uint16(f.fatEntries[c+c/2:]))
		if c&1 == 1 {
			v >>= 4
		}
		n = v & 0xFFF
		if n >= 0xFF7 {
			return 0, false
		}
	case 16:
		n = uint32(le.Uint16(f.fatEntries[2*c:]))
		if n >= 0xFFF7 {
			return 0, false
		}
	default:
		n = le.Uint32(f.fatEntries[4*c:]) & 0x0FFFFFFF
		if n >= 0x0FFFFFF7 {
			return 0, false
		}
	}
	if n < 2 || n >= f.clusters+2 {
		return 0, false
	}
	return n, true
}

// chain reads a cluster chain, at most max bytes; a loop ends it.
func (f *fatFS) chain(first uint32, max int64) ([]byte, error) {
	var out []byte
	cs := f.spc * f.bps
	c, ok := first, first >= 2 && first < f.clusters+2
	for steps := uint32(0); ok && int64(len(out)) < max; steps++ {
		if steps > f.clusters {
			return nil, errors.New("FAT: a cluster chain loops")
		}
		buf := make([]byte, cs)
		if _, err := f.r.ReadAt(buf, f.dataStart+int64(c-2)*cs); err != nil {
			return nil, fmt.Errorf("read FAT cluster %d: %w", c, err)
		}
		out = append(out, buf...)
		c, ok = f.next(c)
	}
	return out, nil
}

const maxFATDir = 4 << 20

func (f *fatFS) readDir(cluster uint32, root bool) ([]fatEntry, error) {
	var raw []byte
	var err error
	if root && f.bits != 32 {
		raw = make([]byte, f.rootSize)
		_, err = f.r.ReadAt(raw, f.rootStart)
	} else {
		raw, err = f.chain(cluster, maxFATDir)
	}
	if err != nil {
		return nil, err
	}
	var out []fatEntry
	var lfn []uint16
	le := binary.LittleEndian
	for i := 0; i+32 <= len(raw); i += 32 {
		e := raw[i : i+32]
		switch {
		case e[0] == 0:
			return out, nil
		case e[0] == 0xE5:
			lfn = nil
			continue
		case e[11] == 0x0F: // a long-name part, stored last part first
			var part []uint16
			for _, r := range [][2]int{{1, 11}, {14, 26}, {28, 32}} {
				for j := r[0]; j < r[1]; j += 2 {
					part = append(part, le.Uint16(e[j:]))
				}
			}
			if e[0]&0x40 != 0 {
				lfn = nil
			}
			lfn = append(part, lfn...)
			continue
		case e[11]&0x08 != 0: // volume label
			lfn = nil
			continue
		}
		name := shortName(e)
		if lfn != nil {
			for k, c := range lfn {
				if c == 0 {
					lfn = lfn[:k]
					break
				}
			}
			name = string(utf16.Decode(lfn))
			lfn = nil
		}
		clus := uint32(le.Uint16(e[26:]))
		if f.bits == 32 {
			clus |= uint32(le.Uint16(e[20:])) << 16
		}
		out = append(out, fatEntry{name: name, dir: e[11]&0x10 != 0, cluster: clus, size: le.Uint32(e[28:])})
	}
	return out, nil
}

func shortName(e []byte) string {
	base := strings.TrimRight(string(e[0:8]), " ")
	ext := strings.TrimRight(string(e[8:11]), " ")
	if e[12]&0x08 != 0 {
		base = strings.ToLower(base)
	}
	if e[12]&0x10 != 0 {
		ext = strings.ToLower(ext)
	}
	if ext == "" {
		return base
	}
	return base + "." + ext
}

// lookup finds a path ("EFI/debian/shimx64.efi"), names compared without case.
func (f *fatFS) lookup(path string) (fatEntry, error) {
	cur := fatEntry{dir: true, cluster: f.rootClus}
	root := true
	for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
		if !cur.dir {
			return fatEntry{}, fmt.Errorf("%s: not a directory on the ESP", path)
		}
		ents, err := f.readDir(cur.cluster, root)
		if err != nil {
			return fatEntry{}, err
		}
		found := false
		for _, e := range ents {
			if strings.EqualFold(e.name, part) {
				cur, found, root = e, true, false
				break
			}
		}
		if !found {
			return fatEntry{}, fmt.Errorf("%s: not on the ESP", path)
		}
	}
	return cur, nil
}

// list returns a directory's entries.
func (f *fatFS) list(path string) ([]fatEntry, error) {
	if strings.Trim(path, "/") == "" {
		return f.readDir(f.rootClus, true)
	}
	d, err := f.lookup(path)
	if err != nil {
		return nil, err
	}
	if !d.dir {
		return nil, fmt.Errorf("%s: not a directory on the ESP", path)
	}
	return f.readDir(d.cluster, false)
}

// readFile reads a file of at most max bytes.
func (f *fatFS) readFile(path string, max int64) ([]byte, error) {
	e, err := f.lookup(path)
	if err != nil {
		return nil, err
	}
	if e.dir {
		return nil, fmt.Errorf("%s: a directory", path)
	}
	if int64(e.size) > max {
		return nil, fmt.Errorf("%s: %d bytes, at most %d", path, e.size, max)
	}
	b, err := f.chain(e.cluster, int64(e.size))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) < int64(e.size) {
		return nil, fmt.Errorf("%s: its clusters hold %d of %d bytes", path, len(b), e.size)
	}
	return b[:e.size], nil
}
