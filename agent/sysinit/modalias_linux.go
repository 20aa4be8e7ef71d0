//go:build linux

package sysinit

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DeviceModaliases reads every device's modalias under root/devices
// (root is /sys), as udev would hand them to modprobe.
func DeviceModaliases(root string) []string {
	seen := map[string]bool{}
	var out []string
	filepath.WalkDir(filepath.Join(root, "devices"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a device that went away, or a file we may not read
		}
		if d.Name() != "modalias" || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if m := strings.TrimSpace(string(b)); err == nil && m != "" && !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
		return nil
	})
	return out
}

// LoadByModalias loads the modules in dir (its modules.dep and
// modules.alias) that drive the devices present, with their dependencies,
// plus the modules named in always (those no device asks for: file
// systems, crc32c_generic). A loaded driver can reveal more devices (a
// virtio PCI function shows its virtio device once virtio_pci binds), so
// it rescans until a round loads nothing new, at most rounds times. It
// returns the modules loaded.
func LoadByModalias(dir string, always []string, log *slog.Logger) ([]string, error) {
	dep, err := os.ReadFile(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	text, err := os.ReadFile(filepath.Join(dir, "modules.alias"))
	if err != nil {
		return nil, err
	}
	aliases, err := ParseAliases(string(text))
	if err != nil {
		return nil, err
	}
	tried := map[string]bool{}
	var loaded []string
	names := always
	const rounds = 6
	for round := 0; round < rounds; round++ {
		names = append(names, ModulesFor(aliases, DeviceModaliases("/sys"))...)
		order, err := closureOrder(string(dep), names)
		if err != nil {
			return loaded, err
		}
		fresh := 0
		for _, rel := range order {
			if tried[rel] {
				continue
			}
			tried[rel] = true
			fresh++
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
		if fresh == 0 {
			break
		}
		names = nil
		time.Sleep(200 * time.Millisecond) // drivers register child devices asynchronously
	}
	return loaded, nil
}
