package tftp

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rollcall/rollcall/lab/testenv"
)

const secret = "TOP-SECRET-6f1d0c"

// traversalFixture lays out, in a temp dir:
//
//	secret.txt               outside every root
//	root/ok.txt              served (directory root at the top)
//	root/sub/ok.txt
//	root/link-rel -> ../secret.txt
//	root/link-abs -> /abs/path/secret.txt
//	root/fifo                a FIFO (would hang a blocking open)
//	root/dir/                a directory
func traversalFixture(t *testing.T) (base, root string) {
	t.Helper()
	base = t.TempDir()
	root = filepath.Join(base, "root")
	for _, d := range []string{root, filepath.Join(root, "sub"), filepath.Join(root, "dir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(base, "secret.txt"), []byte(secret), 0o644))
	must(os.WriteFile(filepath.Join(root, "ok.txt"), []byte("hello\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "sub", "ok.txt"), []byte("sub hello\n"), 0o644))
	must(os.Symlink("../secret.txt", filepath.Join(root, "link-rel")))
	must(os.Symlink(filepath.Join(base, "secret.txt"), filepath.Join(root, "link-abs")))
	must(syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	return base, root
}

// TestTraversalRefused sends every trick in the issue as a raw RRQ (and a
// few through tftp-hpa and atftp): each is refused with an ERROR, counted,
// and no response ever carries the secret beside the root.
func TestTraversalRefused(t *testing.T) {
	base, root := traversalFixture(t)
	secretAbs := filepath.Join(base, "secret.txt")
	s, addr := startServer(t, Config{Roots: map[string]string{"": root}, Timeout: 500 * time.Millisecond})

	refused := map[string]struct {
		req    []byte
		code   uint16
		reason string
	}{
		"dotdot":                {rrq("../secret.txt", "octet"), errFileNotFound, refusedNotFound},
		"dotdot deep":           {rrq("../../../../../../"+secretAbs, "octet"), errFileNotFound, refusedNotFound},
		"dotdot inside":         {rrq("sub/../../secret.txt", "octet"), errFileNotFound, refusedNotFound},
		"absolute":              {rrq(secretAbs, "octet"), errFileNotFound, refusedNotFound},
		"absolute etc":          {rrq("/etc/passwd", "octet"), errFileNotFound, refusedNotFound},
		"backslash":             {rrq(`..\secret.txt`, "octet"), errFileNotFound, refusedNotFound},
		"backslash deep":        {rrq(`sub\..\..\secret.txt`, "octet"), errFileNotFound, refusedNotFound},
		"backslash absolute":    {rrq(`\..\..\`+strings.ReplaceAll(secretAbs, "/", `\`), "octet"), errFileNotFound, refusedNotFound},
		"url-encoded":           {rrq("%2e%2e/secret.txt", "octet"), errFileNotFound, refusedNotFound},
		"url-encoded slash":     {rrq("..%2fsecret.txt", "octet"), errFileNotFound, refusedNotFound},
		"url-encoded all":       {rrq("%2e%2e%2fsecret.txt", "octet"), errFileNotFound, refusedNotFound},
		"url-encoded backslash": {rrq("..%5csecret.txt", "octet"), errFileNotFound, refusedNotFound},
		"double-encoded":        {rrq("%252e%252e%252fsecret.txt", "octet"), errFileNotFound, refusedNotFound},
		"utf8 overlong dot":     {rrq("\xc0\xae\xc0\xae/secret.txt", "octet"), errAccessViolation, refusedBadName},
		"NUL in name":           {rrq("ok.txt\x00../secret.txt", "octet"), errIllegalOperation, refusedMalformed},
		"control char":          {rrq("ok.txt\x01", "octet"), errAccessViolation, refusedBadName},
		"newline":               {rrq("ok.txt\n../secret.txt", "octet"), errAccessViolation, refusedBadName},
		"DEL":                   {rrq("ok\x7f.txt", "octet"), errAccessViolation, refusedBadName},
		"symlink relative out":  {rrq("link-rel", "octet"), errAccessViolation, refusedDenied},
		"symlink absolute out":  {rrq("link-abs", "octet"), errAccessViolation, refusedDenied},
		"fifo":                  {rrq("fifo", "octet"), errAccessViolation, refusedDenied},
		"directory":             {rrq("dir", "octet"), errAccessViolation, refusedDenied},
		"root itself":           {rrq("/", "octet"), errAccessViolation, refusedBadName},
		"dotdot only":           {rrq("..", "octet"), errAccessViolation, refusedBadName},
		"unknown file":          {rrq("nope.efi", "octet"), errFileNotFound, refusedNotFound},
		"bad mode":              {rrq("ok.txt", "mail"), errIllegalOperation, refusedMalformed},
		"write ok.txt":          {wrq("ok.txt"), errAccessViolation, refusedWrite},
		"write new file":        {wrq("new.txt"), errAccessViolation, refusedWrite},
		"write traversal":       {wrq("../secret.txt"), errAccessViolation, refusedWrite},
	}
	wantReasons := map[string]int{}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			p := newPeer(t, addr)
			p.send(tc.req)
			b := p.mustRecv(2 * time.Second)
			if bytes.Contains(b, []byte(secret)) {
				t.Fatalf("response carries the secret: %q", b)
			}
			if opcode(b) != opERROR {
				t.Fatalf("got opcode %d (%q), want ERROR", opcode(b), b)
			}
			if code, msg := peerError(b); code != tc.code {
				t.Errorf("error code %d %q, want %d", code, msg, tc.code)
			}
			if extra := p.recv(100 * time.Millisecond); extra != nil {
				t.Errorf("unexpected second packet %q", extra)
			}
		})
		wantReasons[tc.reason]++
	}
	for reason, n := range wantReasons {
		eventually(t, "refusal "+reason+" counted", func() bool { return counter(t, s, "refused", reason) == n })
	}
	if n := counter(t, s, "started", ""); n != 0 {
		t.Errorf("%d transfers started, want none", n)
	}

	// Nothing was written by the write requests.
	if _, err := os.Stat(filepath.Join(root, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("new.txt: %v, want not to exist", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "ok.txt")); string(b) != "hello\n" {
		t.Errorf("ok.txt changed: %q", b)
	}

	// Normalised names that stay inside the root are served.
	for name, want := range map[string]string{
		"ok.txt": "hello\n", "/ok.txt": "hello\n", `\ok.txt`: "hello\n", "./sub/../ok.txt": "hello\n",
		"sub/ok.txt": "sub hello\n", `sub\ok.txt`: "sub hello\n", "//sub//ok.txt": "sub hello\n",
	} {
		got, err := newPeer(t, addr).getRaw(rrq(name, "octet"))
		if err != nil || string(got) != want {
			t.Errorf("%q: got %q, %v; want %q", name, got, err, want)
		}
	}

	// The same through real clients.
	host, port, _ := net.SplitHostPort(addr)
	if tftpBin, ok := testenv.LookTool(t, "tftp"); ok {
		for _, name := range []string{"../secret.txt", secretAbs, `..\secret.txt`, "link-rel"} {
			out := filepath.Join(t.TempDir(), "out")
			o, _ := exec.Command(tftpBin, host, port, "-m", "binary", "-c", "get", name, out).CombinedOutput()
			if got, _ := os.ReadFile(out); bytes.Contains(got, []byte(secret)) || bytes.Contains(o, []byte(secret)) {
				t.Errorf("tftp-hpa %q read the secret", name)
			}
			if !bytes.Contains(o, []byte("Error code")) {
				t.Errorf("tftp-hpa %q: no error reported: %s", name, o)
			}
		}
	}
	if atftpBin, ok := testenv.LookTool(t, "atftp"); ok {
		for _, name := range []string{"../secret.txt", "link-abs"} {
			out := filepath.Join(t.TempDir(), "out")
			o, err := exec.Command(atftpBin, "--get", "-r", name, "-l", out, "--option", "tsize 0", host, port).CombinedOutput()
			if err == nil {
				t.Errorf("atftp %q succeeded: %s", name, o)
			}
			if got, _ := os.ReadFile(out); bytes.Contains(got, []byte(secret)) {
				t.Errorf("atftp %q read the secret", name)
			}
		}
	}
}

func wrq(name string) []byte {
	b := binary.BigEndian.AppendUint16(nil, opWRQ)
	b = append(append(b, name...), 0)
	return append(append(b, "octet"...), 0)
}

// TestDefaultAllowList: with no Roots, only the three iPXE binaries are
// served, not their neighbours in the directory, nor by absolute path.
func TestDefaultAllowList(t *testing.T) {
	dir := t.TempDir()
	for _, f := range append([]string{"ipxe.pxe", "ipxe.lkrn"}, IPXEFiles...) {
		writeRandom(t, filepath.Join(dir, f), 1000)
	}
	_, addr := startServer(t, Config{IPXEDir: dir})
	for _, f := range IPXEFiles {
		if _, err := newPeer(t, addr).getRaw(rrq(f, "octet")); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, f := range []string{"ipxe.pxe", "ipxe.lkrn", filepath.Join(dir, "ipxe.efi"), "../" + filepath.Base(dir) + "/ipxe.pxe"} {
		_, err := newPeer(t, addr).getRaw(rrq(f, "octet"))
		if pe, ok := err.(*peerErr); !ok || pe.code != errFileNotFound {
			t.Errorf("%s: %v, want file not found", f, err)
		}
	}
}

func TestResolver(t *testing.T) {
	var mu sync.Mutex
	var gotName string
	var gotRemote netip.AddrPort
	_, addr := startServer(t, Config{
		Roots: map[string]string{},
		Resolver: func(ctx context.Context, name string, remote netip.AddrPort) (io.ReadCloser, int64, error) {
			mu.Lock()
			gotName, gotRemote = name, remote
			mu.Unlock()
			switch name {
			case "pxelinux.cfg/default":
				return io.NopCloser(strings.NewReader("DEFAULT local\n")), 14, nil
			case "broken":
				return nil, 0, io.ErrUnexpectedEOF
			}
			return nil, 0, fs.ErrNotExist
		},
	})
	p := newPeer(t, addr)
	got, err := p.getRaw(rrq(`\pxelinux.cfg\..\pxelinux.cfg\default`, "octet", "tsize", "0"))
	if err != nil || string(got) != "DEFAULT local\n" {
		t.Fatalf("got %q, %v", got, err)
	}
	mu.Lock()
	if gotName != "pxelinux.cfg/default" || gotRemote.Port() != uint16(p.conn.LocalAddr().(*net.UDPAddr).Port) {
		t.Errorf("resolver saw %q from %v", gotName, gotRemote)
	}
	mu.Unlock()
	_, err = newPeer(t, addr).getRaw(rrq("other", "octet"))
	if pe, ok := err.(*peerErr); !ok || pe.code != errFileNotFound {
		t.Errorf("other: %v, want file not found", err)
	}
	_, err = newPeer(t, addr).getRaw(rrq("broken", "octet"))
	if pe, ok := err.(*peerErr); !ok || pe.code != errNotDefined || strings.Contains(pe.msg, "EOF") {
		t.Errorf("broken: %v, want a generic error without the cause", err)
	}
}

func TestCleanName(t *testing.T) {
	for raw, want := range map[string]string{
		"ipxe.efi":            "ipxe.efi",
		"/ipxe.efi":           "ipxe.efi",
		`\ipxe.efi`:           "ipxe.efi",
		"../../etc/passwd":    "etc/passwd",
		`..\..\etc\passwd`:    "etc/passwd",
		"a/./b//c/../d":       "a/b/d",
		"%2e%2e/x":            "%2e%2e/x",
		"C:\\boot\\ipxe.efi":  "C:/boot/ipxe.efi",
		"pxelinux.cfg/01-aa":  "pxelinux.cfg/01-aa",
		"..":                  "",
		"/":                   "",
		"a\x00b":              "",
		"a\tb":                "",
		"\xff":                "",
		"ümlaut/ok":           "ümlaut/ok",
		"....//....//etc":     "..../..../etc",
		"/./../.././../x.bin": "x.bin",
	} {
		got, err := cleanName(raw)
		if want == "" {
			if err == nil {
				t.Errorf("cleanName(%q) = %q, want an error", raw, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("cleanName(%q) = %q, %v; want %q", raw, got, err, want)
		}
		if !fs.ValidPath(got) {
			t.Errorf("cleanName(%q) = %q is not a valid fs path", raw, got)
		}
	}
}
