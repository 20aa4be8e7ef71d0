package collect

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/rollcall/rollcall/store/inventory"
)

// This file decodes the raw SMBIOS structure table the kernel exposes at
// /sys/firmware/dmi/tables/DMI, following DMTF DSP0134 (SMBIOS 3.7):
// §6.1.2 structure header and string-set, §7.1 BIOS (type 0), §7.2 System
// (type 1), §7.3 Baseboard (type 2), §7.4 Chassis (type 3), §7.18 Memory
// Device (type 17). /sys/class/dmi/id has the basic fields too, but not one
// memory slot.

// Structure is one SMBIOS structure: its formatted area (header included,
// so offsets match the specification's tables) and its strings.
type Structure struct {
	Type      uint8
	Handle    uint16
	Formatted []byte
	Strings   []string
}

// ErrTruncated is returned for a table that ends inside a structure.
var ErrTruncated = errors.New("smbios: table truncated")

// ParseSMBIOS splits a structure table into structures. It stops at the
// end-of-table structure (type 127) or the end of the data, and rejects a
// structure whose header or strings run past the end.
func ParseSMBIOS(b []byte) ([]Structure, error) {
	var out []Structure
	for len(b) > 0 {
		if len(b) < 4 {
			return out, fmt.Errorf("%w: %d bytes left, need a 4-byte header", ErrTruncated, len(b))
		}
		typ, length := b[0], int(b[1])
		if length < 4 {
			return out, fmt.Errorf("smbios: structure type %d claims length %d, less than its header", typ, length)
		}
		if length > len(b) {
			return out, fmt.Errorf("%w: structure type %d needs %d bytes, %d left", ErrTruncated, typ, length, len(b))
		}
		s := Structure{Type: typ, Handle: binary.LittleEndian.Uint16(b[2:4]), Formatted: b[:length]}
		// The string-set follows, ended by two NULs (one extra NUL when the
		// structure has no strings at all).
		rest := b[length:]
		end := -1
		for i := 0; i+1 < len(rest); i++ {
			if rest[i] == 0 && rest[i+1] == 0 {
				end = i
				break
			}
		}
		if end < 0 {
			return out, fmt.Errorf("%w: strings of structure type %d (handle %#04x) not terminated", ErrTruncated, typ, s.Handle)
		}
		if end > 0 {
			for _, str := range strings.Split(string(rest[:end]), "\x00") {
				s.Strings = append(s.Strings, str)
			}
		}
		out = append(out, s)
		b = rest[end+2:]
		if typ == 127 {
			break
		}
	}
	return out, nil
}

// byteAt returns the formatted area's byte at off, 0 past its end (older
// SMBIOS versions have shorter structures; absent fields read as "unknown").
func (s Structure) byteAt(off int) byte {
	if off < len(s.Formatted) {
		return s.Formatted[off]
	}
	return 0
}

func (s Structure) word(off int) (uint16, bool) {
	if off+2 <= len(s.Formatted) {
		return binary.LittleEndian.Uint16(s.Formatted[off:]), true
	}
	return 0, false
}

func (s Structure) dword(off int) (uint32, bool) {
	if off+4 <= len(s.Formatted) {
		return binary.LittleEndian.Uint32(s.Formatted[off:]), true
	}
	return 0, false
}

// str resolves the string referenced by the byte at off (1-based; 0 means
// none), trimmed of padding firmware leaves around it.
func (s Structure) str(off int) string {
	i := int(s.byteAt(off))
	if i == 0 || i > len(s.Strings) {
		return ""
	}
	return strings.TrimSpace(s.Strings[i-1])
}

// SMBIOSVersion reads major and minor from an entry point structure
// (/sys/firmware/dmi/tables/smbios_entry_point): "_SM_" (2.1, 32-bit) or
// "_SM3_" (3.0, 64-bit). It returns 0, 0 when it cannot tell.
func SMBIOSVersion(ep []byte) (major, minor int) {
	switch {
	case len(ep) >= 9 && string(ep[:5]) == "_SM3_":
		return int(ep[7]), int(ep[8])
	case len(ep) >= 8 && string(ep[:4]) == "_SM_":
		return int(ep[6]), int(ep[7])
	}
	return 0, 0
}

// SMBIOSData is what the decoder fills from a table.
type SMBIOSData struct {
	System    inventory.System
	Baseboard inventory.Baseboard
	Chassis   inventory.Chassis
	BIOS      inventory.BIOS
	DIMMs     []inventory.DIMM
}

