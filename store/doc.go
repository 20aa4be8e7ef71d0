// Package store owns Rollcall's data model on bbolt: typed records, their
// buckets and secondary indexes, the schema version and its migrations, and
// the read API every service uses against the node's local copy.
//
// The store never decides anything on its own: every write arrives through a
// replicated command (package raftfsm), inside one bbolt transaction that also
// records the Raft index it was applied at. Reads open their own read-only
// transactions and may run on any node.
//
// A copy that cannot be trusted is refused at Open (ErrDamaged): its bbolt
// structure is walked before bbolt maps it (filecheck.go), bbolt's own
// check runs, and a file closed cleanly must still match the state hash
// Close recorded beside it. Hash is the digest nodes compare at one applied
// index to find a copy that diverged while running.
package store
