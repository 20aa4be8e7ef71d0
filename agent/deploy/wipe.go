package deploy

import (
	"context"
	"fmt"
	"sync/atomic"
)

// The ends of a disk hold every signature tools look for: the MBR and
// primary GPT (the first 34 sectors), the backup GPT (the last 33), RAID
// and LVM labels near the start, ZFS labels at both ends. One MiB of zeros
// at each end covers them all, for 512- and 4096-byte sectors alike; the
// same at each end of every partition kills the file system signatures
// (ext4 at 1080, XFS at 0, btrfs at 64 KiB, swap at 4086, LVM in the first
// four sectors, md at the end) that a new table with the same layout would
// otherwise bring back to life. No wipefs in the image: this is it in Go.
const wipeEnd = 1 << 20

// zeroRange writes n zero bytes at off, clipped to the disk.
func zeroRange(t *target, off, n int64) error {
	if off < 0 {
		n += off
		off = 0
	}
	if off+n > t.dev.Size {
		n = t.dev.Size - off
	}
	if n <= 0 {
		return nil
	}
	z := make([]byte, min(n, wipeEnd))
	for n > 0 {
		k := min(n, int64(len(z)))
		if _, err := t.WriteAt(z[:k], off); err != nil {
			return fmt.Errorf("zero %d bytes at %d of %s: %w", k, off, t.dev.Path, err)
		}
		off, n = off+k, n-k
	}
	return nil
}

// zeroTables zeroes both ends of the disk (the partition tables), and
// syncs: what a failed or cancelled write leaves behind, so the disk is
// empty rather than half an OS.
func zeroTables(t *target) error {
	if err := zeroRange(t, 0, wipeEnd); err != nil {
		return err
	}
	if err := zeroRange(t, t.dev.Size-wipeEnd, wipeEnd); err != nil {
		return err
	}
	return t.sync()
}

// wipeSignatures zeroes both ends of every partition the current table
// lists, then both ends of the disk. It returns how many partitions it
// wiped.
func wipeSignatures(t *target) (int, error) {
	n := 0
	if tab, err := ReadTable(t, t.dev.Size, t.dev.SectorSize); err == nil {
		for _, p := range tab.Partitions {
			if err := zeroRange(t, p.Start, min(wipeEnd, p.Size)); err != nil {
				return n, err
			}
			if err := zeroRange(t, p.Start+p.Size-wipeEnd, min(wipeEnd, p.Size)); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, zeroTables(t)
}

// fullWipe writes zeros over every block, adding to done as it goes.
func fullWipe(ctx context.Context, t *target, done *atomic.Int64) error {
	const chunk = 4 << 20
	buf := alignedBuf(chunk)
	w := t.f
	if t.direct != nil {
		w = t.direct
	}
	for off := int64(0); off < t.dev.Size; {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		n := min(int64(chunk), t.dev.Size-off)
		if n%4096 != 0 {
			w = t.f // the unaligned tail goes through the page cache
		}
		if _, err := w.WriteAt(buf[:n], off); err != nil {
			return fmt.Errorf("zero %s at %d: %w", t.dev.Path, off, err)
		}
		off += n
		done.Store(off)
	}
	return t.sync()
}
