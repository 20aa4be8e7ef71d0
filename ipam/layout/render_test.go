package layout_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/rollcall/rollcall/ipam/layout"
	"github.com/rollcall/rollcall/lab/testenv"
)

// plans resolves every golden case once.
func plans(t *testing.T) map[string]*layout.Plan {
	out := map[string]*layout.Plan{}
	for _, name := range slices.Sorted(maps.Keys(planCases)) {
		out[name] = planCases[name].plan(t)
	}
	return out
}

// TestRenderedYAMLParsesBack: a YAML parser reads each network-config to
// the plan: every key and every MAC, address and name a string (not a
// YAML 1.1 number or boolean), the addresses with their prefixes, the
// bond's members and the VLAN's link.
func TestRenderedYAMLParsesBack(t *testing.T) {
	for name, p := range plans(t) {
		t.Run(name, func(t *testing.T) {
			var doc map[string]any
			if err := yaml.Unmarshal(p.NetworkConfig(), &doc); err != nil {
				t.Fatalf("not YAML: %v\n%s", err, p.NetworkConfig())
			}
			if doc["version"] != 2 {
				t.Errorf("version %v, want 2", doc["version"])
			}
			section := func(kind string) map[string]any {
				m, _ := doc[kind].(map[string]any)
				return m
			}
			for _, it := range p.Interfaces {
				kind := map[string]string{layout.TypePhysical: "ethernets", layout.TypeBond: "bonds", layout.TypeVLAN: "vlans"}[it.Type]
				entry, ok := section(kind)[it.Name].(map[string]any)
				if !ok {
					t.Errorf("%s has no %s entry %s", kind, it.Type, it.Name)
					continue
				}
				var want []any
				for _, ln := range it.Links {
					if ln.Address.IsValid() {
						want = append(want, netip.PrefixFrom(ln.Address, ln.Subnet.CIDR.Bits()).String())
					}
				}
				if got, _ := entry["addresses"].([]any); !slices.Equal(got, want) {
					t.Errorf("%s addresses %v, want %v", it.Name, got, want)
				}
				switch {
				case it.MAC != "":
					if m, _ := entry["match"].(map[string]any); m["macaddress"] != it.MAC || entry["set-name"] != it.Name {
						t.Errorf("%s match %v set-name %v, want %s and %s", it.Name, entry["match"], entry["set-name"], it.MAC, it.Name)
					}
				case it.Type == layout.TypeBond:
					members, _ := entry["interfaces"].([]any)
					for i, m := range it.Members {
						if i >= len(members) || members[i] != m.Name {
							t.Errorf("bond %s interfaces %v, want %v", it.Name, members, it.Members)
						}
						eth, _ := section("ethernets")[m.Name].(map[string]any)
						if match, _ := eth["match"].(map[string]any); match["macaddress"] != m.MAC {
							t.Errorf("member %s matches %v, want %s", m.Name, eth["match"], m.MAC)
						}
					}
					if params, _ := entry["parameters"].(map[string]any); params["mode"] != it.Bond.Mode {
						t.Errorf("bond %s mode %v, want %s", it.Name, params["mode"], it.Bond.Mode)
					}
				case it.Type == layout.TypeVLAN:
					if entry["id"] != it.VID || entry["link"] != it.Parent {
						t.Errorf("vlan %s id %v link %v, want %d on %s", it.Name, entry["id"], entry["link"], it.VID, it.Parent)
					}
				}
			}
		})
	}
}

// schemaFile is cloud-init's network-config v2 schema: the installed
// package's when it ships one (cloud-init 24.2 and later), else the copy
// of upstream's in testdata (Debian 12's cloud-init 22.4 has none; see
// testdata/cloud-init/README.md).
func schemaFile(t *testing.T) string {
	installed := "/usr/lib/python3/dist-packages/cloudinit/config/schemas/schema-network-config-v2.json"
	if _, err := os.Stat(installed); err == nil {
		return installed
	}
	t.Logf("the installed cloud-init has no network-config v2 schema: using testdata/cloud-init's copy of upstream 25.1.4's")
	return filepath.Join("testdata", "cloud-init", "schema-network-config-v2.json")
}

