package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPackages(t *testing.T) {
	got, err := Packages(packageList, []string{"firmware-misc-nonfree", " "})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append(Required, "firmware-misc-nonfree", "udev", "systemd-resolved") {
		if !slices.Contains(got, r) {
			t.Errorf("%s is not in %v", r, got)
		}
	}
	if slices.ContainsFunc(got, func(p string) bool { return p == "" || strings.ContainsAny(p, "# ") }) {
		t.Errorf("a comment or blank in %q", got)
	}
	bad := map[string]struct {
		list  string
		extra []string
		want  string
	}{
		"twice":       {packageList, []string{"slurmd"}, "slurmd is listed twice"},
		"not a name":  {packageList, []string{"Slurmd"}, `"Slurmd" is not a Debian package name`},
		"a version":   {"slurmd=24.11\n", nil, "packages.list:1"},
		"two a line":  {"munge slurmd\n", nil, "not a Debian package name"},
		"no kernel":   {strings.ReplaceAll(packageList, "linux-image-amd64", ""), nil, "linux-image-amd64 is missing"},
		"only extras": {"", Required, ""},
	}
	for name, c := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := Packages(c.list, c.extra)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("error %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}

func TestSources(t *testing.T) {
	got, err := Sources("trixie", "http://deb.debian.org/debian", "http://deb.debian.org/debian-security", []string{"main", "non-free-firmware"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"deb http://deb.debian.org/debian trixie main non-free-firmware",
		"deb http://deb.debian.org/debian trixie-updates main non-free-firmware",
		"deb http://deb.debian.org/debian-security trixie-security main non-free-firmware",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if got, _ := Sources("trixie", "http://m/debian", "", []string{"main"}); len(got) != 2 {
		t.Errorf("without security: %q", got)
	}
	for name, args := range map[string][3]string{
		"ftp mirror":        {"ftp://m/debian", "", "main"},
		"blank in security": {"http://m/debian", "http://s/ x", "main"},
		"no mirror":         {"", "", "main"},
		"no component":      {"http://m/debian", "", ""},
		"bad component":     {"http://m/debian", "", "main contrib"},
	} {
		if _, err := Sources("trixie", args[0], args[1], strings.Split(args[2], ",")); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The units say what the issue asks: the system overlay once at boot
// before munge, slurmd and ssh; the runtime one a minute after boot, then
// every five minutes.
func TestUnits(t *testing.T) {
	units, err := IncludedUnits()
	if err != nil {
		t.Fatal(err)
	}
	parsed := map[string]map[string]map[string][]string{}
	for name, data := range units {
		u, err := ParseUnit(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		parsed[name] = u
	}
	want := map[string]map[string]map[string][]string{
		"rollcall-overlay.service": {
			"Unit": {"Description": {"Rollcall overlay: this node's system files"}, "Wants": {"network-online.target"},
				"After": {"network-online.target"}, "Before": {"munge.service slurmd.service ssh.service"}},
			"Service": {"Type": {"oneshot"}, "RemainAfterExit": {"yes"}, "ExecStart": {"/" + OverlayPath + " apply system"}, "TimeoutStartSec": {"90"}},
			"Install": {"WantedBy": {"multi-user.target"}},
		},
		"rollcall-overlay-refresh.service": {
			"Unit": {"Description": {"Rollcall overlay: refresh this node's runtime files"}, "Wants": {"network-online.target"},
				"After": {"network-online.target rollcall-overlay.service"}},
			"Service": {"Type": {"oneshot"}, "ExecStart": {"/" + OverlayPath + " apply runtime"}},
		},
		"rollcall-overlay-refresh.timer": {
			"Unit":    {"Description": {"Rollcall overlay: refresh this node's runtime files every five minutes"}},
			"Timer":   {"OnBootSec": {"1min"}, "OnUnitActiveSec": {"5min"}, "RandomizedDelaySec": {"20s"}},
			"Install": {"WantedBy": {"timers.target"}},
		},
	}
	if d := cmp.Diff(want, parsed); d != "" {
		t.Errorf("units (-want +got):\n%s", d)
	}
	// What the recipe enables of its own can be enabled.
	for _, u := range enableUnits {
		if strings.HasPrefix(u, "rollcall-") && len(parsed[u]["Install"]["WantedBy"]) == 0 {
			t.Errorf("%s is enabled but has no WantedBy=", u)
		}
	}

	// The drop-ins and the network file parse; an empty ExecStart= resets.
	for _, name := range []string{"systemd/system/systemd-networkd-wait-online.service.d/rollcall.conf",
		"systemd/system/munge.service.d/rollcall.conf", "systemd/network/50-rollcall.network"} {
		data, err := includes.ReadFile("includes/etc/" + name)
		if err != nil {
			t.Fatal(err)
		}
		u, err := ParseUnit(data)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if strings.Contains(name, "wait-online") && !slices.Equal(u["Service"]["ExecStart"], []string{"/usr/lib/systemd/systemd-networkd-wait-online --any --timeout=60"}) {
			t.Errorf("%s: ExecStart %q", name, u["Service"]["ExecStart"])
		}
	}
	for _, bad := range []string{"Key=value\n", "[Unit]\nno equals\n", "[Service]\nExecStart=/bin/a \\\n  b\n"} {
		if _, err := ParseUnit([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The subcommands the units run are the ones the real client takes: with
// no settings anywhere it fails on the settings (1), not on its usage (2).
func TestUnitsRunTheClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rollcall-overlay")
	}
	bin := filepath.Join(t.TempDir(), "rollcall-overlay")
	build := exec.Command("go", "build", "-o", bin, "../../agent/cmd/rollcall-overlay")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	units, err := IncludedUnits()
	if err != nil {
		t.Fatal(err)
	}
	none := filepath.Join(t.TempDir(), "none")
	for _, name := range []string{"rollcall-overlay.service", "rollcall-overlay-refresh.service"} {
		u, err := ParseUnit(units[name])
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Fields(u["Service"]["ExecStart"][0])
		if args[0] != "/"+OverlayPath {
			t.Fatalf("%s runs %s, the recipe installs /%s", name, args[0], OverlayPath)
		}
		cmd := exec.Command(bin, append([]string{"-cmdline", none, "-env", none}, args[1:]...)...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "no rollcall.node=") {
			t.Errorf("%s: %v %q: %v\n%s", name, bin, args[1:], err, out)
		}
	}
	// A subcommand it does not take is a usage error: the check above can fail.
	if err := exec.Command(bin, "apply", "nosuch").Run(); err == nil {
		t.Error("apply nosuch: no error")
	} else if errors.As(err, new(*exec.ExitError)) && err.(*exec.ExitError).ExitCode() != 2 {
		t.Errorf("apply nosuch: %v, want exit status 2", err)
	}
}

func TestDress(t *testing.T) {
	tree := t.TempDir()
	for name, data := range map[string]string{
		"etc/ssh/ssh_host_ed25519_key":                    "private",
		"etc/ssh/ssh_host_ed25519_key.pub":                "public",
		"etc/ssh/sshd_config":                             "Include /etc/ssh/sshd_config.d/*.conf\n",
		"etc/munge/munge.key":                             "secret",
		"etc/machine-id":                                  "0123456789abcdef0123456789abcdef\n",
		"etc/hostname":                                    "buildhost\n",
		"var/lib/dbus/machine-id":                         "0123456789abcdef0123456789abcdef\n",
		"var/lib/apt/lists/deb.debian.org_Packages":       "lists",
		"boot/vmlinuz-6.12.118+deb13-amd64":               "kernel",
		"boot/config-6.12.118+deb13-amd64":                "config",
		"etc/systemd/system/rollcall-overlay.service":     "an older one",
		"usr/lib/systemd/system/systemd-networkd.service": "[Unit]\n",
	} {
		p := filepath.Join(tree, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	written, err := Dress(tree, []byte("overlay binary"), Release(Name, "v1", "6.12.118+deb13-amd64", Suite))
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"etc/ssh/ssh_host_ed25519_key", "etc/ssh/ssh_host_ed25519_key.pub", "etc/munge/munge.key",
		"var/lib/dbus/machine-id", "var/lib/apt/lists/deb.debian.org_Packages", "boot/vmlinuz-6.12.118+deb13-amd64"} {
		if _, err := os.Lstat(filepath.Join(tree, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there (%v)", gone, err)
		}
	}
	for name, want := range map[string]struct {
		data string
		mode os.FileMode
	}{
		"etc/machine-id":                   {"", 0o644},
		"etc/hostname":                     {"localhost\n", 0o644},
		"boot/config-6.12.118+deb13-amd64": {"config", 0o600},
		OverlayPath:                        {"overlay binary", 0o755},
		"usr/lib/rollcall/image-release":   {"IMAGE=compute-debian13\nBUILD=v1\nKERNEL=6.12.118+deb13-amd64\nSUITE=trixie\n", 0o644},
	} {
		b, err := os.ReadFile(filepath.Join(tree, name))
		st, _ := os.Stat(filepath.Join(tree, name))
		if err != nil || string(b) != want.data || st.Mode().Perm() != want.mode {
			t.Errorf("%s: %q %v (%v), want %q %v", name, b, st.Mode(), err, want.data, want.mode)
		}
	}
	units, _ := IncludedUnits()
	b, err := os.ReadFile(filepath.Join(tree, "etc/systemd/system/rollcall-overlay.service"))
	if err != nil || string(b) != string(units["rollcall-overlay.service"]) {
		t.Errorf("rollcall-overlay.service in the root: %q (%v)", b, err)
	}
	for _, w := range []string{"etc/systemd/network/50-rollcall.network", "etc/ssh/sshd_config.d/rollcall.conf",
		"etc/systemd/system/rollcall-overlay-refresh.timer", OverlayPath} {
		if !slices.Contains(written, w) {
			t.Errorf("%s not among the files written: %q", w, written)
		}
	}
	if !slices.IsSorted(written) {
		t.Errorf("written not sorted: %q", written)
	}
}

func TestManifest(t *testing.T) {
	status := "Package: zlib1g\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1:1.3.dfsg+really1.3.1-1+b1\n\n" +
		"Package: adduser\nStatus: install ok installed\nArchitecture: all\nVersion: 3.152\n\n" +
		"Package: gone\nStatus: deinstall ok config-files\nArchitecture: amd64\nVersion: 1\n"
	want := "adduser 3.152 all\nzlib1g 1:1.3.dfsg+really1.3.1-1+b1 amd64\n"
	if got := string(Manifest([]byte(status))); got != want {
		t.Errorf("manifest %q, want %q", got, want)
	}
}
