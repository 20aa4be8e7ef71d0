package main

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/rollcall/rollcall/images/debroot"
)

// packageList is the root's packages (packages.list), includes the files
// the recipe adds to it (includes/, the tree as it lands in the root).
var (
	//go:embed packages.list
	packageList string
	//go:embed includes
	includes embed.FS
)

// Required are the packages the image is for; the list may grow, not lose
// these.
var Required = []string{"linux-image-amd64", "systemd-sysv", "slurmd", "munge", "rdma-core", "nfs-common", "openssh-server"}

// OverlayPath is where the overlay client lands in the root.
const OverlayPath = "usr/local/sbin/rollcall-overlay"

// Units the recipe enables and disables in the root (systemctl in the
// root): networkd for the network, the overlay at boot and its refresh;
// no package updates, no disk trimming in a root that lives in RAM.
var (
	enableUnits  = []string{"systemd-networkd.service", "rollcall-overlay.service", "rollcall-overlay-refresh.timer"}
	disableUnits = []string{"apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer", "fstrim.timer"}
)

// DpkgOpts are the dpkg options of the build: the slim root, and no
// initramfs-tools hook, so that installing the kernel builds no initrd
// (the image's is Rollcall's own; update-initramfs would put an unused one
// into /boot, and take a minute).
var DpkgOpts = append(append([]string(nil), debroot.Slim...), "path-exclude=/etc/kernel/postinst.d/initramfs-tools")

// debName is what Debian allows as a package name (Policy 5.6.1).
var debName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

// Packages reads a package list (one a line, # comments, blank lines) and
// appends extra; a name Debian does not allow, or one given twice, is an
// error, and so is a list without one of Required.
func Packages(list string, extra []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(where, name string) error {
		if !debName.MatchString(name) {
			return fmt.Errorf("%s: %q is not a Debian package name", where, name)
		}
		if seen[name] {
			return fmt.Errorf("%s: %s is listed twice", where, name)
		}
		seen[name] = true
		out = append(out, name)
		return nil
	}
	for i, line := range strings.Split(list, "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if err := add(fmt.Sprintf("packages.list:%d", i+1), line); err != nil {
			return nil, err
		}
	}
	for _, e := range extra {
		if e = strings.TrimSpace(e); e != "" {
			if err := add("-extra", e); err != nil {
				return nil, err
			}
		}
	}
	for _, r := range Required {
		if !seen[r] {
			return nil, fmt.Errorf("packages.list: %s is missing (the image needs %s)", r, strings.Join(Required, ", "))
		}
	}
	return out, nil
}

// Sources are apt's source lines for suite from mirror and, unless
// security is "", its security archive; components are the archive's
// (main, non-free-firmware, …).
func Sources(suite, mirror, security string, components []string) ([]string, error) {
	if len(components) == 0 {
		return nil, errors.New("no archive component (main, …)")
	}
	for _, c := range components {
		if !debName.MatchString(c) {
			return nil, fmt.Errorf("archive component %q", c)
		}
	}
	for _, u := range []string{mirror, security} {
		if u != "" && (!strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") || strings.ContainsAny(u, " \t\n")) {
			return nil, fmt.Errorf("mirror %q: want an http:// or https:// URL", u)
		}
	}
	if mirror == "" {
		return nil, errors.New("no mirror")
	}
	comp := strings.Join(components, " ")
	out := []string{"deb " + mirror + " " + suite + " " + comp, "deb " + mirror + " " + suite + "-updates " + comp}
	if security != "" {
		out = append(out, "deb "+security+" "+suite+"-security "+comp)
	}
	return out, nil
}

// Release is the image's own release file (usr/lib/rollcall/image-release
// in the root): which recipe, which checkout, which kernel.
func Release(name, version, kernel, suite string) []byte {
	return fmt.Appendf(nil, "IMAGE=%s\nBUILD=%s\nKERNEL=%s\nSUITE=%s\n", name, version, kernel, suite)
}

// Dress makes the root mmdebstrap wrote the stateless image: a template
// for many nodes (debroot.Scrub: no host keys, no machine-id, no apt
// lists; no munge key either: the cluster's comes from the overlay), the
// overlay client and the recipe's files (includes/), release written, no
// kernel in /boot (the image's kernel is a file of its own). Enabling the
// units is EnableUnits'.
func Dress(tree string, overlay, release []byte) ([]string, error) {
	if err := debroot.Scrub(tree); err != nil {
		return nil, err
	}
	var remove []string
	for _, pattern := range []string{"etc/munge/munge.key", "boot/vmlinuz-*", "boot/initrd.img-*"} {
		m, err := filepath.Glob(filepath.Join(tree, pattern))
		if err != nil {
			return nil, err
		}
		remove = append(remove, m...)
	}
	for _, p := range remove {
		if err := os.Remove(p); err != nil {
			return nil, err
		}
	}
	written, err := WriteIncludes(tree)
	if err != nil {
		return nil, err
	}
	for name, f := range map[string]struct {
		data []byte
		mode os.FileMode
	}{OverlayPath: {overlay, 0o755}, "usr/lib/rollcall/image-release": {release, 0o644}} {
		if err := writeFile(tree, name, f.data, f.mode); err != nil {
			return nil, err
		}
		written = append(written, name)
	}
	sort.Strings(written)
	return written, nil
}

// WriteIncludes copies includes/ into tree (files 0644, directories 0755,
// owned by whoever runs the build: root) and returns the files' paths.
func WriteIncludes(tree string) ([]string, error) {
	var written []string
	err := fs.WalkDir(includes, "includes", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := includes.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "includes/")
		written = append(written, rel)
		return writeFile(tree, rel, data, 0o644)
	})
	return written, err
}

// writeFile writes name below tree, its directories 0755, replacing
// whatever is there (a package's file, a symlink: not followed).
func writeFile(tree, name string, data []byte, mode os.FileMode) error {
	p := filepath.Join(tree, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		return err
	}
	return os.Chmod(p, mode) // whatever the umask
}

// IncludedUnits are the unit files includes/ brings, by name.
func IncludedUnits() (map[string][]byte, error) {
	units := map[string][]byte{}
	ents, err := includes.ReadDir("includes/etc/systemd/system")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := includes.ReadFile("includes/etc/systemd/system/" + e.Name())
		if err != nil {
			return nil, err
		}
		units[e.Name()] = b
	}
	return units, nil
}

// ParseUnit reads a systemd unit file into section → key → values (a key
// may repeat; an empty assignment, "ExecStart=", resets it as systemd
// does). Comments, blank lines; no line continuations (the recipe's units
// have none).
func ParseUnit(data []byte) (map[string]map[string][]string, error) {
	out := map[string]map[string][]string{}
	var sec map[string][]string
	for i, line := range bytes.Split(data, []byte("\n")) {
		s := strings.TrimSpace(string(line))
		switch {
		case s == "" || s[0] == '#' || s[0] == ';':
			continue
		case s[0] == '[' && s[len(s)-1] == ']':
			name := s[1 : len(s)-1]
			if out[name] == nil {
				out[name] = map[string][]string{}
			}
			sec = out[name]
			continue
		case strings.HasSuffix(s, "\\"):
			return nil, fmt.Errorf("line %d: a continuation line", i+1)
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok || sec == nil {
			return nil, fmt.Errorf("line %d: %q is not KEY=value in a section", i+1, s)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if v == "" {
			sec[k] = nil
			continue
		}
		sec[k] = append(sec[k], v)
	}
	return out, nil
}
