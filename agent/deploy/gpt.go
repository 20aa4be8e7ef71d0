package deploy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"unicode/utf16"
)

// The GUID Partition Table, UEFI 2.10 §5.3. All integers are little-endian.
// Header (LBA 1): signature "EFI PART" 0, revision 8, header size 12, header
// CRC32 16 (computed with itself zeroed), reserved 20, my LBA 24, alternate
// LBA 32, first usable 40, last usable 48, disk GUID 56, entries LBA 72,
// entry count 80, entry size 84, entries CRC32 88.

// Well-known partition type GUIDs.
const (
	TypeESP          = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"
	TypeLinuxRootX64 = "4f68bce3-e8cd-4db1-96e7-fbcaf984b709" // Discoverable Partitions: Linux root (x86-64)
	TypeLinuxLVM     = "e6d6d379-f507-44c2-a23c-238f2a3df928"
	TypeBIOSBoot     = "21686148-6449-6e6f-744e-656564454649"
)

// Partition is one entry of the table, its extent in bytes.
type Partition struct {
	Number int    // 1-based, as the kernel numbers it
	Start  int64  // bytes from the disk's start
	Size   int64  // bytes
	Type   string // GPT type GUID, lower case; "mbr:0x83" for an MBR entry
	GUID   string // GPT unique partition GUID ("" for MBR)
	Name   string // GPT partition name
	// FirstLBA and Sectors in the table's own sector size, for UEFI device paths.
	FirstLBA, Sectors uint64
}

// Table is a disk's partition table.
type Table struct {
	Kind       string // "gpt" or "mbr"
	SectorSize int
	Partitions []Partition
	hdr        gptHeader // GPT only
	entries    []byte    // GPT only: the raw entry array
}

type gptHeader struct {
	raw                          []byte // the header's bytes (HeaderSize of them)
	MyLBA, AltLBA                uint64
	FirstUsable, LastUsable      uint64
	EntriesLBA                   uint64
	EntryCount, EntrySize        uint32
	EntriesCRC, HeaderSize, HCRC uint32
}

// ErrNoTable: the disk has no valid partition table.
var ErrNoTable = errors.New("no valid partition table")

// Bounds that keep a hostile table from making us read gigabytes.
const (
	maxGPTEntries   = 1024
	maxGPTEntrySize = 1024
)

// ReadTable reads a disk's GPT (primary header at LBA 1, both CRCs checked),
// else an MBR with partitions; anything else is ErrNoTable. size is the
// disk's size in bytes.
func ReadTable(r io.ReaderAt, size int64, sectorSize int) (*Table, error) {
	ss := int64(sectorSize)
	if size < 3*ss {
		return nil, fmt.Errorf("%w: the disk is %d bytes", ErrNoTable, size)
	}
	hb := make([]byte, ss)
	if _, err := r.ReadAt(hb, ss); err != nil {
		return nil, fmt.Errorf("read LBA 1: %w", err)
	}
	if bytes.Equal(hb[:8], []byte("EFI PART")) {
		h, err := parseGPTHeader(hb, 1)
		if err != nil {
			return nil, err
		}
		n := int64(h.EntryCount) * int64(h.EntrySize)
		if int64(h.EntriesLBA)*ss+n > size {
			return nil, fmt.Errorf("%w: GPT entries at LBA %d run past the disk's end", ErrNoTable, h.EntriesLBA)
		}
		ents := make([]byte, n)
		if _, err := r.ReadAt(ents, int64(h.EntriesLBA)*ss); err != nil {
			return nil, fmt.Errorf("read GPT entries: %w", err)
		}
		return parseGPT(h, ents, sectorSize)
	}
	mbr := make([]byte, 512)
	if _, err := r.ReadAt(mbr, 0); err != nil {
		return nil, fmt.Errorf("read MBR: %w", err)
	}
	return parseMBR(mbr, size, sectorSize)
}

