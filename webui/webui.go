// Package webui is Rollcall's browser interface: static HTML, CSS and
// JavaScript modules embedded in the binary, with no build step. The page
// talks only to the public REST API (/api/v1) with the admin token the
// operator types in, and follows changes through the API's blocking queries
// (?index=N&wait=30s).
//
// The appliance mounts Handler at "/" and "/ui/": "/" redirects to "/ui/",
// and "/ui/…" serves the embedded files. The page routes with the URL
// fragment (#/machines/m-…), so every path the browser asks for is a real
// file and the token never appears in a URL.
package webui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is where the page lives.
const Prefix = "/ui/"

// FS is the embedded page: index.html at the root, modules under js/.
func FS() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the directory is embedded above; it cannot be missing
	}
	return sub
}

// contentSecurityPolicy allows only this origin: no inline script or style,
// no third-party fetches, no framing (the page carries an admin token).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// file is one embedded asset, read once at start.
type file struct {
	body  []byte
	ctype string
	etag  string
}

// types names the Content-Type of each extension the page uses, so the
// answer does not depend on the host's MIME tables (a JavaScript module
// served as text/plain is refused by the browser).
var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".json": "application/json",
	".png":  "image/png",
	".ico":  "image/x-icon",
}

// ContentType is the Content-Type the handler sends for a file name.
func ContentType(name string) string {
	ext := path.Ext(name)
	if t, ok := types[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

func load() map[string]file {
	files := map[string]file{}
	err := fs.WalkDir(FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(FS(), p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		files[p] = file{body: b, ctype: ContentType(p), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic(err) // embedded files are always readable
	}
	return files
}

// Handler serves the page: "/" redirects to /ui/, /ui/ is index.html and
// /ui/NAME an embedded file. Anything else is 404. Files are revalidated on
// every load (Cache-Control: no-cache with an ETag), so an upgraded node
// never serves a stale module next to a new one.
func Handler() http.Handler {
	files := load()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		switch {
		case r.URL.Path == "/" || r.URL.Path == "/ui" || r.URL.Path == "/index.html":
			http.Redirect(w, r, Prefix, http.StatusFound)
			return
		case !strings.HasPrefix(r.URL.Path, Prefix):
			http.NotFound(w, r)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if name == "" {
			name = "index.html"
		}
		f, ok := files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.ctype)
		h.Set("ETag", f.etag)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if name == "index.html" {
			h.Set("Content-Security-Policy", contentSecurityPolicy)
			h.Set("X-Frame-Options", "DENY")
		}
		if match := r.Header.Get("If-None-Match"); match != "" && match == f.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Length", strconv.Itoa(len(f.body)))
		if r.Method == http.MethodHead {
			return
		}
		w.Write(f.body)
	})
}
