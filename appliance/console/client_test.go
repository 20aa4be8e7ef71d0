package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/appliance/wire"
)

// recordedAPI serves the answers in testdata/api, captured from a real node
// by testdata/api/record.go: a commissioned machine (ready) and spare-01
// (new, no BMC).
type recordedAPI struct {
	t        *testing.T
	ready    string // the commissioned machine's ID
	spare    string
	mu       sync.Mutex
	requests []string
	noLeader atomic.Int32 // answer this many requests with no_leader first
}

func newRecordedAPI(t *testing.T) (*recordedAPI, *httptest.Server) {
	var l wire.MachineList
	if err := json.Unmarshal(readRecorded(t, "machines.json"), &l); err != nil || len(l.Machines) != 2 {
		t.Fatalf("machines.json: %v (%d machines)", err, len(l.Machines))
	}
	a := &recordedAPI{t: t, ready: l.Machines[0].ID, spare: l.Machines[1].ID}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return a, srv
}

func readRecorded(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "api", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (a *recordedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.requests = append(a.requests, r.Method+" "+r.URL.RequestURI())
	a.mu.Unlock()
	reply := func(status int, file string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(readRecorded(a.t, file))
	}
	if r.Header.Get("Authorization") != "Bearer admin-token" {
		reply(http.StatusUnauthorized, "unauthorized.json")
		return
	}
	if a.noLeader.Add(-1) >= 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":{"code":"no_leader","message":"no leader; retry"}}`))
		return
	}
	m := "/api/v1/machines/"
	switch route := r.Method + " " + r.URL.Path; route {
	case "GET /api/v1/machines":
		reply(200, "machines.json")
	case "GET " + m + a.ready:
		reply(200, "machine.json")
	case "GET /api/v1/events":
		reply(200, "events-recent.json")
	case "GET " + m + a.ready + "/events":
		reply(200, "events.json")
	case "GET " + m + a.spare + "/events":
		reply(200, "events-spare.json")
	case "GET " + m + a.ready + "/jobs":
		reply(200, "jobs.json")
	case "GET /api/v1/cluster":
		reply(200, "cluster.json")
	case "GET /api/v1/fabrics":
		reply(200, "fabrics.json")
	case "GET /api/v1/vlans":
		reply(200, "vlans.json")
	case "GET /api/v1/subnets":
		reply(200, "subnets.json")
	case "GET /api/v1/images":
		reply(200, "images.json")
	case "POST " + m + a.spare + "/power":
		reply(400, "power-nobmc.json")
	case "POST " + m + a.spare + "/recommission":
		reply(409, "recommission.json")
	case "POST " + m + a.ready + "/recommission":
		reply(200, "recommission-ok.json")
	case "DELETE " + m + a.spare:
		reply(200, "delete.json")
	case "GET " + m + a.ready + "/network-plan":
		reply(200, "network-plan.json")
	case "POST " + m + a.ready + "/rename":
		var req wire.RenameMachineRequest
		if json.NewDecoder(r.Body).Decode(&req) == nil && req.Name == "other-01" {
			reply(409, "rename-taken.json")
			return
		}
		reply(200, "rename.json")
	case "DELETE " + m + a.ready + "/bmc":
		reply(200, "bmc-clear.json")
	case "DELETE " + m + a.spare + "/bmc":
		reply(404, "bmc-none.json") // recorded for a machine whose BMC was cleared
	default:
		reply(404, "notfound.json")
	}
}

func (a *recordedAPI) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.requests...)
}

