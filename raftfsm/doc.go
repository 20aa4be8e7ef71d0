// Package raftfsm replicates the store with hashicorp/raft: the command
// types, the bodies they carry (its own structs, never store records, so
// that the log format changes only on purpose) and their encoding, the
// state machine that applies them to bbolt
// (one transaction per batch, recording the applied index), snapshots that
// stream the bbolt file, the mutual-TLS transport that carries both Raft
// traffic and node-to-node calls on one port, forwarding of writes to the
// leader, and waiting for an index so reads see earlier writes on any node.
//
// Raft: Ongaro and Ousterhout, "In Search of an Understandable Consensus
// Algorithm" (2014); membership changes one server at a time (§6 of the
// dissertation), as hashicorp/raft implements them.
package raftfsm
