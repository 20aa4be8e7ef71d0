package deploy

import (
	"bytes"
	"testing"
)

// Fuzz targets for what the agent parses off a disk written from the
// network: the partition table, LVM's label and metadata, shim's
// BOOTX64.CSV. None may panic, loop or allocate without bound; seeds in
// testdata/fuzz are made by sgdisk, pvcreate/vgcreate and Debian's shim
// layout.

func FuzzReadTable(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, err := ReadTable(bytes.NewReader(b), int64(len(b)), 512)
		if err != nil {
			return
		}
		for _, p := range tab.Partitions {
			if p.Start < 0 || p.Size <= 0 {
				t.Fatalf("partition %+v", p)
			}
		}
		// Moving the backup of a table read from b onto a copy must not
		// panic, whatever it decides.
		w := &memDisk{b: append([]byte(nil), b...)}
		MoveBackupGPT(w, tab, int64(len(b))+4096)
	})
}

func FuzzReadLVM(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		lvs, _, err := ReadLVM(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		for _, lv := range lvs {
			if lv.Offset < 0 || lv.Size <= 0 || lv.Offset+lv.Size > int64(len(b)) {
				t.Fatalf("LV %+v outside a PV of %d bytes", lv, len(b))
			}
		}
	})
}

func FuzzLVMText(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		lvmVolumes(b, "dVAyXmRwDCXBXkmuuR2W0cwAzBWDrhse")
	})
}

func FuzzParseBootCSV(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		l, _, err := ParseBootCSV(b)
		if err == nil && (l == "" || bytes.ContainsAny([]byte(l), `/\`)) {
			t.Fatalf("loader %q", l)
		}
	})
}

// memDisk is a growable in-memory disk.
type memDisk struct{ b []byte }

func (m *memDisk) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.b)) {
		return 0, nil
	}
	return copy(p, m.b[off:]), nil
}

func (m *memDisk) WriteAt(p []byte, off int64) (int, error) {
	if end := off + int64(len(p)); end > int64(len(m.b)) {
		if end > 1<<26 {
			return 0, nil
		}
		m.b = append(m.b, make([]byte, end-int64(len(m.b)))...)
	}
	return copy(m.b[off:], p), nil
}
