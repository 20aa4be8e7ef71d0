package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

func TestNetworkCLI(t *testing.T) {
	startNode(t, nodeOptions{}).use(t)

	// The reference's example, as written there.
	mustRun(t, "fabric", "add", "hall-a")
	mustRun(t, "vlan", "add", "hall-a", "0")
	mustRun(t, "subnet", "add", "10.50.0.0/24", "-fabric", "hall-a", "-vid", "0", "-purpose", "provisioning", "-gateway", "10.50.0.1", "-dns", "10.50.0.1", "-domain", "dc.example")
	mustRun(t, "range", "add", "10.50.0.0/24", "reserved", "10.50.0.1", "10.50.0.20")
	mustRun(t, "range", "add", "10.50.0.0/24", "static", "10.50.0.50", "10.50.0.199")
	mustRun(t, "range", "add", "10.50.0.0/24", "dynamic", "10.50.0.200", "10.50.0.250")
	// Flags after the positional arguments, with values.
	mustRun(t, "vlan", "add", "hall-a", "200", "-dhcp", "-node", "t1", "-iface", "eth1", "-mtu", "9000")
	mustRun(t, "subnet", "add", "10.60.0.0/24", "-fabric", "hall-a", "-vid", "200", "-purpose", "storage")

	// A reservation inside a reserved range is allowed; inside the dynamic
	// range it is refused, naming both.
	if out := mustRun(t, "ip", "reserve", "10.50.0.5", "-name", "switch-1"); !strings.Contains(out, "10.50.0.5 reserved for switch-1") {
		t.Errorf("ip reserve: %q", out)
	}
	code, _, errs := run("ip", "reserve", "-name", "switch-2", "10.50.0.210")
	if code != 1 || !strings.Contains(errs, "10.50.0.210") || !strings.Contains(errs, "dynamic range 10.50.0.200–10.50.0.250") {
		t.Errorf("reservation in the dynamic range: exit %d, %q", code, errs)
	}

	out := mustRun(t, "ip", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "IP ") || !strings.Contains(lines[1], "switch-1") || !strings.Contains(lines[1], "reserved") {
		t.Errorf("ip list:\n%s", out)
	}
	// Columns line up: every row has its SUBNET where the header has it.
	if col := strings.Index(lines[0], "SUBNET"); col < 0 || !strings.HasPrefix(lines[1][col:], "10.50.0.0/24") {
		t.Errorf("ip list columns are not aligned:\n%s", out)
	}
	var il wire.AddressList
	if err := json.Unmarshal([]byte(mustRun(t, "ip", "list", "-subnet", "10.50.0.0/24", "-json")), &il); err != nil || len(il.Addresses) != 1 || il.Addresses[0].Name != "switch-1" {
		t.Errorf("ip list -json: %+v, %v", il, err)
	}

	var vd wire.VLANDetail
	if err := json.Unmarshal([]byte(mustRun(t, "vlan", "show", "hall-a", "200", "-json")), &vd); err != nil || vd.DHCP != "full" || vd.MTU != 9000 ||
		len(vd.Servers) != 1 || vd.Servers[0] != (wire.VLANServer{Node: "t1", Iface: "eth1"}) || len(vd.Subnets) != 1 {
		t.Errorf("vlan show -json: %+v, %v", vd, err)
	}
	if out := mustRun(t, "vlan", "list"); !strings.Contains(out, "t1 (eth1)") || !strings.Contains(out, "9000") {
		t.Errorf("vlan list:\n%s", out)
	}
	if out := mustRun(t, "fabric", "show", "hall-a"); !strings.Contains(out, "ethernet") || !strings.Contains(out, "VLANs:") {
		t.Errorf("fabric show:\n%s", out)
	}
	if out := mustRun(t, "fabric", "list", "-json"); !strings.Contains(out, `"hall-a"`) {
		t.Errorf("fabric list -json:\n%s", out)
	}
	out = mustRun(t, "subnet", "show", "10.50.0.0/24")
	for _, want := range []string{"10.50.0.1", "dc.example", "provisioning", "Ranges:", "reserved", "150", "Used:"} {
		if !strings.Contains(out, want) {
			t.Errorf("subnet show lacks %q:\n%s", want, out)
		}
	}
	if out := mustRun(t, "subnet", "list"); !strings.Contains(out, "10.60.0.0/24") || !strings.Contains(out, "storage") {
		t.Errorf("subnet list:\n%s", out)
	}
	if out := mustRun(t, "range", "list", "-subnet", "10.50.0.0/24"); strings.Count(out, "10.50.0.0/24") != 3 {
		t.Errorf("range list:\n%s", out)
	}

	// Every table, as a golden.
	var tables strings.Builder
	for _, args := range [][]string{
		{"fabric", "list"}, {"fabric", "show", "hall-a"}, {"vlan", "list"}, {"vlan", "show", "hall-a", "200"},
		{"subnet", "list"}, {"subnet", "show", "10.50.0.0/24"}, {"range", "list"}, {"ip", "list"},
	} {
		tables.WriteString("$ rollcall " + strings.Join(args, " ") + "\n" + mustRun(t, args...))
	}
	golden(t, "network", normalize(tables.String()))

	// Removal and its refusals.
	code, _, errs = run("subnet", "rm", "10.50.0.0/24")
	if code != 1 || !strings.Contains(errs, "10.50.0.5") || !strings.Contains(errs, "-force") {
		t.Errorf("subnet rm with addresses: exit %d, %q", code, errs)
	}
	mustRun(t, "ip", "release", "10.50.0.5")
	mustRun(t, "range", "rm", "10.50.0.200")
	if out := mustRun(t, "range", "list"); strings.Contains(out, "dynamic") {
		t.Errorf("range list after rm:\n%s", out)
	}
	mustRun(t, "ip", "reserve", "10.50.0.6", "-name", "switch-3")
	mustRun(t, "subnet", "rm", "-force", "10.50.0.0/24")
	mustRun(t, "subnet", "rm", "10.60.0.0/24")
	mustRun(t, "vlan", "rm", "hall-a", "200")
	code, _, errs = run("fabric", "rm", "hall-a")
	if code != 1 || !strings.Contains(errs, "VLAN 0") {
		t.Errorf("fabric rm with a VLAN: exit %d, %q", code, errs)
	}
	mustRun(t, "vlan", "rm", "hall-a", "0")
	mustRun(t, "fabric", "rm", "hall-a")

	// Usage errors.
	for _, args := range [][]string{
		{"fabric"}, {"fabric", "frobnicate"}, {"fabric", "add"}, {"vlan", "add", "hall-a"},
		{"vlan", "add", "hall-a", "1", "-dhcp", "-proxy-dhcp"}, {"vlan", "add", "hall-a", "1", "-node", "t1"},
		{"subnet", "add", "10.70.0.0/24"}, {"subnet", "show", "nonsense"}, {"range", "add", "10.70.0.0/24", "static"},
		{"ip", "reserve"}, {"vlan", "add", "hall-a", "-1"},
	} {
		if code, _, errs := run(args...); code != 1 || errs == "" {
			t.Errorf("rollcall %s: exit %d, %q", strings.Join(args, " "), code, errs)
		}
	}
}

