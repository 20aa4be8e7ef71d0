package cli

import (
	"encoding/json"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// writeTree writes files (path → content) under dir with their modes
// (setuid and the like included: chmod after the write, whatever the
// umask).
func writeTree(t *testing.T, dir string, files map[string]string, modes map[string]iofs.FileMode) {
	t.Helper()
	for p, body := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if m, ok := modes[p]; ok {
			if err := os.Chmod(full, m); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// readTree reads every regular file under dir as path → mode and content.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = fmt.Sprintf("%04o %s", unixMode(info.Mode()), b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// An overlay round-trips through import and export against a node: paths,
// contents and modes (setuid too); export refuses to overwrite without
// -force and changes nothing then. The rm verbs and cluster vars set answer
// -json.
func TestOverlayExportCLI(t *testing.T) {
	n := startNode(t, nodeOptions{})
	n.use(t)
	src := t.TempDir()
	writeTree(t, src, map[string]string{
		"system/etc/motd.tmpl":                "welcome to {{ .Node.Name }}\n",
		"system/usr/local/bin/helper":         "#!/bin/sh\necho hi\n",
		"system/etc/ssh/sshd_config.d/x.conf": "PermitRootLogin prohibit-password\n",
		"runtime/etc/secret":                  "s3cret\n",
	}, map[string]iofs.FileMode{
		"system/usr/local/bin/helper": 0o755 | iofs.ModeSetuid,
		"runtime/etc/secret":          0o600,
	})
	if out := mustRun(t, "overlay", "import", "site", src); !strings.Contains(out, "4 files (1 templates)") {
		t.Fatalf("overlay import: %q", out)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if out := mustRun(t, "overlay", "export", "site", dst); !strings.HasPrefix(out, "overlay site exported to "+dst+": 4 files") {
		t.Errorf("overlay export: %q", out)
	}
	want := readTree(t, src)
	if want["system/usr/local/bin/helper"][:4] != "4755" {
		t.Fatalf("the test's own file lost its setuid bit: %q", want["system/usr/local/bin/helper"])
	}
	if d := cmp.Diff(want, readTree(t, dst)); d != "" {
		t.Errorf("exported tree differs from the imported one (-imported +exported):\n%s", d)
	}

	// Without -force an existing file stops the export before it writes.
	edited := filepath.Join(dst, "runtime", "etc", "secret")
	if err := os.WriteFile(edited, []byte("edited\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dst, "system", "etc", "motd.tmpl")); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run("overlay", "export", "site", dst); code != 1 || !strings.Contains(stderr, "already exists: give -force") {
		t.Errorf("export over existing files: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dst, "system", "etc", "motd.tmpl")); err == nil {
		t.Error("a refused export wrote a file")
	}
	mustRun(t, "overlay", "export", "site", dst, "-force")
	if d := cmp.Diff(want, readTree(t, dst)); d != "" {
		t.Errorf("export -force (-imported +exported):\n%s", d)
	}
	var ov wire.Overlay
	if err := json.Unmarshal([]byte(mustRun(t, "overlay", "export", "site", t.TempDir(), "-json")), &ov); err != nil || ov.FileCount != 4 || len(ov.Files) != 4 || ov.Files[0].Content != nil {
		t.Errorf("export -json: %+v %v; want the overlay's files without their content", ov, err)
	}
	if code, _, stderr := run("overlay", "export", "nosuch", t.TempDir()); code != 1 || stderr == "" {
		t.Errorf("export of a missing overlay: exit %d, %q", code, stderr)
	}

	// -json of the writes that printed a line only.
	var vars wire.ClusterVars
	if err := json.Unmarshal([]byte(mustRun(t, "cluster", "vars", "set", "a=1", "b=2", "-json")), &vars); err != nil || vars.Vars["a"] != "1" || vars.Vars["b"] != "2" {
		t.Errorf("cluster vars set -json: %+v %v", vars, err)
	}
	var after wire.ClusterVars // a fresh map: Unmarshal merges into one
	if err := json.Unmarshal([]byte(mustRun(t, "cluster", "vars", "rm", "a", "-json")), &after); err != nil || len(after.Vars) != 1 || after.Vars["b"] != "2" {
		t.Errorf("cluster vars rm -json: %+v %v", after, err)
	}
	var del wire.Deleted
	if err := json.Unmarshal([]byte(mustRun(t, "overlay", "rm", "site", "-json")), &del); err != nil || del.Deleted != "site" {
		t.Errorf("overlay rm -json: %+v %v", del, err)
	}
	if out := mustRun(t, "overlay", "list", "-json"); strings.Contains(out, `"site"`) {
		t.Errorf("overlay list after rm: %s", out)
	}
}

// A tree past the store's bounds, or with a symbolic link or another
// special file, is refused with the reason before anything is sent.
func TestOverlayImportRefusals(t *testing.T) {
	n := startNode(t, nodeOptions{})
	n.use(t)
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"passwd": "root:x:0:0"}, nil)
	cases := map[string]struct {
		setup func(dir string)
		want  string
	}{
		"too many files": {func(dir string) {
			files := map[string]string{}
			for i := range store.MaxOverlayFiles + 1 {
				files[fmt.Sprintf("system/etc/many/%04d", i)] = ""
			}
			writeTree(t, dir, files, nil)
		}, fmt.Sprintf("more than the %d files", store.MaxOverlayFiles)},
		"too many bytes": {func(dir string) {
			writeTree(t, dir, map[string]string{"system/etc/small": "x"}, nil)
			p := filepath.Join(dir, "system", "big")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(store.MaxOverlayBytes); err != nil { // sparse: 8 MiB + the small file
				t.Fatal(err)
			}
		}, fmt.Sprintf("more than the %d MiB", store.MaxOverlayBytes>>20)},
		"symlink to a file outside": {func(dir string) {
			writeTree(t, dir, map[string]string{"system/etc/hosts": "x"}, nil)
			if err := os.Symlink(filepath.Join(outside, "passwd"), filepath.Join(dir, "system", "etc", "passwd")); err != nil {
				t.Fatal(err)
			}
		}, "system/etc/passwd: only regular files go into an overlay (this is a symbolic link)"},
		"symlinked directory": {func(dir string) {
			writeTree(t, dir, map[string]string{"runtime/x": "x"}, nil)
			if err := os.Symlink(outside, filepath.Join(dir, "runtime", "etc")); err != nil {
				t.Fatal(err)
			}
		}, "runtime/etc: only regular files go into an overlay (this is a symbolic link)"},
		"symlinked tree": {func(dir string) {
			if err := os.Symlink(outside, filepath.Join(dir, "system")); err != nil {
				t.Fatal(err)
			}
		}, "system is not a directory"},
		"named pipe": {func(dir string) {
			writeTree(t, dir, map[string]string{"system/etc/x": "x"}, nil)
			if err := mkfifo(filepath.Join(dir, "system", "etc", "fifo")); err != nil {
				t.Fatal(err)
			}
		}, "system/etc/fifo: only regular files go into an overlay (this is a named pipe)"},
		"a file as a tree": {func(dir string) {
			writeTree(t, dir, map[string]string{"system": "x"}, nil)
		}, "system is not a directory"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c.setup(dir)
			code, _, stderr := run("overlay", "import", "refused", dir)
			if code != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, %q; want 1 and %q", code, stderr, c.want)
			}
		})
	}
	if out := mustRun(t, "overlay", "list", "-json"); strings.Contains(out, `"refused"`) {
		t.Errorf("a refused import reached the node: %s", out)
	}
}

// WriteOverlayDir writes nothing outside its directory: not through a
// symbolic link already there, not for a path the store would refuse.
func TestWriteOverlayDirStaysInside(t *testing.T) {
	outside := t.TempDir()
	dir := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "system")); err != nil {
		t.Fatal(err)
	}
	err := WriteOverlayDir(dir, []store.OverlayFile{{Path: "system/etc/x", Mode: 0o644, Content: []byte("x")}}, true)
	if err == nil {
		t.Error("a write through a symbolic link out of the directory succeeded")
	}
	for _, p := range []string{"../escape", "system/../../escape", "/etc/escape", "etc/x"} {
		if err := WriteOverlayDir(dir, []store.OverlayFile{{Path: p, Content: []byte("x")}}, true); err == nil {
			t.Errorf("path %q was written", p)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("files written outside the directory: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape")); err == nil {
		t.Error("escape written beside the directory")
	}
}

func mkfifo(p string) error { return syscall.Mkfifo(p, 0o644) }

// assign tag:NAME reports each machine: the ones assigned with their node
// names, the one refused with its reason, and exits 1 when any failed.
func TestAssignReportsEachMachine(t *testing.T) {
	n := startNode(t, nodeOptions{})
	n.use(t)
	for i, mac := range []string{"0c:c4:7a:31:00:01", "0c:c4:7a:31:00:02", "0c:c4:7a:31:00:03"} {
		rep := report(mac)
		rep.System.Serial, rep.System.UUID = fmt.Sprintf("AS%04d", i), fmt.Sprintf("4c4c4544-0042-3510-8052-b4c04f4c%04d", i)
		commissionAs(t, n, rep)
	}
	var l wire.MachineList
	if err := json.Unmarshal([]byte(mustRun(t, "list", "-json")), &l); err != nil || len(l.Machines) != 3 {
		t.Fatalf("list: %+v %v", l, err)
	}
	mustRun(t, "tags", "add", "rack-4")
	for _, m := range l.Machines {
		mustRun(t, "tag", m.ID, "+rack-4")
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"k": "kernel", "i": "initrd", "s": "squashfs"}, nil)
	mustRun(t, "image", "import", "img", "-kernel", filepath.Join(dir, "k"), "-initrd", filepath.Join(dir, "i"), "-squashfs", filepath.Join(dir, "s"))
	mustRun(t, "profile", "add", "a", "-image", "img", "-name-format", "a%d")
	mustRun(t, "profile", "add", "b", "-image", "img", "-name-format", "b%d")
	taken := l.Machines[1].ID
	mustRun(t, "assign", taken, "a")

	code, out, stderr := run("assign", "tag:rack-4", "b")
	if code != 1 || !strings.Contains(stderr, "1 of 3 machines with tag rack-4 failed") {
		t.Errorf("assign tag:rack-4: exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("assign tag:rack-4 printed %d lines, want one per machine:\n%s", len(lines), out)
	}
	for _, line := range lines {
		id, rest, _ := strings.Cut(line, ": ")
		switch {
		case id == taken && strings.HasPrefix(rest, "failed: ") && strings.Contains(rest, "unassign it first"):
		case id != taken && strings.HasPrefix(rest, "node b") && strings.HasSuffix(rest, " of profile b"):
		default:
			t.Errorf("assign tag:rack-4: line %q", line)
		}
	}
	var nodes wire.StatelessNodeList
	if err := json.Unmarshal([]byte(mustRun(t, "nodes", "-json")), &nodes); err != nil || len(nodes.Nodes) != 3 {
		t.Fatalf("nodes: %+v %v", nodes, err)
	}
	for _, nd := range nodes.Nodes {
		if want := map[bool]string{true: "a", false: "b"}[nd.Machine == taken]; nd.Profile != want {
			t.Errorf("node %s of machine %s: profile %s, want %s", nd.Name, nd.Machine, nd.Profile, want)
		}
	}
	if out := mustRun(t, "unassign", "tag:rack-4"); strings.Count(out, "unassigned") != 3 {
		t.Errorf("unassign tag:rack-4:\n%s", out)
	}
}
