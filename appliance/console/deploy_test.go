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

	"github.com/rollcall/rollcall/appliance/wire"
)

// Deploy… from the actions menu: the OS versions of the catalog, a
// confirmation that says what is overwritten (Cancel focused), the job
// named in the answer; then the machine view follows the job's progress
// as the agent reports it, and Cancel job stops it after confirming.
func TestDeployFromTheActionsMenu(t *testing.T) {
	s := startSession(t, 140, 40)
	s.keys("2", "/", "web-02", tcell.KeyEnter)
	s.waitFor("web-02 alone", "Machines · 1 of 9")
	s.keys("a", "e")
	s.waitFor("the OS menu", "Deploy web-02 with", "debian-13 (current 20260314-1)", "debian-13 20260301-1", "rocky-9 9.5-1")
	s.keys("2") // debian-13 20260314-1
	s.waitFor("the confirmation", "Deploy web-02 (m-0a1b2c3d4e02)?", "overwrites the disk the rule chooses", "never a USB stick", "Cancel")
	s.keys(tcell.KeyEnter) // Cancel has the focus
	s.waitFor("cancelled", "deploy: cancelled")
	if got := s.f.actions(); len(got) != 0 {
		t.Fatalf("cancel still called the API: %v", got)
	}
	s.keys("a", "e")
	s.waitFor("the OS menu again", "Deploy web-02 with")
	s.keys("2")
	s.waitFor("the confirmation again", "Deploy web-02 (m-0a1b2c3d4e02)?")
	s.keys(tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("the job", "deploy debian-13 20260314-1 web-02: job j-0000000000000001: debian-13 20260314-1 onto sda")
	if diff := cmp.Diff([]Action{{"m-0a1b2c3d4e02", "deploy", "debian-13@20260314-1"}}, s.f.actions()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}

	s.keys(tcell.KeyEnter) // open web-02
	s.waitFor("the machine view", "Deployment  job j-0000000000000001 queued", "waiting for the machine to boot the deploy agent")
	s.f.report("m-0a1b2c3d4e02", wire.JobProgress{Step: "write", State: "running", Bytes: 1 << 30, Total: 4 << 30, Updated: fakeNow},
		wire.JobStep{Step: "wipe", State: "done", At: ago(time.Minute)})
	s.waitFor("live progress", "job j-0000000000000001 running", "write running", "25%", "1.1 GB of 4.3 GB", "wipe       done")

	s.keys("a", "j")
	s.waitFor("cancel confirmation", "Cancel job web-02 (m-0a1b2c3d4e02)?", "before it writes")
	s.keys(tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("cancelled job", "job j-0000000000000001 cancelled")
	if got := s.f.actions(); len(got) != 2 || got[1] != (Action{"m-0a1b2c3d4e02", "cancel", ""}) {
		t.Errorf("calls: %v", got)
	}
}

// Release… asks for the wipe, then confirms.
func TestReleaseFromTheActionsMenu(t *testing.T) {
	s := startSession(t, 140, 40)
	s.f.update(func(ms []wire.MachineView) []wire.MachineView {
		ms[2].State = wire.StateDeployed // db-01
		return ms
	})
	s.keys("2", "/", "db-01", tcell.KeyEnter)
	s.waitFor("db-01 alone", "Machines · 1 of 9")
	s.keys("a", "r")
	s.waitFor("the wipe menu", "Release db-01", "Quick wipe", "Full wipe")
	s.keys("f")
	s.waitFor("the confirmation", "Release db-01 (m-0a1b2c3d4e03)?", "the installed system is destroyed")
	s.keys(tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("the job", "full wipe of")
	if diff := cmp.Diff([]Action{{"m-0a1b2c3d4e03", "release", "full"}}, s.f.actions()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// The machine view of a deploying machine with its job's progress, as a
// golden dump.
func TestDumpDeployingMachine(t *testing.T) {
	f := newFleet()
	f.mu.Lock()
	_, err := f.doDeploy(1, Action{Machine: "m-0a1b2c3d4e02", Kind: "deploy", Arg: "debian-13"})
	f.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	f.report("m-0a1b2c3d4e02", wire.JobProgress{Step: "write", State: "running", Bytes: 3 << 30, Total: 4 << 30, Updated: ago(2 * time.Second)},
		wire.JobStep{Step: "wipe", State: "done", At: ago(90 * time.Second)}, wire.JobStep{Step: "download", State: "running", At: ago(80 * time.Second)})
	for _, sz := range dumpSizes {
		var buf bytes.Buffer
		if err := Dump(&buf, sz.w, sz.h, "machine/web-02", true, f); err != nil {
			t.Fatal(err)
		}
		if sz.h >= 40 && !strings.Contains(buf.String(), "75%") {
			t.Errorf("%dx%d: no progress on the machine view:\n%s", sz.w, sz.h, buf.String())
		}
		golden(t, filepath.Join("testdata", "dump", fmt.Sprintf("machine-web-02-deploying-%dx%d.txt", sz.w, sz.h)), buf.Bytes())
	}
}

// The OS page's keys: p promotes a version that is not current (asked
// first), s syncs the sources now (asked first) and the outcome is shown.
func TestOSPromoteAndSync(t *testing.T) {
	s := startSession(t, 140, 40)
	s.keys("9")
	s.waitFor("the OS page", "debian-13", "current 20260314-1", "s sync now")
	s.keys("p")
	s.waitFor("the versions", "Promote a version", "debian-13 20260301-1")
	s.keys("1")
	s.waitFor("the question", "Make debian-13 20260301-1 current?")
	s.keys(tcell.KeyEnter) // Cancel has the focus
	s.waitFor("cancelled", "promote: cancelled")
	s.keys("p", "1", tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("promoted", "promote: debian-13 20260301-1 is current", "current 20260301-1")

	s.keys("s")
	s.waitFor("the sync question", "Sync the OS images now?")
	s.keys(tcell.KeyTab, tcell.KeyEnter)
	s.waitFor("synced", "os sync: debian-13 new 20261201-1; rocky-9 unchanged")
	s.f.mu.Lock()
	calls := append([]string(nil), s.f.osCalls...)
	s.f.mu.Unlock()
	if diff := cmp.Diff([]string{"promote debian-13 20260301-1", "sync "}, calls); diff != "" {
		t.Errorf("OS calls (-want +got):\n%s", diff)
	}
}