// TestNetworkConfigSchema validates every rendered network-config against
// cloud-init's own JSON schema, and checks that the validator does refuse
// what the schema forbids.
func TestNetworkConfigSchema(t *testing.T) {
	f, err := os.Open(schemaFile(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("network-config-v2.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("network-config-v2.json")
	if err != nil {
		t.Fatal(err)
	}
	validate := func(y []byte) error {
		var v any
		if err := yaml.Unmarshal(y, &v); err != nil {
			return err
		}
		j, err := json.Marshal(v)
		if err != nil {
			return err
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
		if err != nil {
			return err
		}
		return sch.Validate(inst)
	}
	for name, p := range plans(t) {
		if err := validate(p.NetworkConfig()); err != nil {
			t.Errorf("%s: cloud-init's schema refuses the network-config: %v\n%s", name, err, p.NetworkConfig())
		}
	}
	for what, bad := range map[string]string{
		"a bond mode the driver lacks": "version: 2\nbonds:\n  bond0:\n    interfaces: [a, b]\n    parameters:\n      mode: lacp\n",
		"a field match does not have":  "version: 2\nethernets:\n  eno1:\n    match:\n      mac: \"52:54:00:00:00:01\"\n",
		"a route without to":           "version: 2\nethernets:\n  eno1:\n    routes:\n      - via: \"10.0.0.1\"\n",
		"version 1":                    "version: 1\n",
	} {
		if validate([]byte(bad)) == nil {
			t.Errorf("the schema accepts %s: the validator checks nothing", what)
		}
	}
}

// TestCloudInitRenders hands every golden network-config to cloud-init
// itself (Debian's package: its version 2 parser and the renderers of the
// images the lab deploys: netplan for Ubuntu and Debian 13, ENI for older
// Debian, sysconfig and NetworkManager for the RHEL family) and checks
// that each address and interface name comes out the other side.
//
// cloud-init writes an InfiniBand port as an Ethernet connection for
// NetworkManager (version 2 has no InfiniBand type; version 1 does): the
// test checks what it does, not that NetworkManager would bring it up.
func TestCloudInitRenders(t *testing.T) {
	ci := testenv.NeedTool(t, "cloud-init")[0]
	for name, p := range plans(t) {
		in := filepath.Join(t.TempDir(), "network-config")
		if err := os.WriteFile(in, p.NetworkConfig(), 0o644); err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, it := range p.Interfaces {
			want = append(want, it.Name)
			for _, ln := range it.Links {
				if ln.Address.IsValid() {
					want = append(want, ln.Address.String())
				}
			}
		}
		for _, out := range []struct{ kind, distro string }{
			{"netplan", "ubuntu"}, {"eni", "debian"}, {"sysconfig", "rhel"}, {"network-manager", "rocky"},
		} {
			t.Run(fmt.Sprintf("%s/%s", name, out.kind), func(t *testing.T) {
				dir := t.TempDir()
				cmd := exec.Command(ci, "devel", "net-convert", "-p", in, "-k", "yaml", "-d", dir, "-D", out.distro, "-O", out.kind)
				if b, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("cloud-init net-convert: %v\n%s\n%s", err, b, p.NetworkConfig())
				}
				var all strings.Builder
				filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						b, _ := os.ReadFile(path)
						all.WriteString(path + "\n" + string(b) + "\n")
					}
					return nil
				})
				for _, w := range want {
					if !strings.Contains(all.String(), w) {
						t.Errorf("cloud-init's %s output does not mention %s:\n%s", out.kind, w, all.String())
					}
				}
			})
		}
	}
}

// TestUdevRules: one rule per NIC the plan names, in the form udev and
// cloud-init's own rules use.
func TestUdevRules(t *testing.T) {
	p := planCases["example"].plan(t)
	rules := strings.Split(strings.TrimSpace(string(p.UdevRules())), "\n")
	if !strings.HasPrefix(rules[0], "# ") || len(rules) != 5 {
		t.Fatalf("rules:\n%s", p.UdevRules())
	}
	for _, r := range rules[1:] {
		if !strings.HasPrefix(r, `SUBSYSTEM=="net", ACTION=="add", DRIVERS=="?*", `) || !strings.Contains(r, `NAME="`) {
			t.Errorf("rule %q is not of the pinned-name form", r)
		}
	}
}
