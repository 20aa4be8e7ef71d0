package node_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/tftp"
)

// Three nodes: an image imported on one is fetched, verified and served by
// the others; a corrupted copy is refused and fetched again; every node
// renders boot scripts from the replicated state.
func TestImagesSyncAndBootScripts(t *testing.T) {
	nodes := nodetest.StartCluster(t, 3, nodetest.Options{})
	token := nodes[0].Admin
	kernel := bytes.Repeat([]byte("kernel-bytes-"), 100000)
	initrd := bytes.Repeat([]byte("initrd-bytes-"), 50000)

	// Before any image, a machine is told to wait, not given a broken script.
	var script []byte
	nodes[1].Call(t, "", http.MethodGet, "/boot/ipxe?mac=52:54:00:00:00:09", "", &script)
	if !strings.Contains(string(script), "sleep 30") || !strings.Contains(string(script), "rollcall image import") {
		t.Fatalf("no-image script:\n%s", script)
	}

	kf := nodes[0].Upload(t, token, "commissioning", "kernel", kernel)
	inf := nodes[0].Upload(t, token, "commissioning", "initrd", initrd)
	body, _ := json.Marshal(wire.ImageRequest{Name: "commissioning", Files: []wire.ImageFile{kf, inf}})
	var answer []byte
	if code := nodes[0].Call(t, token, http.MethodPost, "/api/v1/images", string(body), &answer); code != http.StatusCreated {
		t.Fatalf("post image: %d %s", code, answer)
	}
	holders := func(n *nodetest.Node) []string {
		var im store.Image
		n.Store().View(func(tx *store.Tx) error { im, _ = tx.Image("commissioning"); return nil })
		return im.Nodes
	}
	nodetest.WaitFor(t, "all three nodes to hold the image", func() bool { return len(holders(nodes[0])) == 3 })
	for _, n := range nodes {
		var got []byte
		if code := n.Call(t, "", http.MethodGet, "/images/commissioning/kernel", "", &got); code != 200 || !bytes.Equal(got, kernel) {
			t.Fatalf("%s serves a different kernel (%d, %d bytes)", n.Name(), code, len(got))
		}
	}

	// Range and HEAD as RFC 9110 says.
	req, _ := http.NewRequest(http.MethodGet, "http://"+nodes[2].HTTPAddr()+"/images/commissioning/initrd", nil)
	req.Header.Set("Range", "bytes=10-19")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(part, initrd[10:20]) || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 10-19/%d", len(initrd)) {
		t.Fatalf("range: %d %q %q", resp.StatusCode, part, resp.Header.Get("Content-Range"))
	}
	resp, err = http.Head("http://" + nodes[2].HTTPAddr() + "/images/commissioning/initrd")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(initrd)) {
		t.Fatalf("head: %d length %d", resp.StatusCode, resp.ContentLength)
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-", len(initrd)+5))
	resp, _ = http.DefaultClient.Do(req)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		t.Fatalf("unsatisfiable range: %d", resp.StatusCode)
	}

	// A corrupted copy is refused and the file fetched again from a good
	// holder: node3 loses its copy; node1, the first holder it asks, has a
	// rotten one of the same size; node2's is good.
	sum := sha256.Sum256(kernel)
	blob := hex.EncodeToString(sum[:])
	os.WriteFile(nodes[0].Blobs().Path(blob), bytes.Repeat([]byte("x"), len(kernel)), 0o644)
	os.Remove(nodes[2].Blobs().Path(blob))
	before := testutil.ToFloat64(nodes[2].BootMetrics().ImageRefused)
	nodetest.WaitFor(t, "node3 to fetch the kernel again", func() bool {
		nodes[2].BootFiles().WakeSync()
		b, err := os.ReadFile(nodes[2].Blobs().Path(blob))
		return err == nil && bytes.Equal(b, kernel)
	})
	if testutil.ToFloat64(nodes[2].BootMetrics().ImageRefused) <= before {
		t.Fatal("the rotten copy was not refused (no failed fetch counted)")
	}

	// Boot scripts on every node follow the machine's state.
	machine := "m-00000000abcd"
	if _, err := nodes[0].Cluster().Apply(context.Background(), &raftfsm.MachineCreate{ID: machine, MACs: []string{"52:54:00:00:00:0a"}, Now: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	expect := func(state, action string) {
		t.Helper()
		for _, n := range nodes {
			n.Cluster().FSM().WaitApplied(context.Background(), nodes[0].Cluster().FSM().AppliedIndex())
			var s []byte
			n.Call(t, "", http.MethodGet, "/boot/ipxe?mac=52-54-00-00-00-0A", "", &s)
			got := string(s)
			ok := map[string]bool{
				"commission": strings.Contains(got, "rollcall.token=") && strings.Contains(got, "/images/commissioning/kernel") && !strings.Contains(got, "rollcall.poweroff"),
				"poweroff":   strings.Contains(got, "rollcall.poweroff"),
				"local":      strings.Contains(got, "\nexit") && !strings.Contains(got, "kernel "),
			}[action]
			if !ok {
				t.Fatalf("%s, state %s: want %s:\n%s", n.Name(), state, action, got)
			}
			if action != "local" && !strings.Contains(got, "rollcall.ca=") {
				t.Fatalf("no CA fingerprint in the agent's arguments:\n%s", got)
			}
		}
	}
	expect(store.StateNew, "commission")
	if _, err := nodes[0].Cluster().Apply(context.Background(), &raftfsm.Commission{NewID: "m-000000000fff", Identity: raftfsm.Identity{BootMAC: "52:54:00:00:00:0a", MACs: []string{"52:54:00:00:00:0a"}}, Inventory: json.RawMessage(`{}`), Now: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	expect(store.StateReady, "poweroff")
	nodes[0].Cluster().Apply(context.Background(), &raftfsm.Recommission{ID: machine, Now: time.Now().UTC()})
	expect(store.StateNew, "commission")

	// Bad input: a MAC that is not a MAC, unknown images and files.
	for path, want := range map[string]int{
		"/boot/ipxe?mac=zz:zz":                     400,
		"/boot/ipxe":                               400,
		"/images/commissioning/squashfs":           404,
		"/images/nope/kernel":                      404,
		"/images/commissioning/..%2f..%2fstate.db": 404,
		"/images/%2e%2e/admin.token":               404,
	} {
		if code := nodes[1].Call(t, "", http.MethodGet, path, "", nil); code != want {
			t.Errorf("GET %s: %d, want %d", path, code, want)
		}
	}
}

// GET and HEAD /boot/FILE serve an allow-listed iPXE binary from ipxe_dir,
// following a symlink out of it as Debian's package has (ipxe.efi →
// /boot/ipxe.efi); any other name, and an allow-listed name that is not a
// regular file, is 404.
func TestBootLoaderFiles(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	efi := bytes.Repeat([]byte("ipxe-efi-"), 5000)
	if err := os.WriteFile(filepath.Join(outside, "ipxe.efi"), efi, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "ipxe.efi"), filepath.Join(dir, "ipxe.efi")); err != nil {
		t.Fatal(err)
	}
	// outside plays /boot, where Debian's ipxe.efi link leads: links are
	// followed only into the package directories (TestBootFilesDoNotFollowLinksOut).
	saved := tftp.SystemDirs
	tftp.SystemDirs = append([]string{outside}, saved...)
	t.Cleanup(func() { tftp.SystemDirs = saved })
	if err := os.Mkdir(filepath.Join(dir, "snponly.efi"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("no"), 0o644)
	conf, _ := json.Marshal(node.FileConfig{IPXEDir: dir})
	n := nodetest.StartWith(t, nodetest.Options{Config: string(conf)})

	var got []byte
	if code := n.Call(t, "", http.MethodGet, "/boot/ipxe.efi", "", &got); code != http.StatusOK || !bytes.Equal(got, efi) {
		t.Fatalf("GET /boot/ipxe.efi: %d, %d bytes", code, len(got))
	}
	resp, err := http.Head("http://" + n.HTTPAddr() + "/boot/ipxe.efi")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(efi)) {
		t.Fatalf("HEAD /boot/ipxe.efi: %d, length %d", resp.StatusCode, resp.ContentLength)
	}
	for _, p := range []string{"/boot/snponly.efi", "/boot/undionly.kpxe", "/boot/secret.txt", "/boot/..%2fsecret.txt", "/boot/%2e%2e%2f%2e%2e%2fetc%2fpasswd"} {
		if code := n.Call(t, "", http.MethodGet, p, "", nil); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, code)
		}
	}
}
