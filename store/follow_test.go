package store

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestFollow(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runs atomic.Int32
	wake := make(chan struct{}, 1)
	stop := errors.New("enough")
	done := make(chan error, 1)
	go func() {
		done <- db.Follow(ctx, []string{TableMachines}, 0, wake, func(context.Context) error {
			if runs.Add(1) == 4 {
				return stop
			}
			return nil
		})
	}()
	waitRuns := func(want int32) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for runs.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%d runs, want %d", runs.Load(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitRuns(1) // at once
	// A change to another table does not run it; one to machines does.
	db.Update(func(tx *Tx) error { tx.Index = 5; return tx.PutFabric(Fabric{Name: "f", Kind: FabricEthernet}) })
	db.Update(func(tx *Tx) error { tx.Index = 6; return tx.PutMachine(Machine{ID: "m-000000000001", State: StateNew}) })
	waitRuns(2)
	if runs.Load() != 2 {
		t.Fatalf("%d runs after one machines change", runs.Load())
	}
	wake <- struct{}{}
	waitRuns(3)
	db.Update(func(tx *Tx) error { tx.Index = 7; return tx.PutMachine(Machine{ID: "m-000000000002", State: StateNew}) })
	if err := <-done; !errors.Is(err, stop) {
		t.Fatalf("Follow returned %v, want fn's error", err)
	}
	// A canceled context ends it with ctx.Err().
	cancel()
	if err := db.Follow(ctx, []string{TableMachines}, time.Hour, nil, func(context.Context) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
}
