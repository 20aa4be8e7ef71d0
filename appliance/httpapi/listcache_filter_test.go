package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
)

// ?tag= and ?rack= are served from cached rows: a re-tag and a location
// change are each seen by the next list. (A re-commission's effect on the
// facts cache is store/tagrule's TestFactsCache.)
func TestListCacheFiltersSeeChanges(t *testing.T) {
	log := fsmtest.Open(t)
	var lc listCache
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ident := raftfsm.Identity{Key: "serial:S1", Serial: "S1", MACs: []string{"02:00:00:00:00:01"}}
	log.Apply(&raftfsm.Commission{NewID: "m-000000000001", Identity: ident, Inventory: json.RawMessage(`{}`), Now: now})
	log.Apply(&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "db"}, Now: now})
	log.Apply(&raftfsm.RackPut{Rack: raftfsm.Rack{Name: "r1"}, Now: now})
	count := func(f listFilter) int {
		t.Helper()
		rows, _, err := lc.snapshot(log.DB)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range rows {
			if f.keep(r) {
				n++
			}
		}
		return n
	}
	if n := count(listFilter{tag: "db"}); n != 0 {
		t.Fatalf("before tagging: %d machines tagged db", n)
	}
	log.Apply(&raftfsm.MachineTags{Machines: []string{"m-000000000001"}, Add: []string{"db"}, Now: now})
	if n := count(listFilter{tag: "db"}); n != 1 {
		t.Fatalf("after tagging: %d machines tagged db, want 1", n)
	}
	log.Apply(&raftfsm.MachineTags{Machines: []string{"m-000000000001"}, Remove: []string{"db"}, Now: now})
	if n := count(listFilter{tag: "db"}); n != 0 {
		t.Fatalf("after untagging: %d machines tagged db, want 0", n)
	}
	log.Apply(&raftfsm.LocationSet{Machines: []raftfsm.MachineLocation{{ID: "m-000000000001", Location: raftfsm.Location{Rack: "r1"}}}, Now: now})
	if n := count(listFilter{rack: "r1"}); n != 1 {
		t.Fatalf("after the move: %d machines in r1, want 1", n)
	}
	log.Apply(&raftfsm.LocationSet{Machines: []raftfsm.MachineLocation{{ID: "m-000000000001"}}, Now: now})
	if n := count(listFilter{rack: "r1"}); n != 0 {
		t.Fatalf("after the move out: %d machines in r1, want 0", n)
	}
}