// parseGPTHeader checks a GPT header found at LBA at.
func parseGPTHeader(b []byte, at uint64) (gptHeader, error) {
	le := binary.LittleEndian
	if len(b) < 92 || !bytes.Equal(b[:8], []byte("EFI PART")) {
		return gptHeader{}, fmt.Errorf("%w: no GPT signature", ErrNoTable)
	}
	h := gptHeader{
		HeaderSize: le.Uint32(b[12:]), HCRC: le.Uint32(b[16:]),
		MyLBA: le.Uint64(b[24:]), AltLBA: le.Uint64(b[32:]),
		FirstUsable: le.Uint64(b[40:]), LastUsable: le.Uint64(b[48:]),
		EntriesLBA: le.Uint64(b[72:]), EntryCount: le.Uint32(b[80:]), EntrySize: le.Uint32(b[84:]),
		EntriesCRC: le.Uint32(b[88:]),
	}
	if h.HeaderSize < 92 || int(h.HeaderSize) > len(b) {
		return h, fmt.Errorf("%w: GPT header size %d", ErrNoTable, h.HeaderSize)
	}
	h.raw = append([]byte(nil), b[:h.HeaderSize]...)
	tmp := append([]byte(nil), h.raw...)
	le.PutUint32(tmp[16:], 0)
	if crc32.ChecksumIEEE(tmp) != h.HCRC {
		return h, fmt.Errorf("%w: GPT header CRC mismatch", ErrNoTable)
	}
	if h.MyLBA != at {
		return h, fmt.Errorf("%w: GPT header says it is at LBA %d, found at %d", ErrNoTable, h.MyLBA, at)
	}
	if h.EntrySize < 128 || h.EntrySize > maxGPTEntrySize || h.EntrySize%8 != 0 || h.EntryCount == 0 || h.EntryCount > maxGPTEntries {
		return h, fmt.Errorf("%w: GPT has %d entries of %d bytes", ErrNoTable, h.EntryCount, h.EntrySize)
	}
	if h.FirstUsable > h.LastUsable || h.EntriesLBA < 2 {
		return h, fmt.Errorf("%w: GPT usable range %d–%d, entries at %d", ErrNoTable, h.FirstUsable, h.LastUsable, h.EntriesLBA)
	}
	return h, nil
}

func parseGPT(h gptHeader, ents []byte, sectorSize int) (*Table, error) {
	le := binary.LittleEndian
	if crc32.ChecksumIEEE(ents) != h.EntriesCRC {
		return nil, fmt.Errorf("%w: GPT entries CRC mismatch", ErrNoTable)
	}
	t := &Table{Kind: "gpt", SectorSize: sectorSize, hdr: h, entries: ents}
	ss := int64(sectorSize)
	for i := 0; i < int(h.EntryCount); i++ {
		e := ents[i*int(h.EntrySize) : (i+1)*int(h.EntrySize)]
		typ := guidString(e[0:16])
		if typ == "00000000-0000-0000-0000-000000000000" {
			continue
		}
		first, last := le.Uint64(e[32:]), le.Uint64(e[40:])
		if first < h.FirstUsable || last > h.LastUsable || last < first {
			return nil, fmt.Errorf("%w: partition %d spans LBA %d–%d, outside %d–%d", ErrNoTable, i+1, first, last, h.FirstUsable, h.LastUsable)
		}
		t.Partitions = append(t.Partitions, Partition{
			Number: i + 1, Start: int64(first) * ss, Size: int64(last-first+1) * ss,
			Type: typ, GUID: guidString(e[16:32]), Name: utf16z(e[56:min(len(e), 128)]),
			FirstLBA: first, Sectors: last - first + 1,
		})
	}
	return t, nil
}

// parseMBR reads the four primary entries of a classic MBR. A protective
// MBR (type 0xEE) without a valid GPT is no table at all.
func parseMBR(b []byte, size int64, sectorSize int) (*Table, error) {
	if b[510] != 0x55 || b[511] != 0xAA {
		return nil, fmt.Errorf("%w: neither a GPT at LBA 1 nor an MBR signature", ErrNoTable)
	}
	le := binary.LittleEndian
	t := &Table{Kind: "mbr", SectorSize: sectorSize}
	ss := int64(sectorSize)
	for i := 0; i < 4; i++ {
		e := b[446+16*i : 446+16*(i+1)]
		typ := e[4]
		first, n := uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
		if typ == 0 || n == 0 {
			continue
		}
		if typ == 0xEE {
			return nil, fmt.Errorf("%w: a protective MBR, but the GPT behind it is missing or damaged", ErrNoTable)
		}
		if typ == 0x05 || typ == 0x0F || typ == 0x85 {
			continue // extended partitions: not followed (cloud images have none)
		}
		if int64(first+n)*ss > size {
			return nil, fmt.Errorf("%w: MBR partition %d runs past the disk's end", ErrNoTable, i+1)
		}
		t.Partitions = append(t.Partitions, Partition{
			Number: i + 1, Start: int64(first) * ss, Size: int64(n) * ss,
			Type: fmt.Sprintf("mbr:0x%02x", typ), FirstLBA: first, Sectors: n,
		})
	}
	if len(t.Partitions) == 0 {
		return nil, fmt.Errorf("%w: an MBR without partitions", ErrNoTable)
	}
	return t, nil
}

