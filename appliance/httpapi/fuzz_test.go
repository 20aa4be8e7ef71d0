package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// The fuzz targets drive the real handler path over HTTP, against one node
// started per fuzz process (each worker starts its own). Seeds live in
// testdata/fuzz/<target>/.

// FuzzCommissionBody: any body gets a 2xx or a 4xx with the error shape,
// never a 5xx or a panic, and an accepted inventory is stored without the
// BMC password.
func FuzzCommissionBody(f *testing.F) {
	n := nodetest.Start(f)

	admin := n.Admin
	valid, err := json.Marshal(testReport("6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b", "FUZZ0001"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add([]byte(`{"version": 1, "boot_mac": "52:54:00:12:34:56", "bmc": {"password": "hunter2-hunter2"}}`))

	// The boot token of the valid seed's MAC: bodies naming another boot
	// MAC are refused (403) before they reach the state machine.
	boot := nodetest.AgentHeader(n.BootToken(f, "0c:c4:7a:00:00:01"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := n.Do(t, "POST", "/api/v1/commission", body, boot...)
		checkFuzzReply(t, r, http.StatusOK)
		if r.Status != http.StatusOK {
			return
		}
		var reply wire.CommissionReply
		r.Decode(t, &reply)
		var stored []byte
		var m store.Machine
		if err := n.Store().View(func(tx *store.Tx) error {
			var err error
			if m, err = tx.Machine(reply.ID); err != nil {
				return err
			}
			stored, err = tx.Inventory(reply.ID)
			return err
		}); err != nil {
			t.Fatalf("accepted %q, but machine %s: %v", body, reply.ID, err)
		}
		if m.State != store.StateReady || reply.State != store.StateReady {
			t.Errorf("accepted, but state %s (reply %s)", m.State, reply.State)
		}
		var inv inventory.Report
		if err := json.Unmarshal(stored, &inv); err != nil {
			t.Fatalf("stored inventory does not decode: %v", err)
		}
		if inv.BMC != nil && inv.BMC.Password != "" {
			t.Errorf("stored inventory keeps the BMC password %q", inv.BMC.Password)
		}
		if bytes.Contains(stored, []byte(`"password"`)) {
			t.Errorf("stored inventory has a password field: %s", stored)
		}
		// What was sent as the password appears nowhere it is shown, unless
		// it is short enough to occur by chance or is elsewhere in the body.
		var sent inventory.Report
		if json.Unmarshal(body, &sent) == nil && sent.BMC != nil && len(sent.BMC.Password) >= 8 &&
			bytes.Count(body, []byte(sent.BMC.Password)) == 1 {
			shown := n.Do(t, "GET", "/api/v1/machines/"+reply.ID, nil, nodetest.Bearer(admin)...)
			if bytes.Contains(stored, []byte(sent.BMC.Password)) || bytes.Contains(shown.Body, []byte(sent.BMC.Password)) {
				t.Errorf("the BMC password %q is stored or shown", sent.BMC.Password)
			}
			if m.BMC == nil || len(m.BMC.PasswordSealed) == 0 {
				t.Errorf("a password was sent but none is sealed: %+v", m.BMC)
			}
		}
	})
}

// FuzzCreateMachineBody: POST /api/v1/machines never fails with a 5xx, and
// what it creates is what was asked for, in normal form.
func FuzzCreateMachineBody(f *testing.F) {
	n := nodetest.Start(f)

	admin := n.Admin
	f.Add([]byte(`{"name": "node-01", "mac": "52:54:00:12:34:56"}`))
	f.Add([]byte(`{"macs": ["52-54-00-12-34-57", "5254.0012.3458"]}`))

	f.Fuzz(func(t *testing.T, body []byte) {
		r := n.Do(t, "POST", "/api/v1/machines", body, nodetest.Bearer(admin)...)
		checkFuzzReply(t, r, http.StatusCreated)
		if r.Status != http.StatusCreated {
			return
		}
		var req wire.CreateMachineRequest
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("created from a body encoding/json refuses (%v): %q", err, body)
		}
		var m wire.MachineView
		r.Decode(t, &m)
		if !store.ValidMachineID(m.ID) || m.State != store.StateNew || m.Name != req.Name {
			t.Errorf("created %+v from %q", m, body)
		}
		if m.Name != "" && store.ValidName(m.Name) != nil {
			t.Errorf("created a machine with the invalid name %q", m.Name)
		}
		if m.Name == "" && len(m.MACs) == 0 {
			t.Errorf("created a machine with neither name nor MAC")
		}
		for _, mac := range m.MACs {
			if norm, err := store.NormalizeMAC(mac); err != nil || norm != mac {
				t.Errorf("stored MAC %q is not in normal form", mac)
			}
		}
	})
}

// checkFuzzReply: the accepted status, or a 4xx in the error shape.
func checkFuzzReply(t *testing.T, r nodetest.Response, ok int) {
	t.Helper()
	switch {
	case r.Status == ok:
	case r.Status >= 400 && r.Status < 500:
		if r.ErrorCode() == "" || r.ErrorMessage() == "" {
			t.Errorf("%d without the error shape: %s", r.Status, r)
		}
	default:
		t.Fatalf("status %s", r)
	}
}

// FuzzImportBody: any location file gets a 200 or a 4xx with the error
// shape (a refused file with its bad rows), never a 5xx; a dry run
// changes nothing, and an applied import leaves every machine it names
// where the answer says.
func FuzzImportBody(f *testing.F) {
	n := nodetest.Start(f)
	var ids []string
	for i, mac := range []string{"0c:c4:7a:00:00:01", "0c:c4:7a:00:00:02"} {
		rep := testReport(fmt.Sprintf("6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4%d", i), fmt.Sprintf("FUZZ000%d", i), mac)
		ids = append(ids, commission(f, n, n.Agent, rep).ID)
	}
	f.Add([]byte("id,building,room,rack,unit,height,asset_tag\n"+ids[0]+",DC1,Hall A,R12,24,2,A-1\n"), true)
	f.Add([]byte("serial,rack,unit\nFUZZ0001,R12,1\nFUZZ0000,R12,1\n"), false)
	f.Add([]byte("mac,node_name,rack\n0C-C4-7A-00-00-02,,\"R\"\"7\"\n"), false)
	f.Fuzz(func(t *testing.T, body []byte, dry bool) {
		path := "/api/v1/locations/import"
		if dry {
			path += "?dry=1"
		}
		before := stateOf(n)
		r := n.Do(t, "POST", path, body, append(nodetest.Bearer(n.Admin), "Content-Type", "text/csv")...)
		checkFuzzReply(t, r, http.StatusOK)
		if r.Status != http.StatusOK || dry {
			if after := stateOf(n); after != before {
				t.Errorf("%d (dry %v), but the node changed: %+v → %+v", r.Status, dry, before, after)
			}
			return
		}
		var ans wire.ImportReply
		r.Decode(t, &ans)
		for _, c := range ans.Changes {
			var mv wire.MachineView
			n.Do(t, "GET", "/api/v1/machines/"+c.Machine, nil, nodetest.Bearer(n.Admin)...).Decode(t, &mv)
			if mv.Location != c.To {
				t.Errorf("line %d: %s stands at %+v, the answer says %+v", c.Line, c.Machine, mv.Location, c.To)
			}
		}
	})
}

// FuzzTagBody: POST /api/v1/tags never fails with a 5xx, whatever the rule
// (evaluation is bounded), and a created tag is what was asked for.
func FuzzTagBody(f *testing.F) {
	n := nodetest.Start(f)
	commission(f, n, n.Agent, testReport("6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b", "FUZZ0001"))
	f.Add([]byte(`{"name": "gpu", "match": "{{ gt .Node.GPUs 0 }}", "comment": "NVIDIA"}`))
	f.Add([]byte(`{"name": "big", "match": "{{ range 1000000000 }}{{ end }}true"}`))
	f.Add([]byte(`{"name": "cc", "cloud_config": "#cloud-config\npackages: [git]\n", "overlays": ["a", "b"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := n.Do(t, "POST", "/api/v1/tags", body, nodetest.Bearer(n.Admin)...)
		checkFuzzReply(t, r, http.StatusCreated)
		if r.Status != http.StatusCreated {
			return
		}
		var req wire.TagRequest
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("created from a body encoding/json refuses (%v): %q", err, body)
		}
		var s wire.TagSaved
		r.Decode(t, &s)
		if s.Tag.Name != req.Name || s.Tag.Match != req.Match || s.Tag.CloudConfig != req.CloudConfig {
			t.Errorf("created %+v from %q", s.Tag, body)
		}
		// Gone again, so the next input may use the name.
		if d := n.Do(t, "DELETE", "/api/v1/tags/"+s.Tag.Name, nil, nodetest.Bearer(n.Admin)...); d.Status != http.StatusOK {
			t.Fatalf("delete %s: %s", s.Tag.Name, d)
		}
	})
}

// FuzzOverlayBody: any overlay body gets a 2xx or a 4xx with the error
// shape (a template that does not parse or render: 422 with its file and
// line), never a 5xx, a panic or a stall; an accepted tree is stored as
// sent.
func FuzzOverlayBody(f *testing.F) {
	n := nodetest.Start(f)
	f.Add([]byte(`{"files": [{"path": "system/etc/hostname.tmpl", "mode": 420, "content": "e3sgLk5vZGUuTmFtZSB9fQo="}]}`))
	f.Add([]byte(`{"files": [{"path": "runtime/etc/motd", "content": "aGVsbG8K"}, {"path": "system/etc/x.tmpl", "content": "e3sgcmFuZ2UgMTAwMDAwMDAwMDAgfX17eyBlbmQgfX0="}]}`))
	f.Add([]byte(`{"files": [{"path": "system/../etc/passwd", "content": ""}]}`))
	f.Add([]byte(`{"files": [{"path": "system/a", "content": ""}, {"path": "system/a/b", "content": ""}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := n.Do(t, "PUT", "/api/v1/overlays/fuzz", body, nodetest.Bearer(n.Admin)...)
		checkFuzzReply(t, r, http.StatusCreated)
		if r.Status >= 300 {
			return
		}
		var req wire.OverlayRequest
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("stored from a body encoding/json refuses (%v): %q", err, body)
		}
		var o wire.Overlay
		r.Decode(t, &o)
		if o.FileCount != len(req.Files) {
			t.Errorf("stored %d files from %d", o.FileCount, len(req.Files))
		}
		if d := n.Do(t, "DELETE", "/api/v1/overlays/fuzz", nil, nodetest.Bearer(n.Admin)...); d.Status != http.StatusOK {
			t.Fatalf("delete: %s", d)
		}
	})
}
