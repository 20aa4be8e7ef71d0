package deploy

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// target is the open disk: a buffered descriptor for small reads and
// writes (tables, signatures), and where the file system allows it an
// O_DIRECT one for the image's large aligned writes, which then neither
// fill the page cache nor wait behind it.
type target struct {
	dev    Device
	f      *os.File // buffered
	direct *os.File // O_DIRECT, or nil
	block  bool     // a block device (not a file in a test)
}

func openTarget(d Device) (*target, error) {
	f, err := os.OpenFile(d.Path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", d.Path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	t := &target{dev: d, f: f, block: st.Mode()&os.ModeDevice != 0}
	if t.block {
		var size uint64
		if err := ioctlPtr(f, unix.BLKGETSIZE64, unsafe.Pointer(&size)); err == nil && size > 0 {
			t.dev.Size = int64(size)
		}
		if ss, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKSSZGET); err == nil && ss > 0 {
			if d.SectorSize != 0 && ss != d.SectorSize {
				f.Close()
				return nil, fmt.Errorf("%s: the kernel says %d-byte sectors, sysfs said %d", d.Path, ss, d.SectorSize)
			}
			t.dev.SectorSize = ss
		}
	} else if d.Size == 0 {
		t.dev.Size = st.Size()
	}
	if t.dev.SectorSize == 0 {
		t.dev.SectorSize = 512
	}
	if df, err := os.OpenFile(d.Path, os.O_RDWR|unix.O_DIRECT, 0); err == nil {
		t.direct = df // tmpfs refuses O_DIRECT: buffered writes then
	}
	return t, nil
}

func (t *target) Close() error {
	var errs []error
	if t.direct != nil {
		errs = append(errs, t.direct.Close())
	}
	errs = append(errs, t.f.Close())
	return errors.Join(errs...)
}

func (t *target) ReadAt(b []byte, off int64) (int, error)  { return t.f.ReadAt(b, off) }
func (t *target) WriteAt(b []byte, off int64) (int, error) { return t.f.WriteAt(b, off) }

// sync flushes both descriptors to the disk.
func (t *target) sync() error {
	if t.direct != nil {
		if err := t.direct.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", t.dev.Path, err)
		}
	}
	if err := t.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", t.dev.Path, err)
	}
	return nil
}

// rereadPartitions asks the kernel to re-read the partition table
// (BLKRRPART). A file has none to re-read.
func (t *target) rereadPartitions() error {
	if !t.block {
		return nil
	}
	if err := unix.IoctlSetInt(int(t.f.Fd()), unix.BLKRRPART, 0); err != nil {
		return fmt.Errorf("re-read the partition table of %s: %w", t.dev.Path, err)
	}
	return nil
}

func ioctlPtr(f *os.File, req uint, p unsafe.Pointer) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(req), uintptr(p))
	if e != 0 {
		return e
	}
	return nil
}

// alignedBuf returns n bytes aligned to 4096, as O_DIRECT wants.
func alignedBuf(n int) []byte {
	const align = 4096
	b := make([]byte, n+align)
	off := align - int(uintptr(unsafe.Pointer(&b[0]))&(align-1))
	if off == align {
		off = 0
	}
	return b[off : off+n : off+n]
}
