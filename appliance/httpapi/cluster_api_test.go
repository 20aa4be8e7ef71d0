package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// The machines contract on a three-node cluster: an agent enlists and
// commissions through one follower, an operator reads, re-commissions and
// deletes through the others, and every node agrees.
func TestMachinesOnFollowers(t *testing.T) {
	nodes := nodetest.StartCluster(t, 3, nodetest.Options{})
	token := nodes[0].Admin
	var followers []*nodetest.Node
	for _, n := range nodes {
		if !n.Cluster().IsLeader() {
			followers = append(followers, n)
		}
	}
	if len(followers) != 2 {
		t.Fatalf("%d followers", len(followers))
	}
	f1, f2 := followers[0], followers[1]
	// The machine's boot token, as another node's boot script minted it:
	// every node checks every node's tokens.
	boot := f2.BootToken(t, "02:00:00:00:00:01")

	agentCall := func(n *nodetest.Node, path, body string, out any) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr()+path, strings.NewReader(body))
		req.Header.Set("X-Rollcall-Token", boot)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	var en wire.EnlistReply
	if code := agentCall(f1, "/api/v1/enlist", `{"system_uuid":"6a1e4a2c-3b5d-4e2f-9c1a-0b7d8e9f1a2b","serial":"SRV-001","boot_mac":"02:00:00:00:00:01"}`, &en); code != 200 || en.State != store.StateCommissioning {
		t.Fatalf("enlist on follower: %d %+v", code, en)
	}
	report := `{"version":1,"boot_mac":"02:00:00:00:00:01","system":{"manufacturer":"Dell Inc.","product":"PowerEdge R650","serial":"SRV-001","uuid":"6A1E4A2C-3B5D-4E2F-9C1A-0B7D8E9F1A2B"},
	  "cpus":[{"socket":0,"model":"Xeon","cores":16,"threads":32}],"nics":[{"name":"eno1","mac":"02:00:00:00:00:01","link":true}],
	  "bmc":{"driver":"ipmi","address":"192.0.2.10","user":"commissioner","password":"Zq8-not-logged-9"}}`
	var cr wire.CommissionReply
	if code := agentCall(f1, "/api/v1/commission", report, &cr); code != 200 || cr.ID != en.ID || cr.State != store.StateReady {
		t.Fatalf("commission on follower: %d %+v (enlisted %s)", code, cr, en.ID)
	}

	// Read on the other follower at the write's index.
	var raw []byte
	if code := f2.Call(t, token, http.MethodGet, fmt.Sprintf("/api/v1/machines/%s?min_index=%d", en.ID, cr.Index), "", &raw); code != 200 {
		t.Fatalf("show on the other follower: %d %s", code, raw)
	}
	if strings.Contains(string(raw), "Zq8-not-logged-9") || strings.Contains(string(raw), "password_sealed") {
		t.Fatalf("the BMC secret reached an answer: %s", raw)
	}
	var d wire.MachineDetail
	json.Unmarshal(raw, &d)
	if d.State != store.StateReady || d.BMC == nil || !d.BMC.HasPassword || d.Summary.Cores != 16 || len(d.Events) < 2 {
		t.Fatalf("detail on follower: %+v", d)
	}

	// Re-commission through f2, by serial-less name lookup (ID here), then
	// delete through the leader; every node agrees at each step.
	var mv wire.MachineView
	if code := f2.Call(t, token, http.MethodPost, "/api/v1/machines/"+en.ID+"/recommission", "", &mv); code != 200 || mv.State != store.StateNew {
		t.Fatalf("recommission on follower: %d %+v", code, mv)
	}
	// An illegal transition through a follower: new → new.
	var bad []byte
	if code := f1.Call(t, token, http.MethodPost, "/api/v1/machines/"+en.ID+"/recommission", "", &bad); code != http.StatusConflict || !strings.Contains(string(bad), "allowed from new") {
		t.Fatalf("illegal transition on follower: %d %s", code, bad)
	}
	idx := nodes[0].Cluster().FSM().AppliedIndex()
	for _, n := range nodes {
		var list wire.MachineList
		n.Call(t, token, http.MethodGet, fmt.Sprintf("/api/v1/machines?min_index=%d&state=new", idx), "", &list)
		if len(list.Machines) != 1 || list.Machines[0].ID != en.ID {
			t.Fatalf("%s lists %+v", n.Name(), list.Machines)
		}
	}
	var leader *nodetest.Node
	for _, n := range nodes {
		if n.Cluster().IsLeader() {
			leader = n
		}
	}
	if code := f1.Call(t, token, http.MethodDelete, "/api/v1/machines/"+en.ID, "", nil); code != 200 {
		t.Fatalf("delete on follower: %d", code)
	}
	idx = leader.Cluster().FSM().AppliedIndex()
	for _, n := range nodes {
		if code := n.Call(t, token, http.MethodGet, fmt.Sprintf("/api/v1/machines/%s?min_index=%d", en.ID, idx), "", nil); code != 404 {
			t.Fatalf("%s still shows the deleted machine: %d", n.Name(), code)
		}
	}
}

// Finding 5 through the API: a node whose store differs from the others'
// is not healthy, says why, serves no boot script, and `cluster repair`
// rebuilds it.
func TestDamagedNodeThroughTheAPI(t *testing.T) {
	nodes := nodetest.StartCluster(t, 3, nodetest.Options{})
	token := nodes[0].Admin
	var damaged *nodetest.Node
	for _, n := range nodes {
		if !n.Cluster().IsLeader() {
			damaged = n
			break
		}
	}
	if err := damaged.Store().Update(func(tx *store.Tx) error {
		return tx.PutMachine(store.Machine{ID: "m-0000000bad01", State: store.StateReady})
	}); err != nil {
		t.Fatal(err)
	}
	if code := nodes[0].Call(t, token, http.MethodPost, "/api/v1/cluster/check", "", nil); code != http.StatusOK {
		t.Fatalf("check: %d", code)
	}
	nodetest.WaitFor(t, "the damaged node's health to say so", func() bool {
		var b []byte
		code := damaged.Call(t, "", http.MethodGet, "/api/v1/health", "", &b)
		var h struct{ Reason string }
		json.Unmarshal(b, &h)
		return code == http.StatusServiceUnavailable && strings.Contains(h.Reason, "differs")
	})
	if code := damaged.Call(t, "", http.MethodGet, "/boot/ipxe?mac=52:54:00:00:bd:01", "", nil); code != http.StatusServiceUnavailable {
		t.Errorf("a damaged node answered a boot script: %d", code)
	}
	var cv wire.ClusterView
	nodes[0].Call(t, token, http.MethodGet, "/api/v1/cluster", "", &cv)
	found := false
	for _, m := range cv.Members {
		found = found || m.ID == damaged.Name() && m.Status != nil && m.Status.Diverged != ""
	}
	if !found {
		t.Errorf("cluster status does not name the damaged node: %+v", cv.Members)
	}
	if code := nodes[0].Call(t, token, http.MethodPost, "/api/v1/cluster/members/"+damaged.Name()+"/repair", "", nil); code != http.StatusOK {
		t.Fatalf("repair: %d", code)
	}
	if code := damaged.Call(t, "", http.MethodGet, "/api/v1/health", "", nil); code != http.StatusOK {
		t.Fatalf("health after repair: %d", code)
	}
	damaged.Store().View(func(tx *store.Tx) error {
		if _, err := tx.Machine("m-0000000bad01"); err == nil {
			t.Error("the repaired store kept the record no command wrote")
		}
		return nil
	})
}
