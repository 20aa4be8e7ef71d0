package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
)

// oneMachineLog is a log that has commissioned one machine, and the time
// its commands carry.
func oneMachineLog(t *testing.T) (*fsmtest.Log, time.Time) {
	log := fsmtest.Open(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ident := raftfsm.Identity{Key: "serial:S1", Serial: "S1", MACs: []string{"02:00:00:00:00:01"}}
	log.Apply(&raftfsm.Commission{NewID: "m-000000000001", Identity: ident, Inventory: json.RawMessage(`{}`), Now: now})
	return log, now
}

// ?tag= and ?rack= are served from cached rows and shared answers: a
// re-tag and a location change are each seen by the next list. (A re-commission's effect on the
// facts cache is store/tagrule's TestFactsCache.)
func TestListCacheFiltersSeeChanges(t *testing.T) {
	log, now := oneMachineLog(t)
	var lc listCache
	log.Apply(&raftfsm.TagPut{Tag: raftfsm.Tag{Name: "db"}, Now: now})
	log.Apply(&raftfsm.RackPut{Rack: raftfsm.Rack{Name: "r1"}, Now: now})
	count := func(f listFilter) int {
		t.Helper()
		a, err := lc.answer(log.DB, listQuery{f: f})
		if err != nil {
			t.Fatal(err)
		}
		var l struct{ Machines []json.RawMessage }
		if err := json.Unmarshal(a.body, &l); err != nil {
			t.Fatalf("%v: %s", err, a.body)
		}
		return len(l.Machines)
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

// The answers kept for one index are bounded: a client asking a new
// question each time is answered, and the cache stays small.
func TestListCacheAnswersBounded(t *testing.T) {
	log, now := oneMachineLog(t)
	var lc listCache
	for i := range 3 * maxSharedAnswers {
		a, err := lc.answer(log.DB, listQuery{f: listFilter{q: fmt.Sprint("no-such-", i)}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(a.body), `"machines":[]`) {
			t.Fatalf("question %d answered %s", i, a.body)
		}
	}
	if n := len(lc.answers); n > maxSharedAnswers {
		t.Fatalf("%d answers kept, more than %d", n, maxSharedAnswers)
	}
	// The unfiltered list is kept even then, and a question asked again
	// after a change is answered anew.
	if a, err := lc.fullList(log.DB); err != nil || lc.answers[listQuery{}] != a {
		t.Fatalf("full list not kept: %v", err)
	}
	before, _ := lc.answer(log.DB, listQuery{f: listFilter{q: "s1"}})
	log.Apply(&raftfsm.MachineRename{ID: "m-000000000001", Name: "web-1", Now: now})
	after, _ := lc.answer(log.DB, listQuery{f: listFilter{q: "web"}})
	if before.index >= after.index || !strings.Contains(string(after.body), "web-1") {
		t.Fatalf("after a rename: %s (index %d, was %d)", after.body, after.index, before.index)
	}
}
