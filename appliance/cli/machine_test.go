package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store/inventory"
)

// report is what a commissioning agent would upload for a small two-socket
// server booted from mac.
func report(mac string) inventory.Report {
	r := inventory.Report{
		Version: inventory.SchemaVersion, Collected: time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC),
		Agent: "rollcall-agent/0.1", BootMAC: mac,
		System: inventory.System{Manufacturer: "Supermicro", Product: "SYS-2029U-TR4", Serial: "S7K2X9", UUID: "4c4c4544-0042-3510-8052-b4c04f4b3232"},
		Memory: inventory.Memory{TotalBytes: 64 << 30},
		NICs:   []inventory.NIC{{Name: "eno1", MAC: mac, Link: true, IPs: []string{"10.0.0.51"}}},
		BMC:    &inventory.BMC{Driver: "ipmi", Address: "10.0.1.17", User: "rollcall", Password: "bmc-Secret-1", Source: "in-band"},
	}
	for s := range 2 {
		r.CPUs = append(r.CPUs, inventory.CPU{Socket: s, Vendor: "GenuineIntel", Model: "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", Cores: 20, Threads: 40})
	}
	for i := range 4 {
		r.DIMMs = append(r.DIMMs, inventory.DIMM{Locator: "DIMM" + string(rune('A'+i)), SizeMB: 16384})
	}
	for _, d := range []string{"sda", "sdb"} {
		r.Disks = append(r.Disks, inventory.Disk{Name: d, SizeBytes: 1920383410176})
	}
	return r
}

// commissionAs uploads rep as the agent a boot script would start for its
// boot MAC, with the token `rollcall boot-token` mints.
func commissionAs(t *testing.T, n *testNode, rep inventory.Report) {
	t.Helper()
	var tok wire.BootTokenReply
	if err := json.Unmarshal([]byte(mustRun(t, "boot-token", rep.BootMAC, "-json")), &tok); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(rep)
	if code, b := n.call(t, http.MethodPost, "/api/v1/commission", bytes.NewReader(body), "X-Rollcall-Token", tok.Token); code != http.StatusOK {
		t.Fatalf("commission: %d %s", code, b)
	}
}

