// Package cluster runs the Raft node that replicates the store through
// raftfsm's state machine: hashicorp/raft on raft-boltdb, the mutual-TLS
// transport that carries both Raft traffic and node-to-node calls on one
// port, forwarding of writes to the leader (after a precheck there),
// membership, the node's status and lag, the cluster consistency check
// (comparing every node's hash at a StateCheck, and repairing a damaged
// copy from the leader's store), and its Prometheus metrics.
//
// Raft: Ongaro and Ousterhout, "In Search of an Understandable Consensus
// Algorithm" (2014); membership changes one server at a time (§6 of the
// dissertation), as hashicorp/raft implements them.
package cluster
