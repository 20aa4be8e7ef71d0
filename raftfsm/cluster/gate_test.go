package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// TestVersionGate runs three in-process nodes that read GateProbe only at
// body version 1 (as a gate-aware binary from before version 2 would) and
// upgrades them one at a time: the gate opens version 1 only and
// proposers write it; with n1 upgraded, a version 2 entry forced into the
// log is refused on every node with n3 named and stops none; a downgrade
// of n1 before the gate opened version 2 is safe; version 2 opens only
// after the last node moved, is written then, and restarting a node as
// the older build again is refused with the reason.
func TestVersionGate(t *testing.T) {
	old := map[raftfsm.Type]uint8{raftfsm.TypeGateProbe: 1}
	tc := newTestCluster(t, 3, func(c *Config) {
		c.VersionReportEvery = 100 * time.Millisecond
		c.Withhold = old
	})
	n1, n2, n3 := tc.nodes[0], tc.nodes[1], tc.nodes[2]
	restart := func(nd *testNode, withhold map[raftfsm.Type]uint8) error {
		t.Helper()
		if err := nd.stop(); err != nil {
			t.Fatal(err)
		}
		nd.cfg.Withhold = withhold
		return nd.start()
	}
	openEverywhere := func(want uint8) {
		tc.eventually(20*time.Second, fmt.Sprintf("gate-probe v%d open on every node", want), func() error {
			for _, nd := range tc.nodes {
				if got := nd.cluster().FSM().OpenVersion(raftfsm.TypeGateProbe); got != want {
					return fmt.Errorf("%s: gate-probe open at %d", nd.name, got)
				}
			}
			return nil
		})
	}
	probes := func() []map[int]uint64 {
		var out []map[int]uint64
		for _, nd := range tc.nodes {
			var m map[int]uint64
			nd.store().View(func(tx *store.Tx) error { m = tx.GateProbes(); return nil })
			out = append(out, m)
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	apply := func(nd *testNode, c raftfsm.Command) (uint64, error) { return nd.cluster().Apply(ctx, c) }
	sync := func() {
		t.Helper()
		idx, err := apply(tc.leader(10*time.Second), raftfsm.Noop{})
		if err != nil {
			t.Fatal(err)
		}
		for _, nd := range tc.nodes {
			if err := nd.cluster().FSM().WaitApplied(ctx, idx); err != nil {
				t.Fatalf("%s: %v", nd.name, err)
			}
		}
	}

	openEverywhere(1)
	if _, err := apply(tc.nodes[0], &raftfsm.GateProbe{Note: "while n3 is old", Seq: 1}); err != nil {
		t.Fatalf("a probe while the gate holds version 2: %v", err)
	}
	sync()
	for i, p := range probes() {
		if p[1] != 1 || p[2] != 0 {
			t.Fatalf("%s counted probes %v, want one of version 1 (the proposer writes what is open)", tc.nodes[i].name, p)
		}
	}

	// n1 moves; a version 2 entry forced into the log: refused on every
	// node, n3 named.
	if err := restart(n1, nil); err != nil {
		t.Fatalf("upgrade n1: %v", err)
	}
	sync()
	leader := tc.leader(10 * time.Second)
	v2, err := raftfsm.Encode(&raftfsm.GateProbe{Note: "forced", Seq: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = leader.cluster().ApplyRaw(ctx, v2)
	if !errors.Is(err, raftfsm.ErrGateClosed) || !strings.Contains(err.Error(), "node n3") {
		t.Fatalf("forced version 2 entry: got %v, want it refused by the gate naming n3", err)
	}
	sync() // n3 applied past it: it did not stop
	for i, p := range probes() {
		if p[2] != 0 {
			t.Fatalf("%s applied a refused entry: %v", tc.nodes[i].name, p)
		}
	}
	st := n1.cluster().LocalStatus()
	if st.Gate == nil || !strings.Contains(strings.Join(st.Gate.Waiting, "; "), "n3") || st.Build == "" {
		t.Fatalf("n1's status %+v does not give its build and say its gate waits for n3", st)
	}

	// A downgrade of n1 before the gate opened version 2 is safe.
	if err := restart(n1, old); err != nil {
		t.Fatalf("downgrade of n1 before the gate opened: %v", err)
	}
	sync()

	// Upgrade every node, one at a time: version 2 opens only after the last.
	for _, nd := range tc.nodes {
		if got := n1.cluster().FSM().OpenVersion(raftfsm.TypeGateProbe); got != 1 {
			t.Fatalf("gate-probe open at %d before %s moved", got, nd.name)
		}
		if err := restart(nd, nil); err != nil {
			t.Fatalf("upgrade %s: %v", nd.name, err)
		}
		sync()
	}
	openEverywhere(2)
	if _, err := apply(n3, &raftfsm.GateProbe{Note: "all moved", Seq: 3}); err != nil {
		t.Fatal(err)
	}
	sync()
	for i, p := range probes() {
		if p[1] != 1 || p[2] != 1 {
			t.Fatalf("%s counted probes %v, want one of each version", tc.nodes[i].name, p)
		}
	}

	// A downgrade after the gate opened is refused, with the reason.
	err = restart(n2, old)
	if err == nil || !strings.Contains(err.Error(), "downgrade after the gate opened is refused") {
		t.Fatalf("downgrade of n2 after the gate opened: got %v, want it refused with the reason", err)
	}
}
