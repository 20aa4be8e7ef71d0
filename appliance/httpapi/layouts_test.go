package httpapi_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden")

// goldenFile compares got with testdata/golden/name (-update writes it).
func goldenFile(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./appliance/httpapi -run %s -update writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (-golden +now):\n%s", path, cmp.Diff(string(want), string(got)))
	}
}

// bondedLayout: the boot NIC with an auto address and the default route,
// the two fastest other NICs in bond0 (jumbo frames), VLAN 200 on it.
const bondedLayout = `{"interfaces": [
  {"type": "physical", "select": "boot", "links": [{"subnet": "boot", "mode": "auto", "default_gateway": true}]},
  {"type": "bond", "name": "bond0", "members": ["fastest:2"], "mtu": 9000, "links": [{"mode": "link_up"}]},
  {"type": "vlan", "parent": "bond0", "vid": 200, "links": [{"subnet": "storage", "mode": "auto"}]}
]}
`

// layoutSite is referenceSite with VLAN 200 carrying the storage subnet
// 10.60.0.0/24, and a machine commissioned with a 1G boot NIC (eno1,
// DHCP address 10.50.0.201) and two 25G ports.
func layoutSite(t *testing.T, n *nodetest.Node) string {
	t.Helper()
	admin := n.Admin
	referenceSite(t, n, admin)
	vid := 200
	mustDo(t, n, http.StatusCreated, "POST", "/api/v1/vlans", wire.VLANRequest{Fabric: "hall-a", VID: &vid, MTU: 9000}, admin)
	mustDo(t, n, http.StatusCreated, "POST", "/api/v1/subnets", wire.SubnetRequest{CIDR: "10.60.0.0/24", Name: "storage", Fabric: "hall-a", VID: &vid, Purpose: "storage"}, admin)
	rep := testReport("7d3e1c52-4f8a-4b6e-9c1d-2a3b4c5d6e01", "S-NET-1", "0c:c4:7a:10:00:01", "b4:96:91:00:00:10", "b4:96:91:00:00:11")
	rep.NICs[0].SpeedMbps, rep.NICs[0].IPs = 1000, []string{"10.50.0.201"}
	for i := 1; i < 3; i++ {
		rep.NICs[i].Name, rep.NICs[i].SpeedMbps, rep.NICs[i].Link = []string{"", "ens1f0", "ens1f1"}[i], 25000, true
	}
	return commission(t, n, n.Agent, rep).ID
}

func applied(t *testing.T, n *nodetest.Node) uint64 {
	t.Helper()
	var h wire.Health
	n.Do(t, "GET", "/api/v1/health", nil).Decode(t, &h)
	return h.AppliedIndex
}

