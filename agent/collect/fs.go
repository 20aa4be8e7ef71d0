package collect

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sysfs reads files under a root directory: "/" on a live machine, a fixture
// tree in tests. Paths are given as on a live system ("/sys/block").
type sysfs struct{ root string }

func (s sysfs) path(p string) string { return filepath.Join(s.root, p) }

// str reads a file and trims surrounding white space; a missing or
// unreadable file is "".
func (s sysfs) str(p string) string {
	b, err := os.ReadFile(s.path(p))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// int reads a decimal or 0x-prefixed integer; def when absent or malformed.
func (s sysfs) int(p string, def int64) int64 {
	v := s.str(p)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil {
		return def
	}
	return n
}

// list names the entries of a directory, sorted; nil when it is absent.
func (s sysfs) list(p string) []string {
	ents, err := os.ReadDir(s.path(p))
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func (s sysfs) exists(p string) bool {
	_, err := os.Stat(s.path(p))
	return err == nil
}

// link is the base name of a symlink's target ("ixgbe" for
// …/device/driver), "" when p is not a link.
func (s sysfs) link(p string) string {
	t, err := os.Readlink(s.path(p))
	if err != nil {
		return ""
	}
	return filepath.Base(t)
}

// resolve follows symlinks and returns the result as a path inside the root
// ("/sys/devices/pci0000:00/0000:00:03.0/virtio0"), "" when it cannot.
func (s sysfs) resolve(p string) string {
	abs, err := filepath.EvalSymlinks(s.path(p))
	if err != nil {
		return ""
	}
	root, err := filepath.EvalSymlinks(s.root)
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || strings.HasPrefix(rel, "..") {
		return ""
	}
	return "/" + filepath.ToSlash(rel)
}

// pciAddress finds the PCI function a sysfs device hangs off: the device
// itself or its nearest ancestor named like 0000:03:00.0.
func (s sysfs) pciAddress(devLink string) string {
	p := s.resolve(devLink)
	for p != "" && p != "/" {
		b := filepath.Base(p)
		if isPCIAddress(b) {
			return b
		}
		p = filepath.Dir(p)
	}
	return ""
}

func isPCIAddress(s string) bool {
	// dddd:bb:dd.f
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	for i, c := range s {
		if i == 4 || i == 7 || i == 10 {
			continue
		}
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// hexID strips 0x from a sysfs ID ("0x8086" → "8086").
func hexID(s string) string {
	return strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "0x")
}
