package cluster

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
)

func TestTrailingFor(t *testing.T) {
	for _, c := range []struct {
		bytes, avg int64
		max, want  uint64
	}{
		{32 << 20, 100, 10240, 10240},    // small entries: the count bounds
		{32 << 20, 64 << 10, 10240, 512}, // 64 KiB entries: 512 of them
		{32 << 20, 4 << 20, 10240, 256},  // huge entries: never fewer than minTrailing
		{32 << 20, 0, 10240, 10240},      // nothing seen
	} {
		if got := trailingFor(c.bytes, c.avg, c.max); got != c.want {
			t.Errorf("trailingFor(%d, %d, %d) = %d, want %d", c.bytes, c.avg, c.max, got, c.want)
		}
	}
}

// Large entries snapshot the log by their bytes long before the entry
// count would, and the log keeps about TrailingBytes after it: its first
// index moves up, and what stays is bounded by bytes, not by the 10,240
// entries TrailingLogs allows.
func TestLogSizedByBytes(t *testing.T) {
	tc := newTestCluster(t, 1, func(c *Config) {
		c.SnapshotBytes, c.TrailingBytes = 1<<20, 512<<10
	})
	nd := tc.leader(10 * time.Second)
	c := nd.cluster()
	content := bytes.Repeat([]byte("x"), 6<<10) // a 6 KiB overlay file: an entry of about 8 KiB (base64)
	var last uint64
	for i := range 700 {
		last = applyCtx(t, c, &raftfsm.OverlayPut{Name: "o" + strconv.Itoa(i%5), Now: t0,
			Files: []raftfsm.OverlayFile{{Path: "system/etc/big", Mode: 0o644, Content: content}}})
	}
	tc.eventually(20*time.Second, "a snapshot by size", func() error {
		st := c.raft.Stats()
		if st["last_snapshot_index"] == "0" {
			return fmt.Errorf("no snapshot yet (%v)", st["last_snapshot_index"])
		}
		return nil
	})
	first, err := c.logs.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	kept := last - first + 1
	// 512 KiB of trailing entries at ~8 KiB each is ~64: minTrailing
	// (256) bounds it from below, plus what came after the last snapshot
	// (at most SnapshotBytes, ~130 entries); the count rule (TrailingLogs
	// 10240, SnapshotThreshold 8192) would have kept all 700.
	if first <= 1 || kept > minTrailing+140 {
		t.Fatalf("log after the size snapshot: first index %d, last %d (%d entries kept)", first, last, kept)
	}
	if rc := c.raft.ReloadableConfig(); rc.TrailingLogs != minTrailing {
		t.Fatalf("trailing logs %d, want %d for ~8 KiB entries", rc.TrailingLogs, minTrailing)
	}
}
