// Package debkernel fetches Debian's kernel package without installing it
// (apt-get download, dpkg-deb -x), follows the linux-image-amd64
// metapackage to the versioned kernel, and picks modules with their
// dependencies (the package ships no modules.dep: it is derived from each
// module's .modinfo). The commissioning image and the deploy test images
// take their kernel from here, so both boot the same one.
package debkernel

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Kernel is a kernel package extracted into a directory.
type Kernel struct {
	Package string // the versioned package: linux-image-6.1.0-41-amd64
	Version string // uname -r: 6.1.0-41-amd64
	Deb     string // the .deb file in the cache
	Root    string // where it was extracted
	Vmlinuz string // Root/boot/vmlinuz-VERSION
	ModDir  string // Root/lib/modules/VERSION
}

// Fetch downloads pkg (a metapackage is followed to the kernel it depends
// on) into cache unless it is there, and extracts it under dir.
func Fetch(pkg, cache, dir string) (*Kernel, error) {
	deb, kpkg, err := Resolve(pkg, cache)
	if err != nil {
		return nil, err
	}
	return Extract(deb, kpkg, dir)
}

// Resolve downloads pkg into cache unless it is there, following a
// metapackage to the versioned kernel package; it returns the .deb and the
// kernel package's name. The file name carries the version, so it can key
// a cache of what is built from it.
func Resolve(pkg, cache string) (deb, kernelPackage string, err error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", "", err
	}
	return packageDeb(pkg, cache)
}

// Extract unpacks the kernel package deb (named kernelPackage) under dir.
func Extract(deb, kernelPackage, dir string) (*Kernel, error) {
	if err := run("", "dpkg-deb", "-x", deb, dir); err != nil {
		return nil, err
	}
	kpkg := kernelPackage
	version := strings.TrimPrefix(kpkg, "linux-image-")
	version = strings.TrimSuffix(version, "-unsigned")
	k := &Kernel{Package: kpkg, Version: version, Deb: deb, Root: dir,
		Vmlinuz: filepath.Join(dir, "boot", "vmlinuz-"+version),
		ModDir:  filepath.Join(dir, "lib/modules", version)}
	if _, err := os.Stat(k.ModDir); err != nil {
		return nil, fmt.Errorf("%s has no lib/modules/%s: %w", kpkg, version, err)
	}
	if _, err := os.Stat(k.Vmlinuz); err != nil {
		return nil, fmt.Errorf("%s has no boot/vmlinuz-%s: %w", kpkg, version, err)
	}
	return k, nil
}

// Installed finds the one kernel installed in a root directory (a Debian
// root mmdebstrap made): root/boot/vmlinuz-VERSION with its modules in
// root/lib/modules/VERSION, which depmod indexed when the package was
// configured.
func Installed(root string) (*Kernel, error) {
	kernels, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if len(kernels) != 1 {
		return nil, fmt.Errorf("%s/boot: want one kernel, found %d (%s)", root, len(kernels), strings.Join(kernels, ", "))
	}
	version := strings.TrimPrefix(filepath.Base(kernels[0]), "vmlinuz-")
	k := &Kernel{Package: "linux-image-" + version, Version: version, Root: root,
		Vmlinuz: kernels[0], ModDir: filepath.Join(root, "lib/modules", version)}
	if _, err := os.Stat(filepath.Join(k.ModDir, "modules.dep")); err != nil {
		return nil, fmt.Errorf("kernel %s in %s: no modules.dep (was depmod run?): %w", version, root, err)
	}
	return k, nil
}

// Modules picks the wanted modules of k and their dependencies: the files
// relative to ModDir (sorted) and the modules.dep lines for them. A wanted
// module neither in the package nor built in is an error. The dependencies
// are depmod's when ModDir has a modules.dep (an installed kernel, whose
// modules may be compressed), else derived from each module's .modinfo.
func (k *Kernel) Modules(want []string) (files []string, modulesDep string, err error) {
	var dep string
	if b, err := os.ReadFile(filepath.Join(k.ModDir, "modules.dep")); err == nil {
		dep = string(b)
	} else if dep, err = ModulesDep(k.ModDir); err != nil {
		return nil, "", err
	}
	builtin, _ := os.ReadFile(filepath.Join(k.ModDir, "modules.builtin"))
	files, depOut, missing := ModuleClosure(dep, string(builtin), want)
	if len(missing) > 0 {
		return nil, "", fmt.Errorf("modules not in %s: %s", k.Package, strings.Join(missing, ", "))
	}
	return files, depOut, nil
}

// Output runs name with args and returns its standard output ("" when it
// fails).
func Output(name string, args ...string) string { return output(name, args...) }

