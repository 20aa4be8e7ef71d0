package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// Headers of the API's index protocol (queries.go).
const (
	headerIndex    = "X-Rollcall-Index"
	headerMinIndex = "X-Rollcall-Min-Index"
)

// nodeState is what a rejected request must leave as it was: the Raft
// applied index, the machine table's change index and its size.
type nodeState struct {
	applied       uint64
	machinesIndex uint64
	machines      int
}

func stateOf(n *nodetest.Node) nodeState {
	s := nodeState{applied: n.Cluster().FSM().AppliedIndex()}
	n.Store().View(func(tx *store.Tx) error {
		s.machines, s.machinesIndex = tx.CountMachines(), tx.TableIndex(store.TableMachines)
		return nil
	})
	return s
}

// ---- inventory reports as an agent sends them

const testBMCPassword = "s3cret-pass-1234"

// testReport is a realistic report of a two-socket server: DMI, 2 CPUs,
// 16 DIMM slots (12 populated), 4 disks, one NIC per MAC given (two when
// none are), and a BMC whose password the agent just set.
func testReport(uuid, serial string, macs ...string) inventory.Report {
	if len(macs) == 0 {
		macs = []string{"0c:c4:7a:00:00:01", "0c:c4:7a:00:00:02"}
	}
	r := inventory.Report{
		Version:   inventory.SchemaVersion,
		Collected: time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC),
		Agent:     "rollcall-agent/0.1",
		BootMAC:   macs[0],
		System: inventory.System{
			Manufacturer: "Supermicro", Product: "SYS-2029U-TR4", Version: "0123456789",
			Serial: serial, UUID: uuid, SKU: "To be filled by O.E.M.", Family: "SMC X11",
		},
		Baseboard: inventory.Baseboard{Manufacturer: "Supermicro", Product: "X11DPU", Version: "1.10", Serial: "ZM19AS012345"},
		Chassis:   inventory.Chassis{Manufacturer: "Supermicro", Type: "Rack Mount Chassis", Serial: "C2160LI45A01234"},
		BIOS:      inventory.BIOS{Vendor: "American Megatrends Inc.", Version: "3.4", Date: "11/09/2020"},
		Memory:    inventory.Memory{TotalBytes: 384 << 30, NUMANodes: []int64{192 << 30, 192 << 30}},
		TPM:       &inventory.TPM{Version: "2.0", Manufacturer: "INTC"},
		BMC: &inventory.BMC{
			Driver: "ipmi", Address: "10.0.1.17", MAC: "0c:c4:7a:ff:00:01", Channel: 1, UserID: 3,
			User: "rollcall", Password: testBMCPassword, Source: "in-band",
		},
	}
	for s := range 2 {
		r.CPUs = append(r.CPUs, inventory.CPU{
			Socket: s, Vendor: "GenuineIntel", Model: "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz",
			Cores: 20, Threads: 40, MHz: 2500, NUMANode: s, Flags: []string{"avx512f", "vmx"},
		})
	}
	for i := range 16 {
		d := inventory.DIMM{Locator: fmt.Sprintf("P%d-DIMM%c%d", i/8+1, 'A'+rune(i%8/2), i%2+1), BankLocator: fmt.Sprintf("P%d_Node%d_Channel%d", i/8, i/8, i%8/2)}
		if i%4 != 3 {
			d.SizeMB, d.SpeedMTs, d.Type, d.FormFactor = 32768, 2933, "DDR4", "DIMM"
			d.Manufacturer, d.PartNumber, d.Serial = "Samsung", "M393A4K40DB2-CVF", fmt.Sprintf("%08X", 0x3A000000+i)
		}
		r.DIMMs = append(r.DIMMs, d)
	}
	for i, name := range []string{"sda", "sdb", "sdc", "sdd"} {
		r.Disks = append(r.Disks, inventory.Disk{
			Name: name, SizeBytes: 1920383410176, Model: "SAMSUNG MZ7LH1T9", Serial: fmt.Sprintf("S455NY0M%06d", i),
			WWN: fmt.Sprintf("0x5002538e0000%04x", i), Transport: "sata",
		})
	}
	for i, mac := range macs {
		r.NICs = append(r.NICs, inventory.NIC{
			Name: fmt.Sprintf("eno%d", i+1), MAC: mac, Driver: "ixgbe", Firmware: "0x800007f6", SpeedMbps: 10000,
			Link: i == 0, MTU: 1500, PCIAddress: fmt.Sprintf("0000:18:00.%d", i),
		})
	}
	r.NICs[0].IPs = []string{"10.0.0.51", "fe80::ec4:7aff:fe00:1"}
	return r
}

// ---- bad input

