// Package debroot makes a Debian root directory from Debian's packages with
// mmdebstrap (mode root: the builder runs as root), offline apart from the
// mirror, and makes it a template for many machines (Scrub). The deploy
// tests' Debian image (lab/deployimage) and the stateless compute image
// (images/compute-debian13) are made with it.
//
// With Options.Epoch set, mmdebstrap's output depends only on its options
// and the mirror's content (SOURCE_DATE_EPOCH; Scrub removes what it copies
// from the host: /etc/hostname, /etc/resolv.conf).
package debroot

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Slim are dpkg options that keep documentation (but the copyright files),
// manual pages and translations out of the root.
var Slim = []string{
	"path-exclude=/usr/share/doc/*", "path-include=/usr/share/doc/*/copyright",
	"path-exclude=/usr/share/man/*",
	"path-exclude=/usr/share/locale/*", "path-include=/usr/share/locale/locale.alias",
}

// Options say what root to make.
type Options struct {
	Suite string // trixie, bookworm, …
	// Sources are apt's source lines ("deb URL SUITE COMPONENT…"); none:
	// mmdebstrap's default mirror for the suite.
	Sources  []string
	Packages []string // beyond the variant's
	Variant  string   // default minbase (Essential: yes, apt)
	// DpkgOpts are dpkg options (path-exclude=…), Slim or more.
	DpkgOpts []string
	// Cache keeps the downloaded .deb files between builds ("": none); it
	// is pruned to what the root has installed.
	Cache string
	// Epoch is SOURCE_DATE_EPOCH (0: unset).
	Epoch int64
	// Log receives mmdebstrap's output (nil: it is kept for the error).
	Log io.Writer
}

// Args are mmdebstrap's arguments for building o into tree.
func (o Options) Args(tree string) ([]string, error) {
	if o.Suite == "" || strings.ContainsAny(o.Suite, " \t\n/") {
		return nil, fmt.Errorf("debroot: suite %q", o.Suite)
	}
	variant := o.Variant
	if variant == "" {
		variant = "minbase"
	}
	args := []string{"--mode=root", "--variant=" + variant}
	for _, p := range o.Packages {
		if p == "" || strings.ContainsAny(p, ", \t\n") {
			return nil, fmt.Errorf("debroot: package name %q", p)
		}
	}
	if len(o.Packages) > 0 {
		args = append(args, "--include="+strings.Join(o.Packages, ","))
	}
	for _, d := range o.DpkgOpts {
		args = append(args, "--dpkgopt="+d)
	}
	if o.Cache != "" {
		// mmdebstrap's own recipe for a package cache: the .deb files go
		// in before apt runs, come out before the cleanup deletes them,
		// and those of the essential set are kept until then.
		abs, err := filepath.Abs(o.Cache)
		if err != nil {
			return nil, err
		}
		if strings.ContainsAny(abs, " \t\n'\"\\$`") {
			return nil, fmt.Errorf("debroot: cache directory %q: no blanks or quotes, please", abs)
		}
		args = append(args, "--skip=essential/unlink",
			`--setup-hook=mkdir -p "$1"/var/cache/apt/archives/`,
			"--setup-hook=sync-in "+abs+" /var/cache/apt/archives/",
			"--customize-hook=sync-out /var/cache/apt/archives "+abs)
	}
	args = append(args, o.Suite, tree)
	return append(args, o.Sources...), nil
}

// Build runs mmdebstrap to make the root in tree (absent or empty).
func Build(ctx context.Context, tree string, o Options) error {
	args, err := o.Args(tree)
	if err != nil {
		return err
	}
	if o.Cache != "" {
		if err := os.MkdirAll(o.Cache, 0o755); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	cmd.Env = os.Environ()
	if o.Epoch != 0 {
		cmd.Env = append(cmd.Env, "SOURCE_DATE_EPOCH="+strconv.FormatInt(o.Epoch, 10))
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if o.Log != nil {
		cmd.Stdout = io.MultiWriter(&out, o.Log)
		cmd.Stderr = cmd.Stdout
	}
	if err := cmd.Run(); err != nil {
		b := out.Bytes()
		if len(b) > 4096 {
			b = b[len(b)-4096:]
		}
		return fmt.Errorf("mmdebstrap %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	if o.Cache != "" {
		status, err := os.ReadFile(filepath.Join(tree, "var/lib/dpkg/status"))
		if err != nil {
			return err
		}
		if _, err := PruneCache(o.Cache, status); err != nil {
			return err
		}
	}
	return nil
}

// Scrub makes the root a template for many machines: no SSH host keys
// (each machine brings or makes its own), an empty /etc/machine-id (systemd
// makes one at boot without taking it for a first boot), no D-Bus
// machine-id, no apt lists, and none of what mmdebstrap copies from the
// build host: /etc/hostname becomes "localhost", a plain /etc/resolv.conf
// goes (a symlink a package made, systemd-resolved's, stays).
func Scrub(tree string) error {
	var remove []string
	for _, pattern := range []string{"etc/ssh/ssh_host_*", "var/lib/apt/lists/*_*"} {
		m, err := filepath.Glob(filepath.Join(tree, pattern))
		if err != nil {
			return err
		}
		remove = append(remove, m...)
	}
	remove = append(remove, filepath.Join(tree, "var/lib/dbus/machine-id"))
	if st, err := os.Lstat(filepath.Join(tree, "etc/resolv.conf")); err == nil && st.Mode().IsRegular() {
		remove = append(remove, filepath.Join(tree, "etc/resolv.conf"))
	}
	for _, p := range remove {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	for name, data := range map[string]string{"etc/machine-id": "", "etc/hostname": "localhost\n"} {
		p := filepath.Join(tree, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			return err
		}
		if err := os.Chmod(p, 0o644); err != nil { // WriteFile keeps an existing file's mode
			return err
		}
	}
	return nil
}

// Package is one package dpkg has installed.
type Package struct{ Name, Version, Arch string }

// Deb is the name apt-get gives the package's file:
// NAME_VERSION_ARCH.deb, the epoch's colon written %3a.
func (p Package) Deb() string {
	return p.Name + "_" + strings.ReplaceAll(p.Version, ":", "%3a") + "_" + p.Arch + ".deb"
}

// Packages lists what dpkg's status file says is installed, sorted by
// name and architecture.
func Packages(status []byte) []Package {
	var out []Package
	sc := bufio.NewScanner(bytes.NewReader(status))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var p Package
	var state string
	flush := func() {
		if p.Name != "" && p.Version != "" && p.Arch != "" && state == "install ok installed" {
			out = append(out, p)
		}
		p, state = Package{}, ""
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			flush()
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch k {
		case "Package":
			p.Name = v
		case "Version":
			p.Version = v
		case "Architecture":
			p.Arch = v
		case "Status":
			state = v
		}
	}
	flush()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Arch < out[j].Arch
	})
	return out
}

// PruneCache removes the .deb files of cache that the root (its dpkg
// status) does not have installed: older versions, packages no longer in
// the list. It returns what it removed.
func PruneCache(cache string, status []byte) ([]string, error) {
	keep := map[string]bool{}
	for _, p := range Packages(status) {
		keep[p.Deb()] = true
	}
	if len(keep) == 0 {
		return nil, errors.New("debroot: the root's dpkg status lists no installed package; not pruning the cache")
	}
	debs, err := filepath.Glob(filepath.Join(cache, "*.deb"))
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, d := range debs {
		if keep[filepath.Base(d)] {
			continue
		}
		if err := os.Remove(d); err != nil {
			return removed, err
		}
		removed = append(removed, filepath.Base(d))
	}
	return removed, nil
}
