package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/agent/nodeenv"
)

const token = "rcn1.m-1.7.c2VjcmV0"

type entry struct {
	name     string
	mode     int64
	typ      byte
	data     string
	linkname string
}

func makeTar(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: typ, Size: int64(len(e.data)), Linkname: e.linkname, Format: tar.FormatUSTAR}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			tw.Write([]byte(e.data))
		}
	}
	tw.Close()
	return b.Bytes()
}

// appliance serves the node endpoints as the contract has them: the token
// in X-Rollcall-Node, 401 for any other; trees from the map.
type appliance struct {
	trees    map[string][]byte
	requests atomic.Int32
	self     string
}

func (a *appliance) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.requests.Add(1)
	if r.Header.Get("X-Rollcall-Node") != token {
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	if r.URL.Path == "/api/v1/stateless/self" {
		w.Write([]byte(a.self))
		return
	}
	tree, ok := strings.CutPrefix(r.URL.Path, "/api/v1/stateless/self/overlay/")
	if !ok || a.trees[tree] == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Write(a.trees[tree])
}

func client(url string) *Client {
	return &Client{Config: nodeenv.Config{Server: url, Node: token}, Backoff: time.Millisecond, Timeout: 10 * time.Second}
}

func TestApply(t *testing.T) {
	sys := makeTar(t,
		entry{name: "etc/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "etc/hostname", mode: 0o644, data: "node001\n"},
		entry{name: "etc/ssh/ssh_host_ed25519_key", mode: 0o600, data: "PRIVATE"},
		entry{name: "etc/munge/munge.key", mode: 0o400, data: "MUNGE"},
		entry{name: "usr/local/bin/tool", mode: 0o755, data: "#!/bin/sh\n"},
	)
	a := &appliance{trees: map[string][]byte{"system": sys}}
	srv := httptest.NewServer(a)
	defer srv.Close()
	root := t.TempDir()
	// What the image had: an old file to replace, a directory to keep.
	os.MkdirAll(filepath.Join(root, "etc/ssh"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/hostname"), []byte("localhost\n"), 0o644)
	old, _ := os.Stat(filepath.Join(root, "etc/hostname"))

	res, err := client(srv.URL).Apply(context.Background(), "system", root)
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 5 || res.Bytes != int64(len("node001\nPRIVATEMUNGE#!/bin/sh\n")) {
		t.Errorf("result %+v", res)
	}
	for p, want := range map[string]struct {
		mode os.FileMode
		data string
	}{
		"etc/hostname":                 {0o644, "node001\n"},
		"etc/ssh/ssh_host_ed25519_key": {0o600, "PRIVATE"},
		"etc/munge/munge.key":          {0o400, "MUNGE"},
		"usr/local/bin/tool":           {0o755, "#!/bin/sh\n"},
	} {
		st, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		got, _ := os.ReadFile(filepath.Join(root, p))
		if st.Mode().Perm() != want.mode || string(got) != want.data {
			t.Errorf("%s: mode %v data %q, want %v %q", p, st.Mode().Perm(), got, want.mode, want.data)
		}
		if os.Geteuid() == 0 {
			if s := st.Sys().(*syscall.Stat_t); s.Uid != 0 || s.Gid != 0 {
				t.Errorf("%s: owner %d:%d, want root", p, s.Uid, s.Gid)
			}
		}
	}
	// Replaced by rename: a new inode, so a reader never sees half a file.
	now, _ := os.Stat(filepath.Join(root, "etc/hostname"))
	if os.SameFile(old, now) {
		t.Error("etc/hostname was rewritten in place, not renamed over")
	}
	leftovers, _ := filepath.Glob(filepath.Join(root, "*/.*.rollcall-overlay"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

func TestApplyRefuses(t *testing.T) {
	cases := map[string]struct {
		tar  []byte
		want string
	}{
		"dotdot":             {makeTar(t, entry{name: "etc/../../escape", mode: 0o644, data: "x"}), "not clean"},
		"dotdot clean":       {makeTar(t, entry{name: "../escape", mode: 0o644, data: "x"}), `".."`},
		"absolute":           {makeTar(t, entry{name: "/etc/passwd", mode: 0o644, data: "x"}), "absolute"},
		"symlink":            {makeTar(t, entry{name: "etc/shadow", typ: tar.TypeSymlink, linkname: "/etc/passwd"}), "link"},
		"hard link":          {makeTar(t, entry{name: "etc/x", typ: tar.TypeLink, linkname: "etc/hostname"}), "link"},
		"device":             {makeTar(t, entry{name: "dev/sda", typ: tar.TypeBlock}), "type"},
		"twice":              {makeTar(t, entry{name: "a", mode: 0o644}, entry{name: "a", mode: 0o644}), "twice"},
		"file and directory": {makeTar(t, entry{name: "a", mode: 0o644}, entry{name: "a/b", mode: 0o644}), "file and a directory"},
		"not a tar":          {[]byte(strings.Repeat("garbage!", 200)), "overlay tar"},
		"too big":            {makeTar(t, entry{name: "big", mode: 0o644, data: strings.Repeat("x", MaxOverlay)}), "allowed"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// A good file first: nothing may be written when any entry is bad.
			srv := httptest.NewServer(&appliance{trees: map[string][]byte{"system": tc.tar}})
			defer srv.Close()
			root := t.TempDir()
			_, err := client(srv.URL).Apply(context.Background(), "system", root)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one about %s", err, tc.want)
			}
			if ents, _ := os.ReadDir(root); len(ents) > 0 {
				t.Errorf("wrote %v", ents)
			}
		})
	}
	t.Run("nothing written before a bad entry", func(t *testing.T) {
		srv := httptest.NewServer(&appliance{trees: map[string][]byte{"system": makeTar(t,
			entry{name: "etc/good", mode: 0o644, data: "ok"}, entry{name: "etc/bad", typ: tar.TypeSymlink, linkname: "/x"})}})
		defer srv.Close()
		root := t.TempDir()
		if _, err := client(srv.URL).Apply(context.Background(), "system", root); err == nil {
			t.Fatal("no error")
		}
		if _, err := os.Stat(filepath.Join(root, "etc/good")); err == nil {
			t.Error("etc/good written although the tar was refused")
		}
	})
	t.Run("a symlink in the target pointing out is not followed", func(t *testing.T) {
		srv := httptest.NewServer(&appliance{trees: map[string][]byte{"system": makeTar(t, entry{name: "etc/x/file", mode: 0o644, data: "x"})}})
		defer srv.Close()
		root, outside := t.TempDir(), t.TempDir()
		os.MkdirAll(filepath.Join(root, "etc"), 0o755)
		os.Symlink(outside, filepath.Join(root, "etc/x"))
		if _, err := client(srv.URL).Apply(context.Background(), "system", root); err == nil {
			t.Error("no error")
		}
		if ents, _ := os.ReadDir(outside); len(ents) > 0 {
			t.Errorf("wrote outside the root: %v", ents)
		}
	})
}

func TestUnauthorized(t *testing.T) {
	a := &appliance{trees: map[string][]byte{"system": makeTar(t)}}
	srv := httptest.NewServer(a)
	defer srv.Close()
	c := client(srv.URL)
	c.Config.Node = "rcn1.m-2.7.other"
	_, err := c.Apply(context.Background(), "system", t.TempDir())
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("err = %v, want ErrUnauthorized", err)
	}
	if a.requests.Load() != 1 {
		t.Errorf("%d requests: a 401 is not retried", a.requests.Load())
	}
	if strings.Contains(err.Error(), "other") {
		t.Errorf("the error shows the token: %v", err)
	}
	// watch stops on it too: no later try can succeed.
	if err := c.Watch(context.Background(), t.TempDir(), func(*Result, error) {}); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("watch: %v", err)
	}
}

func TestRetryAndTimeout(t *testing.T) {
	var n atomic.Int32
	good := makeTar(t, entry{name: "etc/hosts", mode: 0o644, data: "h"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			http.Error(w, "render busy", http.StatusServiceUnavailable)
			return
		}
		w.Write(good)
	}))
	defer srv.Close()
	c := client(srv.URL)
	if _, err := c.Apply(context.Background(), "runtime", t.TempDir()); err != nil || n.Load() != 3 {
		t.Errorf("err %v after %d requests, want success on the third", err, n.Load())
	}

	// A 4xx other than 401 is final.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "overlay compute: system/etc/x.tmpl:3: bad", http.StatusNotFound)
	}))
	defer bad.Close()
	if _, err := client(bad.URL).Apply(context.Background(), "system", t.TempDir()); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("404: %v", err)
	}

	// A server that never answers: the apply's bound ends it.
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer stall.Close()
	c = client(stall.URL)
	c.Timeout = 100 * time.Millisecond
	if _, err := c.Apply(context.Background(), "system", t.TempDir()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stalled server: %v, want the deadline", err)
	}
}

