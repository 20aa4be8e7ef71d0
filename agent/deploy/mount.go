package deploy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Every file system the agent mounts (a partition, an LVM volume) is a
// loop device over the disk at the volume's byte offset: that needs no
// partition device nodes to appear (there is no udev to wait for), no
// device-mapper for LVM, and works the same on a disk and on a file in a
// test. The loop device clears itself when the last user (the mount) goes.

// loopAttach makes a loop device over backing at [off, off+size). The
// device is set to clear itself at its last close: the caller closes the
// returned file once the mount holds the device.
func loopAttach(devDir string, backing *os.File, off, size int64) (string, *os.File, error) {
	ctl, err := os.OpenFile(filepath.Join(devDir, "loop-control"), os.O_RDWR, 0)
	if err != nil {
		return "", nil, fmt.Errorf("loop devices: %w (is the loop module loaded?)", err)
	}
	defer ctl.Close()
	for attempt := 0; attempt < 8; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("loop devices: no free one: %w", err)
		}
		path := filepath.Join(devDir, fmt.Sprintf("loop%d", n))
		var f *os.File
		// devtmpfs creates the node soon after the kernel adds the device.
		for i := 0; i < 50; i++ {
			if f, err = os.OpenFile(path, os.O_RDWR, 0); err == nil || !errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			return "", nil, fmt.Errorf("open %s: %w", path, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(backing.Fd())}
		cfg.Info.Offset, cfg.Info.Sizelimit = uint64(off), uint64(size)
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		if err := unix.IoctlLoopConfigure(int(f.Fd()), &cfg); err != nil {
			f.Close()
			if errors.Is(err, unix.EBUSY) {
				continue // another process took it between GET_FREE and CONFIGURE
			}
			return "", nil, fmt.Errorf("configure %s: %w", path, err)
		}
		return path, f, nil
	}
	return "", nil, errors.New("loop devices: every free one was taken first")
}

// mountVolume mounts the file system at [off, off+size) of the disk on dir.
func mountVolume(devDir string, disk *os.File, off, size int64, fstype, dir string, readOnly bool) error {
	loop, lf, err := loopAttach(devDir, disk, off, size)
	if err != nil {
		return err
	}
	defer lf.Close() // the mount holds the device from here; on failure this clears it
	var flags uintptr = unix.MS_NOSUID | unix.MS_NODEV
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	data := ""
	if fstype == "xfs" {
		data = "nouuid" // the image's UUID may be the agent host's own (a test) or twice in one image
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := unix.Mount(loop, dir, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s (%s at byte %d) on %s: %w", loop, fstype, off, dir, err)
	}
	return nil
}

// unmount unmounts dir, retrying briefly while it is busy.
func unmount(dir string) error {
	var err error
	for i := 0; i < 50; i++ {
		if err = unix.Unmount(dir, 0); err == nil || !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return os.Remove(dir)
}
