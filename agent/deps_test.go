package agent

import (
	"os/exec"
	"strings"
	"testing"
)

// The agent is its own small binary: it reaches the server through the API
// only, so no server package (nor gin, raft, bbolt) may be linked in.
// store/inventory, plain types, is the one package it shares.
func TestAgentImportsNoServerPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./cmd/rollcall-agent").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	forbidden := []string{
		"github.com/rollcall/rollcall/appliance", "github.com/rollcall/rollcall/raftfsm", "github.com/rollcall/rollcall/power",
		"github.com/rollcall/rollcall/dhcp", "github.com/rollcall/rollcall/tftp", "github.com/rollcall/rollcall/ipam",
		"github.com/rollcall/rollcall/webui", "github.com/gin-gonic/gin", "github.com/hashicorp/raft", "go.etcd.io/bbolt",
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/rollcall/rollcall/store") && p != "github.com/rollcall/rollcall/store/inventory" {
			t.Errorf("agent imports %s", p)
		}
		for _, f := range forbidden {
			if p == f || strings.HasPrefix(p, f+"/") {
				t.Errorf("agent imports %s", p)
			}
		}
	}
}