// The machine verbs against a node: add, list, show, events, recommission,
// delete; every table as a golden.
func TestMachineCLI(t *testing.T) {
	n := startNode(t, nodeOptions{})
	n.use(t)
	id := strings.TrimSpace(mustRun(t, "add", "-name", "c1", "-mac", "02:00:00:00:0c:01"))
	if !machineIDs.MatchString(id) {
		t.Fatalf("add printed %q, want the new machine's ID", id)
	}
	id2 := strings.TrimSpace(mustRun(t, "add", "-mac", "0c:c4:7a:00:00:01", "-name", "c2"))
	commissionAs(t, n, report("0c:c4:7a:00:00:01"))

	var out strings.Builder
	section := func(title string, args ...string) {
		out.WriteString("$ rollcall " + strings.Join(args, " ") + "  # " + title + "\n")
		got := normalize(mustRun(t, args...), id, id2)
		if args[0] == "list" {
			got = sortRows(got) // in the order of the machines' random IDs
		}
		out.WriteString(got)
	}
	section("both machines", "list")
	section("the commissioned one, its summary and events", "show", "c2")
	section("its history", "events", "c2")
	section("filtered by state", "list", "-state", "ready")
	section("back to commissioning on its next boot", "recommission", "c2")
	section("a new name", "machine", "rename", "c2", "r12-n07")
	section("found by it", "list", "-q", "r12-n07")
	section("and back", "machine", "rename", "r12-n07", "c2")
	section("gone", "delete", "c1")
	section("one left", "list")
	golden(t, "machine", out.String())

	var d wire.MachineDetail
	if err := json.Unmarshal([]byte(mustRun(t, "show", "-json", "c2")), &d); err != nil || d.Name != "c2" || d.Summary.Sockets != 2 {
		t.Errorf("show -json: %+v, %v", d, err)
	}
	var l wire.MachineList
	if err := json.Unmarshal([]byte(mustRun(t, "list", "-json")), &l); err != nil || len(l.Machines) != 1 || l.Index == 0 {
		t.Errorf("list -json: %+v, %v", l, err)
	}
	var renamed wire.MachineView
	if err := json.Unmarshal([]byte(mustRun(t, "machine", "rename", "c2", "c3", "-json")), &renamed); err != nil || renamed.ID != id2 || renamed.Name != "c3" {
		t.Errorf("machine rename -json: %+v, %v", renamed, err)
	}
	mustRun(t, "add", "-name", "c4")
	for args, want := range map[string]string{
		"machine rename c3 c4":       `name "c4" is taken by machine m-`,
		"machine rename c3 Bad_Name": `name "Bad_Name" must be a DNS label`,
		"machine rename nosuch c9":   `machine "nosuch"`,
		"machine rename c3":          "usage: rollcall machine rename ID|NAME NEWNAME [-json]",
		"machine":                    "usage: rollcall machine rename",
		"machine move c3 c9":         "usage: rollcall machine rename",
	} {
		if code, _, errs := run(strings.Fields(args)...); code != 1 || !strings.Contains(errs, want) {
			t.Errorf("rollcall %s: exit %d, %q, want %q", args, code, errs, want)
		}
	}
	for _, args := range [][]string{{"show"}, {"show", "a", "b"}, {"events"}, {"delete"}, {"recommission"}, {"show", "nosuch"}, {"delete", "c1"}} {
		if code, _, errs := run(args...); code != 1 || errs == "" {
			t.Errorf("rollcall %s: exit %d, %q", strings.Join(args, " "), code, errs)
		}
	}
	if code, _, errs := run("show"); !strings.Contains(errs, "usage: rollcall show ID|NAME [-json]") {
		t.Errorf("show without an argument: exit %d, %q", code, errs)
	}
}

// On a node the CLI needs no environment: the data directory's node.json
// and admin.token say where the API is and how to call it.
func TestCLIFindsTheNodeFromItsDataDirectory(t *testing.T) {
	n := startNode(t, nodeOptions{})
	t.Setenv("ROLLCALL_URL", "")
	t.Setenv("ROLLCALL_TOKEN", "")
	t.Setenv("ROLLCALL_DATA", n.Dir)
	if out := mustRun(t, "add", "-name", "d1"); !machineIDs.MatchString(out) {
		t.Errorf("add: %q", out)
	}
	t.Setenv("ROLLCALL_DATA", "")
	if out := mustRun(t, "list", "-data", n.Dir); !strings.Contains(out, "d1") {
		t.Errorf("list -data: %q", out)
	}
	if o := consoleOptions(n.Dir); o.URL != "http://"+n.HTTPAddr() || o.Token != n.Admin {
		t.Errorf("consoleOptions = %+v, want the node's URL and token", o)
	}
}

// The CLI over https, trusting the cluster CA in ROLLCALL_CA.
func TestCLIOverHTTPS(t *testing.T) {
	n := startNode(t, nodeOptions{https: true})
	_, port, _ := strings.Cut(n.HTTPSAddr(), ":")
	t.Setenv("ROLLCALL_URL", "https://localhost:"+port)
	t.Setenv("ROLLCALL_TOKEN", n.Admin)
	t.Setenv("ROLLCALL_CA", node.CAFile(n.Dir))
	var code int
	var errs string
	waitFor(t, "rollcall list over https", func() bool { // the node makes its certificate after it starts
		code, _, errs = run("list")
		return code == 0
	})
	t.Setenv("ROLLCALL_CA", "/nonexistent/ca.pem")
	if code, _, errs = run("list"); code != 1 || !strings.Contains(errs, "ROLLCALL_CA") {
		t.Fatalf("missing CA: %d %s", code, errs)
	}
}
