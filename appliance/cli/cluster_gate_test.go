package cli

import (
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance/wire"
)

// TestPrintClusterStatusGate: the table gives each member's build (or says
// it runs without the gate), and the leader's gate view says what is not
// open and whom it waits for.
func TestPrintClusterStatusGate(t *testing.T) {
	v := wire.ClusterView{Leader: "n1", Members: []wire.Member{
		{ID: "n1", Leader: true, Voter: true, Reachable: true, Status: &wire.NodeStatus{ID: "n1", State: "Leader", Build: "abc123",
			Gate: &wire.GateStatus{Pending: []string{"gate-probe v2"}, Waiting: []string{"node n3 (build old1 reads gate-probe up to 1)"}}}},
		{ID: "n2", Voter: true, Reachable: true, Status: &wire.NodeStatus{ID: "n2", State: "Follower"}},
		{ID: "n3", Voter: true, Reachable: true, Status: &wire.NodeStatus{ID: "n3", State: "Follower", Build: "old1"}},
	}}
	var b strings.Builder
	if err := printClusterStatus(&b, v); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"BUILD", "abc123", "old1", "(no version gate)", "version gate: gate-probe v2 not open yet", "waiting for node n3 (build old1"} {
		if !strings.Contains(out, want) {
			t.Errorf("cluster status lacks %q:\n%s", want, out)
		}
	}
}
