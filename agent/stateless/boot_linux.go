//go:build linux

package stateless

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rollcall/rollcall/agent/nodeenv"
)

// Boot fetches the root, builds the overlay and switches to it. It runs only
// as PID 1 of an initramfs (the switch deletes the initramfs's files) and
// returns only on failure; on success the process is the new root's init.
// The caller has mounted /proc, /sys, /dev and /run, loaded the modules
// (squashfs, overlay, loop, the NICs) and configured the network.
func Boot(ctx context.Context, cfg nodeenv.Config, log *slog.Logger) error {
	if os.Getpid() != 1 {
		return errors.New("stateless boot: not PID 1 (it replaces the initramfs with the image)")
	}
	if err := cfg.CheckBoot(); err != nil {
		return err
	}
	mem, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return err
	}
	total, avail, err := ParseMeminfo(mem)
	if err != nil {
		return err
	}
	b := RAMBudget(total, avail)
	log.Info("stateless: RAM", "total_mb", total>>20, "available_mb", avail>>20, "image_may_take_mb", b.Image>>20)
	if err := os.MkdirAll(RAMDir, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", RAMDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("mode=0700,size=%d", b.Tmpfs)); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", RAMDir, err)
	}
	start := time.Now()
	n, err := Fetch{URL: cfg.Root, SHA256: cfg.RootSHA256, Max: b.Image, Log: log}.To(ctx, ImageFile)
	if err != nil {
		return err
	}
	log.Info("stateless: root image in RAM", "bytes", n, "took", time.Since(start).Round(time.Millisecond))
	if err := MountOverlay(ImageFile, LowerDir, UpperDir, WorkDir, NewRoot); err != nil {
		return err
	}
	if err := PrepareRoot(NewRoot, cfg); err != nil {
		return err
	}
	if cfg.Hostname != "" {
		if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
			log.Warn("sethostname", "name", cfg.Hostname, "err", err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(nodeenv.Path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(nodeenv.Path, cfg.Env(), 0o600); err != nil {
		return err
	}
	log.Info("stateless: switching root", "init", cfg.InitPath(), "hostname", cfg.Hostname)
	return SwitchRoot(NewRoot, cfg.InitPath())
}

// MountOverlay mounts the squashfs file read-only on lower through a
// read-only loop device, and an overlayfs of it with upper and work (in the
// same file system) on root.
func MountOverlay(image, lower, upper, work, root string) error {
	for _, d := range []string{lower, upper, work, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	f, err := os.Open(image)
	if err != nil {
		return err
	}
	defer f.Close()
	loop, lf, err := loopAttach(f)
	if err != nil {
		return err
	}
	defer lf.Close() // the mount holds the device from here; it clears itself at the last close
	if err := unix.Mount(loop, lower, "squashfs", unix.MS_RDONLY|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("mount %s (squashfs of %s) on %s: %w", loop, image, lower, err)
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work)
	if err := unix.Mount("overlay", root, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay (%s) on %s: %w", opts, root, err)
	}
	return nil
}

// loopAttach makes a read-only loop device over backing that clears itself
// at its last close.
func loopAttach(backing *os.File) (string, *os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return "", nil, fmt.Errorf("loop devices: %w (is the loop module loaded?)", err)
	}
	defer ctl.Close()
	for range 8 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("loop devices: no free one: %w", err)
		}
		path := fmt.Sprintf("/dev/loop%d", n)
		var f *os.File
		for range 50 { // devtmpfs makes the node soon after the kernel adds the device
			if f, err = os.OpenFile(path, os.O_RDONLY, 0); err == nil || !errors.Is(err, fs.ErrNotExist) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			return "", nil, fmt.Errorf("open %s: %w", path, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(backing.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_READ_ONLY | unix.LO_FLAGS_AUTOCLEAR
		if err := unix.IoctlLoopConfigure(int(f.Fd()), &cfg); err != nil {
			f.Close()
			if errors.Is(err, unix.EBUSY) {
				continue
			}
			return "", nil, fmt.Errorf("configure %s: %w", path, err)
		}
		return path, f, nil
	}
	return "", nil, errors.New("loop devices: every free one was taken first")
}

// PrepareRoot makes the mount points the switch moves into and writes
// /etc/hostname, inside root (symlinks resolved within it).
func PrepareRoot(root string, cfg nodeenv.Config) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, d := range []string{"dev", "proc", "sys", "run", "tmp", "etc"} {
		if err := r.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("new root: %s: %w", d, err)
		}
	}
	if cfg.Hostname != "" {
		if err := r.WriteFile("etc/hostname", []byte(cfg.Hostname+"\n"), 0o644); err != nil {
			return fmt.Errorf("new root: etc/hostname: %w", err)
		}
	}
	return nil
}

// SwitchRoot moves /dev, /proc, /sys and /run into root, deletes the
// initramfs's files (they would hold RAM for nothing), makes root the root
// and executes init there, as PID 1. It returns only on failure.
func SwitchRoot(root, init string) error {
	var st unix.Statfs_t
	if err := unix.Statfs("/", &st); err != nil {
		return err
	}
	if st.Type != unix.RAMFS_MAGIC && st.Type != unix.TMPFS_MAGIC {
		return fmt.Errorf("switch root: / is not an initramfs (file system type %#x)", st.Type)
	}
	for _, m := range []string{"/dev", "/proc", "/sys", "/run"} {
		if err := unix.Mount(m, root+m, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("switch root: move %s: %w", m, err)
		}
	}
	unix.Unmount("/tmp", unix.MNT_DETACH) // the new root's init mounts its own
	if err := os.Chdir(root); err != nil {
		return err
	}
	removeInitramfs("/")
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("switch root: move %s to /: %w", root, err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("switch root: chroot: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if _, err := os.Stat(init); err != nil {
		return fmt.Errorf("switch root: the image has no init: %w", err)
	}
	err := syscall.Exec(init, []string{init}, os.Environ())
	return fmt.Errorf("switch root: exec %s: %w", init, err)
}

// removeInitramfs deletes what lies on dir's file system below dir, never
// crossing into another mount (the new root, the moved ones).
func removeInitramfs(dir string) {
	var st unix.Stat_t
	if unix.Lstat(dir, &st) != nil {
		return
	}
	dev := st.Dev
	var walk func(string)
	walk = func(d string) {
		ents, err := os.ReadDir(d)
		if err != nil {
			return
		}
		for _, e := range ents {
			p := filepath.Join(d, e.Name())
			var s unix.Stat_t
			if unix.Lstat(p, &s) != nil || s.Dev != dev {
				continue
			}
			if e.IsDir() {
				walk(p)
				unix.Rmdir(p) // fails for mount points, as it should
				continue
			}
			unix.Unlink(p)
		}
	}
	walk(dir)
}
