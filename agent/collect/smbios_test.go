package collect

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/store/inventory"
)

// st builds one structure: formatted bytes after the 4-byte header, then
// strings.
func st(typ byte, handle uint16, formatted []byte, strs ...string) []byte {
	b := []byte{typ, byte(4 + len(formatted)), 0, 0}
	binary.LittleEndian.PutUint16(b[2:], handle)
	b = append(b, formatted...)
	if len(strs) == 0 {
		return append(b, 0, 0)
	}
	for _, s := range strs {
		b = append(append(b, s...), 0)
	}
	return append(b, 0)
}

func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// type17 lays out a Memory Device up to the extended speed field (3.3).
func type17(size uint16, ext uint32, speed uint16, extSpeed uint32) []byte {
	f := cat(
		le16(0x1000), le16(0xfffe), le16(72), le16(64), // array, error handle, widths
		le16(size), []byte{0x09, 0x00, 1, 2, 0x22}, le16(0x80), // size, DIMM, set, locator #1, bank #2, DDR5, detail
		le16(speed), []byte{3, 4, 0, 5, 2}, le32(ext), // speed, manufacturer #3, serial #4, asset none, part #5, rank 2
	)
	f = append(f, make([]byte, 0x54-4-len(f))...) // configured speed … up to 54h
	f = append(f, le32(extSpeed)...)
	f = append(f, le32(0)...)
	return st(17, 0x1100, f, "DIMM_A1", "BANK 0", "Micron", "3A1B2C3D", "MTC40F2046S1RC48BA1")
}

