package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The cluster verbs against two nodes: join-code (startCluster joins with
// it), status as a table and as JSON, check, repair and remove.
func TestClusterCLI(t *testing.T) {
	nodes := startCluster(t, 2, nodeOptions{})

	out := mustRun(t, "cluster", "status")
	// The table, then what the version gate waits for while the two
	// nodes' reports are young (cluster_gate_test.go).
	table, _, _ := strings.Cut(strings.TrimSuffix(out, "\n"), "\n\n")
	lines := strings.Split(table, "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME ADDRESS ROLE VOTER STATE APPLIED LAST CONTACT BUILD" {
		t.Fatalf("cluster status:\n%s", out)
	}
	leader, follower := strings.Fields(lines[1]), strings.Fields(lines[2])
	if len(leader) != 8 || leader[0] != "t1" || leader[1] != nodes[0].Cluster().Advertise() || leader[2] != "leader" || leader[3] != "yes" || leader[4] != "leader" || leader[6] != "-" {
		t.Errorf("the leader's row: %q", lines[1])
	}
	if len(follower) != 9 || follower[0] != "t2" || follower[2] != "follower" || follower[3] != "yes" || follower[4] != "follower" ||
		!regexp.MustCompile(`^[0-9.]+[µm]?s$`).MatchString(follower[6]) || follower[7] != "ago" {
		t.Errorf("the follower's row: %q", lines[2])
	}
	// Columns line up: every row has its ROLE where the header has it.
	if col := strings.Index(lines[0], "ROLE"); lines[1][col:col+6] != "leader" || lines[2][col:col+8] != "follower" {
		t.Errorf("cluster status columns are not aligned:\n%s", out)
	}
	var v wire.ClusterView
	if err := json.Unmarshal([]byte(mustRun(t, "cluster", "status", "-json")), &v); err != nil || v.Leader != "t1" || len(v.Members) != 2 {
		t.Errorf("cluster status -json: %+v, %v", v, err)
	}

	if out := mustRun(t, "cluster", "check"); !regexp.MustCompile(`^every node hashes its store at index \d+ and compares; rollcall cluster status shows a node that differs\n$`).MatchString(out) {
		t.Errorf("cluster check: %q", out)
	}
	if out := mustRun(t, "cluster", "repair", "t2"); !regexp.MustCompile(`^rebuilding t2's store from the leader's…\nrepaired t2: its store is the leader's as of index \d+\n$`).MatchString(out) {
		t.Errorf("cluster repair: %q", out)
	}
	// Its certificates are revoked by serial once the gate has opened the
	// revocation; before that the note says it is refused by name.
	if out := mustRun(t, "cluster", "remove", "t2"); !regexp.MustCompile(`^removed t2; \d+ of its certificates revoked by serial\n(certificates not revoked by serial \(.*\); the node is refused by name\n)?$`).MatchString(out) {
		t.Errorf("cluster remove: %q", out)
	}
	if out := mustRun(t, "cluster", "status"); strings.Contains(out, "t2") {
		t.Errorf("cluster status after remove:\n%s", out)
	}
	for _, args := range [][]string{{"cluster", "remove"}, {"cluster", "repair"}, {"cluster", "repair", "nosuch"}, {"cluster", "frob"}} {
		if code, _, errs := run(args...); code != 1 || errs == "" {
			t.Errorf("rollcall %s: exit %d, %q", strings.Join(args, " "), code, errs)
		}
	}
}
