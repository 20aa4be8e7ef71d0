package wire

import "time"

// ClusterView is GET /api/v1/cluster.
type ClusterView struct {
	Node          string   `json:"node"` // the node that answered
	Leader        string   `json:"leader"`
	CAFingerprint string   `json:"ca_fingerprint"` // SHA-256 of the cluster CA, hex
	Members       []Member `json:"members"`        // the Raft configuration, asked live
	Nodes         []Node   `json:"nodes"`          // the nodes on record
}

// CAView is the cluster CA's certificate, for rollcall ca show: what an
// operator compares with the fingerprint a client pinned.
type CAView struct {
	Fingerprint string    `json:"fingerprint"` // SHA-256 of the DER, hex
	Subject     string    `json:"subject"`
	Serial      string    `json:"serial"` // hex
	NotBefore   time.Time `json:"not_before"`
	NotAfter    time.Time `json:"not_after"`
	// MaxPathLen is the chain depth the root allows below it (-1: not
	// limited; 0: it signs leaf certificates only).
	MaxPathLen int    `json:"max_path_len"`
	PEM        string `json:"pem"`
}

// Member is one Raft member, with the status it reported if it answered.
type Member struct {
	ID        string      `json:"id"`
	Address   string      `json:"address"`
	Voter     bool        `json:"voter"`
	Leader    bool        `json:"leader"`
	Reachable bool        `json:"reachable"`
	Status    *NodeStatus `json:"status,omitempty"`
	Error     string      `json:"error,omitempty"` // why it did not answer
}

// NodeStatus is one node's own view of Raft.
type NodeStatus struct {
	ID          string    `json:"id"`
	Address     string    `json:"address"`
	State       string    `json:"state"` // Leader, Follower, Candidate, …
	Leader      string    `json:"leader"`
	Term        uint64    `json:"term"`
	Applied     uint64    `json:"applied_index"`
	Commit      uint64    `json:"commit_index"`
	LastContact time.Time `json:"last_contact,omitzero"`
	// Diverged says why this node's store is not trusted ("" while it
	// agrees with the cluster's).
	Diverged string `json:"diverged,omitempty"`
	Parts    []Part `json:"parts,omitempty"`
	// Time is the node's clock when it answered.
	Time time.Time `json:"time,omitzero"`
	// Build is the node's build version (empty from a node without the
	// version gate).
	Build string `json:"build,omitempty"`
	// Gate is what the node reads that the cluster's version gate has not
	// opened yet, and whom it waits for; absent when nothing is pending.
	Gate *GateStatus `json:"gate,omitempty"`
}

// Part is one long-running service of a node and how it fares.
type Part struct {
	Name     string    `json:"name"`
	State    string    `json:"state"` // starting, running, failed, stopped
	Error    string    `json:"error,omitempty"`
	Since    time.Time `json:"since"`
	Restarts int       `json:"restarts,omitempty"`
}

// Node is an appliance node on record: a member of the cluster.
type Node struct {
	Name     string    `json:"name"`
	RaftAddr string    `json:"raft_addr"`
	HTTPAddr string    `json:"http_addr,omitempty"`
	Joined   time.Time `json:"joined"`
	Index    uint64    `json:"index"`
}

// JoinCodeRequest is POST /api/v1/cluster/join-codes; an empty body means a
// TTL of 60m.
type JoinCodeRequest struct {
	TTL string `json:"ttl"` // a duration from 1m to 168h
}

// JoinCodeView is a fresh join code: shown once, kept only as a hash.
type JoinCodeView struct {
	Code    string    `json:"code"`
	Expires time.Time `json:"expires"`
	Address string    `json:"address"` // the Raft address the code points at
}

// Removed answers DELETE /api/v1/cluster/members/{name}.
type Removed struct {
	Removed string `json:"removed"`
	// RevokedCertificates counts the node's certificates revoked with it
	// (by serial: refused at the TLS handshake on every node).
	RevokedCertificates int `json:"revoked_certificates"`
	// Note says why none were, when the cluster could not yet record
	// revocations (a rolling upgrade in progress).
	Note string `json:"note,omitempty"`
}

// Repaired answers POST /api/v1/cluster/members/{name}/repair.
type Repaired struct {
	AppliedIndex uint64 `json:"applied_index"` // the leader's store as of this index
	Node         string `json:"node"`
}

// CheckReply answers POST /api/v1/cluster/check.
type CheckReply struct {
	Index uint64 `json:"index"` // the index every node hashes its store at
}

// Health is GET /api/v1/health (503 when OK is false). Its fields are in
// the sorted order of the map it used to be.
type Health struct {
	AppliedIndex uint64 `json:"applied_index"`
	// Lag is how many entries this node is behind the leader, when it
	// could tell.
	Lag      *uint64 `json:"lag,omitempty"`
	LagError string  `json:"lag_error,omitempty"`
	Leader   string  `json:"leader"`
	Node     string  `json:"node"`
	OK       bool    `json:"ok"`
	Parts    []Part  `json:"parts"`
	Reason   string  `json:"reason,omitempty"` // why not OK
	State    string  `json:"state"`            // the node's Raft state
}

// JoinRequest is what a new node sends the leader's join listener with a
// join code: the code's secret, its name and Raft address, and a CSR.
type JoinRequest struct {
	Secret   string `json:"secret"` // hex
	Name     string `json:"name"`
	RaftAddr string `json:"raft_addr"`
	CSR      string `json:"csr"` // PEM
}

// JoinReply hands a joining node its certificate and the master key (or
// says why not).
type JoinReply struct {
	CACert     string `json:"ca_cert"`    // PEM
	Cert       string `json:"cert"`       // PEM
	MasterKey  string `json:"master_key"` // hex
	AdminToken string `json:"admin_token,omitempty"`
	Error      string `json:"error,omitempty"`
}

// GateStatus is one node's view of the cluster version gate.
type GateStatus struct {
	Pending []string `json:"pending,omitempty"` // e.g. "gate-probe v2"
	Waiting []string `json:"waiting,omitempty"` // the members the gate waits for, and why
}

// CAState is the cluster's roots: the current one and those a rotation
// replaced that are still trusted (until TrustedUntil).
type CAState struct {
	CAView
	Rotated   time.Time    `json:"rotated,omitzero"`
	RotatedBy string       `json:"rotated_by,omitempty"`
	Previous  []PreviousCA `json:"previous,omitempty"`
	// BundlePEM is every trusted root, the current one first: what a
	// client keeps as its CA file during a transition.
	BundlePEM string `json:"bundle_pem"`
}

// PreviousCA is a replaced root still trusted until TrustedUntil.
type PreviousCA struct {
	CAView
	TrustedUntil time.Time `json:"trusted_until"`
}

// CARotateRequest asks for a new cluster root (rollcall ca rotate). Yes
// must be true: a rotation re-issues every node's certificates.
// Transition is how long the replaced root stays trusted (a Go duration,
// 1h to 8760h; default 720h).
type CARotateRequest struct {
	Yes        bool   `json:"yes"`
	Transition string `json:"transition,omitempty"`
}
