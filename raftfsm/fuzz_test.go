package raftfsm

import (
	"bytes"
	"net/netip"
	"path/filepath"
	"testing"
	"time"
)

// FuzzDecode feeds arbitrary log entries to the decoder the proposer uses
// before anything enters the log: it must never panic, and what it accepts
// must encode back, at the type's current version, to an entry that decodes
// to an equal command; encoding that command again gives the same bytes
// (every body is canonical once encoded: JSON from encoding/json, binenc, and
// Commission's JSON header with the inventory's raw bytes).
//
// Seeds: the commands below, every golden entry in testdata/golden, and
// testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	for _, c := range []Command{
		&Noop{},
		&MachineCreate{ID: "m-0123456789ab", Name: "a", MACs: []string{"52:54:00:00:00:01"}, Now: time.Unix(0, 0).UTC()},
		&Commission{NewID: "m-0123456789ab", Identity: Identity{Key: "serial:X"}, Inventory: []byte(`{"version":1}`)},
		&LeaseBatch{Node: "n1"},
		&LeaseBatch{
			Node: "n1", Now: time.Unix(0, 0).UTC(),
			Grants: []LeaseGrant{{IP: netip.MustParseAddr("10.9.0.10"), MAC: "52:54:00:00:00:01", ClientID: "01", Granted: time.Unix(0, 0).UTC(), Expires: time.Unix(600, 0).UTC()}},
			Seen:   []Seen{{MAC: "52:54:00:00:00:01", Node: "n1", Interface: "eth1", VLAN: "f/10", Arch: 7, UserClass: "iPXE", Last: time.Unix(0, 0).UTC()}},
		},
		&RangePut{},
	} {
		b, err := Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	goldens, err := filepath.Glob(filepath.Join(goldenDir, "*.hex"))
	if err != nil || len(goldens) == 0 {
		f.Fatalf("no golden entries in %s to seed from: %v", goldenDir, err)
	}
	for _, path := range goldens {
		b, err := readGolden(filepath.Base(path))
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
			t.Fatalf("decoded %T does not encode: %v", c, err)
		}
		info := commands[c.Type()]
		if Type(again[0]) != c.Type() || again[1] != info.maxVersion {
			t.Fatalf("%T encodes as type %d version %d, want %d version %d", c, again[0], again[1], c.Type(), info.maxVersion)
		}
		c2, err := Decode(again)
		if err != nil {
			t.Fatalf("%T: the re-encoded entry does not decode: %v\n%q", c, err, again)
		}
		if d := commandDiff(c, c2); d != "" {
			t.Fatalf("%T: decode, encode, decode changes the command (-first +second):\n%s", c, d)
		}
		third, err := Encode(c2)
		if err != nil {
			t.Fatalf("%T: the re-decoded command does not encode: %v", c, err)
		}
		if !bytes.Equal(third, again) {
			t.Fatalf("%T: encoding is not canonical: the same command encodes as\n%q\nand\n%q", c, again, third)
		}
	})
}
