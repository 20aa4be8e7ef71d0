package tftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Resolver serves a name that no root matches, so the appliance can serve
// generated files. It gets the normalised name (slash-separated, no leading
// slash, no ".." element) and the client's address, and returns the content
// and its size (-1 when unknown: then tsize is not answered). Return an
// error wrapping fs.ErrNotExist for "no such file"; any other error is
// logged and the client gets a generic error. ctx is done when the server
// stops or Config.MaxLifetime has passed: the call holds a transfer slot.
type Resolver func(ctx context.Context, name string, remote netip.AddrPort) (io.ReadCloser, int64, error)

var (
	errBadName  = errors.New("bad file name")
	errNotFound = fs.ErrNotExist
	errNotFile  = errors.New("not a regular file")
	// errOutsideRoots: a file root whose symlinks lead out of its
	// directory and SystemDirs.
	errOutsideRoots = errors.New("resolves outside the allowed directories")
)

// DefaultIPXEDir is where Debian's ipxe package installs the binaries.
const DefaultIPXEDir = "/usr/lib/ipxe"

// IPXEFiles are the iPXE binaries served by default: BIOS (undionly.kpxe)
// and UEFI (ipxe.efi with its own drivers, snponly.efi over the firmware's).
var IPXEFiles = []string{"undionly.kpxe", "ipxe.efi", "snponly.efi"}

// DefaultRoots is the allow-list used when Config.Roots is nil: the iPXE
// binaries in dir (DefaultIPXEDir when empty) and nothing else.
func DefaultRoots(dir string) map[string]string {
	if dir == "" {
		dir = DefaultIPXEDir
	}
	m := make(map[string]string, len(IPXEFiles))
	for _, f := range IPXEFiles {
		m[f] = filepath.Join(dir, f)
	}
	return m
}

// cleanName turns the name a client sent into the key the allow-list is
// looked up with. pin/tftp and most servers pass the name through raw; we
// normalise backslashes (PXE ROMs written for Windows servers send them),
// refuse NUL, control characters and invalid UTF-8, and clean the path as
// if it were rooted, so "../x", "/x" and "a/../../x" all become "x".
// Percent-encoding is not decoded: "%2e%2e" is a literal name that simply
// matches nothing. "" means the root itself, which is never a file.
func cleanName(raw string) (string, error) {
	if !utf8.ValidString(raw) {
		return "", fmt.Errorf("%w: not UTF-8", errBadName)
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c < 0x20 || c == 0x7f {
			return "", fmt.Errorf("%w: control character 0x%02x", errBadName, c)
		}
	}
	name := path.Clean("/" + strings.ReplaceAll(raw, `\`, "/"))[1:]
	if name == "" {
		return "", fmt.Errorf("%w: names the root", errBadName)
	}
	return name, nil
}

// root is one allow-list entry: a file served under exactly one name, or a
// directory whose tree is served under a prefix through an os.Root, which
// refuses ".." and symlinks that leave the directory.
type root struct {
	prefix string   // cleaned; "" for a directory served at the top
	file   string   // path of a file root
	dir    *os.Root // a directory root
}

type roots struct {
	files map[string]string // name → path
	dirs  []root            // longest prefix first
}

// openRoots validates the configured allow-list. Keys are cleaned like
// client names; a missing file is only warned about (the package may be
// installed later), a missing directory is an error.
func openRoots(cfg map[string]string, logger *slog.Logger) (*roots, error) {
	rs := &roots{files: make(map[string]string)}
	for key, p := range cfg {
		prefix := ""
		if key != "" && key != "/" && key != "." {
			var err error
			if prefix, err = cleanName(key); err != nil {
				rs.close()
				return nil, fmt.Errorf("tftp root %q: %w", key, err)
			}
		}
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) && prefix != "":
			logger.Warn("tftp root file missing; it is refused until it exists", "name", prefix, "path", p)
			rs.files[prefix] = p
		case err != nil:
			rs.close()
			return nil, fmt.Errorf("tftp root %q: %w", key, err)
		case fi.IsDir():
			d, err := os.OpenRoot(p)
			if err != nil {
				rs.close()
				return nil, fmt.Errorf("tftp root %q: %w", key, err)
			}
			rs.dirs = append(rs.dirs, root{prefix: prefix, dir: d})
		case prefix == "":
			rs.close()
			return nil, fmt.Errorf("tftp root %q: a file needs a name", p)
		default:
			rs.files[prefix] = p
		}
	}
	sort.Slice(rs.dirs, func(i, j int) bool { return len(rs.dirs[i].prefix) > len(rs.dirs[j].prefix) })
	return rs, nil
}

func (rs *roots) close() {
	for _, d := range rs.dirs {
		d.dir.Close()
	}
}

// open finds a cleaned name in the allow-list. It opens non-blocking so a
// FIFO planted in a served directory cannot hang a transfer, and refuses
// anything but a regular file. errNotFound means no entry matched.
func (rs *roots) open(name string) (*os.File, int64, error) {
	if p, ok := rs.files[name]; ok {
		return OpenFile(p)
	}
	for _, d := range rs.dirs {
		rel := name
		if d.prefix != "" {
			var ok bool
			if rel, ok = strings.CutPrefix(name, d.prefix+"/"); !ok {
				continue
			}
		}
		return openRegular(func() (*os.File, error) { return d.dir.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0) })
	}
	return nil, 0, errNotFound
}

// SystemDirs are where Debian's boot-loader packages keep their files: a
// file root may be a symlink into one of them (Debian's ipxe links
// /usr/lib/ipxe and /boot), besides its own directory.
var SystemDirs = []string{"/usr/lib", "/usr/share", "/boot"}

// OpenFile opens a file root for reading: a regular file (opened without
// blocking, so a FIFO cannot hang a transfer) that, symlinks followed,
// resolves inside the directory it is configured in or in SystemDirs. A
// link planted next to an iPXE binary that points at a node's tokens or
// keys is refused. The HTTP boot-file handler uses it too.
func OpenFile(p string) (*os.File, int64, error) {
	f, size, err := openRegular(func() (*os.File, error) { return os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0) })
	if err != nil {
		return nil, 0, err
	}
	// The path the kernel opened, not a second lookup of p that a swapped
	// link could change.
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		real, err = filepath.EvalSymlinks(p)
	}
	if err == nil {
		dirs := append([]string{filepath.Dir(p)}, SystemDirs...)
		if d, derr := filepath.EvalSymlinks(filepath.Dir(p)); derr == nil {
			dirs = append(dirs, d)
		}
		for _, d := range dirs {
			if rel, rerr := filepath.Rel(d, real); rerr == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				return f, size, nil
			}
		}
	}
	f.Close()
	return nil, 0, fmt.Errorf("%s: %w", p, errOutsideRoots)
}

func openRegular(open func() (*os.File, error)) (*os.File, int64, error) {
	f, err := open()
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, errNotFile
	}
	return f, fi.Size(), nil
}
