package debroot

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestArgs(t *testing.T) {
	cache := t.TempDir()
	got, err := Options{Suite: "trixie", Packages: []string{"slurmd", "munge"}, DpkgOpts: Slim[:2], Cache: cache,
		Sources: []string{"deb http://deb.debian.org/debian trixie main"}}.Args("/tmp/root")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--mode=root", "--variant=minbase", "--include=slurmd,munge",
		"--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-include=/usr/share/doc/*/copyright",
		"--skip=essential/unlink", `--setup-hook=mkdir -p "$1"/var/cache/apt/archives/`,
		"--setup-hook=sync-in " + cache + " /var/cache/apt/archives/", "--customize-hook=sync-out /var/cache/apt/archives " + cache,
		"trixie", "/tmp/root", "deb http://deb.debian.org/debian trixie main"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("args (-want +got):\n%s", d)
	}
	plain, err := Options{Suite: "bookworm", Variant: "apt"}.Args("r")
	if err != nil || !slices.Equal(plain, []string{"--mode=root", "--variant=apt", "bookworm", "r"}) {
		t.Errorf("no packages, no cache: %q %v", plain, err)
	}
	for name, o := range map[string]Options{
		"no suite":         {},
		"suite with blank": {Suite: "trixie main"},
		"package list":     {Suite: "trixie", Packages: []string{"a,b"}},
		"empty package":    {Suite: "trixie", Packages: []string{""}},
		"cache with blank": {Suite: "trixie", Cache: "/tmp/my cache"},
		"cache with quote": {Suite: "trixie", Cache: "/tmp/it's"},
	} {
		if _, err := o.Args("r"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

const status = `Package: bsdutils
Status: install ok installed
Architecture: amd64
Version: 1:2.41.5-0+deb13u1

Package: adduser
Status: install ok installed
Architecture: all
Version: 3.152

Package: removed
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0
`

func TestPackages(t *testing.T) {
	want := []Package{{"adduser", "3.152", "all"}, {"bsdutils", "1:2.41.5-0+deb13u1", "amd64"}}
	got := Packages([]byte(status))
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if d := got[1].Deb(); d != "bsdutils_1%3a2.41.5-0+deb13u1_amd64.deb" {
		t.Errorf("deb %s", d)
	}
}

func TestPruneCache(t *testing.T) {
	cache := t.TempDir()
	for _, f := range []string{"adduser_3.152_all.deb", "adduser_3.151_all.deb", "bsdutils_1%3a2.41.5-0+deb13u1_amd64.deb",
		"removed_1.0_amd64.deb", "lock"} {
		if err := os.WriteFile(filepath.Join(cache, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := PruneCache(cache, []byte(status))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"adduser_3.151_all.deb", "removed_1.0_amd64.deb"}, removed); d != "" {
		t.Errorf("removed (-want +got):\n%s", d)
	}
	left, _ := os.ReadDir(cache)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if d := cmp.Diff([]string{"adduser_3.152_all.deb", "bsdutils_1%3a2.41.5-0+deb13u1_amd64.deb", "lock"}, names); d != "" {
		t.Errorf("left (-want +got):\n%s", d)
	}
	// A root whose status lists nothing (a failed build) empties nothing.
	if _, err := PruneCache(cache, nil); err == nil {
		t.Error("empty status: no error")
	}
	if left2, _ := os.ReadDir(cache); len(left2) != len(left) {
		t.Errorf("empty status removed files: %d left of %d", len(left2), len(left))
	}
}

func TestScrub(t *testing.T) {
	tree := t.TempDir()
	write := func(name, data string) {
		p := filepath.Join(tree, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/ssh/ssh_host_rsa_key", "private")
	write("etc/ssh/ssh_host_rsa_key.pub", "public")
	write("etc/ssh/sshd_config", "config")
	write("etc/machine-id", "0123456789abcdef0123456789abcdef\n")
	write("etc/hostname", "buildhost\n")
	write("etc/resolv.conf", "nameserver 10.0.0.1\n")
	write("var/lib/dbus/machine-id", "0123456789abcdef0123456789abcdef\n")
	write("var/lib/apt/lists/deb.debian.org_debian_dists_trixie_InRelease", "release")
	write("var/lib/apt/lists/lock", "")
	if err := Scrub(tree); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"etc/ssh/ssh_host_rsa_key", "etc/ssh/ssh_host_rsa_key.pub", "etc/resolv.conf",
		"var/lib/dbus/machine-id", "var/lib/apt/lists/deb.debian.org_debian_dists_trixie_InRelease"} {
		if _, err := os.Lstat(filepath.Join(tree, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there (%v)", gone, err)
		}
	}
	for name, want := range map[string]string{"etc/machine-id": "", "etc/hostname": "localhost\n", "etc/ssh/sshd_config": "config", "var/lib/apt/lists/lock": ""} {
		b, err := os.ReadFile(filepath.Join(tree, name))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %q", name, b, err, want)
		}
	}
	if st, _ := os.Stat(filepath.Join(tree, "etc/machine-id")); st == nil || st.Mode().Perm() != 0o644 {
		t.Errorf("etc/machine-id mode %v, want 0644 (everyone reads it)", st.Mode())
	}

	// systemd-resolved's symlink is the package's, not the build host's.
	link := "../run/systemd/resolve/stub-resolv.conf"
	if err := os.Symlink(link, filepath.Join(tree, "etc/resolv.conf")); err != nil {
		t.Fatal(err)
	}
	if err := Scrub(tree); err != nil { // twice is fine
		t.Fatal(err)
	}
	if got, err := os.Readlink(filepath.Join(tree, "etc/resolv.conf")); err != nil || got != link {
		t.Errorf("resolv.conf symlink: %q %v", got, err)
	}
	if err := Scrub(filepath.Join(tree, "nosuch")); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("no root: %v", err)
	}
}
