package console

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/appliance/wire"
)

// testScreen is a simulation screen initialised (and sized) by the test
// (tview initialises the screen it is given, which would reset the size)
// that keeps a copy of what each Show put on it: the simulation's own cells
// are written without a lock while the test reads.
type testScreen struct {
	tcell.SimulationScreen
	mu    sync.Mutex
	cells []tcell.SimCell
	w, h  int
}

func (s *testScreen) Init() error { return nil }

func (s *testScreen) Show() {
	s.SimulationScreen.Show()
	s.snapshot()
}

func (s *testScreen) Sync() {
	s.SimulationScreen.Sync()
	s.snapshot()
}

func (s *testScreen) snapshot() {
	cells, w, h := s.GetContents() // on the drawing goroutine: consistent
	cp := make([]tcell.SimCell, len(cells))
	for i, c := range cells {
		cp[i] = tcell.SimCell{Style: c.Style, Runes: slices.Clone(c.Runes)}
	}
	s.mu.Lock()
	s.cells, s.w, s.h = cp, w, h
	s.mu.Unlock()
}

func (s *testScreen) contents() ([]tcell.SimCell, int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cells, s.w, s.h
}

// session is a console running on a simulation screen against the fake
// fleet.
type session struct {
	t    *testing.T
	sim  *testScreen
	f    *fleet
	done chan error
	stop context.CancelFunc
}

func startSession(t *testing.T, w, h int) *session {
	t.Helper()
	sim := &testScreen{SimulationScreen: tcell.NewSimulationScreen("UTF-8")}
	if err := sim.SimulationScreen.Init(); err != nil {
		t.Fatal(err)
	}
	sim.SetSize(w, h)
	s := &session{t: t, sim: sim, f: newFleet(), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go func() { s.done <- Run(ctx, Options{Source: s.f, Screen: sim}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			t.Error("the console did not stop")
		}
	})
	s.waitFor("the fleet", "gpu-01") // the overview's events name machines once loaded (the newest: at 80x24 the older are below the edge)
	return s
}

func (s *session) text() string {
	var b bytes.Buffer
	cells, w, h := s.sim.contents()
	writeCells(&b, cells, w, h, true)
	return b.String()
}

// waitFor waits until every want is on the screen.
func (s *session) waitFor(what string, want ...string) string {
	s.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		text := s.text()
		missing := ""
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return text
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: %q never appeared on the screen:\n%s", what, missing, text)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// until waits for cond.
func (s *session) until(what string, cond func() bool) {
	s.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: never happened:\n%s", what, s.text())
		}
	}
}

// waitGone waits until none of gone is on the screen.
func (s *session) waitGone(what string, gone ...string) string {
	s.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		text := s.text()
		left := ""
		for _, g := range gone {
			if strings.Contains(text, g) {
				left = g
			}
		}
		if left == "" {
			return text
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: %q stayed on the screen:\n%s", what, left, text)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *session) keys(keys ...any) {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			for _, r := range k {
				s.sim.InjectKey(tcell.KeyRune, r, tcell.ModNone)
			}
		case tcell.Key:
			s.sim.InjectKey(k, 0, tcell.ModNone)
		}
	}
}

// rowStyle is the style of the first cell of the row that shows text.
func (s *session) rowStyle(text string) (tcell.Style, bool) {
	cells, w, h := s.sim.contents()
	for y := range h {
		var line strings.Builder
		for x := range w {
			line.WriteString(string(cells[y*w+x].Runes))
		}
		if i := strings.Index(line.String(), text); i >= 0 {
			x := len([]rune(line.String()[:i]))
			return cells[y*w+x].Style, true
		}
	}
	return tcell.StyleDefault, false
}

// highlighted reports whether the row showing text is the cursor row.
func (s *session) highlighted(text string) bool {
	st, ok := s.rowStyle(text)
	if !ok {
		return false
	}
	_, bg, attr := st.Decompose()
	return attr&tcell.AttrReverse != 0 || (bg != tcell.ColorBlack && bg != tcell.ColorDefault)
}

