package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/wire"
)

// rollcall doctor against a node: the checks a healthy single node passes,
// the one a fresh cluster fails (no commissioning image) with what to do,
// the exit status following it, and -json.
func TestDoctorCLI(t *testing.T) {
	n := startNode(t, nodeOptions{})
	n.use(t)
	code, out, _ := run("doctor")
	if code != 1 || !strings.Contains(out, "FAIL  commissioning image") || !strings.Contains(out, "→ rollcall image import commissioning") {
		t.Fatalf("doctor without the commissioning image: exit %d\n%s", code, out)
	}
	for _, want := range []string{"OK    raft", "OK    members", "OK    services", "OK    disk", "OK    certificates", "ca.pem", "node.pem"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor lacks %q:\n%s", want, out)
		}
	}
	var rep wire.DoctorReport
	code, js, _ := run("doctor", "-json")
	if err := json.Unmarshal([]byte(js), &rep); err != nil || code != 1 || rep.OK || rep.Node == "" {
		t.Fatalf("doctor -json: exit %d, %+v %v", code, rep, err)
	}
	dir := t.TempDir()
	write := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("the "+name), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mustRun(t, "image", "import", "commissioning", "-kernel", write("vmlinuz"), "-initrd", write("initrd.img"))
	code, out, _ = run("doctor")
	t.Logf("rollcall doctor:\n%s", out)
	if code != 0 || strings.Contains(out, "FAIL") {
		t.Fatalf("doctor on a healthy node: exit %d\n%s", code, out)
	}
}
