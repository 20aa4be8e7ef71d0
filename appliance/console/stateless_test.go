package console

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/google/go-cmp/cmp"
)

// The machine list with a booted node, a stale one and one not booted
// yet; the stale one's machine view; and the profile with its nodes, as
// golden dumps (the colour of the stale node pinned by one ANSI dump).
func TestDumpStatelessNodes(t *testing.T) {
	for _, tc := range []struct {
		page  string
		w, h  int
		plain bool
		want  []string
	}{
		{"machines", 140, 40, true, []string{"NODE", "cn001 seen 1m", "cn002 stale 47m", "cn003 not booted", "booted", "stateless"}},
		{"machines", 80, 24, true, []string{"cn001 seen 1m", "10.0.0.22"}},
		{"machines", 140, 40, false, nil},
		{"machine/db-01", 140, 40, true, []string{"cn002 of profile compute · 10.0.0.102", "stale, seen 47m ago · booted 2026-03-13 13:00:00"}},
		{"profile/compute", 140, 40, true, []string{"Nodes 3", "cn001      web-02           10.0.0.101      seen 1m ago", "cn002      db-01", "cn003      stor-01          10.0.0.103      not booted"}},
		{"profile/compute", 80, 24, true, []string{"Nodes 3"}},
		{"profiles", 140, 40, true, []string{"compute compute-2026.03 compute, slurm         cn%03d 1–512 10.0.0.0/24"}},
	} {
		name := fmt.Sprintf("%s-nodes-%dx%d.txt", strings.ReplaceAll(tc.page, "/", "-"), tc.w, tc.h)
		if !tc.plain {
			name = strings.TrimSuffix(name, ".txt") + ".ansi"
		}
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Dump(&buf, tc.w, tc.h, tc.page, tc.plain, withNodes()); err != nil {
				t.Fatalf("Dump: %v", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(buf.String(), want) {
					t.Errorf("the dump lacks %q:\n%s", want, buf.String())
				}
			}
			golden(t, filepath.Join("testdata", "dump", name), buf.Bytes())
		})
	}
}

func TestDumpUnknownProfileShowsTheError(t *testing.T) {
	var buf bytes.Buffer
	err := Dump(&buf, 80, 24, "profile/nope", true, newFleet())
	if err == nil || !strings.Contains(err.Error(), `profile "nope": not found`) || !strings.Contains(buf.String(), `profile "nope": not found`) {
		t.Fatalf("Dump = %v, want the not-found error on the screen:\n%s", err, buf.String())
	}
}

// Assign profile… from the actions menu: which profile, then a question
// with Cancel focused; Assign makes the node, which the list then shows
// with its heartbeat as it boots; the machine view names it; Unassign asks
// first and takes it back to ready; assigning again with the power cycle
// takes the freed name and says what the power cycle did. A machine that
// is not ready is refused with the API's reason.
func TestAssignAndUnassign(t *testing.T) {
	s := startSession(t, 140, 40)
	s.keys("2", "/", "web-01", tcell.KeyEnter)
	s.waitFor("web-01 alone", "Machines · 1 of 9")
	s.keys("a", "p")
	s.waitFor("the profiles", "Assign web-01 to profile", "compute (image compute-2026.03, cn%03d 1–512)", "gpu (image compute-2026.03, gpu%02d 1–64)")
	s.keys("1")
	s.waitFor("the question", "Assign web-01 (m-0a1b2c3d4e01) to profile", "compute?", "Cancel", "Assign + power-cycle")
	s.keys(tcell.KeyEnter) // Cancel has the focus
	s.waitFor("cancelled", "assign: cancelled")
	if got := s.f.actions(); len(got) != 0 {
		t.Fatalf("cancel still called the API: %v", got)
	}
	s.keys("a", "p")
	s.waitFor("the profiles again", "Assign web-01 to profile")
	s.keys("1")
	s.waitFor("the question again", "Assign web-01 (m-0a1b2c3d4e01)", "compute?")
	s.keys(tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("assigned", "assign to compute web-01: node cn001 of compute (10.0.0.101); boots it on its next network boot", "cn001 not booted", "stateless")

	s.f.boot("m-0a1b2c3d4e01", time.Minute, 30*time.Second, false)
	s.waitFor("booted", "cn001 seen 30s", "booted")
	s.keys(tcell.KeyEnter)
	s.waitFor("the machine view", "Node          cn001 of profile compute · 10.0.0.101", "Heartbeat     seen 30s ago · booted")

	s.keys("a", "u")
	s.waitFor("the unassign question", "Unassign web-01 (m-0a1b2c3d4e01)?", "in memory is not stopped")
	s.keys(tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("unassigned", "unassign web-01: ready; was node cn001 of compute")
	s.waitGone("the node rows", "Heartbeat")

	s.keys("a", "p")
	s.waitFor("the profiles a third time", "Assign web-01 to profile")
	s.keys("1")
	s.waitFor("the question a third time", "Assign web-01 (m-0a1b2c3d4e01)", "compute?")
	s.keys(tcell.KeyTab, tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("assigned with a power cycle", "web-01: node cn001 of compute (10.0.0.101); power cycle job j-")

	s.keys(tcell.KeyEscape, "/", tcell.KeyCtrlU, "gpu-01", tcell.KeyEnter)
	s.waitFor("gpu-01 alone", "Machines · 1 of 9")
	s.keys("a", "p")
	s.waitFor("the profiles for gpu-01", "Assign gpu-01 to profile")
	s.keys("2")
	s.waitFor("the question for gpu-01", "Assign gpu-01 (m-0a1b2c3d4e05)", "gpu?")
	s.keys(tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("refused", "assign to gpu gpu-01: machine m-0a1b2c3d4e05 is commissioning: only a ready machine is assigned")

	want := []Action{
		{"m-0a1b2c3d4e01", "assign", "compute"},
		{"m-0a1b2c3d4e01", "unassign", ""},
		{"m-0a1b2c3d4e01", "assign", "compute+boot"},
		{"m-0a1b2c3d4e05", "assign", "gpu"},
	}
	if diff := cmp.Diff(want, s.f.actions()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
