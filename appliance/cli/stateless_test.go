package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The stateless verbs against a node: an image, an overlay from a
// directory and the example, cluster vars, a profile added and changed,
// machines assigned by tag, rendered for, listed and unassigned; and the
// refusals, each with its reason.
func TestStatelessCLI(t *testing.T) {
	n := startNode(t, nodeOptions{})
	n.use(t)
	mustRun(t, "fabric", "add", "hall-a")
	mustRun(t, "vlan", "add", "hall-a", "0")
	mustRun(t, "subnet", "add", "10.50.0.0/24", "-fabric", "hall-a", "-vid", "0", "-purpose", "provisioning", "-gateway", "10.50.0.1")
	mustRun(t, "range", "add", "10.50.0.0/24", "static", "10.50.0.50", "10.50.0.199")
	for i, mac := range []string{"0c:c4:7a:30:00:01", "0c:c4:7a:30:00:02"} {
		rep := report(mac)
		rep.System.Serial, rep.System.UUID = fmt.Sprintf("ST%04d", i), fmt.Sprintf("4c4c4544-0042-3510-8052-b4c04f4b%04d", i)
		commissionAs(t, n, rep)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(mustRun(t, "list")), "\n")[1:] {
		ids = append(ids, strings.Fields(line)[0])
	}
	mustRun(t, "tags", "add", "rack-3")
	for _, id := range ids {
		mustRun(t, "tag", id, "+rack-3")
	}

	dir := t.TempDir()
	write := func(p, body string, mode os.FileMode) {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"vmlinuz", "initrd.img", "root.squashfs"} {
		write(f, "the "+f, 0o644)
	}
	mustRun(t, "image", "import", "compute", "-kernel", filepath.Join(dir, "vmlinuz"), "-initrd", filepath.Join(dir, "initrd.img"), "-squashfs", filepath.Join(dir, "root.squashfs"))
	write("site/system/etc/motd.tmpl", "welcome to {{ .Node.Name }} of {{ .Vars.cluster_name }}\n", 0o644)
	write("site/runtime/etc/secret", "x", 0o600)
	if out := mustRun(t, "overlay", "import", "site", filepath.Join(dir, "site")); !strings.Contains(out, "2 files (1 templates)") {
		t.Errorf("overlay import: %q", out)
	}
	if out := mustRun(t, "overlay", "import", "compute", "-example"); !strings.HasPrefix(out, "overlay compute imported:") {
		t.Errorf("overlay import -example: %q", out)
	}
	if out := mustRun(t, "overlay", "show", "site", "-files"); !strings.Contains(out, "0600  1     runtime/etc/secret") {
		t.Errorf("overlay show -files:\n%s", out)
	}
	mustRun(t, "cluster", "vars", "set", "cluster_name=hpc", "slurm_controller=head1")
	if out := mustRun(t, "cluster", "vars"); !strings.Contains(out, "cluster_name") || !strings.Contains(out, "head1") {
		t.Errorf("cluster vars:\n%s", out)
	}
	mustRun(t, "profile", "add", "compute", "-image", "compute", "-overlays", "compute,site", "-name-format", "cn%02d", "-subnets", "10.50.0.0/24")
	mustRun(t, "profile", "set", "compute", "-var", "partition=batch", "-last", "50")
	var p wire.Profile
	if err := json.Unmarshal([]byte(mustRun(t, "profile", "show", "compute", "-json")), &p); err != nil ||
		p.Vars["partition"] != "batch" || p.NameLast != 50 || p.NameFormat != "cn%02d" || len(p.Overlays) != 2 {
		t.Fatalf("profile after set: %+v %v", p, err)
	}

	out := mustRun(t, "assign", "tag:rack-3", "compute")
	if !strings.Contains(out, "node cn01 of profile compute (10.50.0.") || !strings.Contains(out, "node cn02") {
		t.Fatalf("assign:\n%s", out)
	}
	if out := mustRun(t, "nodes"); !strings.Contains(out, "cn01") || !strings.Contains(out, "assigned") {
		t.Fatalf("nodes:\n%s", out)
	}
	if out := mustRun(t, "render", "compute", "/etc/motd", "-node", "cn02"); out != "welcome to cn02 of hpc\n" {
		t.Fatalf("render: %q", out)
	}
	if out := mustRun(t, "render", "compute", "/etc/slurm/slurm.conf"); !strings.Contains(out, "NodeName=cn01") || !strings.Contains(out, "PartitionName=batch") {
		t.Fatalf("render slurm.conf:\n%s", out)
	}
	if out := mustRun(t, "render", "compute", "system/etc/ssh/ssh_host_ed25519_key", "-node", "cn01"); strings.Contains(out, "PRIVATE") {
		t.Fatalf("render shows a host key:\n%s", out)
	}
	if out := mustRun(t, "profile", "list"); !strings.Contains(out, "compute") || !strings.Contains(out, "cn%02d 1–50") {
		t.Errorf("profile list:\n%s", out)
	}

	// Refusals.
	for _, args := range [][]string{
		{"profile", "add", "other"},                     // no -image
		{"profile", "add", "other", "-image", "nosuch"}, // a missing image
		{"profile", "rm", "compute"},                    // in use
		{"overlay", "rm", "site"},                       // in use
		{"overlay", "import", "x", dir},                 // no system/ or runtime/
		{"overlay", "import", "x", "-example"},          // no such example
		{"assign", ids[0], "compute", "extra"},          // usage
		{"render", "compute", "/etc/nosuch"},            // no such file
		{"cluster", "vars", "set", "1bad=x"},            // a bad name
	} {
		if code, _, stderr := run(args...); code == 0 || stderr == "" {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
	os.Symlink("/etc/passwd", filepath.Join(dir, "site/system/etc/passwd"))
	if code, _, stderr := run("overlay", "import", "site", filepath.Join(dir, "site")); code == 0 || !strings.Contains(stderr, "symbolic link") {
		t.Errorf("overlay with a symlink: %d %q", code, stderr)
	}

	if out := mustRun(t, "unassign", "tag:rack-3"); strings.Count(out, "unassigned, 1 addresses freed") != 2 {
		t.Fatalf("unassign:\n%s", out)
	}
	if out := mustRun(t, "nodes", "-json"); !strings.Contains(out, `"nodes": []`) {
		t.Fatalf("nodes after unassign: %s", out)
	}
}