func TestFilterAndStates(t *testing.T) {
	s := startSession(t, 140, 40)
	s.keys("2")
	s.waitFor("machines page", "Machines · 9 of 9 · all states", "rack2-n01")

	s.keys("/", "gpu", tcell.KeyEnter)
	text := s.waitFor("filter by name", "Machines · 2 of 9", "gpu-01", "gpu-02")
	if strings.Contains(text, "web-01") {
		t.Errorf("web-01 is shown under the filter gpu:\n%s", text)
	}

	s.keys("/", tcell.KeyEscape) // Esc clears the filter
	s.waitFor("filter cleared", "Machines · 9 of 9")
	for name, q := range map[string]string{"MAC without colons": "5e1101", "IP": "10.0.0.41", "serial": "j30abcd"} {
		s.keys("/", q, tcell.KeyEnter)
		s.waitFor("filter by "+name, "Machines · 1 of 9", "stor-01")
		s.keys("/", tcell.KeyEscape)
		s.waitFor("filter cleared", "Machines · 9 of 9")
	}

	s.keys("s")
	text = s.waitFor("state new", "Machines · 3 of 9 · new", "rack2-n01", "edge-01")
	if strings.Contains(text, "gpu-01") {
		t.Errorf("gpu-01 (commissioning) shown under state new")
	}
	s.keys("s")
	s.waitFor("state commissioning", "Machines · 2 of 9 · commissioning")
	s.keys("s")
	s.waitFor("state ready", "Machines · 4 of 9 · ready")
	// The deployment and stateless states follow, empty in this fleet,
	// then all again.
	for _, st := range []string{"deploying", "deployed", "deploy-failed", "releasing", "stateless", "booted"} {
		s.keys("s")
		s.waitFor("state "+st, "Machines · 0 of 9 · "+st)
	}
	s.keys("s")
	s.waitFor("back to all", "Machines · 9 of 9 · all states")
}

