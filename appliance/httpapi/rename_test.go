package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// errorField is the field an error answer names ("" when none).
func errorField(t testing.TB, r nodetest.Response) string {
	t.Helper()
	var e wire.ErrorReply
	if err := json.Unmarshal(r.Body, &e); err != nil {
		t.Fatalf("decode %q: %v", r.Body, err)
	}
	return e.Error.Field
}

// POST /api/v1/machines/{id}/rename: the new name is the machine's at
// once (found by it, the old one free); a refused name is answered about
// the field name and takes no Raft entry.
func TestRenameMachine(t *testing.T) {
	n := nodetest.Start(t)
	admin := nodetest.Bearer(n.Admin)
	var a, b wire.MachineView
	n.Do(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "node-a", MAC: "52:54:00:aa:10:01"}, admin...).Decode(t, &a)
	n.Do(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "node-b", MAC: "52:54:00:aa:10:02"}, admin...).Decode(t, &b)

	r := n.Do(t, "POST", "/api/v1/machines/"+a.ID+"/rename", wire.RenameMachineRequest{Name: "r12-n07"}, admin...)
	if r.Status != http.StatusOK {
		t.Fatalf("rename: %s", r)
	}
	var got wire.MachineView
	r.Decode(t, &got)
	if got.ID != a.ID || got.Name != "r12-n07" {
		t.Fatalf("the answer is %+v, want %s named r12-n07", got, a.ID)
	}
	d, _ := getMachine(t, n, n.Admin, "r12-n07")
	if d.ID != a.ID || d.Events[len(d.Events)-1].Message != "renamed node-a → r12-n07" {
		t.Errorf("by its new name: %s, last event %+v", d.ID, d.Events[len(d.Events)-1])
	}
	if r := n.Do(t, "GET", "/api/v1/machines/node-a", nil, admin...); r.Status != http.StatusNotFound {
		t.Errorf("the old name still answers: %s", r)
	}
	// By name, too, as every machine route.
	if r := n.Do(t, "POST", "/api/v1/machines/node-b/rename", `{"name": "node-a"}`, admin...); r.Status != http.StatusOK {
		t.Errorf("node-b takes the freed name: %s", r)
	}

	for name, tc := range map[string]struct {
		path, body string
		status     int
		code       string
		field      string
		message    string
	}{
		"taken":         {a.ID, `{"name": "node-a"}`, 409, "conflict", "name", `name "node-a" is taken by machine ` + b.ID},
		"not a label":   {a.ID, `{"name": "Node A"}`, 400, "bad_request", "name", `name "Node A" must be a DNS label`},
		"empty":         {a.ID, `{"name": ""}`, 400, "bad_request", "name", "DNS label"},
		"no name":       {a.ID, `{}`, 400, "bad_request", "name", "DNS label"},
		"like an ID":    {a.ID, `{"name": "m-00000000beef"}`, 400, "bad_request", "name", "form of a machine ID"},
		"unknown field": {a.ID, `{"name": "x", "hostname": "y"}`, 400, "bad_request", "", "hostname"},
		"not JSON":      {a.ID, `name=x`, 400, "bad_request", "", ""},
		"no machine":    {"m-000000000000", `{"name": "x"}`, 404, "not_found", "", "m-000000000000"},
		"too big":       {a.ID, `{"name": "` + strings.Repeat("a", 2<<20) + `"}`, 413, "too_large", "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			before := stateOf(n)
			r := n.Do(t, "POST", "/api/v1/machines/"+tc.path+"/rename", tc.body, admin...)
			if r.Status != tc.status || r.ErrorCode() != tc.code {
				t.Fatalf("= %s, want %d %s", r, tc.status, tc.code)
			}
			if !strings.Contains(r.ErrorMessage(), tc.message) {
				t.Errorf("message %q does not say %q", r.ErrorMessage(), tc.message)
			}
			if f := errorField(t, r); f != tc.field {
				t.Errorf("the error names field %q, want %q", f, tc.field)
			}
			if after := stateOf(n); after != before {
				t.Errorf("a refused rename changed the state: %+v → %+v", before, after)
			}
		})
	}
}

// DELETE /api/v1/machines/{id}/bmc: the record goes, its sealed password
// with it; a machine without a BMC is a 404 that changes nothing.
func TestClearBMC(t *testing.T) {
	n := nodetest.Start(t)
	admin := nodetest.Bearer(n.Admin)
	var m wire.MachineView
	n.Do(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "node-c", MAC: "52:54:00:aa:10:03"}, admin...).Decode(t, &m)
	const secret = "Clear-Me-Secret-91"
	if r := n.Do(t, "PUT", "/api/v1/machines/"+m.ID+"/bmc", wire.BMCRequest{Driver: "ipmi", Address: "10.0.40.12", User: "admin", Password: secret}, admin...); r.Status != http.StatusOK {
		t.Fatalf("set the BMC: %s", r)
	}
	if d, _ := getMachine(t, n, n.Admin, m.ID); d.BMC == nil || !d.BMC.HasPassword {
		t.Fatalf("the BMC was not set: %+v", d.BMC)
	}
	r := n.Do(t, "DELETE", "/api/v1/machines/"+m.ID+"/bmc", nil, admin...)
	if r.Status != http.StatusOK {
		t.Fatalf("clear: %s", r)
	}
	var got wire.MachineView
	r.Decode(t, &got)
	if got.BMC != nil {
		t.Errorf("the answer still shows BMC %+v", got.BMC)
	}
	_, raw := getMachine(t, n, n.Admin, m.ID)
	var fields map[string]json.RawMessage
	raw.Decode(t, &fields)
	if b, ok := fields["bmc"]; ok {
		t.Errorf("after clearing, the machine shows bmc %s", b)
	}
	n.Store().View(func(tx *store.Tx) error {
		rec, err := tx.Machine(m.ID)
		if err != nil || rec.BMC != nil {
			t.Errorf("the store keeps BMC %+v (%v)", rec.BMC, err)
		}
		return nil
	})
	for name, path := range map[string]string{
		"twice":      m.ID,
		"no machine": "m-000000000000",
	} {
		t.Run(name, func(t *testing.T) {
			before := stateOf(n)
			r := n.Do(t, "DELETE", "/api/v1/machines/"+path+"/bmc", nil, admin...)
			if r.Status != http.StatusNotFound {
				t.Errorf("= %s, want 404", r)
			}
			if after := stateOf(n); after != before {
				t.Errorf("state changed: %+v → %+v", before, after)
			}
		})
	}
}

// A rack made lower than a machine it holds is refused about its height,
// so a form shows the reason there.
func TestRackHeightRefusalNamesTheField(t *testing.T) {
	n := nodetest.Start(t)
	admin := nodetest.Bearer(n.Admin)
	var m wire.MachineView
	n.Do(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "tall-01", MAC: "52:54:00:aa:10:04"}, admin...).Decode(t, &m)
	if r := n.Do(t, "PUT", "/api/v1/machines/"+m.ID+"/location", wire.LocationRequest{Rack: "R6", Unit: 30}, admin...); r.Status != http.StatusOK {
		t.Fatalf("place: %s", r)
	}
	before := stateOf(n)
	r := n.Do(t, "PUT", "/api/v1/racks/R6", wire.RackRequest{Height: 20}, admin...)
	if r.Status != http.StatusConflict || errorField(t, r) != "height" || !strings.Contains(r.ErrorMessage(), "holds machines up to U30") {
		t.Errorf("= %s (field %q), want 409 about the height", r, errorField(t, r))
	}
	if after := stateOf(n); after != before {
		t.Errorf("state changed: %+v → %+v", before, after)
	}
}