func TestClientAgainstRecordedAnswers(t *testing.T) {
	api, srv := newRecordedAPI(t)
	c, err := NewClient(srv.URL+"/", "admin-token", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	l, err := c.Machines(ctx, 0, 0)
	if err != nil || l.Index != 8 || l.Machines[0].State != "ready" || l.Machines[0].BMC == nil || !l.Machines[0].BMC.HasPassword {
		t.Fatalf("Machines = %+v, %v", l, err)
	}
	if l.Machines[0].Summary.Sockets != 2 || l.Machines[1].Name != "spare-01" {
		t.Errorf("machine fields lost: %+v", l.Machines)
	}
	if _, err := c.Machines(ctx, 8, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	d, err := c.Machine(ctx, api.ready)
	if err != nil || d.ID != api.ready || len(d.Events) == 0 || d.BMC == nil {
		t.Fatalf("Machine = %+v, %v", d, err)
	}
	if _, err := c.Jobs(ctx, api.ready); err != nil {
		t.Fatal(err)
	}
	es, err := c.Events(ctx, 3)
	if err != nil || len(es) != 3 || es[0].Time.Before(es[2].Time) {
		t.Fatalf("Events = %+v, %v (want 3, newest first)", es, err)
	}
	cv, err := c.Cluster(ctx)
	if err != nil || cv.Leader != "node-1" || len(cv.Members) != 1 || cv.Members[0].Status == nil || cv.Members[0].Status.Applied == 0 {
		t.Fatalf("Cluster = %+v, %v", cv, err)
	}
	n, err := c.Network(ctx)
	if err != nil || len(n.Fabrics) != 1 || len(n.VLANs) != 1 || len(n.Subnets) != 1 || n.Subnets[0].CIDR.String() != "10.0.0.0/24" {
		t.Fatalf("Network = %+v, %v", n, err)
	}
	ims, err := c.Images(ctx)
	if err != nil || len(ims) != 1 || len(ims[0].Files) != 2 {
		t.Fatalf("Images = %+v, %v", ims, err)
	}

	p, err := c.Plan(ctx, api.ready)
	if err != nil || p.Machine != api.ready || p.Source != "default" || len(p.Choices) != 1 || p.Choices[0].Selector != "boot" || p.NetworkConfig == "" {
		t.Fatalf("Plan = %+v, %v", p, err)
	}

	actions := map[string]struct {
		a       Action
		out     string
		wantErr string
	}{
		"power without a bmc": {Action{api.spare, "power", "status"}, "", "has no BMC on record"},
		"recommission new":    {Action{api.spare, "recommission", ""}, "", "cannot move from new to new"},
		"recommission ready":  {Action{api.ready, "recommission", ""}, "new, commissions on its next network boot", ""},
		"delete":              {Action{api.spare, "delete", ""}, "deleted", ""},
		"unknown kind":        {Action{api.spare, "reboot", ""}, "", `action "reboot": not one of`},
		"rename":              {Action{api.ready, "rename", "ready-01"}, "named ready-01", ""},
		"rename to a taken":   {Action{api.ready, "rename", "other-01"}, "", `name "other-01" is taken by machine m-`},
		"clear the bmc":       {Action{api.ready, "bmc-clear", ""}, "BMC cleared: powered by hand until one is set", ""},
		"clear no bmc":        {Action{api.spare, "bmc-clear", ""}, "", ": not found"},
	}
	for name, tc := range actions {
		t.Run(name, func(t *testing.T) {
			out, err := c.Do(ctx, tc.a)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Do = %q, %v; want %q", out, err, tc.wantErr)
				}
				return
			}
			if err != nil || out != tc.out {
				t.Fatalf("Do = %q, %v; want %q", out, err, tc.out)
			}
		})
	}
	seen := api.seen()
	for _, want := range []string{"GET /api/v1/machines?index=8&wait=30s", "POST /api/v1/machines/" + api.spare + "/power", "DELETE /api/v1/machines/" + api.spare,
		"POST /api/v1/machines/" + api.ready + "/rename", "DELETE /api/v1/machines/" + api.ready + "/bmc", "GET /api/v1/machines/" + api.ready + "/network-plan"} {
		found := false
		for _, s := range seen {
			found = found || s == want
		}
		if !found {
			t.Errorf("no request %q in %v", want, seen)
		}
	}
}