func TestSelectPowerOffConfirmAndCancel(t *testing.T) {
	s := startSession(t, 140, 40)
	s.keys("2", "s", "s") // commissioning: gpu-01, gpu-02
	s.waitFor("commissioning", "Machines · 2 of 9 · commissioning")
	s.keys("*")
	s.waitFor("select all shown", "2 selected")

	s.keys("a")
	s.waitFor("actions menu", "2 machines", "Power off (hard)", "Delete")
	s.keys("f")
	s.waitFor("confirmation", "Power off 2 machines?", "gpu-01, gpu-02", "Cancel")
	s.keys(tcell.KeyEnter) // Cancel has the focus
	s.waitFor("cancelled", "power off: cancelled")
	if got := s.f.actions(); len(got) != 0 {
		t.Fatalf("cancel still called the API: %v", got)
	}

	s.keys("a", "f")
	s.waitFor("confirmation again", "Power off 2 machines?")
	s.keys(tcell.KeyEscape) // Esc is Cancel too
	s.waitGone("Esc closes the question", "Power off 2 machines?")
	if got := s.f.actions(); len(got) != 0 {
		t.Fatalf("Esc still called the API: %v", got)
	}

	s.keys("a", "f", tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("done", "power off: 2 ok, 0 failed")
	want := []Action{{"m-0a1b2c3d4e05", "power", "off"}, {"m-0a1b2c3d4e06", "power", "off"}}
	got := s.f.actions()
	if len(got) == 2 && got[0].Machine > got[1].Machine {
		got[0], got[1] = got[1], got[0] // they run in parallel
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestActionOnRowWithoutSelectionAndFailures(t *testing.T) {
	s := startSession(t, 140, 40)
	s.f.fail["m-0a1b2c3d4e04"] = errors.New("ipmi 10.0.20.41: connection refused")
	s.keys("2", "/", "stor", tcell.KeyEnter)
	s.waitFor("stor-01 alone", "Machines · 1 of 9")
	s.keys("a", "t") // power status needs no confirmation
	s.waitFor("the failure", "power status stor-01: ipmi 10.0.20.41: connection refused")

	s.keys("/", tcell.KeyEscape, tcell.KeyHome, "a", "b")
	s.waitFor("boot menu", "Boot device: web-01", "Network (PXE)")
	s.keys("p")
	s.waitFor("boot device set", "boot device pxe web-01: pxe")
	if diff := cmp.Diff([]Action{{"m-0a1b2c3d4e04", "power", "status"}, {"m-0a1b2c3d4e01", "bootdev", "pxe"}}, s.f.actions()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}

	s.keys("a")
	s.waitFor("menu", "Power on")
	s.keys(tcell.KeyEscape)
	s.waitGone("Esc closes the menu", "Power on")
	if n := len(s.f.actions()); n != 2 {
		t.Errorf("Esc on the menu made a call: %v", s.f.actions())
	}
}

func TestDeleteAsksThenTheListFollows(t *testing.T) {
	s := startSession(t, 140, 40)
	s.keys("2", "/", "edge", tcell.KeyEnter)
	s.waitFor("edge-01", "Machines · 1 of 9")
	s.keys("a", "d")
	s.waitFor("question", "Delete edge-01 (m-0a1b2c3d4e09)?", "forgets the machine")
	s.keys(tcell.KeyRight, tcell.KeyEnter)
	s.waitFor("deleted, and the live list drops it", "delete edge-01: deleted", "Machines · 0 of 8")
	if diff := cmp.Diff([]Action{{"m-0a1b2c3d4e09", "delete", ""}}, s.f.actions()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestLiveUpdatesAndMachinePage(t *testing.T) {
	s := startSession(t, 140, 40)
	s.keys("2")
	s.waitFor("machines", "Machines · 9 of 9")
	s.f.update(func(ms []wire.MachineView) []wire.MachineView {
		ms[0].State = "new"
		return append(ms, newMachine("m-0a1b2c3d4e10", "late-01"))
	})
	s.waitFor("a change arrives without a key", "Machines · 10 of 10", "late-01")

	s.keys(tcell.KeyEnter) // the cursor is on web-01
	s.waitFor("machine page", "web-01 · m-0a1b2c3d4e01", "Serial", "S211X5A01", "BMC jobs", "Events")
	s.keys(tcell.KeyEscape)
	s.waitFor("back to the list", "Machines · 10 of 10")

	s.keys("?")
	s.waitFor("help", "Keys (Esc closes)", "select all shown")
	s.keys(tcell.KeyEscape)
	s.waitGone("help closed", "Keys (Esc closes)")

	s.keys("6")
	s.waitFor("events", "Events ·", "agent booted")
	s.keys(tcell.KeyEnter)
	s.waitFor("event opens its machine", "gpu-01 · m-0a1b2c3d4e05")
	s.keys(tcell.KeyEscape)
	s.waitFor("back to events", "Events ·")
}

// TestRacksAndTags walks from the rack list to an elevation, from a unit to
// its machine and back, and from the tag list to a tag.
func TestRacksAndTags(t *testing.T) {
	s := startSession(t, 140, 40)
	s.keys("3")
	s.waitFor("racks", "Racks · 3", "R12", "R14")
	s.keys(tcell.KeyEnter) // the cursor is on R12
	s.waitFor("elevation", "Rack R12 · B1 › hall-2 · 42U, 6U used · 5 machines", "┏ stor-01", "┗", "db-01", "unit not known", "rack2-n01")
	// The cursor starts on the highest machine (stor-01 at U20–21); two
	// rows down is U19, empty, and one more is db-01's top unit (U15).
	s.keys(tcell.KeyEnter)
	s.waitFor("a unit opens its machine", "stor-01 · m-0a1b2c3d4e04", "B1 › hall-2 › R12 U20–21", "storage (rule)")
	s.keys(tcell.KeyEscape)
	s.waitFor("back to the elevation", "Rack R12 ·")
	s.keys(tcell.KeyDown, tcell.KeyDown, tcell.KeyDown, tcell.KeyDown, tcell.KeyDown, tcell.KeyDown, tcell.KeyEnter)
	s.waitFor("the unit under an empty one", "db-01 · m-0a1b2c3d4e03", "asset A-3301")
	s.keys(tcell.KeyEscape, tcell.KeyEscape)
	s.waitFor("back to the racks", "Racks · 3")
	s.f.update(func(ms []wire.MachineView) []wire.MachineView {
		ms[6].Location = wire.Location{Rack: "R14", Unit: 1}
		return ms
	})
	s.waitFor("a placement arrives without a key", "R14  B2       -         24U   1U")

	s.keys("4")
	s.waitFor("tags", "Tags · 4", "burn-in", "storage")
	s.keys(tcell.KeyDown, tcell.KeyEnter)
	s.waitFor("a tag", "Tag gpu", "{{ gt .Node.GPUs 0 }}", "nvidia-driver", "Machines 2")
	s.keys(tcell.KeyEscape)
	s.waitFor("back to the tags", "Tags · 4")
}

func newMachine(id, name string) wire.MachineView {
	return wire.MachineView{ID: id, Name: name, State: "new", CreatedAt: fakeNow, UpdatedAt: fakeNow}
}

func TestQuit(t *testing.T) {
	s := startSession(t, 80, 24)
	s.keys("q")
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("Run after q = %v", err)
		}
		s.done <- nil // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatal("q did not quit")
	}
}

// TestNarrowTerminal: at 80×24 the keys that matter and the cursor row stay
// on the screen, even at the bottom of a long list.
func TestNarrowTerminal(t *testing.T) {
	s := startSession(t, 80, 24)
	s.f.update(func(ms []wire.MachineView) []wire.MachineView {
		for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o"} {
			ms = append(ms, newMachine("m-0000000000"+n+n, "zz-"+n))
		}
		return ms
	})
	s.keys("2")
	text := s.waitFor("machines at 80x24", "Machines · 24 of 24", "NAME", "STATE", "IP")
	for _, h := range []string{"/ filter", "s state", "Space select", "Enter open", "a actions", "? keys", "q quit"} {
		if !strings.Contains(text, h) {
			t.Errorf("key hint %q is cut off at 80x24:\n%s", h, text)
		}
	}
	s.keys(tcell.KeyEnd)
	s.until("the cursor row zz-o is highlighted", func() bool { return s.highlighted("zz-o") })
	s.keys(" ")
	text = s.waitFor("selection shown in the title", "1 selected")
	if lines := strings.Split(strings.TrimRight(text, "\n"), "\n"); len(lines) != 24 {
		t.Errorf("screen has %d lines, want 24", len(lines))
	}
	s.keys("a")
	s.waitFor("the menu fits", "zz-o", "Power on", "Delete")
}
