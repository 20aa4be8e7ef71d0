package tftp

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// Finding 14: a symlink in ipxe_dir to the node's admin.token was served
// over HTTP and TFTP. A file root is served only where it resolves into its
// own directory or Debian's package directories.
func TestOpenFileRefusesLinksOut(t *testing.T) {
	data := t.TempDir()
	secret := filepath.Join(data, "admin.token")
	if err := os.WriteFile(secret, []byte("the-admin-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(data, "ipxe")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "real.efi"), []byte("MZ"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"ipxe.efi": secret, "snponly.efi": "../admin.token", "undionly.kpxe": "real.efi"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, wantOK := range map[string]bool{"ipxe.efi": false, "snponly.efi": false, "undionly.kpxe": true, "real.efi": true} {
		f, _, err := OpenFile(filepath.Join(dir, name))
		if wantOK {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			} else {
				f.Close()
			}
			continue
		}
		if err == nil || !errors.Is(err, errOutsideRoots) {
			if f != nil {
				f.Close()
			}
			t.Errorf("%s (a link out of its directory) opened: %v", name, err)
		}
	}
	// Through the allow-list, as a TFTP request sees it.
	rs, err := openRoots(DefaultRoots(dir), testLogger(t, slog.LevelError))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.close()
	if f, _, err := rs.open("ipxe.efi"); err == nil {
		f.Close()
		t.Fatal("the allow-list served a link to admin.token")
	}
}