// parseFlags moves the flags first, knowing from the flag set which take a
// value (-data is the client's); a negative number stays an argument.
func TestFlagsFirst(t *testing.T) {
	fs := newFlags("x", "")
	fs.Bool("json", false, "")
	fs.String("node", "", "")
	fs.String("data", "", "")
	got := strings.Join(flagsFirst(fs.FlagSet, []string{"hall-a", "-node", "n1", "0", "-json", "-data=/d", "-7", "-data", "/e"}), " ")
	if want := "-node n1 -json -data=/d -data /e -- hall-a 0 -7"; got != want {
		t.Errorf("flagsFirst = %q, want %q", got, want)
	}
}

// The boot loader of a VLAN through the CLI: vlan add -boot-loader, vlan
// set changing only what it names, vlan show, and a value that is not a
// boot loader refused with the ones that are.
func TestVLANBootLoaderCLI(t *testing.T) {
	startNode(t, nodeOptions{}).use(t)
	mustRun(t, "fabric", "add", "hall-a")
	if out := mustRun(t, "vlan", "add", "hall-a", "10", "-boot-loader", "pxelinux"); !strings.Contains(out, "boot loader pxelinux") {
		t.Errorf("vlan add: %q", out)
	}
	mustRun(t, "vlan", "add", "hall-a", "20", "-dhcp", "-node", "t1", "-iface", "eth1", "-mtu", "9000")
	if out := mustRun(t, "vlan", "show", "hall-a", "20"); !strings.Contains(out, "Boot loader") || !strings.Contains(out, "ipxe") {
		t.Errorf("vlan show of an iPXE VLAN:\n%s", out)
	}
	mustRun(t, "vlan", "set", "hall-a", "20", "-boot-loader", "pxelinux")
	var vd wire.VLANDetail
	if err := json.Unmarshal([]byte(mustRun(t, "vlan", "show", "hall-a", "20", "-json")), &vd); err != nil || vd.BootLoader != store.BootLoaderPXELinux ||
		vd.DHCP != store.DHCPFull || vd.MTU != 9000 || len(vd.Servers) != 1 || vd.Servers[0] != (wire.VLANServer{Node: "t1", Iface: "eth1"}) {
		t.Errorf("vlan set -boot-loader changed more than the boot loader: %+v, %v", vd, err)
	}
	if out := mustRun(t, "vlan", "show", "hall-a", "20"); !strings.Contains(out, "pxelinux") {
		t.Errorf("vlan show:\n%s", out)
	}
	mustRun(t, "vlan", "set", "hall-a", "20", "-no-dhcp", "-mtu", "1500", "-boot-loader", "ipxe")
	json.Unmarshal([]byte(mustRun(t, "vlan", "show", "hall-a", "20", "-json")), &vd)
	if vd.BootLoader != store.BootLoaderIPXE || vd.DHCP != store.DHCPOff || vd.MTU != 1500 {
		t.Errorf("vlan set -no-dhcp -mtu -boot-loader: %+v", vd)
	}
	if code, _, errs := run("vlan", "set", "hall-a", "20", "-boot-loader", "grub"); code != 1 || !strings.Contains(errs, `"grub"`) || !strings.Contains(errs, "ipxe, pxelinux") {
		t.Errorf("vlan set -boot-loader grub: exit %d, %q", code, errs)
	}
	for _, args := range [][]string{{"vlan", "set", "hall-a"}, {"vlan", "set", "hall-a", "20", "-dhcp", "-no-dhcp"}, {"vlan", "set", "hall-a", "99", "-mtu", "1500"}} {
		if code, _, errs := run(args...); code != 1 || errs == "" {
			t.Errorf("rollcall %s: exit %d, %q", strings.Join(args, " "), code, errs)
		}
	}
}
