//go:build e2e

package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/lab/testenv"
)

// statelessNode is GET /api/v1/stateless/nodes/{id} as the test reads it.
type statelessNode struct {
	Machine       string    `json:"machine"`
	Name          string    `json:"name"`
	Addresses     []string  `json:"addresses"`
	Booted        time.Time `json:"booted"`
	LastSeen      time.Time `json:"last_seen"`
	Stale         bool      `json:"stale"`
	SSHHostKeyPub string    `json:"ssh_host_key_pub"`
}

// TestStatelessBoot: a VM commissioned to ready, then assigned to a
// profile, boots the stateless test image into RAM (the commissioning
// image's kernel and initrd, rollcall.mode=stateless, the squashfs over
// HTTP), applies its system overlay (checked from inside: its hostname
// and the SSH host key the appliance sealed for it, on the console),
// heartbeats (booted, last seen advancing), goes stale when it stops, and
// is unassigned back to ready. The refresh is 5 s (stateless_refresh_seconds)
// so that stale comes within a minute and a half.
func TestStatelessBoot(t *testing.T) {
	if testing.Short() {
		t.Skip("boots an emulated machine twice (a few minutes)")
	}
	needDeployVM(t, fwBIOS)
	kernel, initrd := commissioningImage(t)
	_, file, _, _ := runtime.Caller(0)
	squashfs := filepath.Join(filepath.Dir(file), "..", "..", "bin", "stateless-image", "root.squashfs")
	if _, err := os.Stat(squashfs); err != nil {
		testenv.Skip(t, "needs the stateless test image: run `make stateless-image` (%v)", err)
	}
	began := time.Now()
	dir := t.TempDir()
	lab := newLab(t, fwBIOS, dir, kernel, initrd, 768, nil, `"stateless_refresh_seconds": 5`)
	n1 := lab.n1
	lab.commission(t)
	id := lab.id
	commissioned := time.Now()

	// The profile: the image, an overlay of the node's own files.
	n1.cli(t, "image", "import", "tiny-stateless", "-kernel", kernel, "-initrd", initrd, "-squashfs", squashfs)
	over := filepath.Join(dir, "overlay")
	for p, body := range map[string]string{
		"system/etc/hostname.tmpl":                     "{{ .Node.Name }}\n",
		"system/etc/ssh/ssh_host_ed25519_key.tmpl":     "{{ .Node.SSHHostKey }}\n",
		"system/etc/ssh/ssh_host_ed25519_key.pub.tmpl": "{{ .Node.SSHHostKeyPub }}\n",
		"system/etc/motd.tmpl":                         "node {{ .Node.Name }} of {{ .Vars.cluster_name }}\n",
		"runtime/etc/hosts.tmpl":                       "{{ range .Nodes }}{{ .IP }} {{ .Name }}\n{{ end }}",
	} {
		p = filepath.Join(over, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, "_key.tmpl") {
			mode = 0o600
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	n1.cli(t, "overlay", "import", "e2e", over)
	n1.cli(t, "cluster", "vars", "set", "cluster_name=e2e")
	n1.cli(t, "profile", "add", "e2e", "-image", "tiny-stateless", "-overlays", "e2e", "-name-format", "e2e%02d", "-args", "console=ttyS0")
	out := n1.cli(t, "assign", id, "e2e")
	if !strings.Contains(out, "node e2e01 of profile e2e") {
		t.Fatalf("assign: %s", out)
	}
	var node statelessNode
	if _, err := n1.call(n1.token, http.MethodGet, "/api/v1/stateless/nodes/"+id, nil, &node); err != nil || node.Name != "e2e01" {
		t.Fatalf("node: %+v %v", node, err)
	}

	// Boot it: PXE → the stateless boot script → RAM → the overlay.
	bootAt := time.Now()
	vm := lab.boot(t, "stateless", false, 6*time.Minute)
	if !vm.waitConsole("RC-STATELESS hostkey=", 5*time.Minute) {
		t.Fatalf("the stateless node did not report its host key (qemu: %v)", vm.err)
	}
	upAt := time.Now()
	console := vm.Console()
	if !strings.Contains(console, "RC-STATELESS hostname=e2e01") {
		t.Errorf("the node's hostname is not e2e01:\n%s", grepLines(console, "RC-STATELESS"))
	}
	if !strings.Contains(console, "RC-STATELESS hostkey="+node.SSHHostKeyPub+"\r") && !strings.Contains(console, "RC-STATELESS hostkey="+node.SSHHostKeyPub+"\n") {
		t.Errorf("the node's host key is not the one the appliance sealed for it (%s):\n%s", node.SSHHostKeyPub, grepLines(console, "RC-STATELESS"))
	}
	if !strings.Contains(console, "RC-STATELESS hostkey mode=0600") {
		t.Errorf("the private host key's mode:\n%s", grepLines(console, "RC-STATELESS"))
	}
	if !strings.Contains(console, "stateless: root image in RAM") {
		t.Error("the console does not say the agent fetched the root into RAM")
	}

	// Booted, and heartbeating.
	var first time.Time
	waitUntil(t, 60*time.Second, "machine booted with a last-seen time", func() bool {
		m, err := lab.machine()
		if err != nil || m.State != "booted" {
			return false
		}
		_, err = n1.call(n1.token, http.MethodGet, "/api/v1/stateless/nodes/"+id, nil, &node)
		first = node.LastSeen
		return err == nil && !node.Booted.IsZero() && !first.IsZero()
	})
	waitUntil(t, 60*time.Second, "last seen advancing (the runtime refresh)", func() bool {
		_, err := n1.call(n1.token, http.MethodGet, "/api/v1/stateless/nodes/"+id, nil, &node)
		return err == nil && node.LastSeen.After(first) && !node.Stale
	})
	t.Logf("BENCHMARK stateless (TCG): power-on → host key on the console %v, booted; commissioning took %v",
		upAt.Sub(bootAt).Round(100*time.Millisecond), commissioned.Sub(began).Round(100*time.Millisecond))

	// Stopped: stale after two refreshes, the seen interval and a minute.
	vm.cancel()
	vm.wait(30 * time.Second)
	stoppedAt := time.Now()
	waitUntil(t, 3*time.Minute, "the stopped node shown stale", func() bool {
		_, err := n1.call(n1.token, http.MethodGet, "/api/v1/stateless/nodes/"+id, nil, &node)
		return err == nil && node.Stale
	})
	t.Logf("stale %v after the VM stopped", time.Since(stoppedAt).Round(time.Second))
	if out := n1.cli(t, "nodes"); !strings.Contains(out, "stale") {
		t.Errorf("rollcall nodes does not show it stale:\n%s", out)
	}

	// Unassigned: ready, the name free.
	n1.cli(t, "unassign", id)
	if m, err := lab.machine(); err != nil || m.State != "ready" {
		t.Fatalf("after unassign: %+v %v", m.State, err)
	}
	t.Logf("TestStatelessBoot took %v", time.Since(began).Round(time.Second))
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, "\n")
}
