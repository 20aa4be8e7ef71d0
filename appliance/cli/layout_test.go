package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store/inventory"
)

const cliBondedLayout = `{"interfaces": [
  {"type": "physical", "select": "boot", "links": [{"subnet": "boot", "mode": "auto", "default_gateway": true}]},
  {"type": "bond", "name": "bond0", "members": ["fastest:2"], "mtu": 9000, "links": [{"mode": "link_up"}]},
  {"type": "vlan", "parent": "bond0", "vid": 200, "links": [{"subnet": "storage", "mode": "auto"}]}
]}
`

// The layout and net verbs against a node: a layout added from its file
// and shown back as written, given to a machine with a pin, the plan
// printed (goldens), and every refusal with its reason.
func TestLayoutAndNetCLI(t *testing.T) {
	n := startNode(t, nodeOptions{})
	n.use(t)
	mustRun(t, "fabric", "add", "hall-a")
	mustRun(t, "vlan", "add", "hall-a", "0")
	mustRun(t, "vlan", "add", "hall-a", "200", "-mtu", "9000")
	mustRun(t, "subnet", "add", "10.50.0.0/24", "-fabric", "hall-a", "-vid", "0", "-purpose", "provisioning", "-gateway", "10.50.0.1", "-dns", "10.50.0.1", "-domain", "dc.example")
	mustRun(t, "range", "add", "10.50.0.0/24", "static", "10.50.0.50", "10.50.0.199")
	mustRun(t, "range", "add", "10.50.0.0/24", "dynamic", "10.50.0.200", "10.50.0.250")
	mustRun(t, "subnet", "add", "10.60.0.0/24", "-fabric", "hall-a", "-vid", "200", "-purpose", "storage", "-name", "storage")
	rep := report("0c:c4:7a:20:00:01")
	rep.NICs[0].SpeedMbps, rep.NICs[0].IPs = 1000, []string{"10.50.0.201"}
	rep.NICs = append(rep.NICs,
		inventory.NIC{Name: "ens1f0", MAC: "b4:96:91:00:01:10", SpeedMbps: 25000, Link: true},
		inventory.NIC{Name: "ens1f1", MAC: "b4:96:91:00:01:11", SpeedMbps: 25000, Link: true})
	commissionAs(t, n, rep)
	id := strings.Fields(strings.Split(mustRun(t, "list"), "\n")[1])[0]

	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bonded := file("bonded.json", cliBondedLayout)
	if out := mustRun(t, "layout", "add", "bonded", bonded, "-comment", "GPU nodes"); out != "layout bonded added\n" {
		t.Errorf("layout add: %q", out)
	}
	if out := mustRun(t, "layout", "show", "bonded"); out != cliBondedLayout {
		t.Errorf("layout show does not give the file back:\n%s", out)
	}
	var lv wire.LayoutView
	if err := json.Unmarshal([]byte(mustRun(t, "layout", "show", "bonded", "-json")), &lv); err != nil || lv.Comment != "GPU nodes" || lv.JSON != cliBondedLayout {
		t.Errorf("layout show -json: %+v %v", lv, err)
	}
	mustRun(t, "layout", "add", "boot-only", file("boot.json", `{"interfaces": [{"type": "physical", "select": "boot", "links": [{"mode": "dhcp"}]}]}`))
	if out := mustRun(t, "layout", "set", "boot-only", file("boot2.json", `{"interfaces": [{"type": "physical", "select": "boot", "links": [{"subnet": "boot", "mode": "auto"}]}]}`)); out != "layout boot-only replaced\n" {
		t.Errorf("layout set: %q", out)
	}

	out := mustRun(t, "net", "set", id, "-layout", "bonded", "-static", "bond0.200=10.60.0.60")
	if !strings.Contains(out, "layout bonded, static bond0.200=10.60.0.60") || strings.Contains(out, "warning") {
		t.Errorf("net set: %q", out)
	}
	var plan wire.NetworkPlan
	if err := json.Unmarshal([]byte(mustRun(t, "net", "show", id, "-json")), &plan); err != nil || plan.Source != "machine" || len(plan.Addresses) != 2 {
		t.Errorf("net show -json: %+v %v", plan, err)
	}
	var tables strings.Builder
	for _, args := range [][]string{{"layout", "list"}, {"net", "show", id}} {
		tables.WriteString("$ rollcall " + strings.Join(args, " ") + "\n" + mustRun(t, args...))
	}
	golden(t, "layout", normalize(tables.String(), id))

	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"layout", "add", "bonded", bonded}, "layout bonded exists already"},
		{[]string{"layout", "add", "x", file("bad.json", `{"interfaces": [{"type": "bridge"}]}`)}, `type "bridge" is not one of physical, bond, vlan`},
		{[]string{"layout", "add", "x", file("typo.json", `{"interfaces": [{"type": "physical", "selekt": "boot"}]}`)}, `unknown field "selekt"`},
		{[]string{"layout", "add", "x", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"layout", "add", "x"}, "usage: rollcall layout add NAME FILE.json"},
		{[]string{"layout", "rm", "bonded"}, "used by machine " + id},
		{[]string{"layout", "show", "nope"}, `layout "nope": not found`},
		{[]string{"layout", "frob"}, "unknown layout command"},
		{[]string{"net", "set", id}, "usage: rollcall net set"},
		{[]string{"net", "set", id, "-static", "eno1"}, `-static "eno1" is not IFACE=ADDR`},
		{[]string{"net", "set", id, "-static", "eno1=10.50.0.210"}, "inside dynamic range"},
		{[]string{"net", "set", id, "-layout", "nope"}, "layout nope does not exist"},
		{[]string{"net", "set", id, "-static", "eno1=10.50.0.61", "-no-static"}, "-static and -no-static together"},
		{[]string{"net", "show", "m-00000000beef"}, "m-00000000beef"},
	} {
		code, _, errs := run(c.args...)
		if code != 1 || !strings.Contains(errs, c.says) {
			t.Errorf("rollcall %s: exit %d, %q; want it to say %q", strings.Join(c.args, " "), code, errs, c.says)
		}
	}

	// A layout that does not fit: net set warns, net show fails with why.
	mustRun(t, "layout", "add", "eth9", file("eth9.json", `{"interfaces": [{"type": "physical", "select": "name:eth9", "links": [{"mode": "dhcp"}]}]}`))
	if out := mustRun(t, "net", "set", id, "-layout", "eth9", "-no-static"); !strings.Contains(out, "warning: the machine has no network plan") || !strings.Contains(out, "name:eth9") {
		t.Errorf("net set of a layout that does not fit: %q", out)
	}
	if code, _, errs := run("net", "show", id); code != 1 || !strings.Contains(errs, "has no network plan") || !strings.Contains(errs, "name:eth9") {
		t.Errorf("net show of a plan that fails: exit %d, %q", code, errs)
	}
	// Cleared: the default, and the layouts can go.
	if out := mustRun(t, "net", "set", id, "-layout", ""); !strings.Contains(out, "layout (none") {
		t.Errorf("net set -layout \"\": %q", out)
	}
	if out := mustRun(t, "net", "show", id); !strings.Contains(out, "no layout") {
		t.Errorf("net show of the default:\n%s", out)
	}
	for _, name := range []string{"bonded", "boot-only", "eth9"} {
		mustRun(t, "layout", "rm", name)
	}
	if out := mustRun(t, "layout", "list"); strings.Count(out, "\n") != 1 {
		t.Errorf("layout list after rm:\n%s", out)
	}
}
