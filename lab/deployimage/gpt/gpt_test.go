package gpt

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/lab/testenv"
)

// sgdiskImage is a 64 MiB image partitioned by sgdisk (the real peer) the
// way the deploy image is, with fixed GUIDs.
func sgdiskImage(t *testing.T) []byte {
	t.Helper()
	testenv.NeedTool(t, "sgdisk")
	f := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(f, 64<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sgdisk", "-U", "11111111-2222-3333-4444-555555555555",
		"-n", "1:2048:+1M", "-t", "1:ef02", "-c", "1:bios", "-u", "1:00000000-0000-0000-0000-000000000001",
		"-n", "2:0:+8M", "-t", "2:ef00", "-c", "2:ESP", "-u", "2:00000000-0000-0000-0000-000000000002",
		"-n", "3:0:0", "-t", "3:"+TypeRootAMD64, "-c", "3:root", "-u", "3:00000000-0000-0000-0000-000000000003",
		f).CombinedOutput()
	if err != nil {
		t.Fatalf("sgdisk: %v\n%s", err, out)
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReadSgdisk(t *testing.T) {
	img := sgdiskImage(t)
	tab, err := Read(bytes.NewReader(img), 512)
	if err != nil {
		t.Fatal(err)
	}
	want := &Table{DiskGUID: "11111111-2222-3333-4444-555555555555", SectorSize: 512, Partitions: []Partition{
		{Number: 1, Type: TypeBIOSBoot, GUID: "00000000-0000-0000-0000-000000000001", Name: "bios", FirstLBA: 2048, LastLBA: 4095},
		{Number: 2, Type: TypeESP, GUID: "00000000-0000-0000-0000-000000000002", Name: "ESP", FirstLBA: 4096, LastLBA: 20479},
		// sgdisk leaves 33 sectors for the backup entries and header.
		{Number: 3, Type: TypeRootAMD64, GUID: "00000000-0000-0000-0000-000000000003", Name: "root", FirstLBA: 20480, LastLBA: 64<<11 - 34},
	}}
	if d := cmp.Diff(want, tab); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
	if r := tab.ByType(TypeRootAMD64); len(r) != 1 || r[0].Number != 3 || r[0].Offset(512) != 20480*512 {
		t.Errorf("ByType(root) = %+v", r)
	}
}

func TestReadBad(t *testing.T) {
	img := sgdiskImage(t)
	cases := map[string]struct {
		edit func(b []byte)
		want string
	}{
		"no signature":    {func(b []byte) { copy(b[512:], "NOT PART") }, "no partition table"},
		"header crc":      {func(b []byte) { b[512+40]++ }, "header CRC32"},
		"entries crc":     {func(b []byte) { b[1024+56]++ }, "partition entries CRC32"},
		"huge entry size": {func(b []byte) { b[512+84], b[512+85], b[512+86] = 0, 0, 1 }, "header CRC32"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			b := bytes.Clone(img)
			c.edit(b)
			_, err := Read(bytes.NewReader(b), 512)
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
				t.Errorf("err = %v, want one saying %q", err, c.want)
			}
		})
	}
	if _, err := Read(bytes.NewReader(make([]byte, 4096)), 512); !errors.Is(err, ErrNoTable) {
		t.Errorf("zeros: %v, want ErrNoTable", err)
	}
	if _, err := Read(bytes.NewReader(img), 520); err == nil {
		t.Error("sector size 520 accepted")
	}
}

// Whatever a disk holds, Read returns a table or an error, never panics,
// and never reads past what it holds.
func FuzzRead(f *testing.F) {
	// testdata/fuzz/FuzzRead holds the first 34 sectors of sgdiskImage.
	f.Add(make([]byte, 1024))
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, err := Read(bytes.NewReader(b), 512)
		if err != nil {
			return
		}
		for _, p := range tab.Partitions {
			if p.LastLBA < p.FirstLBA || p.Number < 1 || p.Number > maxEntries {
				t.Fatalf("partition %+v", p)
			}
		}
	})
}
