package store

import (
	"encoding/binary"
	"strconv"
)

// The cluster version gate's two records (raftfsm/gate.go decides with
// them; docs/versions.md tells the discipline).
//
// node_versions holds, per node, what its binary reads: the command types
// with the highest body version of each, the record formats, the build.
// It is left out of the state hash (hashVersion 2): a node that ran a
// binary without the gate skipped the reports applied meanwhile (their
// type is ignorable to it), so two correct stores may hold different
// reports. Nothing in a command's outcome depends on it; it only says what
// the leader may open, and it feeds `rollcall cluster status`.
//
// gate holds what is open: per command type the highest body version a
// proposer may write, per record format the version the store holds. It
// is written only by GateOpen, which every member applies (it is proposed
// once every member reported), so it is replicated state like any other
// and hashed. Both buckets are made by their first write, not at Open: a
// store that never met a gate-aware node holds the buckets an older
// node's does.
var (
	bucketNodeVersions = []byte("node_versions")
	bucketGate         = []byte("gate")
)

// keyGate is the gate record's key in bucketGate.
const keyGate = "open"

// NodeVersions is what one node's binary reads.
type NodeVersions struct {
	Node  string `json:"node"`
	Build string `json:"build"`
	// Boot is random per process start: two reports of one boot are the
	// same binary.
	Boot string `json:"boot"`
	// Types maps a command type (decimal) to the highest body version read.
	Types map[string]uint8 `json:"types"`
	// Formats maps a record format's name to the highest version read.
	Formats map[string]int `json:"formats,omitempty"`
	Index   uint64         `json:"index"`
}

// Gate is what the cluster has opened.
type Gate struct {
	Types   map[string]uint8 `json:"types"`
	Formats map[string]int   `json:"formats,omitempty"`
	// Opened records, per "type/version" or "format/version", the index
	// of the GateOpen that opened it.
	Opened map[string]uint64 `json:"opened,omitempty"`
	Index  uint64            `json:"index"`
}

// NodeVersionsAll returns every node's report, by node name.
func (t *Tx) NodeVersionsAll() (map[string]NodeVersions, error) {
	out := map[string]NodeVersions{}
	if t.tx.Bucket(bucketNodeVersions) == nil {
		return out, nil
	}
	err := forEachJSON(t, bucketNodeVersions, "", func(k string, v *NodeVersions) error {
		out[k] = *v
		return nil
	})
	return out, err
}

// PutNodeVersions records a node's report. It writes no change record and
// touches no table: the bucket is not replicated state (see above).
func (t *Tx) PutNodeVersions(v NodeVersions) error {
	if err := t.ensureBuckets(bucketNodeVersions); err != nil {
		return err
	}
	v.Index = t.Index
	return t.putJSON(bucketNodeVersions, v.Node, v)
}

// DeleteNodeVersions forgets a removed node's report.
func (t *Tx) DeleteNodeVersions(node string) error {
	if t.tx.Bucket(bucketNodeVersions) == nil {
		return nil
	}
	return t.del(bucketNodeVersions, node)
}

// Gate returns what is open; found is false while nothing was ever opened
// (the cluster is at the baseline, raftfsm's preGate).
func (t *Tx) Gate() (g Gate, found bool, err error) {
	if t.tx.Bucket(bucketGate) == nil {
		return g, false, nil
	}
	if err := t.getJSON(bucketGate, keyGate, &g); err != nil {
		if isNotFound(err) {
			return g, false, nil
		}
		return g, false, err
	}
	return g, true, nil
}

// PutGate records what is open.
func (t *Tx) PutGate(g Gate) error {
	if err := t.ensureBuckets(bucketGate); err != nil {
		return err
	}
	g.Index = t.Index
	return t.putJSON(bucketGate, keyGate, g)
}

// keyProbe prefixes the gate probe counters (raftfsm.GateProbe).
const keyProbe = "probe/v"

// CountGateProbe counts one applied gate probe of body version v.
func (t *Tx) CountGateProbe(v int) error {
	if err := t.ensureBuckets(bucketGate); err != nil {
		return err
	}
	b := t.tx.Bucket(bucketGate)
	k := []byte(keyProbe + strconv.Itoa(v))
	n := uint64(0)
	if old := b.Get(k); len(old) == 8 {
		n = binary.BigEndian.Uint64(old)
	}
	return b.Put(k, binary.BigEndian.AppendUint64(nil, n+1))
}

// GateProbes returns the gate probes applied, by body version.
func (t *Tx) GateProbes() map[int]uint64 {
	out := map[int]uint64{}
	b := t.tx.Bucket(bucketGate)
	if b == nil {
		return out
	}
	c := b.Cursor()
	p := []byte(keyProbe)
	for k, v := c.Seek(p); k != nil && hasPrefix(k, p); k, v = c.Next() {
		if n, err := strconv.Atoi(string(k[len(p):])); err == nil && len(v) == 8 {
			out[n] = binary.BigEndian.Uint64(v)
		}
	}
	return out
}
