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
	// PreviousCAs are the roots `ca rotate` replaced that are still
	// trusted, newest first. Only CARotate writes them, and only once the
	// version gate opened that command on every member, so no binary that
	// does not read the field ever meets it.
	PreviousCAs []PreviousCA `json:"previous_cas,omitempty"`
	// Rotated is when and by whom the current root was made by a rotation.
	Rotated   time.Time `json:"rotated,omitzero"`
	RotatedBy string    `json:"rotated_by,omitempty"`
}

// A PreviousCA is a cluster root replaced by `ca rotate`: trusted until
// Until so that nodes and clients move to the new root without a break,
// its key kept sealed as a backup, and its cross certificate (the current
// root's subject and key certified by it) handed to peers that know only it.
type PreviousCA struct {
	CertPEM   string    `json:"cert_pem"`
	SealedKey []byte    `json:"sealed_key"`
	CrossPEM  string    `json:"cross_pem"`
	Until     time.Time `json:"until"`
}

// PreviousCAs bounds how many replaced roots an identity keeps trusted.
const PreviousCAs = 4

// RotateCA replaces the cluster root with certPEM (its key sealedKey),
// provided the current root is still from (a rotation based on a root
// another rotation already replaced is refused). previous is the new list
// of trusted earlier roots, newest first, starting with from.
func (t *Tx) RotateCA(from, certPEM string, sealedKey []byte, previous []PreviousCA, by string, now time.Time) error {
	id, err := t.Identity()
	if err != nil {
		return err
	}
	switch {
	case id.CACertPEM != from:
		return Errorf(ErrConflict, "the cluster CA changed since this rotation was prepared (another rotation came first): run it again")
	case certPEM == "" || len(sealedKey) == 0:
		return Errorf(ErrInvalid, "a rotation needs the new CA certificate and its sealed key")
	case len(previous) == 0 || previous[0].CertPEM != from:
		return Errorf(ErrInvalid, "a rotation keeps the root it replaces trusted first")
	case len(previous) > PreviousCAs:
		return Errorf(ErrInvalid, "a rotation keeps at most %d previous roots, not %d", PreviousCAs, len(previous))
	}
	for _, p := range previous {
		if p.CertPEM == certPEM {
			return Errorf(ErrInvalid, "the new CA is one of the previous ones")
		}
		if p.CrossPEM == "" || !p.Until.After(now) {
			return Errorf(ErrInvalid, "every previous root kept needs its cross certificate and an end after now")
		}
	}
	id.CACertPEM, id.SealedCAKey, id.PreviousCAs = certPEM, sealedKey, previous
	id.Rotated, id.RotatedBy = now, by
	if err := t.putJSON(bucketCluster, keyIdentity, id); err != nil {
		return err
	}
	if err := t.logChange(TableClusterCAs, "", OpPut); err != nil {
		return err
	}
	return t.touch(tableCluster)
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
	// No change-log entry: a bootstrap is older than any export, whose
	// first full pass carries the root (and ClusterInit must write what
	// binaries before cluster_cas wrote).
	return t.touch(tableCluster)
}

// TableClusterCAs names the cluster's CA roots in the change log (the
// identity's certificates; the export reloads them whole).
const TableClusterCAs = "cluster_cas"

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
