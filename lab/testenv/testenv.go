// Package testenv holds the one rule for tests whose real peer may be
// missing (root, a network namespace, a Debian tool, a firmware file): run
// by hand without it, such a test is skipped and says why; under CI=true it
// fails instead, because CI installs every peer (.ci/run) and a skip there
// would pass a test that never ran (DESIGN.md, "Quality bar").
//
// Tests of any package may import it, and so may other test-support
// packages (power/powertest, store/pgexport/pgtest); other non-test code may
// not (lab/layering checks it).
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// CI reports whether the tests run under CI (CI=true), where a missing peer
// is a failure.
func CI() bool { return os.Getenv("CI") == "true" }

// ciSuffix ends the message of a failure that would have been a skip, so the
// log says why a missing tool failed the test.
const ciSuffix = " (CI=true: a missing peer fails the test instead of skipping it)"

// Skip ends a test whose peer is missing: skipped with the reason when run
// by hand, failed under CI=true.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatal(msg + ciSuffix)
	}
	t.Skip(msg)
}

// Fallback notes that something a test would rather use is missing and the
// test goes on without it (a lesser variant, or one part left out): logged
// when run by hand, a failure under CI=true. The caller falls back only when
// Fallback returns.
func Fallback(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatal(msg + ciSuffix)
	}
	t.Log(msg)
}

// NeedRoot skips the test unless it runs as root; why says what root is for
// ("network namespaces, veth pairs, port 67").
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if why == "" {
		Skip(t, "needs root")
		return
	}
	Skip(t, "needs root (%s)", why)
}

// NeedNetns skips the test unless it can build network namespaces the way
// the network tests do (root and ip(8)), and the tools it names are
// installed; it returns the tools' paths in order. why says what else root
// is for.
func NeedNetns(t testing.TB, why string, tools ...string) []string {
	t.Helper()
	reason := "network namespaces"
	if why != "" {
		reason += ", " + why
	}
	NeedRoot(t, reason)
	return NeedTool(t, append([]string{"ip"}, tools...)...)[1:]
}

// NeedTool skips the test unless every named program is in PATH, and
// returns their paths in order. The message names every missing one and the
// Debian packages that hold them.
func NeedTool(t testing.TB, names ...string) []string {
	t.Helper()
	paths := make([]string, len(names))
	var missing, pkgs []string
	for i, name := range names {
		p, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, name)
			pkgs = append(pkgs, Package(name))
			continue
		}
		paths[i] = p
	}
	if len(missing) > 0 {
		Skip(t, "needs %s (apt-get install %s)", strings.Join(missing, ", "), strings.Join(pkgs, " "))
	}
	return paths
}

// LookTool returns the path of an optional program: "" and false, logged,
// when it is missing and the test runs by hand, so the caller leaves out what
// needs it; under CI=true a missing one fails the test.
func LookTool(t testing.TB, name string) (string, bool) {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Fallback(t, "%s is not installed (apt-get install %s): leaving out what needs it", name, Package(name))
		return "", false
	}
	return p, true
}

// NeedFile returns the first of paths that exists, and skips the test when
// none does; what names the file for a person ("UEFI firmware (Debian
// package ovmf)").
func NeedFile(t testing.TB, what string, paths ...string) string {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	Skip(t, "needs %s: none of %s", what, strings.Join(paths, ", "))
	return ""
}

// packages maps the programs the tests run to the Debian packages that ship
// them, as .ci/run installs them.
var packages = map[string]string{
	"ip":                 "iproute2",
	"dhclient":           "isc-dhcp-client",
	"udhcpc":             "udhcpc",
	"perfdhcp":           "kea-admin",
	"kea-dhcp4":          "kea-dhcp4-server",
	"dnsmasq":            "dnsmasq-base",
	"tftp":               "tftp-hpa",
	"atftp":              "atftp",
	"in.tftpd":           "tftpd-hpa",
	"ipmitool":           "ipmitool",
	"ipmi_sim":           "openipmi",
	"qemu-system-x86_64": "qemu-system-x86",
	"chromium":           "chromium",
	"busybox":            "busybox",
	"cpio":               "cpio",
	"sgdisk":             "gdisk",
	"debugfs":            "e2fsprogs",
	"mkfs.ext4":          "e2fsprogs",
	"mkfs.vfat":          "dosfstools",
	"mkfs.xfs":           "xfsprogs",
	"mmd":                "mtools",
	"mcopy":              "mtools",
	"grub-mkimage":       "grub-common",
	"grub-mkstandalone":  "grub-common",
	"qemu-img":           "qemu-utils",
	"mmdebstrap":         "mmdebstrap",
}

// Package names the Debian package that ships program name (the name itself
// when this package does not know it).
func Package(name string) string {
	if p, ok := packages[name]; ok {
		return p
	}
	return name
}
