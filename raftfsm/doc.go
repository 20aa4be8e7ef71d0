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
// Raft: Ongaro and Ousterhout, "In Search of an Understandable Consensus
// Algorithm" (2014).
package raftfsm
