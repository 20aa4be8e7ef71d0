package store

import (
	"encoding/hex"
	"time"
)

// Node is an appliance node: a member of the Raft cluster.
type Node struct {
	Name     string    `json:"name"`
	RaftAddr string    `json:"raft_addr"`
	HTTPAddr string    `json:"http_addr,omitempty"`
	Joined   time.Time `json:"joined"`
	Index    uint64    `json:"index"`
}

// JoinCode is the cluster's record of a join code: only the SHA-256 of its
// secret is kept, so the record cannot be replayed into a join.
type JoinCode struct {
	SecretHash string    `json:"secret_hash"`
	Expires    time.Time `json:"expires"`
	CreatedBy  string    `json:"created_by,omitempty"`
	Created    time.Time `json:"created"`
	UsedBy     string    `json:"used_by,omitempty"`
	Used       time.Time `json:"used,omitzero"`
}

// ClusterIdentity is what every node needs to act as the cluster: the CA
// certificate, the CA key sealed under the master key, and the SHA-256 of the
// admin token created at bootstrap.
type ClusterIdentity struct {
	CACertPEM      string `json:"ca_cert_pem"`
	SealedCAKey    []byte `json:"sealed_ca_key"`
	AdminTokenHash string `json:"admin_token_hash"`
	// SealedAdminToken lets any node hand the first admin token to a node
	// that joins, so the CLI works on every node.
	SealedAdminToken []byte `json:"sealed_admin_token,omitempty"`
	// The agent token: what commissioning agents present (X-Rollcall-Token).
	// Sealed so that any node can put it on a boot command line.
	AgentTokenHash   string    `json:"agent_token_hash,omitempty"`
	SealedAgentToken []byte    `json:"sealed_agent_token,omitempty"`
	Created          time.Time `json:"created"`
}

const (
	keyIdentity   = "identity"
	prefixNode    = "node/"
	prefixJoin    = "join/"
	prefixRemoved = "removed/"
	tableCluster  = "cluster"
	joinCodeLimit = 1000
)

// TableCluster names the cluster table for blocking queries.
const TableCluster = tableCluster

// Identity returns the cluster identity, or ErrNotFound before bootstrap
// finished.
func (t *Tx) Identity() (ClusterIdentity, error) {
	var id ClusterIdentity
	err := t.getJSON(bucketCluster, keyIdentity, &id)
	return id, err
}

// PutIdentity records the cluster identity. It is written once.
func (t *Tx) PutIdentity(id ClusterIdentity) error {
	if _, err := t.Identity(); err == nil {
		return Errorf(ErrConflict, "cluster identity already set")
	}
	if err := t.putJSON(bucketCluster, keyIdentity, id); err != nil {
		return err
	}
	return t.touch(tableCluster)
}

// Nodes returns the appliance nodes, by name.
func (t *Tx) Nodes() ([]Node, error) {
	var out []Node
	err := forEachJSON(t, bucketCluster, prefixNode, func(_ string, n *Node) error {
		out = append(out, *n)
		return nil
	})
	return out, err
}

// Node returns one appliance node.
func (t *Tx) Node(name string) (Node, error) {
	var n Node
	if err := t.getJSON(bucketCluster, prefixNode+name, &n); err != nil {
		return n, lookupError(err, "node %q", name)
	}
	return n, nil
}

// PutNode records an appliance node.
func (t *Tx) PutNode(n Node) error {
	n.Index = t.Index
	if err := t.putJSON(bucketCluster, prefixNode+n.Name, n); err != nil {
		return err
	}
	if err := t.logChange("nodes", n.Name, OpPut); err != nil {
		return err
	}
	return t.touch(tableCluster)
}

// DeleteNode forgets an appliance node.
func (t *Tx) DeleteNode(name string) error {
	if _, err := t.Node(name); err != nil {
		return err
	}
	if err := t.del(bucketCluster, prefixNode+name); err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketCluster).Put([]byte(prefixRemoved+name), nil); err != nil {
		return err
	}
	if err := t.logChange("nodes", name, OpDelete); err != nil {
		return err
	}
	return t.touch(tableCluster)
}

// NodeRemoved reports whether a node of this name was removed and has not
// joined again since: its certificate no longer admits it.
func (t *Tx) NodeRemoved(name string) bool {
	b := t.tx.Bucket(bucketCluster)
	return b.Get([]byte(prefixRemoved+name)) != nil
}

// AddJoinCode records a new join code by the hash of its secret. Expired
// codes are pruned here, so the table stays small without a timer.
func (t *Tx) AddJoinCode(j JoinCode, now time.Time) error {
	if _, err := hex.DecodeString(j.SecretHash); err != nil || len(j.SecretHash) != 64 {
		return Errorf(ErrInvalid, "join code hash must be 64 hex digits")
	}
	n, stale, err := liveAndStale(t, prefixJoin, func(c *JoinCode) bool { return now.After(c.Expires.Add(24 * time.Hour)) })
	if err != nil {
		return err
	}
	// Refused before the pruning: a refused command writes nothing.
	if n >= joinCodeLimit {
		return Errorf(ErrConflict, "too many outstanding join codes (%d)", n)
	}
	for _, k := range stale {
		if err := t.del(bucketCluster, k); err != nil {
			return err
		}
	}
	return t.putJSON(bucketCluster, prefixJoin+j.SecretHash, j)
}

// UseJoinCode marks a join code used by node, refusing one that is unknown,
// already used or expired at now (the proposer's clock, carried in the
// command).
func (t *Tx) UseJoinCode(secretHash, node string, now time.Time) error {
	var j JoinCode
	if err := t.getJSON(bucketCluster, prefixJoin+secretHash, &j); err != nil {
		return Errorf(ErrForbidden, "join code is not known to this cluster")
	}
	if j.UsedBy != "" && j.UsedBy == node && !now.After(j.Expires) {
		// The same node asking again (its first answer was lost): the
		// secret proves it holds the code, and it stays that node.
		return nil
	}
	if j.UsedBy != "" {
		return Errorf(ErrForbidden, "join code was already used (by %s at %s)", j.UsedBy, j.Used.UTC().Format(time.RFC3339))
	}
	if now.After(j.Expires) {
		return Errorf(ErrForbidden, "join code expired at %s", j.Expires.UTC().Format(time.RFC3339))
	}
	j.UsedBy, j.Used = node, now
	if err := t.putJSON(bucketCluster, prefixJoin+secretHash, j); err != nil {
		return err
	}
	// A node joining again under a removed name is admitted from now on.
	return t.tx.Bucket(bucketCluster).Delete([]byte(prefixRemoved + node))
}

// liveAndStale counts the cluster records under prefix that are kept and
// lists the keys of those stale says are past keeping (pruned by the
// caller once it has decided to write).
func liveAndStale[T any](t *Tx, prefix string, stale func(*T) bool) (live int, old []string, err error) {
	err = forEachJSON(t, bucketCluster, prefix, func(k string, v *T) error {
		if stale(v) {
			old = append(old, k)
		} else {
			live++
		}
		return nil
	})
	return live, old, err
}
