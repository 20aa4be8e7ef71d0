package raftfsm

import (
	"time"

	"github.com/rollcall/rollcall/store"
)

// ClusterInit records the cluster identity at bootstrap. It is applied once;
// a second one fails with a conflict.
type ClusterInit struct {
	Identity ClusterIdentity `json:"identity"`
}

// NodePut records (or updates) an appliance node's addresses.
type NodePut struct {
	Node Node `json:"node"`
}

// NodeRemove forgets an appliance node.
type NodeRemove struct {
	Name string `json:"name"`
}

// JoinCodeAdd registers a join code by the hash of its secret.
type JoinCodeAdd struct {
	Code JoinCode  `json:"code"`
	Now  time.Time `json:"now"`
}

// JoinCodeUse spends a join code; it fails when the code is unknown, used or
// expired at Now.
type JoinCodeUse struct {
	SecretHash string    `json:"secret_hash"`
	Node       string    `json:"node"`
	Now        time.Time `json:"now"`
}

func (*ClusterInit) Type() Type { return TypeClusterInit }
func (*NodePut) Type() Type     { return TypeNodePut }
func (*NodeRemove) Type() Type  { return TypeNodeRemove }
func (*JoinCodeAdd) Type() Type { return TypeJoinCodeAdd }
func (*JoinCodeUse) Type() Type { return TypeJoinCodeUse }

func (*ClusterInit) Version() uint8 { return 1 }
func (*NodePut) Version() uint8     { return 1 }
func (*NodeRemove) Version() uint8  { return 1 }
func (*JoinCodeAdd) Version() uint8 { return 1 }
func (*JoinCodeUse) Version() uint8 { return 1 }

func (c *ClusterInit) apply(tx *store.Tx) error { return tx.PutIdentity(c.Identity.record()) }

func (c *NodePut) apply(tx *store.Tx) error {
	if c.Node.Name == "" || c.Node.RaftAddr == "" {
		return store.Errorf(store.ErrInvalid, "node needs a name and a raft address")
	}
	return tx.PutNode(c.Node.record())
}

func (c *NodeRemove) apply(tx *store.Tx) error {
	if err := tx.DeleteNode(c.Name); err != nil {
		return err
	}
	// A removed node's version report no longer holds the gate shut.
	return tx.DeleteNodeVersions(c.Name)
}

func (c *JoinCodeAdd) apply(tx *store.Tx) error { return tx.AddJoinCode(c.Code.record(), c.Now) }

func (c *JoinCodeUse) apply(tx *store.Tx) error { return tx.UseJoinCode(c.SecretHash, c.Node, c.Now) }

func clusterCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeClusterInit: {"cluster-init", 1, func() Command { return &ClusterInit{} }},
		TypeNodePut:     {"node-put", 1, func() Command { return &NodePut{} }},
		TypeNodeRemove:  {"node-remove", 1, func() Command { return &NodeRemove{} }},
		TypeJoinCodeAdd: {"join-code-add", 1, func() Command { return &JoinCodeAdd{} }},
		TypeJoinCodeUse: {"join-code-use", 1, func() Command { return &JoinCodeUse{} }},
	}
}