func TestTLSPinned(t *testing.T) {
	a := &appliance{trees: map[string][]byte{"system": makeTar(t, entry{name: "etc/hostname", mode: 0o644, data: "n1\n"})}}
	tlsSrv := httptest.NewTLSServer(a)
	defer tlsSrv.Close()
	cert := tlsSrv.Certificate() // self-signed: its own CA
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ca.pem" {
			w.Write(caPEM)
			return
		}
		http.Error(w, "plain HTTP carries nothing but the CA", http.StatusForbidden)
	}))
	defer plain.Close()
	sum := sha256.Sum256(cert.Raw)
	c := &Client{Config: nodeenv.Config{Server: plain.URL, TLS: tlsSrv.URL, CA: hex.EncodeToString(sum[:]), Node: token}, Backoff: time.Millisecond}
	root := t.TempDir()
	if _, err := c.Apply(context.Background(), "system", root); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/hostname")); string(b) != "n1\n" {
		t.Errorf("etc/hostname = %q", b)
	}
	c = &Client{Config: nodeenv.Config{Server: plain.URL, TLS: tlsSrv.URL, CA: strings.Repeat("ab", 32), Node: token}, Backoff: time.Millisecond}
	if _, err := c.Apply(context.Background(), "system", t.TempDir()); err == nil || !strings.Contains(err.Error(), "fingerprint") {
		t.Errorf("wrong pin: %v", err)
	}
}

