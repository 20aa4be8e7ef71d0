package dhcp

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the service's imports pointing one way (STYLE.md
// rule 1): the DHCP packages read the store and write only through the
// interfaces they declare, never through raftfsm, appliance or another
// service.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	forbidden := []string{"raftfsm", "appliance", "ipam", "tftp", "power", "webui", "lab"}
	for _, dep := range strings.Fields(string(out)) {
		rest, ok := strings.CutPrefix(dep, "github.com/rollcall/rollcall/")
		if !ok {
			continue
		}
		for _, f := range forbidden {
			if rest == f || strings.HasPrefix(rest, f+"/") {
				t.Errorf("package dhcp depends on %s", dep)
			}
		}
	}
}
