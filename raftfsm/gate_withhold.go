//go:build gate_withhold

package raftfsm

// Built with -tags gate_withhold, a binary reads GateProbe only at body
// version 1, as a gate-aware binary from before that version would: it
// stands for "the old build" in the mixed-version test. It is the current
// tree less one body version, not an older commit.
func init() {
	withheld[TypeGateProbe] = 1
	knownDefault = KnownVersions()
}