func TestBadInput(t *testing.T) {
	n := nodetest.Start(t)

	admin, agent := n.Admin, n.Agent
	readyReport := testReport("5c1e0e6a-9d43-4b6e-8f0a-0c6b1f4f2a11", "S-READY-1")
	commission(t, n, agent, readyReport)
	// The boot token of a machine that is booting, and of the ready one.
	boot := nodetest.AgentHeader(n.BootToken(t, "52:54:00:ee:00:01"))
	bootReady := nodetest.AgentHeader(n.BootToken(t, readyReport.BootMAC))
	created := n.Do(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "fresh", MAC: "52:54:00:aa:00:01"}, nodetest.Bearer(admin)...)
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %s", created)
	}
	var fresh wire.MachineView
	created.Decode(t, &fresh)

	big := func(prefix string, size int, suffix string) []byte {
		return append(append([]byte(prefix), bytes.Repeat([]byte("a"), size)...), suffix...)
	}
	tests := map[string]struct {
		method, path string
		body         any
		header       []string
		status       int
		code         string
		message      []string // substrings of the message
	}{
		"invalid JSON": {
			"POST", "/api/v1/machines", `{"name": nope}`, nodetest.Bearer(admin),
			400, "bad_request", []string{"not valid JSON", "byte"},
		},
		"truncated JSON": {
			"POST", "/api/v1/machines", `{"name": "x`, nodetest.Bearer(admin),
			400, "bad_request", []string{"request body"},
		},
		"wrong type": {
			"POST", "/api/v1/machines", `{"name": 5}`, nodetest.Bearer(admin),
			400, "bad_request", []string{`"name"`, "string", "number"},
		},
		"wrong type in a list": {
			"POST", "/api/v1/machines", `{"macs": "52:54:00:aa:00:09"}`, nodetest.Bearer(admin),
			400, "bad_request", []string{`"macs"`},
		},
		"unknown field": {
			"POST", "/api/v1/machines", `{"name": "x", "nmae": "y"}`, nodetest.Bearer(admin),
			400, "bad_request", []string{`unknown field "nmae"`},
		},
		"empty body": {
			"POST", "/api/v1/machines", "", nodetest.Bearer(admin),
			400, "bad_request", []string{"empty"},
		},
		"whitespace body": {
			"POST", "/api/v1/machines", " \n", nodetest.Bearer(admin),
			400, "bad_request", []string{"empty"},
		},
		"trailing object": {
			"POST", "/api/v1/machines", `{"name": "trail-a"} {"name": "trail-b"}`, nodetest.Bearer(admin),
			400, "bad_request", []string{"after the JSON object"},
		},
		"trailing garbage": {
			"POST", "/api/v1/machines", `{"name": "trail-c"} x`, nodetest.Bearer(admin),
			400, "bad_request", []string{"after the JSON object"},
		},
		"trailing brace": {
			"POST", "/api/v1/machines", `{"name": "trail-d"}}`, nodetest.Bearer(admin),
			400, "bad_request", []string{"after the JSON object"},
		},
		"trailing bracket": {
			"POST", "/api/v1/machines", `{"name": "trail-e"}]`, nodetest.Bearer(admin),
			400, "bad_request", []string{"after the JSON object"},
		},
		"not an object": {
			"POST", "/api/v1/machines", `["trail-f"]`, nodetest.Bearer(admin),
			400, "bad_request", nil,
		},
		"bad name": {
			"POST", "/api/v1/machines", `{"name": "Not_A_Label"}`, nodetest.Bearer(admin),
			400, "invalid", []string{"DNS label"},
		},
		"name like an id": {
			"POST", "/api/v1/machines", `{"name": "m-0123456789ab"}`, nodetest.Bearer(admin),
			400, "invalid", []string{"machine ID"},
		},
		"bad mac": {
			"POST", "/api/v1/machines", `{"mac": "52:54:00"}`, nodetest.Bearer(admin),
			400, "invalid", []string{"52:54:00", "MAC"},
		},
		"neither name nor mac": {
			"POST", "/api/v1/machines", `{}`, nodetest.Bearer(admin),
			400, "bad_request", []string{"name or a mac"},
		},
		"duplicate name": {
			"POST", "/api/v1/machines", `{"name": "fresh"}`, nodetest.Bearer(admin),
			409, "conflict", []string{"fresh"},
		},
		"duplicate mac": {
			"POST", "/api/v1/machines", `{"mac": "52-54-00-AA-00-01"}`, nodetest.Bearer(admin),
			409, "conflict", []string{"52:54:00:aa:00:01"},
		},
		"a list where an object belongs": {
			"POST", "/api/v1/commission", `{"version": 1, "system": {"serial": "X1"}, "cpus": {"socket": 0}}`, boot,
			400, "bad_request", []string{`"cpus"`},
		},
		"machines body over 1 MiB": {
			"POST", "/api/v1/machines", big(`{"name": "`, 1<<20, `"}`), nodetest.Bearer(admin),
			413, "too_large", []string{"1048576 bytes"},
		},
		"enlist body over 1 MiB": {
			"POST", "/api/v1/enlist", big(`{"serial": "`, 1<<20, `"}`), nodetest.AgentHeader(agent),
			413, "too_large", nil,
		},
		"commission body over 1 MiB": {
			"POST", "/api/v1/commission", big(`{"version": 1, "agent": "`, 1<<20, `"}`), boot,
			413, "too_large", []string{"1 MiB"},
		},
		"commission with unknown field": {
			"POST", "/api/v1/commission", `{"version": 1, "system": {"serial": "X1", "colour": "red"}}`, boot,
			400, "bad_request", []string{`unknown field "colour"`},
		},
		"commission with wrong version": {
			"POST", "/api/v1/commission", `{"version": 2, "system": {"serial": "X1"}}`, boot,
			400, "invalid_inventory", []string{"version: 2"},
		},
		"commission naming another boot MAC": {
			"POST", "/api/v1/commission", `{"version": 1, "boot_mac": "52:54:00:ee:00:02", "system": {"serial": "X1"}}`, boot,
			403, "forbidden", []string{"52:54:00:ee:00:02", "52:54:00:ee:00:01"},
		},
		"commission with the shared agent token": {
			"POST", "/api/v1/commission", `{"version": 1, "system": {"serial": "X1"}}`, nodetest.AgentHeader(agent),
			401, "unauthorized", []string{"only enlists"},
		},
		"commission with bad MAC": {
			"POST", "/api/v1/commission", `{"version": 1, "system": {"serial": "X1"}, "nics": [{"name": "eth0", "mac": "zz"}]}`, boot,
			400, "invalid_inventory", []string{"nics[0].mac"},
		},
		"enlist with bad UUID": {
			"POST", "/api/v1/enlist", `{"system_uuid": "not-a-uuid", "serial": "X1"}`, nodetest.AgentHeader(agent),
			400, "bad_request", []string{"not-a-uuid"},
		},
		"enlist without identity": {
			"POST", "/api/v1/enlist", `{"serial": "To Be Filled By O.E.M."}`, nodetest.AgentHeader(agent),
			400, "invalid", []string{"identity"},
		},
		"commission a ready machine": {
			"POST", "/api/v1/commission", readyReport, bootReady,
			403, "forbidden", []string{"is ready", "only while it is new or commissioning"},
		},
		"unknown machine": {
			"GET", "/api/v1/machines/m-000000000000", nil, nodetest.Bearer(admin),
			404, "not_found", []string{"m-000000000000"},
		},
		"unknown machine by name": {
			"GET", "/api/v1/machines/nobody", nil, nodetest.Bearer(admin),
			404, "not_found", []string{"nobody"},
		},
		"events of an unknown machine": {
			"GET", "/api/v1/machines/m-000000000000/events", nil, nodetest.Bearer(admin),
			404, "not_found", nil,
		},
		"recommission an unknown machine": {
			"POST", "/api/v1/machines/m-000000000000/recommission", nil, nodetest.Bearer(admin),
			404, "not_found", nil,
		},
		"delete an unknown machine": {
			"DELETE", "/api/v1/machines/m-000000000000", nil, nodetest.Bearer(admin),
			404, "not_found", nil,
		},
		"recommission a new machine": {
			"POST", "/api/v1/machines/" + fresh.ID + "/recommission", nil, nodetest.Bearer(admin),
			409, "transition", []string{"from new", "commissioning, ready"},
		},
		"recommission now": {
			"POST", "/api/v1/machines/" + fresh.ID + "/recommission?now=1", nil, nodetest.Bearer(admin),
			409, "no_power_control", nil,
		},
		"recommission bad now": {
			"POST", "/api/v1/machines/" + fresh.ID + "/recommission?now=soon", nil, nodetest.Bearer(admin),
			400, "bad_request", []string{"now"},
		},
		"bad state filter": {
			"GET", "/api/v1/machines?state=racked", nil, nodetest.Bearer(admin),
			400, "bad_request", []string{`"racked"`, "new, commissioning, ready"},
		},
		"bad min_index": {
			"GET", "/api/v1/machines?min_index=-1", nil, nodetest.Bearer(admin),
			400, "bad_request", []string{"min_index"},
		},
		"bad min_index header": {
			"GET", "/api/v1/machines", nil, append(nodetest.Bearer(admin), headerMinIndex, "soon"),
			400, "bad_request", []string{"min_index"},
		},
		"bad index": {
			"GET", "/api/v1/machines?index=latest", nil, nodetest.Bearer(admin),
			400, "bad_request", []string{"index"},
		},
		"bad wait": {
			"GET", "/api/v1/machines?index=1&wait=forever", nil, nodetest.Bearer(admin),
			400, "bad_request", []string{"wait"},
		},
		"negative wait": {
			"GET", "/api/v1/machines?index=1&wait=-1s", nil, nodetest.Bearer(admin),
			400, "bad_request", []string{"wait"},
		},
		"bad join code ttl": {
			"POST", "/api/v1/cluster/join-codes", `{"ttl": "10s"}`, nodetest.Bearer(admin),
			400, "bad_request", []string{"ttl"},
		},
		"bmc hint without macs": {
			"GET", "/api/v1/bmc-hint", nil, boot,
			400, "bad_request", []string{"macs"},
		},
		"bmc hint with a bad mac": {
			"GET", "/api/v1/bmc-hint?macs=nope", nil, boot,
			400, "invalid", []string{"nope"},
		},
		"no such endpoint": {
			"GET", "/api/v1/nothing", nil, nodetest.Bearer(admin),
			404, "not_found", []string{"/api/v1/nothing"},
		},
		"method not allowed": {
			"PUT", "/api/v1/machines", nil, nodetest.Bearer(admin),
			405, "method_not_allowed", []string{"PUT"},
		},
	}
	// Requests the state machine would refuse ("duplicate name", "enlist
	// without identity", …) are refused by the leader's precheck: they take
	// no Raft entry, so the applied index does not move either.
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := stateOf(n)
			r := n.Do(t, tc.method, tc.path, tc.body, tc.header...)
			if r.Status != tc.status || r.ErrorCode() != tc.code {
				t.Fatalf("%s %s = %s, want %d %s", tc.method, tc.path, r, tc.status, tc.code)
			}
			for _, s := range tc.message {
				if !strings.Contains(r.ErrorMessage(), s) {
					t.Errorf("message %q does not mention %q", r.ErrorMessage(), s)
				}
			}
			// What a client sees must not name Go types.
			for _, s := range []string{"appliance.", "inventory.", "store.", "[]"} {
				if strings.Contains(r.ErrorMessage(), s) {
					t.Errorf("message %q shows a Go type (%q)", r.ErrorMessage(), s)
				}
			}
			if after := stateOf(n); after != before {
				t.Errorf("state changed: %+v → %+v", before, after)
			}
		})
	}
}

