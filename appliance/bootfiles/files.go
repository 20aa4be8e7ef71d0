package bootfiles

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/tftp"
)

// The files a booting machine fetches over HTTP, unauthenticated: it holds
// no credential yet. The handlers read their path parameters with
// r.PathValue and return a refusal for the node's error path to render.

// bootLoaders are the iPXE binaries UEFI HTTP boot fetches from /boot/FILE.
var bootLoaders = append([]string{"ipxe-arm64.efi"}, tftp.IPXEFiles...)

// ServeLoader serves GET and HEAD /boot/{file}: an allow-listed iPXE binary
// from ipxe_dir, for UEFI HTTP boot clients (TFTP serves the same files).
func (s *Server) ServeLoader(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("file")
	if !slices.Contains(bootLoaders, name) {
		s.m.BootRefused.Inc()
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no such boot file (served: " + strings.Join(bootLoaders, ", ") + ")"}
	}
	dir := s.conf.IPXEDir
	if dir == "" {
		dir = tftp.DefaultIPXEDir
	}
	// The name is one of a fixed list, so it cannot leave dir; the file
	// itself may be a symlink, followed as TFTP follows it only where it
	// stays in dir or Debian's package directories (tftp.OpenFile):
	// Debian's /usr/lib/ipxe/ipxe.efi links to /boot/ipxe.efi, which an
	// os.Root refuses, and a link to the node's tokens must never be served.
	f, _, err := tftp.OpenFile(filepath.Join(dir, name))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("boot file refused", "file", name, "err", err)
		}
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: name + " is not installed on this node"}
	}
	defer f.Close()
	http.ServeContent(sendfileWriter{w}, r, name, time.Time{}, f)
	return nil
}

// ServeImageFile serves GET and HEAD /images/{name}/{file}. Only files named
// by an image record are served, from the blob the record names: no request
// path ever reaches the file system. An unknown image or file is the
// store's not-found error.
func (s *Server) ServeImageFile(w http.ResponseWriter, r *http.Request) error {
	var f store.ImageFile
	err := s.conf.DB.View(func(tx *store.Tx) error {
		im, err := tx.Image(r.PathValue("name"))
		if err != nil {
			return err
		}
		var ok bool
		if f, ok = im.File(r.PathValue("file")); !ok {
			return store.Errorf(store.ErrNotFound, "image %s has no %s", im.Name, store.Clip(r.PathValue("file")))
		}
		return nil
	})
	if err != nil {
		s.m.BootRefused.Inc()
		return err
	}
	file, err := os.Open(s.conf.Blobs.Path(f.SHA256))
	if err != nil {
		w.Header().Set("Retry-After", "10")
		return &Error{Status: http.StatusServiceUnavailable, Code: "syncing", Message: "this node has not fetched that image file yet; retry shortly"}
	}
	defer file.Close()
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", `"`+f.SHA256+`"`)
	// ServeContent handles HEAD, Range, If-Range and Content-Length (RFC
	// 9110); the response writer sends an *os.File with sendfile.
	http.ServeContent(sendfileWriter{w}, r, "", time.Time{}, file)
	return nil
}

// sendfileWriter gives a wrapping response writer that has no io.ReaderFrom
// (gin's) the one of the http.ResponseWriter underneath, so that
// ServeContent's copy of an *os.File is a sendfile instead of 32 KiB reads
// and writes.
type sendfileWriter struct{ http.ResponseWriter }

func (w sendfileWriter) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	if u, ok := w.ResponseWriter.(interface{ Unwrap() http.ResponseWriter }); ok {
		if rf, ok := u.Unwrap().(io.ReaderFrom); ok {
			// The wrapper may hold the status back until the first write:
			// an empty one sends it before the body goes round it.
			w.ResponseWriter.Write(nil)
			return rf.ReadFrom(r)
		}
	}
	return io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
}
