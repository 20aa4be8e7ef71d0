package raftfsm_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
)

// A machine renamed: the name index follows, the old name is free again,
// and a name another machine holds, or one that is not a DNS label, is
// refused with the reason and changes nothing.
func TestMachineRename(t *testing.T) {
	a, b := fsmtest.MachineID(1), fsmtest.MachineID(2)
	setup := func(t *testing.T) *fsmtest.Log {
		l := fsmtest.Open(t)
		l.Must(t,
			&raftfsm.MachineCreate{ID: a, Name: "node-a", MACs: []string{fsmtest.MAC(1)}, Now: t0},
			&raftfsm.MachineCreate{ID: b, MACs: []string{fsmtest.MAC(2)}, Now: t0},
		)
		return l
	}
	t.Run("renamed", func(t *testing.T) {
		l := setup(t)
		later := t0.Add(time.Minute)
		l.Must(t, &raftfsm.MachineRename{ID: a, Name: "r12-n07", Now: later})
		m := machineOf(t, l, a)
		if m.Name != "r12-n07" || !m.UpdatedAt.Equal(later) {
			t.Errorf("after the rename: name %q, updated %v", m.Name, m.UpdatedAt)
		}
		if got := view(t, l, func(tx *store.Tx) (string, error) { m, err := tx.MachineByRef("r12-n07"); return m.ID, err }); got != a {
			t.Errorf("the new name finds %s", got)
		}
		if ids := view(t, l, func(tx *store.Tx) ([]string, error) { return tx.MachineIDsByName("node-a"), nil }); len(ids) != 0 {
			t.Errorf("the old name still finds %v", ids)
		}
		// The old name is free: another machine may take it.
		l.Must(t, &raftfsm.MachineRename{ID: b, Name: "node-a", Now: later})
		if got := machineOf(t, l, b).Name; got != "node-a" {
			t.Errorf("machine b is named %q", got)
		}
		events := view(t, l, func(tx *store.Tx) ([]store.Event, error) { return tx.Events(a) })
		last := events[len(events)-1]
		if last.Kind != "renamed" || last.Message != "renamed node-a → r12-n07" || !last.Time.Equal(later) {
			t.Errorf("last event %+v", last)
		}
		events = view(t, l, func(tx *store.Tx) ([]store.Event, error) { return tx.Events(b) })
		if last := events[len(events)-1]; last.Message != "named node-a" {
			t.Errorf("a machine without a name before: event %+v", last)
		}
	})
	t.Run("the same name", func(t *testing.T) {
		l := setup(t)
		before := machineOf(t, l, a)
		l.Must(t, &raftfsm.MachineRename{ID: a, Name: "node-a", Now: t0.Add(time.Hour)})
		if after := machineOf(t, l, a); after.Index != before.Index || !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Errorf("renaming to its own name rewrote the machine: index %d → %d", before.Index, after.Index)
		}
	})
	for name, c := range map[string]struct {
		cmd  *raftfsm.MachineRename
		kind error
		want string
	}{
		"taken":           {&raftfsm.MachineRename{ID: b, Name: "node-a", Now: t0}, store.ErrConflict, `name "node-a" is taken by machine m-000000000001`},
		"not a label":     {&raftfsm.MachineRename{ID: a, Name: "Node A", Now: t0}, store.ErrInvalid, `name "Node A" must be a DNS label`},
		"empty":           {&raftfsm.MachineRename{ID: a, Name: "", Now: t0}, store.ErrInvalid, `name "" must be a DNS label`},
		"too long":        {&raftfsm.MachineRename{ID: a, Name: strings.Repeat("a", 64), Now: t0}, store.ErrInvalid, "1 to 63 characters"},
		"like an ID":      {&raftfsm.MachineRename{ID: a, Name: "m-0123456789ab", Now: t0}, store.ErrInvalid, "has the form of a machine ID"},
		"no such thing":   {&raftfsm.MachineRename{ID: fsmtest.MachineID(9), Name: "x", Now: t0}, store.ErrNotFound, "m-000000000009"},
		"trailing dash":   {&raftfsm.MachineRename{ID: a, Name: "node-", Now: t0}, store.ErrInvalid, "DNS label"},
		"name with a NUL": {&raftfsm.MachineRename{ID: a, Name: "a\x00b", Now: t0}, store.ErrInvalid, "DNS label"},
	} {
		t.Run(name, func(t *testing.T) {
			l := setup(t)
			before := stateSum(t, l.DB)
			err := l.Apply(c.cmd)
			if !errors.Is(err, c.kind) || !strings.Contains(store.Public(err), c.want) {
				t.Fatalf("got %v, want %v saying %q", err, c.kind, c.want)
			}
			// The refused entry changed nothing but the applied index.
			l2 := setup(t)
			l2.Must(t, &raftfsm.Noop{})
			if after, want := stateSum(t, l.DB), stateSum(t, l2.DB); after != want {
				t.Errorf("a refused rename changed the store (%s before, %s after, %s for a no-op)", before, after, want)
			}
		})
	}
}

// BMCClear drops the whole BMC record, sealed password included; a machine
// without one is refused.
func TestBMCClear(t *testing.T) {
	a := fsmtest.MachineID(1)
	l := fsmtest.Open(t)
	l.Must(t,
		&raftfsm.MachineCreate{ID: a, Name: "node-a", MACs: []string{fsmtest.MAC(1)}, Now: t0},
		&raftfsm.BMCSet{Machine: a, BMC: raftfsm.BMC{
			Driver: "ipmi", Address: "10.0.40.12:623", User: "admin",
			PasswordSealed: []byte{1, 2, 3}, PasswordAAD: "bmc-password/machine/" + a + "@10.0.40.12:623",
			CertSHA256: hash64("pin"), Operator: true, Source: "operator",
		}, Now: t0},
	)
	if machineOf(t, l, a).BMC == nil {
		t.Fatal("the BMC was not set")
	}
	later := t0.Add(time.Minute)
	l.Must(t, &raftfsm.BMCClear{Machine: a, Now: later})
	m := machineOf(t, l, a)
	if m.BMC != nil || !m.UpdatedAt.Equal(later) {
		t.Errorf("after clearing: BMC %+v, updated %v", m.BMC, m.UpdatedAt)
	}
	events := view(t, l, func(tx *store.Tx) ([]store.Event, error) { return tx.Events(a) })
	if last := events[len(events)-1]; last.Kind != "bmc" || !strings.Contains(last.Message, "was ipmi 10.0.40.12:623") {
		t.Errorf("last event %+v", last)
	}
	// Jobs need a BMC again.
	err := l.Apply(&raftfsm.JobEnqueue{Job: raftfsm.Job{ID: "j-1", Machine: a, Kind: "power", Arg: "on"}, Now: later})
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a power job after clearing: %v", err)
	}
	for name, c := range map[string]struct {
		cmd  *raftfsm.BMCClear
		kind error
	}{
		"twice":      {&raftfsm.BMCClear{Machine: a, Now: later}, store.ErrNotFound},
		"no machine": {&raftfsm.BMCClear{Machine: fsmtest.MachineID(7), Now: later}, store.ErrNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			if err := l.Apply(c.cmd); !errors.Is(err, c.kind) {
				t.Errorf("got %v, want %v", err, c.kind)
			}
		})
	}
}