// TestLayoutsAPI: layouts added, replaced, listed, shown as written and
// removed; every bad request refused with its reason and no Raft entry.
func TestLayoutsAPI(t *testing.T) {
	n := nodetest.Start(t)
	admin := n.Admin
	mid := layoutSite(t, n)

	r := mustDo(t, n, http.StatusCreated, "POST", "/api/v1/layouts/bonded?comment=GPU+nodes", bondedLayout, admin)
	var lv wire.LayoutView
	r.Decode(t, &lv)
	if lv.Name != "bonded" || lv.JSON != bondedLayout || lv.Comment != "GPU nodes" || lv.Created.IsZero() || lv.Index == 0 {
		t.Errorf("added: %+v", lv)
	}
	var list wire.LayoutList
	mustDo(t, n, http.StatusOK, "GET", "/api/v1/layouts", nil, admin).Decode(t, &list)
	if len(list.Layouts) != 1 || list.Layouts[0].JSON != bondedLayout || list.Index != lv.Index {
		t.Errorf("list: %+v", list)
	}
	replaced := strings.Replace(bondedLayout, `"mtu": 9000`, `"mtu": 8000`, 1)
	lv = wire.LayoutView{}
	mustDo(t, n, http.StatusOK, "PUT", "/api/v1/layouts/bonded", replaced, admin).Decode(t, &lv)
	if lv.JSON != replaced || lv.Comment != "" {
		t.Errorf("replaced: %+v", lv)
	}
	mustDo(t, n, http.StatusOK, "PUT", "/api/v1/layouts/bonded", bondedLayout, admin)

	for name, c := range map[string]struct {
		method, path, body string
		status             int
		says               string
	}{
		"a bad name":              {"POST", "/api/v1/layouts/Big%20Bond", bondedLayout, 400, `layout name "Big Bond" must be lowercase`},
		"not JSON":                {"POST", "/api/v1/layouts/x", `{"interfaces": [`, 400, "layout is not JSON"},
		"empty":                   {"POST", "/api/v1/layouts/x", ``, 400, "layout is empty"},
		"an unknown field":        {"POST", "/api/v1/layouts/x", `{"interfaces": [], "bridges": []}`, 400, `unknown field "bridges"`},
		"a field in capitals":     {"POST", "/api/v1/layouts/x", `{"Interfaces": [{"type": "physical", "select": "boot"}]}`, 400, `field "Interfaces": write it interfaces`},
		"a bond of one":           {"POST", "/api/v1/layouts/x", `{"interfaces": [{"type": "bond", "name": "bond0", "members": ["name:eno1"]}]}`, 400, "a bond with one member (name:eno1) is no bond"},
		"a VLAN without parent":   {"POST", "/api/v1/layouts/x", `{"interfaces": [{"type": "bond", "name": "bond0", "members": ["all"]}, {"type": "vlan", "parent": "bond1", "vid": 5}]}`, 400, "parent bond1 is not an interface of the layout"},
		"a static outside":        {"POST", "/api/v1/layouts/x", `{"interfaces": [{"type": "physical", "select": "boot", "links": [{"subnet": "10.60.0.0/24", "mode": "static", "address": "10.50.0.9"}]}]}`, 400, "static address 10.50.0.9 is outside its subnet 10.60.0.0/24"},
		"data after the layout":   {"POST", "/api/v1/layouts/x", `{"interfaces": [{"type": "physical", "select": "boot"}]} {}`, 400, "data after the layout"},
		"an existing name":        {"POST", "/api/v1/layouts/bonded", bondedLayout, 409, "layout bonded exists already"},
		"replacing a missing one": {"PUT", "/api/v1/layouts/storage", bondedLayout, 404, `layout "storage": not found`},
		"removing a missing one":  {"DELETE", "/api/v1/layouts/storage", "", 404, `layout "storage": not found`},
		"showing a missing one":   {"GET", "/api/v1/layouts/storage", "", 404, `layout "storage": not found`},
		"too large":               {"POST", "/api/v1/layouts/x", `{"interfaces": [], "x": "` + strings.Repeat("a", 70<<10) + `"}`, 413, "at most 65536 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			before := applied(t, n)
			var body any
			if c.body != "" {
				body = c.body
			}
			r := n.Do(t, c.method, c.path, body, nodetest.Bearer(admin)...)
			if r.Status != c.status || !strings.Contains(r.ErrorMessage(), c.says) {
				t.Errorf("%s %s = %s, want %d saying %q", c.method, c.path, r, c.status, c.says)
			}
			if after := applied(t, n); after != before {
				t.Errorf("a refused request took Raft entries: applied %d → %d", before, after)
			}
		})
	}

	// A machine uses it: it cannot go.
	mustDo(t, n, http.StatusOK, "PUT", "/api/v1/machines/"+mid+"/network", wire.NetworkRequest{Layout: ptr("bonded")}, admin)
	if r := n.Do(t, "DELETE", "/api/v1/layouts/bonded", nil, nodetest.Bearer(admin)...); r.Status != http.StatusConflict || !strings.Contains(r.ErrorMessage(), "used by machine "+mid) {
		t.Errorf("delete in use: %s", r)
	}
	mustDo(t, n, http.StatusOK, "PUT", "/api/v1/machines/"+mid+"/network", wire.NetworkRequest{Layout: ptr("")}, admin)
	mustDo(t, n, http.StatusOK, "DELETE", "/api/v1/layouts/bonded", nil, admin)
	mustDo(t, n, http.StatusOK, "GET", "/api/v1/layouts", nil, admin).Decode(t, &list)
	if len(list.Layouts) != 0 {
		t.Errorf("after delete: %+v", list.Layouts)
	}
}

func ptr[T any](v T) *T { return &v }

