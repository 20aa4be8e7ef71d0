package webui

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"
)

func serve(t *testing.T, method, target string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, req)
	return rec
}

func embedded(t *testing.T) []string {
	t.Helper()
	var names []string
	err := fs.WalkDir(FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestContentTypes serves every embedded file and checks its type: a module
// script sent as anything but JavaScript is refused by the browser.
func TestContentTypes(t *testing.T) {
	want := map[string]string{
		".html": "text/html; charset=utf-8",
		".css":  "text/css; charset=utf-8",
		".js":   "text/javascript; charset=utf-8",
		".svg":  "image/svg+xml",
	}
	names := embedded(t)
	if len(names) < 5 {
		t.Fatalf("only %d embedded files: %v", len(names), names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			ct, ok := want[path.Ext(name)]
			if !ok {
				t.Fatalf("no expected Content-Type for %s: add its extension to this test and to types", name)
			}
			rec := serve(t, http.MethodGet, Prefix+name)
			if rec.Code != http.StatusOK {
				t.Fatalf("GET %s: status %d", Prefix+name, rec.Code)
			}
			if got := rec.Header().Get("Content-Type"); got != ct {
				t.Errorf("GET %s: Content-Type %q, want %q", Prefix+name, got, ct)
			}
			if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", Prefix+name, got)
			}
			b, _ := fs.ReadFile(FS(), name)
			if rec.Body.String() != string(b) {
				t.Errorf("GET %s: body differs from the embedded file", Prefix+name)
			}
			etag := rec.Header().Get("ETag")
			if again := serve(t, http.MethodGet, Prefix+name, "If-None-Match", etag); again.Code != http.StatusNotModified {
				t.Errorf("GET %s with If-None-Match %s: status %d, want 304", Prefix+name, etag, again.Code)
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	tests := map[string]struct {
		method, target string
		status         int
		location       string
		ctype          string
	}{
		"root redirects":   {"GET", "/", http.StatusFound, Prefix, ""},
		"ui without slash": {"GET", "/ui", http.StatusFound, Prefix, ""},
		"index":            {"GET", Prefix, http.StatusOK, "", "text/html; charset=utf-8"},
		"head index":       {"HEAD", Prefix, http.StatusOK, "", "text/html; charset=utf-8"},
		"module":           {"GET", Prefix + "js/app.js", http.StatusOK, "", "text/javascript; charset=utf-8"},
		"unknown file":     {"GET", Prefix + "js/nope.js", http.StatusNotFound, "", ""},
		"outside the page": {"GET", "/api/v1/machines", http.StatusNotFound, "", ""},
		"dot dot":          {"GET", Prefix + "../webui.go", http.StatusNotFound, "", ""},
		"post":             {"POST", Prefix, http.StatusMethodNotAllowed, "", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rec := serve(t, tc.method, tc.target)
			if rec.Code != tc.status {
				t.Fatalf("%s %s: status %d, want %d", tc.method, tc.target, rec.Code, tc.status)
			}
			if tc.location != "" && rec.Header().Get("Location") != tc.location {
				t.Errorf("Location %q, want %q", rec.Header().Get("Location"), tc.location)
			}
			if tc.ctype != "" && rec.Header().Get("Content-Type") != tc.ctype {
				t.Errorf("Content-Type %q, want %q", rec.Header().Get("Content-Type"), tc.ctype)
			}
		})
	}
	// The page carries an admin token: it allows only its own origin and
	// cannot be framed.
	csp := serve(t, "GET", Prefix).Header().Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
}

// TestReferences checks that index.html, the stylesheet and the modules
// name only files that are embedded: no CDN, no missing module.
func TestReferences(t *testing.T) {
	files := map[string]bool{}
	for _, n := range embedded(t) {
		files[n] = true
	}
	resolve := func(from, ref string) string { return path.Clean(path.Join(path.Dir(from), ref)) }

	b, err := fs.ReadFile(FS(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				if a.Key == "src" || (a.Key == "href" && n.Data == "link") {
					refs = append(refs, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if diff := cmp.Diff([]string{"icon.svg", "style.css", "js/app.js"}, refs); diff != "" {
		t.Errorf("index.html references (-want +got):\n%s", diff)
	}
	check := func(from, ref string) {
		if strings.Contains(ref, "//") || strings.HasPrefix(ref, "/") {
			t.Errorf("%s references %q: only relative references to embedded files are allowed", from, ref)
			return
		}
		if !files[resolve(from, ref)] {
			t.Errorf("%s references %q, which is not embedded", from, ref)
		}
	}
	for _, r := range refs {
		check("index.html", r)
	}

	imports := regexp.MustCompile(`(?m)^\s*(?:import|export)\s[^;]*?\sfrom\s+'([^']+)'|import\('([^']+)'\)`)
	urls := regexp.MustCompile(`url\("?([^")]+)"?\)`)
	reached := map[string]bool{"index.html": true}
	for name := range files {
		src, _ := fs.ReadFile(FS(), name)
		switch path.Ext(name) {
		case ".js":
			for _, m := range imports.FindAllStringSubmatch(string(src), -1) {
				ref := m[1] + m[2]
				check(name, ref)
				reached[resolve(name, ref)] = true
			}
		case ".css":
			for _, m := range urls.FindAllStringSubmatch(string(src), -1) {
				if !strings.HasPrefix(m[1], "data:") {
					check(name, m[1])
				}
			}
		}
	}
	for _, r := range refs {
		reached[resolve("index.html", r)] = true
	}
	for name := range files {
		if !reached[name] {
			t.Errorf("%s is embedded but nothing references it", name)
		}
	}
}
