package appliance_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
)

// ---- the network model from the CLI, on one real node

// cli runs the command line against the node; it returns the exit status
// and what went to stdout and stderr.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := appliance.Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := cli(t, args...)
	if code != 0 {
		t.Fatalf("rollcall %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}

func TestNetworkCLI(t *testing.T) {
	n := nodetest.Start(t)

	admin := n.Admin
	t.Setenv("ROLLCALL_URL", "http://"+n.HTTPAddr())
	t.Setenv("ROLLCALL_TOKEN", admin)

	// The reference's example, as written there.
	mustCLI(t, "fabric", "add", "hall-a")
	mustCLI(t, "vlan", "add", "hall-a", "0")
	mustCLI(t, "subnet", "add", "10.50.0.0/24", "-fabric", "hall-a", "-vid", "0", "-purpose", "provisioning", "-gateway", "10.50.0.1", "-dns", "10.50.0.1", "-domain", "dc.example")
	mustCLI(t, "range", "add", "10.50.0.0/24", "reserved", "10.50.0.1", "10.50.0.20")
	mustCLI(t, "range", "add", "10.50.0.0/24", "static", "10.50.0.50", "10.50.0.199")
	mustCLI(t, "range", "add", "10.50.0.0/24", "dynamic", "10.50.0.200", "10.50.0.250")
	// Flags after the positional arguments, with values.
	mustCLI(t, "vlan", "add", "hall-a", "200", "-dhcp", "-node", "t1", "-iface", "eth1", "-mtu", "9000")
	mustCLI(t, "subnet", "add", "10.60.0.0/24", "-fabric", "hall-a", "-vid", "200", "-purpose", "storage")

	// A reservation inside a reserved range is allowed; inside the dynamic
	// range it is refused, naming both.
	if out := mustCLI(t, "ip", "reserve", "10.50.0.5", "-name", "switch-1"); !strings.Contains(out, "10.50.0.5 reserved for switch-1") {
		t.Errorf("ip reserve: %q", out)
	}
	code, _, errs := cli(t, "ip", "reserve", "-name", "switch-2", "10.50.0.210")
	if code != 1 || !strings.Contains(errs, "10.50.0.210") || !strings.Contains(errs, "dynamic range 10.50.0.200–10.50.0.250") {
		t.Errorf("reservation in the dynamic range: exit %d, %q", code, errs)
	}

	out := mustCLI(t, "ip", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "IP ") || !strings.Contains(lines[1], "switch-1") || !strings.Contains(lines[1], "reserved") {
		t.Errorf("ip list:\n%s", out)
	}
	// Columns line up: every row has its SUBNET where the header has it.
	if col := strings.Index(lines[0], "SUBNET"); col < 0 || !strings.HasPrefix(lines[1][col:], "10.50.0.0/24") {
		t.Errorf("ip list columns are not aligned:\n%s", out)
	}
	var il wire.AddressList
	if err := json.Unmarshal([]byte(mustCLI(t, "ip", "list", "-subnet", "10.50.0.0/24", "-json")), &il); err != nil || len(il.Addresses) != 1 || il.Addresses[0].Name != "switch-1" {
		t.Errorf("ip list -json: %+v, %v", il, err)
	}

	var vd wire.VLANDetail
	if err := json.Unmarshal([]byte(mustCLI(t, "vlan", "show", "hall-a", "200", "-json")), &vd); err != nil || vd.DHCP != "full" || vd.MTU != 9000 ||
		len(vd.Servers) != 1 || vd.Servers[0] != (wire.VLANServer{Node: "t1", Iface: "eth1"}) || len(vd.Subnets) != 1 {
		t.Errorf("vlan show -json: %+v, %v", vd, err)
	}
	if out := mustCLI(t, "vlan", "list"); !strings.Contains(out, "t1 (eth1)") || !strings.Contains(out, "9000") {
		t.Errorf("vlan list:\n%s", out)
	}
	if out := mustCLI(t, "fabric", "show", "hall-a"); !strings.Contains(out, "ethernet") || !strings.Contains(out, "VLANs:") {
		t.Errorf("fabric show:\n%s", out)
	}
	if out := mustCLI(t, "fabric", "list", "-json"); !strings.Contains(out, `"hall-a"`) {
		t.Errorf("fabric list -json:\n%s", out)
	}
	out = mustCLI(t, "subnet", "show", "10.50.0.0/24")
	for _, want := range []string{"10.50.0.1", "dc.example", "provisioning", "Ranges:", "reserved", "150", "Used:"} {
		if !strings.Contains(out, want) {
			t.Errorf("subnet show lacks %q:\n%s", want, out)
		}
	}
	if out := mustCLI(t, "subnet", "list"); !strings.Contains(out, "10.60.0.0/24") || !strings.Contains(out, "storage") {
		t.Errorf("subnet list:\n%s", out)
	}
	if out := mustCLI(t, "range", "list", "-subnet", "10.50.0.0/24"); strings.Count(out, "10.50.0.0/24") != 3 {
		t.Errorf("range list:\n%s", out)
	}

	// Removal and its refusals.
	code, _, errs = cli(t, "subnet", "rm", "10.50.0.0/24")
	if code != 1 || !strings.Contains(errs, "10.50.0.5") || !strings.Contains(errs, "-force") {
		t.Errorf("subnet rm with addresses: exit %d, %q", code, errs)
	}
	mustCLI(t, "ip", "release", "10.50.0.5")
	mustCLI(t, "range", "rm", "10.50.0.200")
	if out := mustCLI(t, "range", "list"); strings.Contains(out, "dynamic") {
		t.Errorf("range list after rm:\n%s", out)
	}
	mustCLI(t, "ip", "reserve", "10.50.0.6", "-name", "switch-3")
	mustCLI(t, "subnet", "rm", "-force", "10.50.0.0/24")
	mustCLI(t, "subnet", "rm", "10.60.0.0/24")
	mustCLI(t, "vlan", "rm", "hall-a", "200")
	code, _, errs = cli(t, "fabric", "rm", "hall-a")
	if code != 1 || !strings.Contains(errs, "VLAN 0") {
		t.Errorf("fabric rm with a VLAN: exit %d, %q", code, errs)
	}
	mustCLI(t, "vlan", "rm", "hall-a", "0")
	mustCLI(t, "fabric", "rm", "hall-a")

	// Usage errors.
	for _, args := range [][]string{
		{"fabric"}, {"fabric", "frobnicate"}, {"fabric", "add"}, {"vlan", "add", "hall-a"},
		{"vlan", "add", "hall-a", "1", "-dhcp", "-proxy-dhcp"}, {"vlan", "add", "hall-a", "1", "-node", "t1"},
		{"subnet", "add", "10.70.0.0/24"}, {"subnet", "show", "nonsense"}, {"range", "add", "10.70.0.0/24", "static"},
		{"ip", "reserve"}, {"vlan", "add", "hall-a", "-1"},
	} {
		if code, _, errs := cli(t, args...); code != 1 || errs == "" {
			t.Errorf("rollcall %s: exit %d, %q", strings.Join(args, " "), code, errs)
		}
	}
}