func TestRefresh(t *testing.T) {
	a := &appliance{self: `{"machine":"m-1","name":"node001","refresh_seconds":120}`}
	srv := httptest.NewServer(a)
	defer srv.Close()
	c := client(srv.URL)
	if got := c.Refresh(context.Background()); got != 120*time.Second {
		t.Errorf("refresh from the appliance = %v", got)
	}
	c.Config.Refresh = 10
	if got := c.Refresh(context.Background()); got != 10*time.Second {
		t.Errorf("refresh from rollcall.refresh = %v", got)
	}
	a.self = `{"refresh_seconds":-5}`
	if got := client(srv.URL).Refresh(context.Background()); got != DefaultRefresh*time.Second {
		t.Errorf("refresh from a bad answer = %v", got)
	}
}

func TestLoadConfigAndRun(t *testing.T) {
	dir := t.TempDir()
	cmdline, env := filepath.Join(dir, "cmdline"), filepath.Join(dir, "node.env")
	os.WriteFile(cmdline, []byte("console=ttyS0 rollcall.refresh=10\n"), 0o644)
	os.WriteFile(env, nodeenv.Config{Server: "http://10.0.0.1:8080", Node: token, Hostname: "node001"}.Env(), 0o600)
	cfg, err := LoadConfig(cmdline, env)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(nodeenv.Config{Server: "http://10.0.0.1:8080", Node: token, Hostname: "node001", Refresh: 10}, cfg); d != "" {
		t.Errorf("settings from node.env with the command line's refresh (-want +got):\n%s", d)
	}
	if _, err := LoadConfig(cmdline, filepath.Join(dir, "none")); err == nil || !strings.Contains(err.Error(), "rollcall.node=") {
		t.Errorf("no settings anywhere: %v", err)
	}

	a := &appliance{trees: map[string][]byte{"runtime": makeTar(t, entry{name: "run/rollcall/heartbeat", mode: 0o644, data: "1"})}}
	srv := httptest.NewServer(a)
	defer srv.Close()
	os.WriteFile(cmdline, []byte("rollcall.server="+srv.URL+" rollcall.node="+token+"\n"), 0o644)
	root := t.TempDir()
	var out, errOut bytes.Buffer
	if code := run([]string{"-cmdline", cmdline, "-env", env, "-root", root, "apply", "runtime"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "applied runtime: 1 files") {
		t.Errorf("stdout %q", out.String())
	}
	if _, err := os.Stat(filepath.Join(root, "run/rollcall/heartbeat")); err != nil {
		t.Error(err)
	}
	out.Reset()
	if code := run([]string{"-cmdline", cmdline, "-root", root, "show"}, &out, &errOut); code != 0 || strings.Contains(out.String(), token) || !strings.Contains(out.String(), "node=set") {
		t.Errorf("show: exit %d, %q (the token must not be printed)", code, out.String())
	}
	for _, args := range [][]string{{}, {"apply"}, {"apply", "etc"}, {"watch", "x"}, {"frob"}} {
		if code := run(append([]string{"-cmdline", cmdline}, args...), &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	errOut.Reset()
	os.WriteFile(cmdline, []byte("rollcall.server="+srv.URL+" rollcall.node=rcn1.bad\n"), 0o644)
	if code := run([]string{"-cmdline", cmdline, "-root", root, "apply", "system"}, &out, &errOut); code != 1 ||
		strings.Count(errOut.String(), "\n") != 1 || !strings.Contains(errOut.String(), "401") {
		t.Errorf("401: exit %d, stderr %q (want one line)", code, errOut.String())
	}
}

func FuzzReadTar(f *testing.F) {
	f.Add(makeTar(f, entry{name: "etc/hosts", mode: 0o644, data: "127.0.0.1 localhost\n"}, entry{name: "etc/", typ: tar.TypeDir}))
	f.Add(makeTar(f, entry{name: "../x", mode: 0o644}))
	f.Add(makeTar(f, entry{name: "a", typ: tar.TypeSymlink, linkname: "/"}))
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		files, err := ReadTar(data)
		if err != nil {
			return
		}
		for _, fl := range files {
			if checkPath(fl.Path) != nil || fl.Mode&^0o7777 != 0 {
				t.Fatalf("accepted %q mode %o", fl.Path, fl.Mode)
			}
		}
	})
}
