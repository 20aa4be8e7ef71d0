// Package raftfsm is the replicated state machine over the store: the
// command types, the bodies they carry (its own structs, never store
// records, so that the log format changes only on purpose) and their
// encoding, the state machine that applies committed entries to bbolt (one
// transaction per batch, recording the applied index), snapshots that
// stream the bbolt file, its side of the consistency check (a hash of the
// store at each StateCheck), waiting for an index so reads see earlier
// writes, and the proposer's side of the commands whose outcome a
// proposer computes (tags.go: tag rules evaluated over the local store
// into TagPut and AutoTagsSet, since Apply never evaluates). The Raft node that feeds it, with its transport, forwarding and
// membership, is raftfsm/cluster.
//
// Versions: every body version, command type and record format is behind
// the cluster version gate (gate.go): a proposer writes only what every
// member reports it reads, Apply refuses anything above that (no node
// stops on it), and a stored format change is a format in the gate plus a
// migration command proposed once it is open — never a store
// SchemaVersion bump. docs/versions.md tells the discipline and what the
// first rolling upgrade to a gate-aware build requires.
//
// Raft: Ongaro and Ousterhout, "In Search of an Understandable Consensus
// Algorithm" (2014).
package raftfsm