// packageDeb downloads pkg into cache (unless there) and follows a
// metapackage (linux-image-amd64) to the versioned kernel package it
// depends on. It returns the .deb's path and the kernel package's name.
func packageDeb(pkg, cache string) (string, string, error) {
	for range 3 {
		deb, err := Download(pkg, cache)
		if err != nil {
			return "", "", err
		}
		if strings.Contains(output("dpkg-deb", "-c", deb), "/boot/vmlinuz-") {
			return deb, pkg, nil
		}
		depends := strings.TrimSpace(output("dpkg-deb", "-f", deb, "Depends"))
		next := strings.Fields(strings.Split(depends, ",")[0])
		if len(next) == 0 || !strings.HasPrefix(next[0], "linux-image-") {
			return "", "", fmt.Errorf("%s: no kernel in it and no linux-image dependency (Depends: %q)", pkg, depends)
		}
		pkg = next[0]
	}
	return "", "", fmt.Errorf("%s: metapackages nest too deep", pkg)
}

// Download fetches the candidate version of pkg with apt-get download,
// keeping it in cache: the .deb file name carries the version, so a new
// kernel in the archive is a new file.
func Download(pkg, cache string) (string, error) {
	version := ""
	for _, line := range strings.Split(output("apt-cache", "policy", pkg), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate:"); ok {
			version = strings.TrimSpace(v)
		}
	}
	if version == "" || version == "(none)" {
		return "", fmt.Errorf("apt knows no %s (run apt-get update)", pkg)
	}
	// apt-get download names the file pkg_version_arch.deb, with ':' as %3a.
	pattern := filepath.Join(cache, pkg+"_"+strings.ReplaceAll(version, ":", "%3a")+"_*.deb")
	if m, _ := filepath.Glob(pattern); len(m) > 0 {
		return m[0], nil
	}
	abs, err := filepath.Abs(cache)
	if err != nil {
		return "", err
	}
	if err := run(abs, "apt-get", "download", "-q", pkg+"="+version); err != nil {
		return "", err
	}
	m, _ := filepath.Glob(pattern)
	if len(m) == 0 {
		return "", fmt.Errorf("apt-get download %s left no %s", pkg, pattern)
	}
	return m[0], nil
}

// ModuleClosure picks the wanted modules and everything they depend on
// from modules.dep. It returns the files (sorted), the modules.dep lines for
// them, and the wanted names found neither as modules nor built in.
func ModuleClosure(dep, builtin string, want []string) (files []string, depOut string, missing []string) {
	deps := map[string][]string{}
	byName := map[string]string{}
	for _, line := range strings.Split(dep, "\n") {
		mod, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
		byName[moduleName(mod)] = mod
	}
	isBuiltin := map[string]bool{}
	for _, line := range strings.Split(builtin, "\n") {
		if line != "" {
			isBuiltin[moduleName(line)] = true
		}
	}
	picked := map[string]bool{}
	var add func(string)
	add = func(m string) {
		if picked[m] {
			return
		}
		picked[m] = true
		for _, d := range deps[m] {
			add(d)
		}
	}
	for _, w := range want {
		w = strings.ReplaceAll(strings.TrimSpace(w), "-", "_")
		if w == "" {
			continue
		}
		if m, ok := byName[w]; ok {
			add(m)
		} else if !isBuiltin[w] {
			missing = append(missing, w)
		}
	}
	for m := range picked {
		files = append(files, m)
	}
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "%s: %s\n", f, strings.Join(deps[f], " "))
	}
	return files, b.String(), missing
}

// ModulesDep writes modules.dep lines ("kernel/a.ko: kernel/b.ko") for
// every module under dir from the "depends=" entry of its .modinfo section,
// which modpost fills from the symbols the module uses.
func ModulesDep(dir string) (string, error) {
	byName := map[string]string{}
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, rel)
			byName[moduleName(rel)] = rel
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		deps, err := modinfoDepends(filepath.Join(dir, f))
		if err != nil {
			return "", fmt.Errorf("%s: %w", f, err)
		}
		var paths []string
		for _, d := range deps {
			p, ok := byName[strings.ReplaceAll(d, "-", "_")]
			if !ok {
				return "", fmt.Errorf("%s depends on %s, which is not in the package", f, d)
			}
			paths = append(paths, p)
		}
		fmt.Fprintf(&b, "%s: %s\n", f, strings.Join(paths, " "))
	}
	return b.String(), nil
}

func modinfoDepends(file string) ([]string, error) {
	info, err := ModInfo(file)
	if err != nil || len(info["depends"]) == 0 {
		return nil, err
	}
	var out []string
	for _, d := range strings.Split(info["depends"][0], ",") {
		if d != "" {
			out = append(out, d)
		}
	}
	return out, nil
}

func moduleName(file string) string {
	b := filepath.Base(file)
	if i := strings.Index(b, ".ko"); i >= 0 {
		b = b[:i]
	}
	return strings.ReplaceAll(b, "-", "_")
}

func run(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

func output(name string, args ...string) string {
	b, _ := exec.Command(name, args...).Output()
	return string(b)
}