// ---- happy paths

// commission uploads a report and returns the reply, failing the test on
// anything but 200.
func commission(t testing.TB, n *nodetest.Node, agent string, rep inventory.Report) wire.CommissionReply {
	t.Helper()
	r := n.Do(t, "POST", "/api/v1/commission", rep, nodetest.AgentHeader(n.BootToken(t, rep.BootMAC))...)
	if r.Status != http.StatusOK {
		t.Fatalf("commission: %s", r)
	}
	var out wire.CommissionReply
	r.Decode(t, &out)
	return out
}

func getMachine(t testing.TB, n *nodetest.Node, admin, ref string) (wire.MachineDetail, nodetest.Response) {
	t.Helper()
	r := n.Do(t, "GET", "/api/v1/machines/"+ref, nil, nodetest.Bearer(admin)...)
	if r.Status != http.StatusOK {
		t.Fatalf("get %s: %s", ref, r)
	}
	var d wire.MachineDetail
	r.Decode(t, &d)
	return d, r
}

func listMachines(t testing.TB, n *nodetest.Node, admin, query string) wire.MachineList {
	t.Helper()
	r := n.Do(t, "GET", "/api/v1/machines"+query, nil, nodetest.Bearer(admin)...)
	if r.Status != http.StatusOK {
		t.Fatalf("list %s: %s", query, r)
	}
	var l wire.MachineList
	r.Decode(t, &l)
	return l
}