func TestDecodeSMBIOS(t *testing.T) {
	uuidLE := []byte{0x44, 0x45, 0x4c, 0x4c, 0x58, 0x00, 0x10, 0x4b, 0x80, 0x32, 0xb7, 0xc0, 0x4f, 0x51, 0x48, 0x33}
	sys := func(uuid []byte) []byte {
		return st(1, 0x100, cat([]byte{1, 2, 0, 3}, uuid, []byte{6, 0, 0}), "Lenovo", "ThinkSystem SR650 V3", "J900ABCD")
	}
	end := st(127, 0xfeff, nil)
	dimm := func(d inventory.DIMM) inventory.DIMM {
		d.Locator, d.BankLocator, d.FormFactor, d.Manufacturer, d.Serial, d.PartNumber = "DIMM_A1", "BANK 0", "DIMM", "Micron", "3A1B2C3D", "MTC40F2046S1RC48BA1"
		if d.Type == "" {
			d.Type = "DDR5"
		}
		return d
	}
	cases := map[string]struct {
		table        []byte
		major, minor int
		want         SMBIOSData
		err          bool
	}{
		"uuid little-endian fields (2.6+)": {
			table: cat(sys(uuidLE), end), major: 3, minor: 4,
			want: SMBIOSData{System: inventory.System{Manufacturer: "Lenovo", Product: "ThinkSystem SR650 V3", Serial: "J900ABCD", UUID: "4c4c4544-0058-4b10-8032-b7c04f514833"}},
		},
		"uuid big-endian before 2.6": {
			table: cat(sys(uuidLE), end), major: 2, minor: 4,
			want: SMBIOSData{System: inventory.System{Manufacturer: "Lenovo", Product: "ThinkSystem SR650 V3", Serial: "J900ABCD", UUID: "44454c4c-5800-104b-8032-b7c04f514833"}},
		},
		"uuid all ff is absent": {
			table: cat(sys([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), end),
			want:  SMBIOSData{System: inventory.System{Manufacturer: "Lenovo", Product: "ThinkSystem SR650 V3", Serial: "J900ABCD"}},
		},
		"dimm in MB": {
			table: cat(type17(16384, 0, 4800, 0), end),
			want:  SMBIOSData{DIMMs: []inventory.DIMM{dimm(inventory.DIMM{SizeMB: 16384, SpeedMTs: 4800})}},
		},
		"dimm in KB granularity": {
			table: cat(type17(0x8000|512, 0, 1600, 0), end),
			// 512 KB rounds down to 0 MB and reads as an empty slot.
			want: SMBIOSData{DIMMs: []inventory.DIMM{{Locator: "DIMM_A1", BankLocator: "BANK 0"}}},
		},
		"dimm of 2 GiB in KB": {
			table: cat(type17(0x8000|0x7c00, 0, 1600, 0), end),
			want:  SMBIOSData{DIMMs: []inventory.DIMM{dimm(inventory.DIMM{SizeMB: 31, SpeedMTs: 1600})}},
		},
		"dimm extended size and speed": {
			table: cat(type17(0x7fff, 131072, 0xffff, 8800), end),
			want:  SMBIOSData{DIMMs: []inventory.DIMM{dimm(inventory.DIMM{SizeMB: 131072, SpeedMTs: 8800})}},
		},
		"no end-of-table structure": {
			table: sys(uuidLE), major: 3,
			want: SMBIOSData{System: inventory.System{Manufacturer: "Lenovo", Product: "ThinkSystem SR650 V3", Serial: "J900ABCD", UUID: "4c4c4544-0058-4b10-8032-b7c04f514833"}},
		},
		"truncated after a good structure": {
			table: cat(sys(uuidLE), []byte{17, 0x54, 0x00}), major: 3,
			want: SMBIOSData{System: inventory.System{Manufacturer: "Lenovo", Product: "ThinkSystem SR650 V3", Serial: "J900ABCD", UUID: "4c4c4544-0058-4b10-8032-b7c04f514833"}},
			err:  true,
		},
		"strings not terminated": {
			table: []byte{1, 0x1b, 0, 1, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'x'},
			err:   true,
		},
		"length below header": {
			table: []byte{1, 2, 0, 0, 0, 0},
			err:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeSMBIOS(tc.table, tc.major, tc.minor)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	if _, err := ParseSMBIOS([]byte{1, 0x1b, 0}); !errors.Is(err, ErrTruncated) {
		t.Errorf("3-byte table: %v, want ErrTruncated", err)
	}
}

func TestSMBIOSVersion(t *testing.T) {
	for ep, want := range map[string][2]int{
		"_SM3_\x00\x18\x03\x07\x00": {3, 7},
		"_SM_\x00\x1f\x02\x08":      {2, 8},
		"_DMI_":                     {0, 0},
		"":                          {0, 0},
	} {
		if ma, mi := SMBIOSVersion([]byte(ep)); ma != want[0] || mi != want[1] {
			t.Errorf("%q: %d.%d, want %d.%d", ep, ma, mi, want[0], want[1])
		}
	}
}

// Real table dumps: /sys/firmware/dmi/tables/{DMI,smbios_entry_point}
// read inside QEMU 7.2 guests (q35 and i440fx, SeaBIOS) started with
// -smbios type=0,1,2,3,17 options; the values below are those options.
func TestDecodeSMBIOSDumps(t *testing.T) {
	want := SMBIOSData{
		System: inventory.System{Manufacturer: "Rollcall", Product: "LabVM", Version: "1.0", Serial: "RC-VM-0001",
			UUID: "8f0c7a2e-3b1d-4e5f-9a6b-1c2d3e4f5a6b", SKU: "RC-SKU-1", Family: "Lab"},
		Baseboard: inventory.Baseboard{Manufacturer: "RollcallBoard", Product: "RC-MB-1", Version: "A01", Serial: "MB-0001", AssetTag: "MB-ASSET"},
		Chassis:   inventory.Chassis{Manufacturer: "RollcallChassis", Type: "Other", Serial: "CH-0001", AssetTag: "CH-ASSET"},
		BIOS:      inventory.BIOS{Vendor: "RollcallBIOS", Version: "2.4a", Date: "06/02/2022"},
		DIMMs: []inventory.DIMM{{Locator: "DIMM 0", BankLocator: "BANK", SizeMB: 512, SpeedMTs: 3200, Type: "RAM", FormFactor: "DIMM",
			Manufacturer: "Rollcall", PartNumber: "RC-DIMM-1G", Serial: "DM0001"}},
	}
	for _, m := range []string{"q35", "pc"} {
		t.Run(m, func(t *testing.T) {
			table, err := os.ReadFile(filepath.Join("testdata/smbios", "qemu72-"+m+".bin"))
			if err != nil {
				t.Fatal(err)
			}
			ep, err := os.ReadFile(filepath.Join("testdata/smbios", "qemu72-"+m+".ep"))
			if err != nil {
				t.Fatal(err)
			}
			major, minor := SMBIOSVersion(ep)
			if major != 2 || minor != 8 {
				t.Errorf("entry point version %d.%d, want 2.8", major, minor)
			}
			got, err := DecodeSMBIOS(table, major, minor)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func FuzzParseSMBIOS(f *testing.F) {
	for _, m := range []string{"server2s", "gpunode", "vm"} {
		if b, err := os.ReadFile(filepath.Join(fixture(m), "sys/firmware/dmi/tables/DMI")); err == nil {
			f.Add(b)
		}
	}
	for _, m := range []string{"q35", "pc"} {
		if b, err := os.ReadFile(filepath.Join("testdata/smbios", "qemu72-"+m+".bin")); err == nil {
			f.Add(b)
		}
	}
	f.Add(cat(type17(0x7fff, 65536, 0xffff, 6400), st(127, 0, nil)))
	f.Fuzz(func(t *testing.T, b []byte) {
		structs, _ := ParseSMBIOS(b)
		total := 0
		for _, s := range structs {
			if len(s.Formatted) < 4 || int(s.Formatted[1]) != len(s.Formatted) {
				t.Fatalf("structure with formatted length %d, header says %d", len(s.Formatted), s.Formatted[1])
			}
			total += len(s.Formatted)
		}
		if total > len(b) {
			t.Fatalf("structures cover %d bytes of %d", total, len(b))
		}
		d, _ := DecodeSMBIOS(b, 0, 0)
		for _, m := range d.DIMMs {
			if m.SizeMB < 0 || m.SpeedMTs < 0 {
				t.Fatalf("negative DIMM %+v", m)
			}
		}
		if d.System.UUID != "" && inventory.NormalizeUUID(d.System.UUID) == "" {
			t.Fatalf("uuid %q is not a UUID", d.System.UUID)
		}
	})
}
