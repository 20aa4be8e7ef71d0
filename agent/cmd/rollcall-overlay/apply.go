package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"unicode/utf8"
)

// Bounds on the tar beyond its size (the appliance's own are tighter:
// 2,000 files, paths of 255 bytes).
const (
	maxEntries = 10000
	maxPath    = 1024
)

// File is one regular file or directory of the overlay.
type File struct {
	Path string // relative to the root, clean
	Mode uint32 // permission bits (0o7777)
	Dir  bool
	Data []byte
}

// ReadTar reads the whole overlay and checks every entry before anything is
// written: only regular files and directories; a path that is absolute,
// not clean, has a ".." or "." element, a NUL, or is not UTF-8 refuses the
// whole tar, as does a path given twice.
func ReadTar(data []byte) ([]File, error) {
	tr := tar.NewReader(bytes.NewReader(data))
	var files []File
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("overlay tar: %w", err)
		}
		if len(files) >= maxEntries {
			return nil, fmt.Errorf("overlay tar: more than %d entries", maxEntries)
		}
		name := h.Name
		dir := h.Typeflag == tar.TypeDir
		if dir {
			name = strings.TrimSuffix(name, "/")
		}
		name = strings.TrimPrefix(name, "./")
		if err := checkPath(name); err != nil {
			return nil, fmt.Errorf("overlay tar: entry %q: %w", clip(h.Name), err)
		}
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeDir:
		case tar.TypeSymlink, tar.TypeLink:
			return nil, fmt.Errorf("overlay tar: entry %q is a link: only files and directories are written", name)
		default:
			return nil, fmt.Errorf("overlay tar: entry %q has type %q: only files and directories are written", name, h.Typeflag)
		}
		if seen[name] {
			return nil, fmt.Errorf("overlay tar: %q twice", name)
		}
		seen[name] = true
		f := File{Path: name, Mode: uint32(h.Mode) & 0o7777, Dir: dir}
		if !dir {
			if f.Data, err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("overlay tar: %s: %w", name, err)
			}
		}
		files = append(files, f)
	}
	// A file that another entry needs as a directory.
	for _, f := range files {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			if seen[d] && !isDir(files, d) {
				return nil, fmt.Errorf("overlay tar: %q is a file and a directory of %q", d, f.Path)
			}
		}
	}
	return files, nil
}

func isDir(files []File, p string) bool {
	for _, f := range files {
		if f.Path == p {
			return f.Dir
		}
	}
	return false
}

func checkPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case len(p) > maxPath:
		return fmt.Errorf("path longer than %d bytes", maxPath)
	case !utf8.ValidString(p) || strings.ContainsRune(p, 0):
		return errors.New("path is not clean UTF-8")
	case strings.HasPrefix(p, "/"):
		return errors.New("absolute path")
	case path.Clean(p) != p:
		return errors.New("path is not clean")
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." || el == "." {
			return errors.New(`path has a ".." or "." element`)
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// WriteFiles writes files under root: directories first made (0755 where
// new), then each file through a temporary file in its directory, given
// its mode and (as root) owner root, synced and renamed over the old one.
// Paths resolve inside root only: a symlink in the target tree that points
// out of it is refused, never followed. It returns the bytes written.
func WriteFiles(root string, files []File) (int64, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	asRoot := os.Geteuid() == 0
	var n int64
	for _, f := range files {
		if f.Dir {
			if err := r.MkdirAll(f.Path, 0o755); err != nil {
				return n, fmt.Errorf("mkdir %s: %w", f.Path, err)
			}
			continue
		}
		if dir := path.Dir(f.Path); dir != "." {
			if err := r.MkdirAll(dir, 0o755); err != nil {
				return n, fmt.Errorf("mkdir %s: %w", dir, err)
			}
		}
		if err := writeAtomic(r, f, asRoot); err != nil {
			return n, fmt.Errorf("write %s: %w", f.Path, err)
		}
		n += int64(len(f.Data))
	}
	return n, nil
}

func writeAtomic(r *os.Root, f File, asRoot bool) error {
	tmp := path.Join(path.Dir(f.Path), "."+path.Base(f.Path)+".rollcall-overlay")
	r.Remove(tmp) // one a killed run left
	w, err := r.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			w.Close()
			r.Remove(tmp)
		}
	}()
	if _, err := w.Write(f.Data); err != nil {
		return err
	}
	if asRoot {
		if err := w.Chown(0, 0); err != nil {
			return err
		}
	}
	// After chown, which clears set-user-ID and set-group-ID bits.
	if err := w.Chmod(os.FileMode(f.Mode&0o777) | modeBits(f.Mode)); err != nil {
		return err
	}
	if err := w.Sync(); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	ok = true
	if err := r.Rename(tmp, f.Path); err != nil {
		r.Remove(tmp)
		return err
	}
	return nil
}

// modeBits turns the setuid, setgid and sticky bits of a Unix mode into
// Go's.
func modeBits(m uint32) os.FileMode {
	var fm os.FileMode
	if m&0o4000 != 0 {
		fm |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		fm |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		fm |= os.ModeSticky
	}
	return fm
}
