package raftfsm

import (
	"testing"
	"time"
)

// FuzzDecode feeds arbitrary log entries to the decoder the proposer uses
// before anything enters the log: it must never panic, and what it accepts
// must encode back to an entry that decodes to the same command type.
func FuzzDecode(f *testing.F) {
	for _, c := range []Command{
		&Noop{},
		&MachineCreate{ID: "m-0123456789ab", Name: "a", MACs: []string{"52:54:00:00:00:01"}, Now: time.Unix(0, 0).UTC()},
		&Commission{NewID: "m-0123456789ab", Identity: Identity{Key: "serial:X"}, Inventory: []byte(`{"version":1}`)},
		&LeaseBatch{Node: "n1"},
		grantBatch(0, 2),
		&RangePut{},
	} {
		b, err := Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			return
		}
		again, err := Encode(c)
		if err != nil {
			t.Fatalf("decoded command does not encode: %v", err)
		}
		c2, err := Decode(again)
		if err != nil || c2.Type() != c.Type() {
			t.Fatalf("round trip: %v, type %v vs %v", err, c2, c)
		}
	})
}
