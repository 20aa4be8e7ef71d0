package console

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/store"
)

// TestSetupJoinsWithACode runs the first-boot setup against a fresh data
// directory: pick the second interface, join with a code (a bad code is
// refused first), see the web UI's address.
func TestSetupJoinsWithACode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "var")
	if !NeedsSetup(dir) {
		t.Fatal("a fresh directory does not need setup")
	}
	code, err := pki.NewJoinCode("10.0.0.2:8300", [32]byte{1, 2, 3}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	sim := &testScreen{SimulationScreen: tcell.NewSimulationScreen("UTF-8")}
	if err := sim.SimulationScreen.Init(); err != nil {
		t.Fatal(err)
	}
	sim.SetSize(80, 24)
	s := &session{t: t, sim: sim}

	var mu sync.Mutex
	var started []SetupChoices
	type result struct {
		ch  SetupChoices
		err error
	}
	done := make(chan result, 1)
	go func() {
		ch, err := Setup(context.Background(), SetupOptions{
			DataDir: dir, Hostname: "appliance-1", Screen: sim,
			Interfaces: func() ([]Interface, error) {
				return []Interface{
					{Name: "eno1", MAC: "3c:ec:ef:00:00:01", Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/24")}},
					{Name: "eno2", MAC: "3c:ec:ef:00:00:02", Addrs: []netip.Prefix{netip.MustParsePrefix("fe80::1/64"), netip.MustParsePrefix("192.168.10.7/24")}},
				}, nil
			},
			Start: func(_ context.Context, ch SetupChoices) (string, error) {
				mu.Lock()
				started = append(started, ch)
				mu.Unlock()
				return "https://" + ch.Address.Addr().String() + ":8443/", nil
			},
		})
		done <- result{ch, err}
	}()

	s.waitFor("the form", "set up this appliance", "appliance-1", "eno1", "10.0.0.5/24")
	s.keys(tcell.KeyTab, tcell.KeyEnter, tcell.KeyDown, tcell.KeyEnter) // interface: eno2
	s.waitFor("eno2's address suggested", "192.168.10.7/24")
	s.keys(tcell.KeyTab, tcell.KeyTab, tcell.KeyEnter, tcell.KeyDown, tcell.KeyEnter) // cluster: join
	s.waitFor("join chosen", "Join a cluster with a code")
	s.keys(tcell.KeyTab, "not-a-code", tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("a bad code is refused", "join code:")
	mu.Lock()
	if len(started) != 0 {
		t.Fatalf("Start called with a bad code: %v", started)
	}
	mu.Unlock()

	s.keys(tcell.KeyBacktab, tcell.KeyCtrlU, code.String(), tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("the web UI's address", "Rollcall is running", "https://192.168.10.7:8443/", "admin.token on this appliance")
	s.keys(tcell.KeyEnter)

	var r result
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Setup did not return")
	}
	if r.err != nil {
		t.Fatalf("Setup: %v", r.err)
	}
	want := SetupChoices{Name: "appliance-1", Interface: "eno2", Address: netip.MustParsePrefix("192.168.10.7/24"), Cluster: "join", Join: code.String()}
	if diff := cmp.Diff(want, r.ch, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("choices (-want +got):\n%s", diff)
	}
	if len(started) != 1 || started[0].Join != code.String() {
		t.Errorf("Start got %+v, want one call with the code", started)
	}

	st, err := os.Stat(filepath.Join(dir, setupFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("setup.json mode %04o, want 0600", st.Mode().Perm())
	}
	b, _ := os.ReadFile(filepath.Join(dir, setupFile))
	if strings.Contains(string(b), code.String()) {
		t.Errorf("setup.json holds the join code: %s", b)
	}
	var saved SetupChoices
	if err := json.Unmarshal(b, &saved); err != nil || saved.Interface != "eno2" || saved.Cluster != "join" {
		t.Errorf("setup.json = %s (%v)", b, err)
	}
	if !NeedsSetup(dir) {
		t.Error("setup.json alone (no state.db yet) must not end the setup: the node may not have started")
	}
}

func TestSetupChecks(t *testing.T) {
	s := &setup{ifs: []Interface{{Name: "eth0"}}, o: SetupOptions{CheckName: store.ValidName}}
	cases := map[string]struct {
		name, addr, code string
		join             bool
		want             string
	}{
		"ok new":          {"node-1", "10.0.0.5/24", "", false, ""},
		"bad name":        {"Node_1", "10.0.0.5/24", "", false, "node name: name \"Node_1\" must be a DNS label"},
		"no prefix":       {"node-1", "10.0.0.5", "", false, `address "10.0.0.5": want ADDRESS/BITS`},
		"loopback":        {"node-1", "127.0.0.1/8", "", false, "not usable for management"},
		"join needs code": {"node-1", "10.0.0.5/24", "", true, "join code: required"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := s.check(tc.name, 0, tc.addr, tc.join, tc.code)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("check: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("check = %v, want %q", err, tc.want)
			}
		})
	}
}
