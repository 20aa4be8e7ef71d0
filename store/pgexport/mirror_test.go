package pgexport

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/pgexport/pgtest"
)

// runMirror starts a mirror; stop cancels it and checks that Run returned
// nil.
func runMirror(t *testing.T, db *store.DB, dsn, schema string, exported func(uint64)) (m *Mirror, stop func()) {
	t.Helper()
	m, err := NewMirror(db, MirrorConfig{
		Target: Target{DSN: dsn, Schema: schema, Node: "node1"}, RetryMin: 50 * time.Millisecond, RetryMax: 300 * time.Millisecond,
		Idle: 200 * time.Millisecond, Exported: exported,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v after cancel, want nil", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Run did not return within 10s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return m, stop
}

// The mirror loads everything once, then follows creates, updates and
// deletes of every kind of record.
func TestMirrorFollows(t *testing.T) {
	srv := server(t)
	f := newFleet(t)
	f.commission(t, 0, 50)
	f.network(t)
	schema := schemaName(t)
	m, _ := runMirror(t, f.db, srv.DSN(), schema, nil)
	waitExported(t, m, f.db)
	conn := srv.Conn(t)
	compareAll(t, conn, schema, f.db)

	f.commission(t, 50, 120)
	for i := range 10 { // commissioned again: new inventories replace the old rows
		f.apply(t, &raftfsm.Recommission{ID: pgtest.ID(i), Now: f.tick()})
	}
	f.commission(t, 0, 10)
	f.apply(t,
		&raftfsm.Recommission{ID: pgtest.ID(11), Reason: "burn-in failed", Now: f.tick()},
		&raftfsm.MachineDelete{ID: pgtest.ID(12)},
		&raftfsm.MachineDelete{ID: pgtest.ID(13)},
		&raftfsm.MachineEvent{Event: store.Event{Machine: pgtest.ID(14), Time: f.tick(), Kind: "note", Message: "rack B7 U12"}},
		&raftfsm.MachineCreate{ID: "m-0000000000aa", Name: "by-hand", MACs: []string{"02:00:00:00:00:aa"}, Now: f.tick()},
		&raftfsm.AddressRelease{IP: netip.MustParseAddr("10.20.0.11")},
		&raftfsm.NodeRemove{Name: "node2"},
		&raftfsm.FabricPut{Fabric: store.Fabric{Name: "dc2", Kind: store.FabricEthernet, Created: f.tick()}},
		&raftfsm.RangeDelete{Subnet: netip.MustParsePrefix("10.20.0.0/16"), First: netip.MustParseAddr("10.20.0.1")},
	)
	// A machine deleted and created again under the same ID in one batch:
	// its old events must not survive in PostgreSQL.
	if err := f.log.ApplyBatch(
		&raftfsm.MachineDelete{ID: pgtest.ID(15)},
		&raftfsm.MachineCreate{ID: pgtest.ID(15), Name: "reborn", Now: f.tick()},
	); err != nil {
		t.Fatal(err)
	}
	st := waitExported(t, m, f.db)
	compareAll(t, conn, schema, f.db)
	if st.FullExports != 1 || st.LagIndexes != 0 || !st.Running || !st.Connected || st.Changes == 0 || st.LastError != "" {
		t.Errorf("status %+v: want one full export, no lag, running, connected, changes applied, no error", st)
	}
	var mode string
	if err := conn.QueryRow(t.Context(), "SELECT mode FROM "+ident(schema, "export_state")).Scan(&mode); err != nil || mode != "mirror" {
		t.Errorf("export_state.mode = %q (%v), want mirror", mode, err)
	}
}

// PostgreSQL stopped and restarted while the store keeps changing: the
// mirror reports the outage and its lag, then catches up without a full
// reload and without losing a change.
func TestMirrorSurvivesOutage(t *testing.T) {
	srv := pgtest.Start(t)
	f := newFleet(t)
	f.commission(t, 0, 20)
	schema := "outage"
	m, _ := runMirror(t, f.db, srv.DSN(), schema, nil)
	waitExported(t, m, f.db)

	feed := func(from, to int) {
		for i := from; i < to; i++ {
			f.commission(t, i, i+1)
			if i%7 == 0 {
				f.apply(t, &raftfsm.Recommission{ID: pgtest.ID(i - 5), Now: f.tick()})
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	feed(20, 60)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	feed(60, 120)
	f.apply(t, &raftfsm.MachineDelete{ID: pgtest.ID(30)})
	deadline := time.Now().Add(10 * time.Second)
	var st Status
	for st = m.Status(); st.LastError == "" && time.Now().Before(deadline); st = m.Status() {
		time.Sleep(20 * time.Millisecond)
	}
	if st.LastError == "" || st.Connected || st.LagIndexes == 0 || st.LagSeconds <= 0 {
		t.Errorf("during the outage: %+v; want an error, not connected, a lag in indexes and seconds", st)
	}
	t.Logf("during the outage: lag %d indexes, %.2fs, error %q", st.LagIndexes, st.LagSeconds, st.LastError)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	feed(120, 150)
	st = waitExported(t, m, f.db)
	compareAll(t, srv.Conn(t), schema, f.db)
	if st.FullExports != 1 {
		t.Errorf("%d full exports, want 1: the mirror should resume from its index", st.FullExports)
	}
}

// A change of leader: the old leader's mirror stops, the new leader's
// (another copy of the store, fed the same log) resumes at the index the
// old one stored, without reloading; and two mirrors that overlap for a
// while (an old leader that has not noticed yet) do not corrupt anything.
func TestMirrorHandover(t *testing.T) {
	srv := server(t)
	a, b := newFleet(t), newFleet(t)
	both := func(fn func(f *fleet)) { fn(a); fn(b) }
	both(func(f *fleet) { f.commission(t, 0, 40); f.network(t) })
	schema := schemaName(t)
	ma, stopA := runMirror(t, a.db, srv.DSN(), schema, nil)
	stA := waitExported(t, ma, a.db)
	stopA()
	handedOver := stA.ExportedIndex

	both(func(f *fleet) {
		f.commission(t, 40, 60)
		f.apply(t, &raftfsm.MachineDelete{ID: pgtest.ID(3)})
	})
	var mu sync.Mutex
	var first uint64
	mb, _ := runMirror(t, b.db, srv.DSN(), schema, func(i uint64) {
		mu.Lock()
		defer mu.Unlock()
		if first == 0 {
			first = i
		}
	})
	stB := waitExported(t, mb, b.db)
	conn := srv.Conn(t)
	compareAll(t, conn, schema, b.db)
	mu.Lock()
	if first != handedOver || stB.FullExports != 0 {
		t.Errorf("new leader started at index %d with %d full exports; want %d and none", first, stB.FullExports, handedOver)
	}
	mu.Unlock()

	// Overlap: the old leader's mirror runs again beside the new one.
	ma2, _ := runMirror(t, a.db, srv.DSN(), schema, nil)
	for i := 60; i < 90; i++ {
		both(func(f *fleet) { f.commission(t, i, i+1) })
	}
	waitExported(t, ma2, a.db)
	waitExported(t, mb, b.db)
	compareAll(t, conn, schema, b.db)
}

// When the change log no longer reaches the exported index (the mirror
// was away for more than the log's window), the mirror reloads everything.
func TestMirrorFallsBackToFullExport(t *testing.T) {
	srv := server(t)
	f := newFleet(t)
	f.commission(t, 0, 30)
	schema := schemaName(t)
	m, stop := runMirror(t, f.db, srv.DSN(), schema, nil)
	waitExported(t, m, f.db)
	stop()

	f.log.Index += 1_000_010 // the log moved on past the change window
	f.commission(t, 30, 40)
	f.apply(t, &raftfsm.MachineDelete{ID: pgtest.ID(1)})
	var truncated error
	f.db.View(func(tx *store.Tx) error { _, _, truncated = tx.ChangeBatch(m.Status().ExportedIndex, 10); return nil })
	if truncated == nil {
		t.Fatal("the change log still reaches the exported index; the test does not test the fallback")
	}
	m2, _ := runMirror(t, f.db, srv.DSN(), schema, nil)
	st := waitExported(t, m2, f.db)
	if st.FullExports != 1 {
		t.Errorf("%d full exports, want 1", st.FullExports)
	}
	compareAll(t, srv.Conn(t), schema, f.db)
}
