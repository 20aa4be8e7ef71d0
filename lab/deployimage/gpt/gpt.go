// Package gpt reads a GUID partition table (UEFI 2.10 §5.3): the primary
// header at LBA 1, checked by its CRC32, and the partition entry array it
// points to, checked by its own. It is what the deploy test image's tiny
// init uses to find the root partition by its type, and what the image
// builder and the tests use to find a partition's bytes inside an image
// file. A disk's contents are not trusted: every size and count is bounded
// before anything is read.
package gpt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"unicode/utf16"
)

// Partition types the deploy images use (the Discoverable Partitions
// Specification names the root type).
const (
	TypeBIOSBoot  = "21686148-6449-6e6f-744e-656564454649" // sgdisk ef02
	TypeESP       = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b" // sgdisk ef00
	TypeRootAMD64 = "4f68bce3-e8cd-4db1-96e7-fbcaf984b709" // sgdisk 8304, "Linux root (x86-64)"
	TypeLinuxData = "0fc63daf-8483-4772-8e79-3d69d8477de4" // sgdisk 8300
	TypeLinuxLVM  = "e6d6d379-f507-44c2-a23c-238f2a3df928" // sgdisk 8e00
)

// Limits on what a header may claim: the specification asks for at least
// 16 KiB of entries (128 of 128 bytes); real tables never exceed a few
// hundred.
const (
	maxEntries   = 1024
	maxEntrySize = 4096
)

// Partition is one used entry of the table.
type Partition struct {
	Number   int    // 1-based index in the entry array
	Type     string // lowercase GUID text
	GUID     string // the partition's unique GUID
	Name     string // the UTF-16 name
	FirstLBA uint64
	LastLBA  uint64 // inclusive
}

// Offset and Size are the partition's place in bytes for a sector size.
func (p Partition) Offset(sector int) int64 { return int64(p.FirstLBA) * int64(sector) }
func (p Partition) Size(sector int) int64 {
	return int64(p.LastLBA-p.FirstLBA+1) * int64(sector)
}

// Table is a read partition table.
type Table struct {
	DiskGUID   string
	SectorSize int
	Partitions []Partition
}

// ErrNoTable is returned when LBA 1 holds no GPT signature.
var ErrNoTable = errors.New("gpt: no partition table (no \"EFI PART\" signature at LBA 1)")

// Read reads the primary table of a disk with the given logical sector
// size (512 or 4096). A damaged header or entry array is an error naming
// what is wrong; the backup table is not consulted.
func Read(r io.ReaderAt, sector int) (*Table, error) {
	if sector != 512 && sector != 4096 {
		return nil, fmt.Errorf("gpt: sector size %d (want 512 or 4096)", sector)
	}
	hdr := make([]byte, sector)
	if _, err := r.ReadAt(hdr, int64(sector)); err != nil {
		return nil, fmt.Errorf("gpt: read header: %w", err)
	}
	if string(hdr[0:8]) != "EFI PART" {
		return nil, ErrNoTable
	}
	le := binary.LittleEndian
	hsize := le.Uint32(hdr[12:16])
	if hsize < 92 || int(hsize) > sector {
		return nil, fmt.Errorf("gpt: header size %d (want 92 to %d)", hsize, sector)
	}
	want := le.Uint32(hdr[16:20])
	h := bytes.Clone(hdr[:hsize])
	clear(h[16:20])
	if got := crc32.ChecksumIEEE(h); got != want {
		return nil, fmt.Errorf("gpt: header CRC32 %08x, the header says %08x", got, want)
	}
	entriesLBA := le.Uint64(hdr[72:80])
	count := le.Uint32(hdr[80:84])
	esize := le.Uint32(hdr[84:88])
	if count > maxEntries {
		return nil, fmt.Errorf("gpt: %d partition entries (at most %d)", count, maxEntries)
	}
	if esize < 128 || esize > maxEntrySize || esize%8 != 0 {
		return nil, fmt.Errorf("gpt: partition entry size %d (want 128 to %d, a multiple of 8)", esize, maxEntrySize)
	}
	if entriesLBA < 2 || entriesLBA > 1<<40 {
		return nil, fmt.Errorf("gpt: partition entries at LBA %d", entriesLBA)
	}
	arr := make([]byte, int(count)*int(esize))
	if _, err := r.ReadAt(arr, int64(entriesLBA)*int64(sector)); err != nil {
		return nil, fmt.Errorf("gpt: read %d partition entries at LBA %d: %w", count, entriesLBA, err)
	}
	if got, want := crc32.ChecksumIEEE(arr), le.Uint32(hdr[88:92]); got != want {
		return nil, fmt.Errorf("gpt: partition entries CRC32 %08x, the header says %08x", got, want)
	}
	t := &Table{DiskGUID: guid(hdr[56:72]), SectorSize: sector}
	for i := range int(count) {
		e := arr[i*int(esize) : (i+1)*int(esize)]
		if allZero(e[0:16]) {
			continue
		}
		p := Partition{Number: i + 1, Type: guid(e[0:16]), GUID: guid(e[16:32]),
			FirstLBA: le.Uint64(e[32:40]), LastLBA: le.Uint64(e[40:48]), Name: name(e[56:128])}
		if p.LastLBA < p.FirstLBA {
			return nil, fmt.Errorf("gpt: partition %d ends (LBA %d) before it starts (LBA %d)", p.Number, p.LastLBA, p.FirstLBA)
		}
		t.Partitions = append(t.Partitions, p)
	}
	return t, nil
}

// ByType returns the partitions of one type, in table order.
func (t *Table) ByType(typ string) []Partition {
	var out []Partition
	for _, p := range t.Partitions {
		if p.Type == strings.ToLower(typ) {
			out = append(out, p)
		}
	}
	return out
}

// guid formats a GUID stored mixed-endian (the first three fields little
// endian) as text.
func guid(b []byte) string {
	le := binary.LittleEndian
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", le.Uint32(b[0:4]), le.Uint16(b[4:6]), le.Uint16(b[6:8]), b[8:10], b[10:16])
}

func name(b []byte) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