// MoveBackupGPT puts the backup GPT at the disk's last LBAs, as `sgdisk -e`
// does: an image smaller than the disk leaves its backup in the middle,
// where nothing looks for it, and the usable space would end there (growpart
// could not grow the root). It rewrites the primary header (alternate LBA,
// last usable LBA, CRC), writes the entries and a backup header at the end,
// clears the old backup header, and fixes a protective MBR's size. It
// reports whether anything changed.
func MoveBackupGPT(rw interface {
	io.ReaderAt
	io.WriterAt
}, t *Table, size int64) (bool, error) {
	if t.Kind != "gpt" {
		return false, nil
	}
	ss := int64(t.SectorSize)
	last := uint64(size/ss) - 1
	h := t.hdr
	entSectors := (uint64(len(t.entries)) + uint64(ss) - 1) / uint64(ss)
	newEntries := last - entSectors
	if h.AltLBA == last {
		return false, nil
	}
	if h.AltLBA > last || newEntries <= h.LastUsable {
		return false, fmt.Errorf("move backup GPT: the disk (%d sectors) is smaller than the table says (backup at LBA %d)", last+1, h.AltLBA)
	}
	for _, p := range t.Partitions {
		if p.FirstLBA+p.Sectors-1 >= newEntries {
			return false, fmt.Errorf("move backup GPT: partition %d ends at LBA %d, where the backup must go", p.Number, p.FirstLBA+p.Sectors-1)
		}
	}
	le := binary.LittleEndian
	oldAlt := h.AltLBA
	primary := append([]byte(nil), h.raw...)
	le.PutUint64(primary[32:], last)
	le.PutUint64(primary[48:], newEntries-1)
	setHeaderCRC(primary)

	backup := append([]byte(nil), primary...)
	le.PutUint64(backup[24:], last)
	le.PutUint64(backup[32:], 1)
	le.PutUint64(backup[72:], newEntries)
	setHeaderCRC(backup)

	// Entries and backup header first, primary last: until the primary is
	// rewritten the old table is intact.
	ents := make([]byte, entSectors*uint64(ss))
	copy(ents, t.entries)
	if _, err := rw.WriteAt(ents, int64(newEntries)*ss); err != nil {
		return false, fmt.Errorf("write backup GPT entries: %w", err)
	}
	if _, err := rw.WriteAt(sector(backup, ss), int64(last)*ss); err != nil {
		return false, fmt.Errorf("write backup GPT header: %w", err)
	}
	if _, err := rw.WriteAt(sector(primary, ss), ss); err != nil {
		return false, fmt.Errorf("write primary GPT header: %w", err)
	}
	if oldAlt < newEntries { // else the new entries have already overwritten it
		if _, err := rw.WriteAt(make([]byte, ss), int64(oldAlt)*ss); err != nil {
			return false, fmt.Errorf("clear the old backup GPT header: %w", err)
		}
	}
	if err := fixProtectiveMBR(rw, last); err != nil {
		return false, err
	}
	t.hdr.raw, t.hdr.AltLBA, t.hdr.LastUsable = primary, last, newEntries-1
	return true, nil
}

// fixProtectiveMBR sets the 0xEE entry's size to cover the disk (capped at
// 32 bits), as the spec's §5.2.3 asks.
func fixProtectiveMBR(rw interface {
	io.ReaderAt
	io.WriterAt
}, last uint64) error {
	mbr := make([]byte, 512)
	if _, err := rw.ReadAt(mbr, 0); err != nil {
		return fmt.Errorf("read protective MBR: %w", err)
	}
	if mbr[510] != 0x55 || mbr[511] != 0xAA {
		return nil
	}
	for i := 0; i < 4; i++ {
		e := mbr[446+16*i:]
		if e[4] == 0xEE {
			binary.LittleEndian.PutUint32(e[12:], uint32(min(last, 0xFFFFFFFF)))
			if _, err := rw.WriteAt(mbr, 0); err != nil {
				return fmt.Errorf("write protective MBR: %w", err)
			}
			return nil
		}
	}
	return nil
}

func setHeaderCRC(h []byte) {
	binary.LittleEndian.PutUint32(h[16:], 0)
	binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h))
}

func sector(b []byte, ss int64) []byte {
	s := make([]byte, ss)
	copy(s, b)
	return s
}

// guidString formats a GUID stored in the mixed-endian on-disk order
// (first three fields little-endian).
func guidString(b []byte) string {
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", binary.LittleEndian.Uint32(b[0:]), binary.LittleEndian.Uint16(b[4:]),
		binary.LittleEndian.Uint16(b[6:]), b[8:10], b[10:16])
}

// guidBytes is the inverse of guidString.
func guidBytes(s string) ([16]byte, error) {
	var out [16]byte
	var a uint32
	var b, c uint16
	var d [2]byte
	var e [6]byte
	if len(s) != 36 {
		return out, fmt.Errorf("GUID %q: want 8-4-4-4-12 hex digits", s)
	}
	if _, err := fmt.Sscanf(s, "%08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x", &a, &b, &c, &d[0], &d[1], &e[0], &e[1], &e[2], &e[3], &e[4], &e[5]); err != nil {
		return out, fmt.Errorf("GUID %q: %w", s, err)
	}
	binary.LittleEndian.PutUint32(out[0:], a)
	binary.LittleEndian.PutUint16(out[4:], b)
	binary.LittleEndian.PutUint16(out[6:], c)
	copy(out[8:], d[:])
	copy(out[10:], e[:])
	return out, nil
}

// utf16z decodes a NUL-terminated UTF-16LE string.
func utf16z(b []byte) string {
	var u []uint16
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}
