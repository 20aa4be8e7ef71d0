//go:build linux

package sysinit

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Mount mounts /proc, /sys, /dev (devtmpfs), /run and /tmp; one that is
// already mounted (EBUSY) is fine.
func Mount() error {
	var errs []error
	for _, m := range []struct {
		src, dst, fstype string
		flags            uintptr
		data             string
	}{
		{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755"},
		{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
		{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
		{"efivarfs", "/sys/firmware/efi/efivars", "efivarfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	} {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			if m.fstype != "efivarfs" {
				errs = append(errs, err)
			}
			continue
		}
		if err := unix.Mount(m.src, m.dst, m.fstype, m.flags, m.data); err != nil && !errors.Is(err, unix.EBUSY) {
			if m.fstype == "efivarfs" { // BIOS machines have none
				continue
			}
			errs = append(errs, fmt.Errorf("mount %s on %s: %w", m.fstype, m.dst, err))
		}
	}
	return errors.Join(errs...)
}

// MountEFIVars mounts efivarfs on a UEFI machine once its module is
// loaded (Mount ran before the modules were): a machine without UEFI, or
// one where it is mounted already, is no error.
func MountEFIVars() error {
	const dir = "/sys/firmware/efi/efivars"
	if _, err := os.Stat("/sys/firmware/efi"); err != nil {
		return nil
	}
	if err := unix.Mount("efivarfs", dir, "efivarfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("mount efivarfs on %s: %w", dir, err)
	}
	return nil
}

// Release is the running kernel's version (uname -r).
func Release() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// LoadModules loads every module listed in dir/modules.dep, dependencies
// first, with finit_module(2). A module the kernel has built in or already
// loaded, or whose hardware is absent (ENODEV: ipmi_si without a KCS
// interface), is not an error. It returns the names loaded.
func LoadModules(dir string, log *slog.Logger) ([]string, error) {
	dep, err := os.ReadFile(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	order, err := LoadOrder(string(dep))
	if err != nil {
		return nil, err
	}
	var loaded []string
	for _, rel := range order {
		err := insmod(filepath.Join(dir, rel))
		switch {
		case err == nil:
			loaded = append(loaded, ModuleName(rel))
		case errors.Is(err, unix.EEXIST):
		case errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO), errors.Is(err, unix.ENOENT):
			log.Debug("module found no device", "module", ModuleName(rel), "err", err)
		default:
			log.Warn("module not loaded", "module", ModuleName(rel), "err", err)
		}
	}
	return loaded, nil
}

func insmod(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	flags := 0
	if strings.HasSuffix(file, ".xz") || strings.HasSuffix(file, ".zst") || strings.HasSuffix(file, ".gz") {
		flags = unix.MODULE_INIT_COMPRESSED_FILE
	}
	return unix.FinitModule(int(f.Fd()), "", flags)
}

// WaitForNICs waits until the set of network interfaces in /sys/class/net
// has not changed for settle, or timeout passes: drivers register their
// netdevs asynchronously after the module loads.
func WaitForNICs(settle, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	var last string
	stableSince := time.Now()
	for {
		ents, _ := os.ReadDir("/sys/class/net")
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		cur := strings.Join(names, ",")
		if cur != last {
			last, stableSince = cur, time.Now()
		}
		if time.Since(stableSince) >= settle && len(names) > 1 || time.Now().After(deadline) {
			return names
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// PowerOff syncs and powers the machine off. It returns only on failure.
func PowerOff() error {
	unix.Sync()
	return unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}

// Reboot syncs and restarts the machine. It returns only on failure.
func Reboot() error {
	unix.Sync()
	return unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
}

// WaitForEntropy blocks until the kernel's random number generator is
// initialised. A blocking getrandom(2) makes the kernel gather jitter
// entropy itself (Linux 5.4+), which takes about a second; without it a
// headless machine that early in boot may wait minutes, and the DHCP
// transaction IDs, the TLS handshake and the BMC password all need random
// numbers.
func WaitForEntropy() error {
	_, err := unix.Getrandom(make([]byte, 16), 0)
	return err
}