func hasEvent(events []wire.Event, kind string) bool {
	for _, e := range events {
		if e.Kind == kind {
			return true
		}
	}
	return false
}

func TestMachineLifecycle(t *testing.T) {
	logs := &nodetest.LogBuffer{}
	n := nodetest.StartWith(t, nodetest.Options{Log: logs})

	admin, agent := n.Admin, n.Agent
	const uuid = "4c4c4544-0042-3510-8052-b4c04f4b3232"
	rep := testReport(uuid, "S7K2X9")

	// The agent's first contact.
	r := n.Do(t, "POST", "/api/v1/enlist", wire.EnlistRequest{SystemUUID: strings.ToUpper(uuid), Serial: "S7K2X9", BootMAC: "0C-C4-7A-00-00-01"}, nodetest.AgentHeader(agent)...)
	if r.Status != http.StatusOK {
		t.Fatalf("enlist: %s", r)
	}
	var en wire.EnlistReply
	r.Decode(t, &en)
	if en.State != store.StateCommissioning || !store.ValidMachineID(en.ID) || en.Index == 0 {
		t.Fatalf("enlist = %+v, want a new machine in commissioning", en)
	}
	if r.Header.Get(headerIndex) == "" {
		t.Errorf("enlist: no %s header", headerIndex)
	}

	// The inventory.
	cr := commission(t, n, agent, rep)
	if cr.ID != en.ID || cr.State != store.StateReady || cr.Index <= en.Index {
		t.Fatalf("commission = %+v, want %s ready after index %d", cr, en.ID, en.Index)
	}
	d, raw := getMachine(t, n, admin, en.ID)
	if d.State != store.StateReady || d.SystemUUID != uuid || d.Serial != "S7K2X9" || d.BootMAC != "0c:c4:7a:00:00:01" {
		t.Errorf("machine = %+v", d.MachineView)
	}
	wantSummary := inventory.Summary{
		Manufacturer: "Supermicro", Product: "SYS-2029U-TR4", CPUModel: "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz",
		Sockets: 2, Cores: 40, Threads: 80, MemoryBytes: 384 << 30, DIMMs: 12, Disks: 4, DiskBytes: 4 * 1920383410176,
		NICs: 2, TPM: "2.0",
	}
	if fmt.Sprint(d.Summary) != fmt.Sprint(wantSummary) {
		t.Errorf("summary = %+v, want %+v", d.Summary, wantSummary)
	}
	if want := []string{"0c:c4:7a:00:00:01", "0c:c4:7a:00:00:02"}; strings.Join(d.MACs, ",") != strings.Join(want, ",") {
		t.Errorf("macs = %v, want %v", d.MACs, want)
	}
	if want := []string{"10.0.0.51", "fe80::ec4:7aff:fe00:1"}; strings.Join(d.IPs, ",") != strings.Join(want, ",") {
		t.Errorf("ips = %v, want %v", d.IPs, want)
	}
	var inv inventory.Report
	if err := json.Unmarshal(d.Inventory, &inv); err != nil {
		t.Fatalf("inventory: %v", err)
	}
	if len(inv.DIMMs) != 16 || len(inv.CPUs) != 2 || len(inv.Disks) != 4 || len(inv.NICs) != 2 || inv.System.Serial != "S7K2X9" {
		t.Errorf("inventory is not the report sent: %d DIMMs, %d CPUs, %d disks, %d NICs", len(inv.DIMMs), len(inv.CPUs), len(inv.Disks), len(inv.NICs))
	}
	if inv.BMC == nil || inv.BMC.Password != "" || inv.BMC.User != "rollcall" {
		t.Errorf("inventory bmc = %+v, want the user and no password", inv.BMC)
	}
	if d.BMC == nil || !d.BMC.HasPassword || d.BMC.Address != "10.0.1.17" || d.BMC.Settings["channel"] != "1" {
		t.Errorf("bmc = %+v, want has_password and the address", d.BMC)
	}
	for _, secret := range []string{testBMCPassword, "password_sealed", "password_aad"} {
		if bytes.Contains(raw.Body, []byte(secret)) {
			t.Errorf("GET /api/v1/machines/{id} contains %q", secret)
		}
	}
	if !hasEvent(d.Events, "commissioned") || !hasEvent(d.Events, "enlisted") {
		t.Errorf("events = %+v, want enlisted and commissioned", d.Events)
	}
	list := n.Do(t, "GET", "/api/v1/machines", nil, nodetest.Bearer(admin)...)
	if bytes.Contains(list.Body, []byte(testBMCPassword)) || bytes.Contains(list.Body, []byte("password_sealed")) {
		t.Errorf("GET /api/v1/machines shows the BMC secret")
	}
	// The store keeps only the sealed form.
	n.Store().View(func(tx *store.Tx) error {
		b, err := tx.Inventory(en.ID)
		if err != nil || bytes.Contains(b, []byte(testBMCPassword)) {
			t.Errorf("stored inventory: err %v, contains the password: %t", err, bytes.Contains(b, []byte(testBMCPassword)))
		}
		m, _ := tx.Machine(en.ID)
		if m.BMC == nil || len(m.BMC.PasswordSealed) == 0 || bytes.Contains(m.BMC.PasswordSealed, []byte(testBMCPassword)) {
			t.Errorf("stored bmc = %+v, want a sealed password", m.BMC)
		}
		return nil
	})

	// A second upload without a password keeps the sealed one.
	again := testReport(uuid, "S7K2X9")
	again.BMC.Password = ""
	r = n.Do(t, "POST", "/api/v1/machines/"+en.ID+"/recommission", nil, nodetest.Bearer(admin)...)
	if r.Status != http.StatusOK {
		t.Fatalf("recommission: %s", r)
	}
	var rv wire.MachineView
	r.Decode(t, &rv)
	if rv.State != store.StateNew {
		t.Errorf("recommission: state %s, want new", rv.State)
	}
	d, _ = getMachine(t, n, admin, en.ID)
	if d.State != store.StateNew || !hasEvent(d.Events, "recommission") {
		t.Errorf("after recommission: state %s, events %+v", d.State, d.Events)
	}
	r = n.Do(t, "GET", "/api/v1/machines/"+en.ID+"/events", nil, nodetest.Bearer(admin)...)
	var ev wire.EventList
	r.Decode(t, &ev)
	if r.Status != 200 || !hasEvent(ev.Events, "recommission") {
		t.Errorf("events: %s", r)
	}
	commission(t, n, agent, again)
	d, _ = getMachine(t, n, admin, en.ID)
	if d.State != store.StateReady || d.BMC == nil || !d.BMC.HasPassword {
		t.Errorf("after a second commission without a password: state %s, bmc %+v", d.State, d.BMC)
	}

	// Delete.
	r = n.Do(t, "DELETE", "/api/v1/machines/"+en.ID, nil, nodetest.Bearer(admin)...)
	if r.Status != http.StatusOK {
		t.Fatalf("delete: %s", r)
	}
	if r := n.Do(t, "GET", "/api/v1/machines/"+en.ID, nil, nodetest.Bearer(admin)...); r.Status != http.StatusNotFound {
		t.Errorf("after delete: %s", r)
	}

	if strings.Contains(logs.String(), testBMCPassword) {
		t.Errorf("the node logged the BMC password")
	}
	if !strings.Contains(logs.String(), "machine commissioned") {
		t.Errorf("the log buffer does not hold the node's log (no \"machine commissioned\")")
	}
}

