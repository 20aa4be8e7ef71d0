package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

var jobIDs = regexp.MustCompile(`j-[0-9a-f]{16}`)

func addDebian(t *testing.T, n *testNode) {
	t.Helper()
	now := time.Now().UTC()
	if _, err := n.Cluster().Apply(context.Background(), &raftfsm.OSVersionAdd{
		Name: "debian-13", Family: store.FamilyDebian, Node: n.Name(),
		New: raftfsm.OSVersion{Version: "20261201", File: raftfsm.ImageFile{Name: raftfsm.OSFileName, Size: 600 << 20, SHA256: fmt.Sprintf("%064x", "zst")},
			RawSize: 3 << 30, RawSHA256: fmt.Sprintf("%064x", "raw"), SectorSize: 512, Format: "qcow2", Imported: now},
		Now: now,
	}); err != nil {
		t.Fatal(err)
	}
}

// The deployment verbs against a node: deploy shows the disk and the rule
// before anything is written, jobs lists, -watch follows the agent's
// reports to the end, job cancel takes a job or a machine.
func TestDeployCLI(t *testing.T) {
	n := startNode(t, nodeOptions{})
	n.use(t)
	rep := report("02:00:00:00:0d:01")
	commissionAs(t, n, rep)
	id := strings.Fields(mustRun(t, "list"))[len(strings.Fields(strings.Split(mustRun(t, "list"), "\n")[0]))]
	addDebian(t, n)
	keys := filepath.Join(t.TempDir(), "keys.pub")
	os.WriteFile(keys, []byte("# ops\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5 op@example\n"), 0o600)

	out := mustRun(t, "deploy", id, "debian-13", "-hostname", "node1", "-packages", "htop,jq", "-ssh-key", keys)
	jobID := jobIDs.FindString(out)
	golden(t, "deploy", jobIDs.ReplaceAllString(normalize(out, id), "j-################"))
	if code, _, errs := run("deploy", id, "debian-13"); code == 0 || !strings.Contains(errs, "only a ready machine deploys") {
		t.Errorf("a second deploy: %d %s", code, errs)
	}
	if code, _, errs := run("deploy", "tag:gpu", "debian-13"); code == 0 || !strings.Contains(errs, "not supported yet") {
		t.Errorf("deploy tag:: %d %s", code, errs)
	}

	// The agent's reports, with -watch following them.
	var script struct{ body string }
	code, b := n.call(t, http.MethodGet, "/boot/ipxe?mac="+rep.BootMAC, nil)
	script.body = string(b)
	tok := regexp.MustCompile(`rollcall\.job=(\S+)`).FindStringSubmatch(script.body)
	if code != http.StatusOK || tok == nil {
		n.ImportImage(t, n.Admin, "commissioning", []byte("k"), []byte("i"))
		_, b = n.call(t, http.MethodGet, "/boot/ipxe?mac="+rep.BootMAC, nil)
		if tok = regexp.MustCompile(`rollcall\.job=(\S+)`).FindStringSubmatch(string(b)); tok == nil {
			t.Fatalf("no job token in the boot script:\n%s", b)
		}
	}
	done := make(chan string)
	go func() {
		_, out, errs := run("jobs", id, "-watch")
		done <- out + errs
	}()
	for _, p := range []wire.ProgressRequest{{Step: "write", State: "running", Bytes: 1 << 30, Total: 4 << 30}, {Step: "write", State: "running", Bytes: 2 << 30, Total: 4 << 30}, {Step: "done", State: "done"}} {
		body, _ := json.Marshal(p)
		time.Sleep(300 * time.Millisecond)
		if code, b := n.call(t, http.MethodPost, "/api/v1/jobs/self/progress", strings.NewReader(string(body)), "X-Rollcall-Job", tok[1]); code != http.StatusOK {
			t.Fatalf("progress: %d %s", code, b)
		}
	}
	select {
	case w := <-done:
		for _, want := range []string{"write running 25%", "write running 50%", "deploy done"} {
			if !strings.Contains(w, want) {
				t.Errorf("-watch printed %q, without %q", w, want)
			}
		}
	case <-time.After(60 * time.Second):
		t.Fatal("-watch did not end")
	}
	var jobs []wire.DeployJob
	if err := json.Unmarshal([]byte(mustRun(t, "jobs", id, "-json")), &jobs); err != nil || len(jobs) != 1 || jobs[0].ID != jobID || jobs[0].State != "done" {
		t.Fatalf("jobs -json: %v %+v", err, jobs)
	}

	// Release, then cancel it by job ID before the agent starts.
	out = mustRun(t, "release", id, "-wipe", "full")
	relID := jobIDs.FindString(out)
	golden(t, "release", jobIDs.ReplaceAllString(normalize(out, id), "j-################"))
	out = mustRun(t, "job", "cancel", relID)
	if !strings.Contains(out, "cancelled") {
		t.Errorf("job cancel: %s", out)
	}
	table := mustRun(t, "jobs", id)
	golden(t, "jobs", jobIDs.ReplaceAllString(normalize(table, id), "j-################"))
	if code, _, errs := run("job", "cancel", id); code == 0 || !strings.Contains(errs, "no queued or running") {
		t.Errorf("cancel without a job: %d %s", code, errs)
	}
}