// DecodeSMBIOS decodes the types the inventory needs. major/minor is the
// table's version (0, 0 when unknown: taken as 2.6 or later, as every
// machine this century is); it decides the UUID's byte order.
func DecodeSMBIOS(table []byte, major, minor int) (SMBIOSData, error) {
	var d SMBIOSData
	structs, err := ParseSMBIOS(table)
	if len(structs) == 0 && err != nil {
		return d, err
	}
	seen := map[uint8]bool{}
	for _, s := range structs {
		first := !seen[s.Type]
		seen[s.Type] = true
		switch s.Type {
		case 0:
			if first {
				d.BIOS = inventory.BIOS{Vendor: s.str(0x04), Version: s.str(0x05), Date: s.str(0x08)}
			}
		case 1:
			if first {
				d.System = inventory.System{
					Manufacturer: s.str(0x04), Product: s.str(0x05), Version: s.str(0x06),
					Serial: s.str(0x07), UUID: smbiosUUID(s, major, minor),
					SKU: s.str(0x19), Family: s.str(0x1a),
				}
			}
		case 2:
			if first {
				d.Baseboard = inventory.Baseboard{
					Manufacturer: s.str(0x04), Product: s.str(0x05), Version: s.str(0x06),
					Serial: s.str(0x07), AssetTag: s.str(0x08),
				}
			}
		case 3:
			if first {
				d.Chassis = inventory.Chassis{
					Manufacturer: s.str(0x04), Type: chassisType(s.byteAt(0x05) & 0x7f),
					Serial: s.str(0x07), AssetTag: s.str(0x08),
				}
			}
		case 17:
			d.DIMMs = append(d.DIMMs, decodeDIMM(s))
		}
	}
	// Descriptive fields that firmware left at its filler read as empty.
	// Serials and the UUID stay as found: the server decides whether they
	// identify the machine (inventory.RealSerial), and an operator may want
	// to see what the board says.
	for _, p := range []*string{
		&d.System.Version, &d.System.SKU, &d.System.Family, &d.Baseboard.Version,
		&d.Baseboard.AssetTag, &d.Chassis.AssetTag,
	} {
		if isFiller(*p) {
			*p = ""
		}
	}
	for i := range d.DIMMs {
		if isFiller(d.DIMMs[i].BankLocator) {
			d.DIMMs[i].BankLocator = ""
		}
	}
	// A table cut short still yields what came before the cut; report it.
	return d, err
}

