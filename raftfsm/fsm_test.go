package raftfsm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
)

var (
	t0        = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	machineID = fsmtest.MachineID
	mac       = fsmtest.MAC
)

func TestApplyCommands(t *testing.T) {
	cases := map[string]struct {
		setup   []raftfsm.Command
		cmd     raftfsm.Command
		wantErr error
	}{
		"create":             {cmd: &raftfsm.MachineCreate{ID: machineID(1), Name: "node1", MACs: []string{mac(1)}, Now: t0}},
		"create duplicate":   {setup: []raftfsm.Command{&raftfsm.MachineCreate{ID: machineID(1), Now: t0}}, cmd: &raftfsm.MachineCreate{ID: machineID(1), Now: t0}, wantErr: store.ErrConflict},
		"name taken":         {setup: []raftfsm.Command{&raftfsm.MachineCreate{ID: machineID(1), Name: "a", Now: t0}}, cmd: &raftfsm.MachineCreate{ID: machineID(2), Name: "a", Now: t0}, wantErr: store.ErrConflict},
		"mac taken":          {setup: []raftfsm.Command{&raftfsm.MachineCreate{ID: machineID(1), MACs: []string{mac(1)}, Now: t0}}, cmd: &raftfsm.MachineCreate{ID: machineID(2), MACs: []string{mac(1)}, Now: t0}, wantErr: store.ErrConflict},
		"bad id":             {cmd: &raftfsm.MachineCreate{ID: "m-xyz", Now: t0}, wantErr: store.ErrInvalid},
		"bad name":           {cmd: &raftfsm.MachineCreate{ID: machineID(1), Name: "Not A Label", Now: t0}, wantErr: store.ErrInvalid},
		"mac not normalized": {cmd: &raftfsm.MachineCreate{ID: machineID(1), MACs: []string{"52-54-00-00-00-01"}, Now: t0}, wantErr: store.ErrInvalid},
		"delete missing":     {cmd: &raftfsm.MachineDelete{ID: machineID(9)}, wantErr: store.ErrNotFound},
		"delete":             {setup: []raftfsm.Command{&raftfsm.MachineCreate{ID: machineID(1), Now: t0}}, cmd: &raftfsm.MachineDelete{ID: machineID(1)}},
		"join code unknown":  {cmd: &raftfsm.JoinCodeUse{SecretHash: hash64("a"), Node: "n2", Now: t0}, wantErr: store.ErrForbidden},
		"join code expired": {
			setup:   []raftfsm.Command{&raftfsm.JoinCodeAdd{Code: raftfsm.JoinCode{SecretHash: hash64("a"), Expires: t0}, Now: t0}},
			cmd:     &raftfsm.JoinCodeUse{SecretHash: hash64("a"), Node: "n2", Now: t0.Add(time.Second)},
			wantErr: store.ErrForbidden,
		},
		"join code reused": {
			setup: []raftfsm.Command{
				&raftfsm.JoinCodeAdd{Code: raftfsm.JoinCode{SecretHash: hash64("a"), Expires: t0.Add(time.Hour)}, Now: t0},
				&raftfsm.JoinCodeUse{SecretHash: hash64("a"), Node: "n2", Now: t0},
			},
			cmd:     &raftfsm.JoinCodeUse{SecretHash: hash64("a"), Node: "n3", Now: t0},
			wantErr: store.ErrForbidden,
		},
		// Refused commands that would take MACs from machine 1 (ready,
		// with an identity, so never resolved by MAC alone): nothing moves.
		"commission of a ready machine": {
			setup:   twoReady,
			cmd:     &raftfsm.Commission{NewID: machineID(9), Identity: raftfsm.Identity{Key: "serial:B", Serial: "B", BootMAC: mac(3), MACs: []string{mac(3), mac(1), mac(2)}}, Inventory: json.RawMessage(`{}`), Now: t0},
			wantErr: store.ErrTransition,
		},
		"commission without an inventory": {
			setup:   twoReady,
			cmd:     &raftfsm.Commission{NewID: machineID(9), Identity: raftfsm.Identity{Key: "serial:C", Serial: "C", BootMAC: mac(1), MACs: []string{mac(1), mac(2)}}, Now: t0},
			wantErr: store.ErrInvalid,
		},
		"commission with a taken new id": {
			setup:   twoReady,
			cmd:     &raftfsm.Commission{NewID: machineID(2), Identity: raftfsm.Identity{Key: "serial:C", Serial: "C", BootMAC: mac(1), MACs: []string{mac(1), mac(2)}}, Inventory: json.RawMessage(`{}`), Now: t0},
			wantErr: store.ErrConflict,
		},
		"commission outside its boot token's machine": {
			setup:   twoReady,
			cmd:     &raftfsm.Commission{NewID: machineID(9), Identity: raftfsm.Identity{Key: "serial:C", Serial: "C", BootMAC: mac(1), MACs: []string{mac(1), mac(2)}}, Inventory: json.RawMessage(`{}`), Now: t0, AgentMAC: mac(1)},
			wantErr: store.ErrForbidden,
		},
		"enlist of a ready machine": {
			setup:   twoReady,
			cmd:     &raftfsm.MachineEnlist{NewID: machineID(9), Identity: raftfsm.Identity{Key: "serial:B", Serial: "B", BootMAC: mac(3), MACs: []string{mac(3), mac(1)}}, Now: t0},
			wantErr: store.ErrTransition,
		},
		"join code over the limit": {
			setup:   joinCodes(1000, t0.Add(time.Hour)),
			cmd:     &raftfsm.JoinCodeAdd{Code: raftfsm.JoinCode{SecretHash: hash64("one more"), Expires: t0.Add(time.Hour)}, Now: t0},
			wantErr: store.ErrConflict,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := fsmtest.Open(t)
			if err := l.ApplyBatch(tc.setup...); err != nil {
				t.Fatalf("setup: %v", err)
			}
			before := stateSum(t, l.DB)
			err := l.Apply(tc.cmd)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("got error %v, want %v", err, tc.wantErr)
			}
			if got, _, _ := l.DB.Applied(); got != l.Index {
				t.Fatalf("applied index %d, want %d", got, l.Index)
			}
			if tc.wantErr != nil {
				// A refused command changes nothing but the applied index:
				// every command checks everything before it writes.
				if after := stateSum(t, l.DB); after != before {
					t.Fatalf("the refused command changed the store (state hash %s, was %s)", after, before)
				}
			}
		})
	}
}

