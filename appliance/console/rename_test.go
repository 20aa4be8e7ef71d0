package console

import (
	"testing"

	"github.com/gdamore/tcell/v2"
	"github.com/google/go-cmp/cmp"
)

// Rename… from the machine page: a taken name and a bad one are refused
// with the API's reason in the form, which stays open; a good one renames
// the machine and the page follows.
func TestRenameFromTheActionsMenu(t *testing.T) {
	s := startSession(t, 140, 40)
	s.keys("2", "/", "web-02", tcell.KeyEnter, tcell.KeyEnter)
	s.waitFor("web-02's page", "web-02 · m-0a1b2c3d4e02")
	s.keys("a", "l")
	s.waitFor("the form", "Rename web-02 (m-0a1b2c3d4e02)", "New name", "unique in the fleet")
	s.keys(tcell.KeyCtrlU, "web-01", tcell.KeyEnter)
	s.waitFor("a taken name", `name "web-01" is taken by machine m-0a1b2c3d4e01`)
	s.keys(tcell.KeyCtrlU, "Web_2", tcell.KeyEnter)
	s.waitFor("not a DNS label", `name "Web_2" must be a DNS label`)
	s.keys(tcell.KeyCtrlU, "r12-n07", tcell.KeyEnter)
	s.waitFor("renamed", "rename web-02: named r12-n07", "r12-n07 · m-0a1b2c3d4e02")
	s.waitGone("the form closed", "New name")
	want := []Action{
		{"m-0a1b2c3d4e02", "rename", "web-01"},
		{"m-0a1b2c3d4e02", "rename", "Web_2"},
		{"m-0a1b2c3d4e02", "rename", "r12-n07"},
	}
	if diff := cmp.Diff(want, s.f.actions()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}

	s.keys("a", "l")
	s.waitFor("the form again", "Rename r12-n07")
	s.keys(tcell.KeyEscape)
	s.waitFor("cancelled", "rename: cancelled")
	if n := len(s.f.actions()); n != 3 {
		t.Errorf("Esc made a call: %v", s.f.actions())
	}

	// Several machines: names are unique, so one at a time.
	s.keys(tcell.KeyEscape, "/", tcell.KeyEscape, "*", "a", "l")
	s.waitFor("refused for a selection", "rename: one machine at a time")
}

// Clear BMC asks first, then the machine shows no BMC.
func TestClearBMCFromTheActionsMenu(t *testing.T) {
	s := startSession(t, 140, 40)
	s.keys("2", "/", "db-01", tcell.KeyEnter, tcell.KeyEnter)
	s.waitFor("db-01's page", "db-01 · m-0a1b2c3d4e03", "ipmi 10.0.20.31 user rollcall (password sealed)")
	s.keys("a", "k")
	s.waitFor("the question", "Clear BMC db-01 (m-0a1b2c3d4e03)?", "sealed password")
	s.keys(tcell.KeyEnter) // Cancel has the focus
	s.waitFor("cancelled", "clear bmc: cancelled")
	if n := len(s.f.actions()); n != 0 {
		t.Fatalf("cancel made a call: %v", s.f.actions())
	}
	s.keys("a", "k")
	s.waitFor("the question again", "Clear BMC db-01 (m-0a1b2c3d4e03)?")
	s.keys(tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("cleared", "clear bmc db-01: BMC cleared", "none known")
	if diff := cmp.Diff([]Action{{"m-0a1b2c3d4e03", "bmc-clear", ""}}, s.f.actions()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	s.keys("a", "k", tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("twice", "clear bmc db-01: BMC of machine m-0a1b2c3d4e03: not found")
}
