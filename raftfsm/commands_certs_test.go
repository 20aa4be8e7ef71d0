package raftfsm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
)

// TestAudited: an audited command applies as the bare one would and
// appends one event with its outcome (the error when it failed); an
// audited entry holding nothing, or another audited entry, is refused and
// records nothing; a wrapped command the gate has not opened is refused as
// it would be bare.
func TestAudited(t *testing.T) {
	l := fsmtest.Open(t)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if err := l.Apply(&raftfsm.GateOpen{Types: map[string]uint8{"50": 1, "51": 1, "52": 1}}); err != nil {
		t.Fatal(err)
	}
	wrap := func(c raftfsm.Command) *raftfsm.Audited {
		a, err := raftfsm.NewAudited(c, "admin:ada", "192.0.2.7", "node1", "PUT /api/v1/racks/:name", "/api/v1/racks/r1", now)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if err := l.Apply(wrap(&raftfsm.RackPut{Rack: raftfsm.Rack{Name: "r1", Height: 42}, Now: now})); err != nil {
		t.Fatal(err)
	}
	// Fails at apply (no such rack): the error goes back and into the event.
	err := l.Apply(wrap(&raftfsm.RackDelete{Name: "nosuch"}))
	if err == nil {
		t.Fatal("deleting an unknown rack succeeded")
	}
	if _, nested := raftfsm.NewAudited(wrap(&raftfsm.RackDelete{Name: "r1"}), "x", "", "", "", "", now); nested == nil {
		t.Fatal("an audited command wrapped again")
	}
	if err := l.Apply(&raftfsm.Audited{Actor: "token", Action: "x", Now: now}); err == nil {
		t.Fatal("an audited entry holding no command was applied")
	}
	l.DB.View(func(tx *store.Tx) error {
		evs, _ := tx.Audit(0, 10)
		if len(evs) != 2 {
			t.Fatalf("events %+v, want two", evs)
		}
		if e := evs[1]; e.Outcome != "ok" || e.Actor != "admin:ada" || e.From != "192.0.2.7" || e.Node != "node1" || e.Command != "rack-put" || !e.Time.Equal(now) {
			t.Errorf("first event %+v", e)
		}
		if e := evs[0]; e.Outcome == "ok" || !strings.Contains(err.Error(), e.Outcome) || !strings.Contains(e.Outcome, "not found") || e.Command != "rack-delete" {
			t.Errorf("failed event %+v (error %v)", e, err)
		}
		if _, err := tx.Rack("r1"); err != nil {
			t.Errorf("the audited rack-put did not apply: %v", err)
		}
		return nil
	})

	// Closed in the gate: the wrapper does not smuggle its command in.
	closed := fsmtest.Open(t)
	if err := closed.Apply(&raftfsm.GateOpen{Types: map[string]uint8{"52": 1}}); err != nil {
		t.Fatal(err)
	}
	a := wrap(&raftfsm.CertPut{Cert: raftfsm.Cert{Serial: "0a01", Kind: "admin", Name: "ada", NotAfter: now.Add(time.Hour), Issued: now}, Now: now})
	if err := closed.Apply(a); err == nil {
		t.Fatal("a cert-put the gate has not opened was applied inside an audited entry")
	}
	closed.DB.View(func(tx *store.Tx) error {
		if _, ok := tx.Cert("0a01"); ok {
			t.Error("the closed command wrote its record")
		}
		return nil
	})
}