func hash64(s string) string { return fmt.Sprintf("%064x", []byte(s)) }

// stateSum is the store's state hash: every bucket, key and value but the
// applied index.
func stateSum(t testing.TB, db *store.DB) string {
	t.Helper()
	h, err := db.Hash()
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// twoReady commissions machine 1 (MACs 1 and 2, serial A) and machine 2
// (MAC 3, serial B).
var twoReady = []raftfsm.Command{
	&raftfsm.Commission{NewID: machineID(1), Identity: raftfsm.Identity{Key: "serial:A", Serial: "A", BootMAC: mac(1), MACs: []string{mac(1), mac(2)}}, Inventory: json.RawMessage(`{}`), Now: t0},
	&raftfsm.Commission{NewID: machineID(2), Identity: raftfsm.Identity{Key: "serial:B", Serial: "B", BootMAC: mac(3), MACs: []string{mac(3)}}, Inventory: json.RawMessage(`{}`), Now: t0},
}

// joinCodes adds n join codes that expire at expires.
func joinCodes(n int, expires time.Time) []raftfsm.Command {
	var out []raftfsm.Command
	for i := range n {
		out = append(out, &raftfsm.JoinCodeAdd{Code: raftfsm.JoinCode{SecretHash: hash64(fmt.Sprint("code ", i)), Expires: expires}, Now: t0})
	}
	return out
}

func TestApplyBatchOneTransaction(t *testing.T) {
	l := fsmtest.Open(t)
	var cmds []raftfsm.Command
	for i := 1; i <= 100; i++ {
		cmds = append(cmds, &raftfsm.MachineCreate{ID: machineID(i), MACs: []string{mac(i)}, Now: t0})
	}
	// One entry in the middle fails; the rest still apply.
	cmds[49] = &raftfsm.MachineDelete{ID: machineID(999)}
	logs, err := l.Entries(cmds...)
	if err != nil {
		t.Fatal(err)
	}
	res := l.FSM.ApplyBatch(logs)
	if len(res) != 100 {
		t.Fatalf("%d results", len(res))
	}
	for i, r := range res {
		err := r.(*raftfsm.Result).Err
		if (i == 49) != (err != nil) {
			t.Fatalf("entry %d: err %v", i+1, err)
		}
	}
	var n int
	l.DB.View(func(tx *store.Tx) error { n = tx.CountMachines(); return nil })
	if n != 99 {
		t.Fatalf("%d machines, want 99", n)
	}
	if l.FSM.AppliedIndex() != 100 {
		t.Fatalf("applied %d", l.FSM.AppliedIndex())
	}
	// Re-fed after a restart (NoSnapshotRestoreOnStart): skipped, no error,
	// no duplicate-conflict.
	res = l.FSM.ApplyBatch(logs[:10])
	for _, r := range res {
		if r.(*raftfsm.Result).Err != nil {
			t.Fatalf("re-fed entry: %v", r.(*raftfsm.Result).Err)
		}
	}
}

func TestBatchCommand(t *testing.T) {
	l := fsmtest.Open(t)
	b, err := raftfsm.NewBatch(
		&raftfsm.MachineCreate{ID: machineID(1), Now: t0},
		&raftfsm.MachineCreate{ID: machineID(1), Now: t0}, // conflict with the first
		&raftfsm.MachineEvent{Event: raftfsm.Event{Machine: machineID(1), Time: t0, Kind: "note", Message: "hello"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := l.Entries(b)
	if err != nil {
		t.Fatal(err)
	}
	r := l.FSM.Apply(logs[0]).(*raftfsm.Result)
	if len(r.Errs) != 3 || r.Errs[0] != nil || !errors.Is(r.Errs[1], store.ErrConflict) || r.Errs[2] != nil {
		t.Fatalf("batch results %v", r.Errs)
	}
	l.DB.View(func(tx *store.Tx) error {
		ev, _ := tx.Events(machineID(1))
		if len(ev) != 2 || ev[1].Message != "hello" {
			t.Fatalf("events %+v", ev)
		}
		return nil
	})
	if _, err := raftfsm.NewBatch(b); err == nil {
		t.Fatal("nested batch accepted")
	}
}

func TestDecodeRejects(t *testing.T) {
	good, _ := raftfsm.Encode(&raftfsm.Noop{})
	cases := map[string][]byte{
		"empty":         nil,
		"short":         {1},
		"unknown type":  {59, 1, '{', '}'},
		"version zero":  {byte(raftfsm.TypeMachineCreate), 0, '{', '}'},
		"version newer": {byte(raftfsm.TypeMachineCreate), 9, '{', '}'},
		"bad json":      {byte(raftfsm.TypeMachineCreate), 1, '{'},
		"wrong types":   append([]byte{byte(raftfsm.TypeMachineCreate), 1}, `{"id":5}`...),
	}
	for name, b := range cases {
		if _, err := raftfsm.Decode(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := raftfsm.Decode(good); err != nil {
		t.Fatal(err)
	}
	// An unknown command marked ignorable is skipped, not fatal.
	l := fsmtest.Open(t)
	if err := l.ApplyRaw([]byte{byte(raftfsm.FlagIgnorable | 0x7e), 1}); err != nil || l.FSM.AppliedIndex() != 1 {
		t.Fatalf("ignorable: %v applied %d", err, l.FSM.AppliedIndex())
	}
}

func TestUnknownCommandStopsTheNode(t *testing.T) {
	l := fsmtest.Open(t)
	defer func() {
		if recover() == nil {
			t.Fatal("an undecodable entry must stop the node, not be skipped")
		}
	}()
	l.ApplyRaw([]byte{0x7e, 1})
}

type sink struct {
	bytes.Buffer
	cancelled bool
}

func (s *sink) ID() string    { return "test" }
func (s *sink) Cancel() error { s.cancelled = true; return nil }
func (s *sink) Close() error  { return nil }

func TestSnapshotRestore10k(t *testing.T) {
	src := fsmtest.Open(t)
	const n = 10000
	var cmds []raftfsm.Command
	for i := 1; i <= n; i++ {
		cmds = append(cmds, &raftfsm.MachineCreate{ID: machineID(i), Name: fmt.Sprintf("node%d", i), MACs: []string{mac(i)}, Now: t0})
		if len(cmds) == 1000 {
			if err := src.ApplyBatch(cmds...); err != nil {
				t.Fatal(err)
			}
			cmds = nil
		}
	}
	snap, err := src.FSM.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Applies continue while the snapshot is held; it must not see them.
	src.Apply(&raftfsm.MachineDelete{ID: machineID(1)})
	var s sink
	if err := snap.Persist(&s); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	dst := fsmtest.Open(t)
	dst.Apply(&raftfsm.MachineCreate{ID: machineID(999999), Now: t0}) // replaced by the restore
	if err := dst.FSM.Restore(io.NopCloser(bytes.NewReader(s.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if dst.FSM.AppliedIndex() != n {
		t.Fatalf("restored applied index %d, want %d", dst.FSM.AppliedIndex(), n)
	}
	var count int
	err = dst.DB.View(func(tx *store.Tx) error {
		count = tx.CountMachines()
		if _, err := tx.Machine(machineID(999999)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("pre-restore machine survived: %v", err)
		}
		m, err := tx.Machine(machineID(1))
		if err != nil || m.Name != "node1" {
			t.Errorf("machine 1: %+v %v", m, err)
		}
		if ids := tx.MachineIDsByMAC(mac(5000)); len(ids) != 1 || ids[0] != machineID(5000) {
			t.Errorf("mac index after restore: %v", ids)
		}
		return nil
	})
	if err != nil || count != n {
		t.Fatalf("restored %d machines (%v), want %d", count, err, n)
	}
	// And a restored store keeps applying, after the snapshot's index.
	dst.Index = dst.FSM.AppliedIndex()
	if err := dst.Apply(&raftfsm.MachineDelete{ID: machineID(2)}); err != nil {
		t.Fatal(err)
	}

	// Corrupt snapshots are refused and leave the store as it was.
	data := s.Bytes()
	flipped := append([]byte(nil), data...)
	flipped[len(flipped)/2] ^= 0xff
	bad := map[string][]byte{
		"truncated":       data[:len(data)/2],
		"header only":     data[:16],
		"no checksum":     data[:len(data)-32],
		"flipped byte":    flipped,
		"not a snapshot":  []byte("hello, this is not a snapshot at all"),
		"empty":           nil,
		"testdata sample": readTestdata(t, "truncated.snap"),
	}
	for name, b := range bad {
		if err := dst.FSM.Restore(io.NopCloser(bytes.NewReader(b))); err == nil {
			t.Errorf("%s: restore accepted a damaged snapshot", name)
		}
		if dst.FSM.AppliedIndex() != n+1 {
			t.Errorf("%s: applied index moved to %d", name, dst.FSM.AppliedIndex())
		}
	}
	var after int
	dst.DB.View(func(tx *store.Tx) error { after = tx.CountMachines(); return nil })
	if after != n-1 {
		t.Fatalf("store changed by refused restores: %d machines", after)
	}
}

func readTestdata(t *testing.T, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A command's body format may change with its version, but entries already
// in logs and snapshots keep theirs: a version 1 (all JSON) commission still
// decodes and applies.
func TestCommissionVersion1StillDecodes(t *testing.T) {
	v1 := append([]byte{byte(raftfsm.TypeCommission), 1}, `{"new_id":"m-00000000c001","identity":{"key":"serial:OLD1","serial":"OLD1","boot_mac":"52:54:00:00:c0:01","macs":["52:54:00:00:c0:01"]},"summary":{},"inventory":{"version":1,"system":{"serial":"OLD1"}},"now":"2026-11-30T08:00:00Z"}`...)
	c, err := raftfsm.Decode(v1)
	if err != nil {
		t.Fatal(err)
	}
	cm := c.(*raftfsm.Commission)
	if cm.NewID != "m-00000000c001" || !strings.Contains(string(cm.Inventory), `"OLD1"`) {
		t.Fatalf("v1 decoded as %+v", cm)
	}
	l := fsmtest.Open(t)
	if err := l.ApplyRaw(v1); err != nil {
		t.Fatal(err)
	}
	l.DB.View(func(tx *store.Tx) error {
		inv, err := tx.Inventory("m-00000000c001")
		if err != nil || !strings.Contains(string(inv), "OLD1") {
			t.Fatalf("inventory %s %v", inv, err)
		}
		return nil
	})
	// And the current version round-trips, inventory byte for byte.
	cur, _ := raftfsm.Encode(cm)
	if cur[1] != 3 {
		t.Fatalf("current version %d", cur[1])
	}
	back, err := raftfsm.Decode(cur)
	if err != nil || string(back.(*raftfsm.Commission).Inventory) != string(cm.Inventory) {
		t.Fatalf("v2 round trip: %v", err)
	}
}

// A body with a field this node does not know is refused, not read with
// the field dropped: a newer writer's format must not half-apply here.
func TestDecodeRefusesUnknownFields(t *testing.T) {
	for name, entry := range map[string][]byte{
		"json body":         append([]byte{byte(raftfsm.TypeMachineCreate), 1}, `{"id":"m-000000000001","now":"2026-11-30T08:00:00Z","colour":"red"}`...),
		"trailing data":     append([]byte{byte(raftfsm.TypeMachineCreate), 1}, `{"id":"m-000000000001","now":"2026-11-30T08:00:00Z"}{}`...),
		"commission header": append([]byte{byte(raftfsm.TypeCommission), 3, 27}, `{"new_id":"m-1","colour":1}`...),
	} {
		if _, err := raftfsm.Decode(entry); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := raftfsm.Decode(append([]byte{byte(raftfsm.TypeMachineCreate), 1}, `{"id":"m-000000000001","now":"2026-11-30T08:00:00Z"}`...)); err != nil {
		t.Fatalf("a known body: %v", err)
	}
}
