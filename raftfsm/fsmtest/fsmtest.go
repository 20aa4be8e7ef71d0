// Package fsmtest drives the real state machine without a cluster: it feeds
// commands to a raftfsm.FSM as committed Raft log entries, numbered one
// after the other, over a store under t.TempDir() or one the caller opened
// (STYLE.md rule 8: test the FSM with synthetic raft.Log entries). It is
// the one harness for tests of the state machine, the IPAM rules and the
// PostgreSQL mirror, and for the benchmarks that need a fed store.
package fsmtest

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// Log is one store and the state machine that applies entries to it.
// Index is the last index fed: the next entry gets Index+1. A test that
// writes the store itself, or restores a snapshot, sets it.
type Log struct {
	DB    *store.DB
	FSM   *raftfsm.FSM
	Index uint64
}

// Open opens an empty store under t.TempDir(), closed when the test ends.
func Open(t testing.TB) *Log {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	l, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// New wraps a store the caller opened (and closes). Entries continue after
// the index the store has applied.
func New(db *store.DB) (*Log, error) {
	f, err := raftfsm.NewFSM(db, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	return &Log{DB: db, FSM: f, Index: f.AppliedIndex()}, nil
}

// Entries encodes commands as the next entries of the log, without
// applying them (to hand the FSM a batch, or the same entries twice).
func (l *Log) Entries(cmds ...raftfsm.Command) ([]*raft.Log, error) {
	logs := make([]*raft.Log, 0, len(cmds))
	for _, c := range cmds {
		data, err := raftfsm.Encode(c)
		if err != nil {
			return nil, err
		}
		logs = append(logs, l.RawEntry(data))
	}
	return logs, nil
}

// RawEntry makes already encoded data the next entry of the log.
func (l *Log) RawEntry(data []byte) *raft.Log {
	l.Index++
	return &raft.Log{Index: l.Index, Term: 1, Type: raft.LogCommand, Data: data}
}

// Apply commits each command as its own entry (its own store transaction)
// and returns the first business error.
func (l *Log) Apply(cmds ...raftfsm.Command) error {
	logs, err := l.Entries(cmds...)
	if err != nil {
		return err
	}
	for _, e := range logs {
		if err := l.apply(e); err != nil {
			return err
		}
	}
	return nil
}

// ApplyBatch commits the commands as consecutive entries handed to the
// state machine at once (one store transaction, as raft batches them) and
// returns the first business error.
func (l *Log) ApplyBatch(cmds ...raftfsm.Command) error {
	logs, err := l.Entries(cmds...)
	if err != nil {
		return err
	}
	for i, r := range l.FSM.ApplyBatch(logs) {
		if err := Err(r); err != nil {
			return fmt.Errorf("entry %d: %w", logs[i].Index, err)
		}
	}
	return nil
}

// ApplyRaw commits one already encoded entry (an old body version, a
// damaged one) and returns its business error. An entry the state machine
// cannot decode panics, as it stops a node.
func (l *Log) ApplyRaw(data []byte) error { return l.apply(l.RawEntry(data)) }

// Must applies commands that have to succeed (a test's setup).
func (l *Log) Must(t testing.TB, cmds ...raftfsm.Command) {
	t.Helper()
	for _, c := range cmds {
		if err := l.Apply(c); err != nil {
			t.Fatalf("%T: %v", c, err)
		}
	}
}

func (l *Log) apply(e *raft.Log) error {
	if err := Err(l.FSM.Apply(e)); err != nil {
		return fmt.Errorf("entry %d: %w", e.Index, err)
	}
	return nil
}

// Err is the business error of what the state machine returned for an
// entry: the command's, or for a Batch its first failed entry's.
func Err(r any) error {
	res, ok := r.(*raftfsm.Result)
	if !ok || res == nil {
		return nil
	}
	for _, err := range res.Errs {
		if err != nil {
			return err
		}
	}
	return res.Err
}

// MachineID is the ID tests give machine i.
func MachineID(i int) string { return fmt.Sprintf("m-%012x", i) }

// MAC is the MAC tests give machine i (locally administered, 52:54:00, as
// QEMU's).
func MAC(i int) string {
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", (i>>16)&0xff, (i>>8)&0xff, i&0xff)
}