func TestClientErrors(t *testing.T) {
	api, srv := newRecordedAPI(t)
	bad, _ := NewClient(srv.URL, "wrong", "")
	if _, err := bad.Machines(context.Background(), 0, 0); !Unauthorized(err) || err.Error() != "wrong admin token" {
		t.Errorf("wrong token: %v (Unauthorized %v)", err, Unauthorized(err))
	}
	c, _ := NewClient(srv.URL, "admin-token", "")
	api.noLeader.Store(2)
	if _, err := c.Cluster(context.Background()); err != nil {
		t.Errorf("no leader twice, then an answer: %v", err)
	}
	for name, tc := range map[string]struct{ url, token, want string }{
		"no scheme": {"10.0.0.5:8080", "t", "want http://HOST:PORT"},
		"no token":  {"http://10.0.0.5:8080", " ", "api token: empty"},
	} {
		if _, err := NewClient(tc.url, tc.token, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewClient = %v, want %q", name, err, tc.want)
		}
	}
}

// TestDumpWithRealClient renders the machines page through the HTTP
// client: the recorded answers drive the same screens as the fake fleet.
func TestDumpWithRealClient(t *testing.T) {
	api, srv := newRecordedAPI(t)
	c, _ := NewClient(srv.URL, "admin-token", "")
	var buf bytes.Buffer
	if err := Dump(&buf, 140, 40, "machines", true, c); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{api.ready, "spare-01", "Machines · 2 of 2", "Supermicro SYS-2029U-TR4", "node-1 · leader node-1"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("dump lacks %q:\n%s", want, buf.String())
		}
	}
	buf.Reset()
	if err := Dump(&buf, 80, 24, "machine/"+api.ready, true, c); err != nil || !strings.Contains(buf.String(), "S211X5A") {
		t.Errorf("machine page: %v\n%s", err, buf.String())
	}
}

func TestClientConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rollcall", "client.json")
	if _, err := LoadClientConfig(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
	}
	want := ClientConfig{URL: "https://10.0.0.2:8443", Token: "s3cret", CAFile: "/etc/rollcall/ca.pem"}
	if err := SaveClientConfig(path, want); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", st.Mode().Perm())
	}
	got, err := LoadClientConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"ca_file": "/etc/rollcall/ca.pem"`) {
		t.Errorf("file format changed: %s", b)
	}
	os.Chmod(path, 0o644)
	if _, err := LoadClientConfig(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a readable token file: %v, want a refusal", err)
	}
	t.Setenv("XDG_CONFIG_HOME", dir)
	if p, _ := DefaultConfigPath(); p != path {
		t.Errorf("DefaultConfigPath = %s, want %s", p, path)
	}
}

// TestLoginAsksOnceAndSaves: with no URL or token the console asks for
// both, checks them against the API, keeps them and opens.
func TestLoginAsksOnceAndSaves(t *testing.T) {
	_, srv := newRecordedAPI(t)
	path := filepath.Join(t.TempDir(), "client.json")
	sim := &testScreen{SimulationScreen: tcell.NewSimulationScreen("UTF-8")}
	sim.SimulationScreen.Init()
	sim.SetSize(100, 30)
	s := &session{t: t, sim: sim}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{ConfigPath: path, Screen: sim}) }()
	t.Cleanup(func() { cancel(); <-done })

	s.waitFor("the question", "connect to a cluster", "API URL", "Admin token")
	s.keys(srv.URL, tcell.KeyTab, "wrong", tcell.KeyTab, tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("a refused token", "the API refused this token")
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a refused token was saved")
	}
	s.keys(tcell.KeyBacktab, tcell.KeyBacktab, tcell.KeyCtrlU, "admin-token", tcell.KeyTab, tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("the console", "Overview", "spare-01")
	got, err := LoadClientConfig(path)
	if err != nil || got.URL != srv.URL || got.Token != "admin-token" {
		t.Fatalf("saved %+v, %v", got, err)
	}
}
