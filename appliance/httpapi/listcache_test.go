package httpapi

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
)

// The cached list always equals a list decoded from the store, through
// creates, updates, deletes and events, read after every few writes: the
// commands applied by the real state machine (fsmtest), as on a node.
func TestListCacheFollowsTheStore(t *testing.T) {
	log := fsmtest.Open(t)
	var lc listCache
	rng := rand.New(rand.NewPCG(1, 2))
	var ids []string
	for step := 0; step < 300; step++ {
		now := time.Now().UTC()
		var cmd raftfsm.Command
		switch op := rng.IntN(10); {
		case op < 5 || len(ids) == 0:
			id := fmt.Sprintf("m-%012x", step+1)
			ids = append(ids, id)
			cmd = &raftfsm.MachineCreate{ID: id, Name: fmt.Sprintf("n%d", step), Now: now}
		case op < 7:
			id := ids[rng.IntN(len(ids))]
			cmd = &raftfsm.Commission{NewID: "m-ffffffffffff", Identity: raftfsm.Identity{Key: "serial:S" + id, Serial: "S" + id, MACs: []string{fmt.Sprintf("02:00:00:00:%02x:%02x", step>>8, step&0xff)}}, Inventory: json.RawMessage(`{}`), Now: now}
			_ = id
		case op < 8:
			i := rng.IntN(len(ids))
			cmd = &raftfsm.MachineDelete{ID: ids[i]}
			ids = append(ids[:i], ids[i+1:]...)
		default:
			cmd = &raftfsm.MachineEvent{Event: raftfsm.Event{Machine: ids[rng.IntN(len(ids))], Time: now, Kind: "note", Message: "x"}}
		}
		log.Apply(cmd) // business errors (a commission of a ready machine) are part of the mix
		if step%7 != 0 {
			continue
		}
		rows, idx, err := lc.snapshot(log.DB)
		if err != nil {
			t.Fatal(err)
		}
		var want []wire.MachineView
		var wantIdx uint64
		log.DB.View(func(tx *store.Tx) error {
			wantIdx = tx.TableIndex(store.TableMachines)
			ms, _ := tx.Machines(store.MachineFilter{})
			for _, m := range ms {
				want = append(want, wireMachine(m))
			}
			return nil
		})
		var got []wire.MachineView
		for _, r := range rows {
			var v wire.MachineView
			if err := json.Unmarshal(r.body(), &v); err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
		if idx != wantIdx {
			t.Fatalf("step %d: cache at index %d, store at %d", step, idx, wantIdx)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("step %d: cached list differs (-store +cache):\n%s", step, diff)
		}
	}
}

// machinesIn hands a tag rule's evaluation the machines exactly as its
// transaction holds them, and nothing when the cache has moved past the
// transaction (the caller then reads the transaction itself).
func TestListCacheMachinesIn(t *testing.T) {
	log := fsmtest.Open(t)
	var lc listCache
	now := time.Now().UTC()
	for i := range 5 {
		log.Must(t, &raftfsm.MachineCreate{ID: fmt.Sprintf("m-%012x", i+1), Name: fmt.Sprintf("n%d", i), Now: now})
	}
	check := func(tx *store.Tx) {
		t.Helper()
		got, err := lc.machinesIn(tx)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := tx.Machines(store.MachineFilter{})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("machinesIn differs from the transaction (-tx +cache):\n%s", diff)
		}
	}
	log.DB.View(func(tx *store.Tx) error { check(tx); return nil })
	// An old view held open while the cache moves on.
	old := make(chan struct{})
	opened := make(chan struct{})
	done := make(chan string)
	go log.DB.View(func(tx *store.Tx) error {
		close(opened)
		<-old
		ms, err := lc.machinesIn(tx)
		want, _ := tx.Machines(store.MachineFilter{})
		switch {
		case err != nil:
			done <- err.Error()
		case ms != nil && !cmp.Equal(ms, want):
			done <- fmt.Sprintf("an older view (%d machines) got %d from a newer cache", len(want), len(ms))
		default:
			done <- ""
		}
		return nil
	})
	<-opened
	log.Must(t, &raftfsm.MachineDelete{ID: "m-000000000001"})
	log.DB.View(func(tx *store.Tx) error { check(tx); return nil })
	close(old)
	if msg := <-done; msg != "" {
		t.Error(msg)
	}
}