func TestListFilters(t *testing.T) {
	n := nodetest.Start(t)

	admin, agent := n.Admin, n.Agent
	a := commission(t, n, agent, testReport("8e2b1d44-5f3a-4c7e-9b61-2d0f5a7c3e90", "SER-ALPHA-01", "0c:c4:7a:10:00:01", "0c:c4:7a:10:00:02"))
	b := commission(t, n, agent, testReport("1f6a9c22-7b4d-4e8a-a3c5-6e1b0d9f4a27", "SER-BRAVO-02", "0c:c4:7a:20:00:01", "0c:c4:7a:20:00:02"))
	r := n.Do(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "rack7-node3", MAC: "52:54:00:30:00:01"}, nodetest.Bearer(admin)...)
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %s", r)
	}
	var c wire.MachineView
	r.Decode(t, &c)
	if r := n.Do(t, "POST", "/api/v1/machines/"+b.ID+"/recommission", nil, nodetest.Bearer(admin)...); r.Status != 200 {
		t.Fatalf("recommission: %s", r)
	}
	// b is new again, a is ready, c is new.

	tests := map[string]struct {
		query string
		want  []string
	}{
		"all":                 {"", []string{a.ID, b.ID, c.ID}},
		"state ready":         {"?state=ready", []string{a.ID}},
		"state new":           {"?state=new", []string{b.ID, c.ID}},
		"state commissioning": {"?state=commissioning", nil},
		"name":                {"?q=rack7", []string{c.ID}},
		"name, other case":    {"?q=RACK7-Node3", []string{c.ID}},
		"serial":              {"?q=ser-bravo", []string{b.ID}},
		"mac, colons":         {"?q=0c:c4:7a:10:00:02", []string{a.ID}},
		"mac, dashes":         {"?q=0C-C4-7A-20-00-01", []string{b.ID}},
		"mac, bare":           {"?q=0cc47a100001", []string{a.ID}},
		"mac, cisco":          {"?q=5254.0030.0001", []string{c.ID}},
		"ip":                  {"?q=10.0.0.51", []string{a.ID, b.ID}},
		"id":                  {"?q=" + a.ID, []string{a.ID}},
		"state and q":         {"?state=new&q=ser-", []string{b.ID}},
		"nothing":             {"?q=no-such-thing", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := listMachines(t, n, admin, tc.query)
			var got []string
			for _, m := range l.Machines {
				got = append(got, m.ID)
			}
			want := append([]string(nil), tc.want...)
			sortStrings(want)
			sortStrings(got)
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("GET /api/v1/machines%s = %v, want %v", tc.query, got, want)
			}
			if l.Machines == nil {
				t.Errorf("machines is null, want []")
			}
		})
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestBlockingQuery(t *testing.T) {
	n := nodetest.Start(t)

	admin := n.Admin
	cur := listMachines(t, n, admin, "").Index

	t.Run("returns after a write", func(t *testing.T) {
		type result struct {
			l       wire.MachineList
			r       nodetest.Response
			err     error
			elapsed time.Duration
		}
		done := make(chan result, 1)
		go func() {
			start := time.Now()
			r, err := n.Send(t.Context(), "GET", fmt.Sprintf("/api/v1/machines?index=%d&wait=5s", cur), nil, nodetest.Bearer(admin)...)
			var l wire.MachineList
			json.Unmarshal(r.Body, &l)
			done <- result{l, r, err, time.Since(start)}
		}()
		time.Sleep(200 * time.Millisecond)
		select {
		case res := <-done:
			t.Fatalf("returned before any write: %s", res.r)
		default:
		}
		if r := n.Do(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "wakes-the-watcher"}, nodetest.Bearer(admin)...); r.Status != http.StatusCreated {
			t.Fatalf("create: %s", r)
		}
		res := <-done
		if res.err != nil {
			t.Fatal(res.err)
		}
		if res.r.Status != http.StatusOK || res.l.Index <= cur || len(res.l.Machines) != 1 {
			t.Fatalf("blocking query = %s, want index > %d and the new machine", res.r, cur)
		}
		if res.elapsed > 4*time.Second {
			t.Errorf("returned after %v: it waited for the timeout, not the write", res.elapsed)
		}
		if res.r.Header.Get(headerIndex) != fmt.Sprint(res.l.Index) {
			t.Errorf("%s = %q, want %d", headerIndex, res.r.Header.Get(headerIndex), res.l.Index)
		}
		cur = res.l.Index
	})
	t.Run("times out unchanged", func(t *testing.T) {
		start := time.Now()
		l := listMachines(t, n, admin, fmt.Sprintf("?index=%d&wait=200ms", cur))
		if el := time.Since(start); el < 190*time.Millisecond {
			t.Errorf("returned after %v, before the wait", el)
		}
		if l.Index != cur {
			t.Errorf("index = %d, want %d (nothing changed)", l.Index, cur)
		}
	})
	t.Run("min_index already reached", func(t *testing.T) {
		l := listMachines(t, n, admin, fmt.Sprintf("?min_index=%d", n.Cluster().FSM().AppliedIndex()))
		if len(l.Machines) != 1 {
			t.Errorf("machines = %+v", l.Machines)
		}
	})
}