// smbiosUUID formats the type 1 UUID (offset 08h, 16 bytes). Since SMBIOS
// 2.6 the first three fields are little-endian (§7.2.1); all 0xFF means
// "not present", all 0x00 "present but not set".
func smbiosUUID(s Structure, major, minor int) string {
	if len(s.Formatted) < 0x18 {
		return ""
	}
	u := append([]byte(nil), s.Formatted[0x08:0x18]...)
	allFF, all00 := true, true
	for _, c := range u {
		allFF = allFF && c == 0xff
		all00 = all00 && c == 0
	}
	if allFF || all00 {
		return ""
	}
	if major == 0 || major > 2 || (major == 2 && minor >= 6) {
		u[0], u[1], u[2], u[3] = u[3], u[2], u[1], u[0]
		u[4], u[5] = u[5], u[4]
		u[6], u[7] = u[7], u[6]
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// decodeDIMM reads a Memory Device (type 17, §7.18).
func decodeDIMM(s Structure) inventory.DIMM {
	d := inventory.DIMM{
		Locator: s.str(0x10), BankLocator: s.str(0x11),
		FormFactor:   lookup(formFactors, s.byteAt(0x0e)),
		Type:         lookup(memoryTypes, s.byteAt(0x12)),
		Manufacturer: s.str(0x17), Serial: s.str(0x18), PartNumber: s.str(0x1a),
	}
	if size, ok := s.word(0x0c); ok {
		switch {
		case size == 0 || size == 0xffff: // empty slot, or size unknown
		case size == 0x7fff: // ≥ 32 GiB: Extended Size (1Ch) in MB
			if ext, ok := s.dword(0x1c); ok {
				d.SizeMB = int64(ext & 0x7fffffff)
			}
		case size&0x8000 != 0: // granularity KB
			d.SizeMB = int64(size&0x7fff) / 1024
		default:
			d.SizeMB = int64(size)
		}
	}
	if d.SizeMB > 0 {
		if sp, ok := s.word(0x15); ok {
			if sp == 0xffff { // Extended Speed (54h), SMBIOS 3.3
				if ext, ok := s.dword(0x54); ok {
					d.SpeedMTs = int(ext & 0x7fffffff)
				}
			} else {
				d.SpeedMTs = int(sp)
			}
		}
	}
	// Empty slots carry vendor filler ("NO DIMM", "Not Specified"); keep the
	// locator only.
	if d.SizeMB == 0 {
		d.Manufacturer, d.Serial, d.PartNumber, d.Type, d.FormFactor = "", "", "", "", ""
	}
	for _, p := range []*string{&d.Manufacturer, &d.Serial, &d.PartNumber} {
		if isFiller(*p) {
			*p = ""
		}
	}
	return d
}

func isFiller(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "not specified", "unknown", "none", "no dimm", "not available", "n/a", "not applicable",
		"to be filled by o.e.m.", "to be filled by oem", "default string", "system version",
		"system sku", "system product name", "0123456789", "base board asset tag", "chassis asset tag",
		"asset-1234567890", "type1sku0", "type1family", "type2 - board version":
		return true
	}
	return false
}

func lookup(table []string, v byte) string {
	if int(v) < len(table) {
		return table[v]
	}
	return ""
}

// memoryTypes is Table 76 (Memory Device — Type), indexed by value.
var memoryTypes = []string{
	0x01: "Other", 0x02: "Unknown", 0x03: "DRAM", 0x04: "EDRAM", 0x05: "VRAM", 0x06: "SRAM",
	0x07: "RAM", 0x08: "ROM", 0x09: "Flash", 0x0a: "EEPROM", 0x0b: "FEPROM", 0x0c: "EPROM",
	0x0d: "CDRAM", 0x0e: "3DRAM", 0x0f: "SDRAM", 0x10: "SGRAM", 0x11: "RDRAM", 0x12: "DDR",
	0x13: "DDR2", 0x14: "DDR2 FB-DIMM", 0x18: "DDR3", 0x19: "FBD2", 0x1a: "DDR4",
	0x1b: "LPDDR", 0x1c: "LPDDR2", 0x1d: "LPDDR3", 0x1e: "LPDDR4",
	0x1f: "Logical non-volatile device", 0x20: "HBM", 0x21: "HBM2", 0x22: "DDR5",
	0x23: "LPDDR5", 0x24: "HBM3",
}

// formFactors is Table 75 (Memory Device — Form Factor).
var formFactors = []string{
	0x01: "Other", 0x02: "Unknown", 0x03: "SIMM", 0x04: "SIP", 0x05: "Chip", 0x06: "DIP",
	0x07: "ZIP", 0x08: "Proprietary Card", 0x09: "DIMM", 0x0a: "TSOP", 0x0b: "Row of chips",
	0x0c: "RIMM", 0x0d: "SODIMM", 0x0e: "SRIMM", 0x0f: "FB-DIMM", 0x10: "Die",
	0x11: "CAMM",
}

// chassisTypes is Table 17 (System Enclosure or Chassis Types).
var chassisTypes = []string{
	0x01: "Other", 0x02: "Unknown", 0x03: "Desktop", 0x04: "Low Profile Desktop",
	0x05: "Pizza Box", 0x06: "Mini Tower", 0x07: "Tower", 0x08: "Portable", 0x09: "Laptop",
	0x0a: "Notebook", 0x0b: "Hand Held", 0x0c: "Docking Station", 0x0d: "All in One",
	0x0e: "Sub Notebook", 0x0f: "Space-saving", 0x10: "Lunch Box", 0x11: "Main Server Chassis",
	0x12: "Expansion Chassis", 0x13: "SubChassis", 0x14: "Bus Expansion Chassis",
	0x15: "Peripheral Chassis", 0x16: "RAID Chassis", 0x17: "Rack Mount Chassis",
	0x18: "Sealed-case PC", 0x19: "Multi-system chassis", 0x1a: "Compact PCI",
	0x1b: "Advanced TCA", 0x1c: "Blade", 0x1d: "Blade Enclosure", 0x1e: "Tablet",
	0x1f: "Convertible", 0x20: "Detachable", 0x21: "IoT Gateway", 0x22: "Embedded PC",
	0x23: "Mini PC", 0x24: "Stick PC",
}

func chassisType(v byte) string { return lookup(chassisTypes, v) }