// TestMachineNetworkAPI: a per-machine layout with a pinned address, set
// through the API, gives the plan, the network-config and the udev rules
// in testdata/golden; bad settings are refused with no Raft entry, and a
// plan that cannot be made is a 422 with the reason.
func TestMachineNetworkAPI(t *testing.T) {
	n := nodetest.Start(t)
	admin := n.Admin
	mid := layoutSite(t, n)
	mustDo(t, n, http.StatusCreated, "POST", "/api/v1/layouts/bonded", bondedLayout, admin)

	// Without a layout: the default, the boot NIC's auto address.
	var plan wire.NetworkPlan
	mustDo(t, n, http.StatusOK, "GET", "/api/v1/machines/"+mid+"/network-plan", nil, admin).Decode(t, &plan)
	if plan.Source != "default" || len(plan.Addresses) != 1 || plan.Addresses[0].Interface != "eno1" || plan.Addresses[0].How != "auto" {
		t.Errorf("default plan: %+v", plan)
	}

	var nv wire.NetworkView
	mustDo(t, n, http.StatusOK, "PUT", "/api/v1/machines/"+mid+"/network",
		wire.NetworkRequest{Layout: ptr("bonded"), Static: map[string]string{"bond0.200": "10.60.0.60"}}, admin).Decode(t, &nv)
	if nv.Layout != "bonded" || !cmp.Equal(nv.Static, map[string]string{"bond0.200": "10.60.0.60"}) || nv.PlanError != "" {
		t.Errorf("net set: %+v", nv)
	}
	var d wire.MachineDetail
	mustDo(t, n, http.StatusOK, "GET", "/api/v1/machines/"+mid, nil, admin).Decode(t, &d)
	if d.Layout != "bonded" {
		t.Errorf("machine shows layout %q", d.Layout)
	}
	var ips wire.AddressList
	mustDo(t, n, http.StatusOK, "GET", "/api/v1/ips?subnet=10.60.0.0/24", nil, admin).Decode(t, &ips)
	if len(ips.Addresses) != 1 || ips.Addresses[0].How != "pinned" || ips.Addresses[0].Machine != mid || ips.Addresses[0].Interface != "bond0.200" {
		t.Errorf("the pin is not held in IPAM: %+v", ips.Addresses)
	}

	r := mustDo(t, n, http.StatusOK, "GET", "/api/v1/machines/"+mid+"/network-plan", nil, admin)
	r.Decode(t, &plan)
	if plan.Source != "machine" || plan.Layout != "bonded" || plan.Index == 0 {
		t.Errorf("plan: %+v", plan)
	}
	// The machine's ID is random: the goldens say (machine).
	anon := func(s string) []byte { return []byte(strings.ReplaceAll(s, mid, "(machine)")) }
	goldenFile(t, "machine-bonded.network-config.yaml", anon(plan.NetworkConfig))
	goldenFile(t, "machine-bonded.udev.rules", anon(plan.UdevRules))
	plan.NetworkConfig, plan.UdevRules, plan.Index = "(golden file)", "(golden file)", 0
	plan.Machine = "(machine)"
	b, _ := json.MarshalIndent(plan, "", "  ")
	goldenFile(t, "machine-bonded.plan.json", bytes.ReplaceAll(append(b, '\n'), []byte(mid), []byte("(machine)")))
	// A preview allocates nothing: the auto address of eno1 is still free.
	mustDo(t, n, http.StatusOK, "GET", "/api/v1/ips?subnet=10.50.0.0/24", nil, admin).Decode(t, &ips)
	if len(ips.Addresses) != 0 {
		t.Errorf("the preview allocated %+v", ips.Addresses)
	}

	// Another machine holds 10.50.0.70.
	mustDo(t, n, http.StatusCreated, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "other"}, admin)
	mustDo(t, n, http.StatusCreated, "POST", "/api/v1/ips/allocate", wire.AllocateRequest{Machine: "other", IP: "10.50.0.70"}, admin)

	for name, c := range map[string]struct {
		path   string
		body   any
		status int
		says   string
	}{
		"nothing to set":           {mid, `{}`, 400, "give layout"},
		"an unknown field":         {mid, `{"layout": "bonded", "pins": {}}`, 400, "pins"},
		"a missing layout":         {mid, wire.NetworkRequest{Layout: ptr("storage")}, 400, "layout storage does not exist"},
		"a bad layout name":        {mid, wire.NetworkRequest{Layout: ptr("Big Bond")}, 400, "layout name"},
		"a pin not IFACE=ADDR":     {mid, wire.NetworkRequest{Static: map[string]string{"eno1": "nonsense"}}, 400, `"nonsense" is not an IP address`},
		"a pin with a prefix":      {mid, wire.NetworkRequest{Static: map[string]string{"eno1": "10.50.0.60/24"}}, 400, "give the address alone"},
		"a pin in a dynamic range": {mid, wire.NetworkRequest{Static: map[string]string{"eno1": "10.50.0.210"}}, 409, "inside dynamic range"},
		"a pin taken":              {mid, wire.NetworkRequest{Static: map[string]string{"eno1": "10.50.0.70"}}, 409, "already in use"},
		"a pin in no subnet":       {mid, wire.NetworkRequest{Static: map[string]string{"eno1": "192.0.2.1"}}, 400, "in no subnet"},
		"an empty pin":             {mid, wire.NetworkRequest{Static: map[string]string{"eno1": ""}}, 400, "no address"},
		"an unknown machine":       {"m-00000000beef", wire.NetworkRequest{Layout: ptr("")}, 404, "m-00000000beef"},
	} {
		t.Run(name, func(t *testing.T) {
			before := applied(t, n)
			r := n.Do(t, "PUT", "/api/v1/machines/"+c.path+"/network", c.body, nodetest.Bearer(admin)...)
			if r.Status != c.status || !strings.Contains(r.ErrorMessage(), c.says) {
				t.Errorf("= %s, want %d saying %q", r, c.status, c.says)
			}
			if after := applied(t, n); after != before {
				t.Errorf("a refused request took Raft entries: applied %d → %d", before, after)
			}
		})
	}

	// Plans that cannot be made: the setting is kept (with plan_error
	// saying why), and the plan is a 422 with the reason.
	for name, c := range map[string]struct {
		layout string
		static map[string]string
		says   string
	}{
		"a selector that matches nothing": {`{"interfaces": [{"type": "physical", "select": "name:eth9", "links": [{"mode": "dhcp"}]}]}`, nil, "name:eth9"},
		"a bond that finds one member":    {`{"interfaces": [{"type": "physical", "select": "fastest:1", "links": [{"mode": "dhcp"}]}, {"type": "physical", "select": "boot", "links": [{"mode": "dhcp"}]}, {"type": "bond", "name": "bond0", "members": ["all"]}]}`, nil, "a bond with one member"},
		"a VLAN on a missing parent":      {`{"interfaces": [{"type": "physical", "select": "boot", "links": [{"mode": "dhcp"}]}, {"type": "vlan", "parent": "eno9", "vid": 200, "links": [{"subnet": "storage", "mode": "auto"}]}]}`, nil, "parent eno9 is not an interface of the layout"},
		"a static outside its subnet":     {`{"interfaces": [{"type": "physical", "select": "boot", "links": [{"subnet": "boot", "mode": "static", "address": "10.60.0.9"}]}]}`, nil, "static address 10.60.0.9 is outside its subnet 10.50.0.0/24"},
		"a static taken":                  {`{"interfaces": [{"type": "physical", "select": "boot", "links": [{"subnet": "boot", "mode": "static", "address": "10.50.0.70"}]}]}`, nil, "10.50.0.70 is already in use"},
		"a pin on no interface":           {bondedLayout, map[string]string{"eth7": "10.50.0.61"}, "the layout has no interface eth7"},
	} {
		t.Run(name, func(t *testing.T) {
			lname := strings.ReplaceAll(strings.ToLower(name), " ", "-")
			mustDo(t, n, http.StatusCreated, "POST", "/api/v1/layouts/"+lname, c.layout, admin)
			static := c.static
			if static == nil {
				static = map[string]string{}
			}
			var nv wire.NetworkView
			mustDo(t, n, http.StatusOK, "PUT", "/api/v1/machines/"+mid+"/network", wire.NetworkRequest{Layout: ptr(lname), Static: static}, admin).Decode(t, &nv)
			if !strings.Contains(nv.PlanError, c.says) {
				t.Errorf("plan_error %q, want it to say %q", nv.PlanError, c.says)
			}
			r := n.Do(t, "GET", "/api/v1/machines/"+mid+"/network-plan", nil, nodetest.Bearer(admin)...)
			if r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != "no_plan" || !strings.Contains(r.ErrorMessage(), c.says) {
				t.Errorf("plan = %s, want 422 saying %q", r, c.says)
			}
		})
	}

	// Cleared: the default again, and the pins released.
	nv = wire.NetworkView{}
	mustDo(t, n, http.StatusOK, "PUT", "/api/v1/machines/"+mid+"/network", wire.NetworkRequest{Layout: ptr(""), Static: map[string]string{}}, admin).Decode(t, &nv)
	if nv.Layout != "" || len(nv.Static) != 0 || nv.PlanError != "" {
		t.Errorf("cleared: %+v", nv)
	}
	mustDo(t, n, http.StatusOK, "GET", "/api/v1/machines/"+mid+"/network-plan", nil, admin).Decode(t, &plan)
	if plan.Source != "default" {
		t.Errorf("after clearing: %+v", plan)
	}
	if r := n.Do(t, "GET", "/api/v1/machines/m-00000000beef/network-plan", nil, nodetest.Bearer(admin)...); r.Status != http.StatusNotFound {
		t.Errorf("plan of an unknown machine: %s", r)
	}
	// A machine without an inventory has no plan, and says why.
	var fresh wire.MachineView
	mustDo(t, n, http.StatusCreated, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "fresh"}, admin).Decode(t, &fresh)
	if r := n.Do(t, "GET", "/api/v1/machines/fresh/network-plan", nil, nodetest.Bearer(admin)...); r.Status != http.StatusUnprocessableEntity || !strings.Contains(r.ErrorMessage(), "commission it first") {
		t.Errorf("plan without inventory: %s", r)
	}
}
