package oscatalog

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func qcow2Header(version uint32, backing uint64, incompat uint64) []byte {
	h := make([]byte, 512)
	copy(h, qcow2Magic)
	binary.BigEndian.PutUint32(h[4:], version)
	binary.BigEndian.PutUint64(h[8:], backing)
	binary.BigEndian.PutUint64(h[qcow2IncompatOffset:], incompat)
	return h
}

func detectBytes(t testing.TB, b []byte) (Detected, error) {
	p := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return detect(p)
}

// TestDetect: formats by magic bytes, with the header's refusals.
func TestDetect(t *testing.T) {
	gpt := make([]byte, 8192)
	copy(gpt[512:], "EFI PART")
	gpt4k := make([]byte, 8192)
	copy(gpt4k[4096:], "EFI PART")
	mbr := make([]byte, 512)
	mbr[510], mbr[511] = 0x55, 0xaa
	for name, c := range map[string]struct {
		in     []byte
		format string
		sector int
		says   string
	}{
		"qcow2 v3":         {qcow2Header(3, 0, 0), FormatQCOW2, 512, ""},
		"raw with GPT":     {gpt, FormatRaw, 512, ""},
		"raw with 4Kn GPT": {gpt4k, FormatRaw, 4096, ""},
		"raw with MBR":     {mbr, FormatRaw, 512, ""},
		"qcow2 backing":    {qcow2Header(3, 0x10000, 0), "", 0, "backing file"},
		"qcow2 data file":  {qcow2Header(3, 0, qcow2ExternalDataBit), "", 0, "external data file"},
		"qcow2 truncated":  {[]byte(qcow2Magic + "\x00\x00"), "", 0, "truncated"},
		"vmdk":             {[]byte("KDMV\x01\x00\x00\x00"), "", 0, "VMDK images are not accepted"},
		"xz":               {[]byte("\xfd7zXZ\x00\x00"), "", 0, "xz images"},
		"empty":            {nil, "", 0, "not a disk image"},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := detectBytes(t, c.in)
			if c.says != "" {
				if err == nil || !strings.Contains(publicText(err), c.says) {
					t.Errorf("got %+v, %v; want %q", d, err, c.says)
				}
				return
			}
			if err != nil || d.Format != c.format || d.SectorSize != c.sector {
				t.Errorf("got %+v, %v; want %s/%d", d, err, c.format, c.sector)
			}
		})
	}
}

// FuzzDetect: an upload's first bytes are hostile input: detect never
// panics, and accepts only what it can name.
func FuzzDetect(f *testing.F) {
	f.Add(qcow2Header(3, 0, 0))
	f.Add(qcow2Header(2, 1, 0))
	f.Add([]byte("KDMV"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := detectBytes(t, b)
		if err == nil && d.Format != FormatQCOW2 && d.Format != FormatRaw {
			t.Fatalf("accepted as %q", d.Format)
		}
	})
}