// ---- identity: which record an upload belongs to

func TestCommissionIdentity(t *testing.T) {
	const dummyUUID = "03000200-0400-0500-0006-000700080009"
	// A step is one of: add a machine by hand, recommission the machine of
	// the step before (a ready machine must be sent back before its agent
	// uploads again), or upload a report.
	type step struct {
		create       *wire.CreateMachineRequest
		recommission bool
		report       inventory.Report
	}
	tests := map[string]struct {
		steps []step
		// check sees the machine each step resolved to.
		check func(t *testing.T, n *nodetest.Node, admin string, ids []string)
	}{
		"placeholder UUID, real serials: two machines": {
			steps: []step{
				{report: testReport(dummyUUID, "NM1A00001", "0c:c4:7a:01:00:01", "0c:c4:7a:01:00:02")},
				{report: testReport(dummyUUID, "NM1A00002", "0c:c4:7a:02:00:01", "0c:c4:7a:02:00:02")},
			},
			check: func(t *testing.T, n *nodetest.Node, admin string, ids []string) {
				distinct(t, ids[0], ids[1])
				for i, serial := range []string{"NM1A00001", "NM1A00002"} {
					d, _ := getMachine(t, n, admin, ids[i])
					if d.IdentityKey != "serial:"+serial || d.SystemUUID != "" {
						t.Errorf("%s: identity %q, uuid %q; want serial:%s and no UUID", ids[i], d.IdentityKey, d.SystemUUID, serial)
					}
				}
			},
		},
		"zero UUID, OEM serial: known by boot MAC": {
			steps: []step{
				{report: testReport("00000000-0000-0000-0000-000000000000", "To Be Filled By O.E.M.", "0c:c4:7a:03:00:01", "0c:c4:7a:03:00:02")},
				{recommission: true},
				{report: testReport("00000000-0000-0000-0000-000000000000", "To Be Filled By O.E.M.", "0c:c4:7a:03:00:01", "0c:c4:7a:03:00:02")},
				{report: testReport("00000000-0000-0000-0000-000000000000", "To Be Filled By O.E.M.", "0c:c4:7a:04:00:01", "0c:c4:7a:04:00:02")},
			},
			check: func(t *testing.T, n *nodetest.Node, admin string, ids []string) {
				if ids[0] != ids[2] {
					t.Errorf("the same board twice became %s and %s", ids[0], ids[2])
				}
				distinct(t, ids[0], ids[3])
				d, _ := getMachine(t, n, admin, ids[0])
				if d.IdentityKey != "mac:0c:c4:7a:03:00:01" || d.Serial != "" || d.SystemUUID != "" {
					t.Errorf("identity %q, serial %q, uuid %q; want mac:0c:c4:7a:03:00:01 only", d.IdentityKey, d.Serial, d.SystemUUID)
				}
			},
		},
		"one serial on two boards with real UUIDs: two machines": {
			steps: []step{
				{report: testReport("a3b1c2d4-1111-4e5f-8a9b-0c1d2e3f4a01", "SAMESERIAL9", "0c:c4:7a:05:00:01", "0c:c4:7a:05:00:02")},
				{report: testReport("a3b1c2d4-2222-4e5f-8a9b-0c1d2e3f4a02", "SAMESERIAL9", "0c:c4:7a:06:00:01", "0c:c4:7a:06:00:02")},
			},
			check: func(t *testing.T, n *nodetest.Node, admin string, ids []string) {
				distinct(t, ids[0], ids[1])
				if l := listMachines(t, n, admin, "?q=sameserial9"); len(l.Machines) != 2 {
					t.Errorf("q=sameserial9 finds %d machines, want 2", len(l.Machines))
				}
			},
		},
		"NIC swap: same UUID, new MACs": {
			steps: []step{
				{report: testReport("b7c8d9e0-3333-4f5a-9b8c-1d2e3f4a5b01", "SWAP0001", "0c:c4:7a:07:00:01", "0c:c4:7a:07:00:02")},
				{recommission: true},
				{report: testReport("b7c8d9e0-3333-4f5a-9b8c-1d2e3f4a5b01", "SWAP0001", "3c:fd:fe:07:00:01", "3c:fd:fe:07:00:02")},
			},
			check: func(t *testing.T, n *nodetest.Node, admin string, ids []string) {
				if ids[0] != ids[2] {
					t.Fatalf("new NICs made a new machine: %s and %s", ids[0], ids[2])
				}
				d, _ := getMachine(t, n, admin, ids[0])
				if got := strings.Join(d.MACs, ","); got != "3c:fd:fe:07:00:01,3c:fd:fe:07:00:02" || d.BootMAC != "3c:fd:fe:07:00:01" {
					t.Errorf("macs %s, boot %s; want the new NICs only", got, d.BootMAC)
				}
				if l := listMachines(t, n, admin, "?q=0c:c4:7a:07:00:01"); len(l.Machines) != 0 {
					t.Errorf("the old MAC still finds %d machines", len(l.Machines))
				}
			},
		},
		// An agent may take a MAC only from a machine that is new or
		// commissioning (TestAgentCannotTakeAnotherMachinesMAC): the
		// operator sends A back first.
		"a NIC moves from A to B": {
			steps: []step{
				{report: testReport("c1d2e3f4-4444-4a5b-8c9d-2e3f4a5b6c01", "MOVEA001", "0c:c4:7a:08:00:01", "0c:c4:7a:08:00:02")},
				{recommission: true},
				{report: testReport("c1d2e3f4-5555-4a5b-8c9d-2e3f4a5b6c02", "MOVEB001", "0c:c4:7a:09:00:01", "0c:c4:7a:08:00:02")},
			},
			check: func(t *testing.T, n *nodetest.Node, admin string, ids []string) {
				distinct(t, ids[0], ids[2])
				a, _ := getMachine(t, n, admin, ids[0])
				b, _ := getMachine(t, n, admin, ids[2])
				if strings.Join(a.MACs, ",") != "0c:c4:7a:08:00:01" {
					t.Errorf("A's macs = %v, want it to lose 0c:c4:7a:08:00:02", a.MACs)
				}
				if strings.Join(b.MACs, ",") != "0c:c4:7a:09:00:01,0c:c4:7a:08:00:02" {
					t.Errorf("B's macs = %v", b.MACs)
				}
				if !hasEvent(a.Events, "mac-moved") {
					t.Errorf("A's events = %+v, want mac-moved", a.Events)
				}
			},
		},
		"added by hand, then commissioned": {
			steps: []step{
				{create: &wire.CreateMachineRequest{Name: "db-07", MAC: "0C:C4:7A:0A:00:01"}},
				{report: testReport("d4e5f6a7-6666-4b5c-9d8e-3f4a5b6c7d01", "HAND0001", "0c:c4:7a:0a:00:01", "0c:c4:7a:0a:00:02")},
			},
			check: func(t *testing.T, n *nodetest.Node, admin string, ids []string) {
				if ids[0] != ids[1] {
					t.Fatalf("the commissioned board became %s, not the hand-added %s", ids[1], ids[0])
				}
				d, _ := getMachine(t, n, admin, "db-07")
				if d.ID != ids[0] || d.State != store.StateReady || d.Serial != "HAND0001" || !strings.HasPrefix(d.IdentityKey, "uuid:") {
					t.Errorf("db-07 = %+v", d.MachineView)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := nodetest.Start(t)

			admin, agent := n.Admin, n.Agent
			var ids []string
			for _, s := range tc.steps {
				if s.recommission {
					id := ids[len(ids)-1]
					if r := n.Do(t, "POST", "/api/v1/machines/"+id+"/recommission", nil, nodetest.Bearer(admin)...); r.Status != http.StatusOK {
						t.Fatalf("recommission: %s", r)
					}
					ids = append(ids, id)
					continue
				}
				if s.create != nil {
					r := n.Do(t, "POST", "/api/v1/machines", s.create, nodetest.Bearer(admin)...)
					if r.Status != http.StatusCreated {
						t.Fatalf("create: %s", r)
					}
					var m wire.MachineView
					r.Decode(t, &m)
					ids = append(ids, m.ID)
					continue
				}
				ids = append(ids, commission(t, n, agent, s.report).ID)
			}
			tc.check(t, n, admin, ids)
			if l := listMachines(t, n, admin, ""); len(l.Machines) != distinctCount(ids) {
				t.Errorf("%d machines in the store, want %d", len(l.Machines), distinctCount(ids))
			}
		})
	}
}

func distinctCount(ids []string) int {
	set := map[string]bool{}
	for _, id := range ids {
		set[id] = true
	}
	return len(set)
}

func distinct(t *testing.T, a, b string) {
	t.Helper()
	if a == b {
		t.Errorf("two boards became one machine %s", a)
	}
}

// A serial with a control character is refused before it can reach an index
// (index keys are value + NUL + ID); the store also ignores such keys.
func TestCommissionRefusesControlCharacters(t *testing.T) {
	n := nodetest.Start(t)
	before := stateOf(n)
	r := n.Do(t, "POST", "/api/v1/commission", testReport("03000200-0400-0500-0006-000700080009", "NULSER01\x00m-0123456789ab", "0c:c4:7a:0b:00:01", "0c:c4:7a:0b:00:02"), nodetest.AgentHeader(n.BootToken(t, "0c:c4:7a:0b:00:01"))...)
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "system.serial") {
		t.Fatalf("NUL in a serial: %s", r)
	}
	if after := stateOf(n); after != before {
		t.Fatalf("state changed: %+v → %+v", before, after)
	}
}

func TestRecentEvents(t *testing.T) {
	n := nodetest.Start(t)
	admin := n.Admin
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		n.Cluster().Apply(ctx, &raftfsm.MachineCreate{ID: fmt.Sprintf("m-%012x", i), Now: time.Now().UTC()})
	}
	n.Cluster().Apply(ctx, &raftfsm.MachineDelete{ID: "m-000000000002"})
	var v struct {
		Events []wire.Event `json:"events"`
	}
	if code := n.Call(t, admin, "GET", "/api/v1/events?limit=2", "", &v); code != 200 || len(v.Events) != 2 || v.Events[0].Machine != "m-000000000003" || v.Events[1].Machine != "m-000000000001" {
		t.Fatalf("recent events: %d %+v", code, v.Events)
	}
	if code := n.Call(t, admin, "GET", "/api/v1/events?limit=0", "", nil); code != 400 {
		t.Fatalf("limit 0: %d", code)
	}
}
