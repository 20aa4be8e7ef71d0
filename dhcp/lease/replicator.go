// Package lease hands out dynamic DHCP addresses without a consensus round
// per packet, and without two clients ever sharing an address.
//
// The scheme is the store's (see store/leases.go): every dynamic range is
// cut into fixed blocks; a node claims blocks through Raft ahead of need and
// leases only from blocks it owns; a lease never ends after its block does.
// Grants, renewals, releases, declines and sightings are queued and sent in
// batches (one replicated command per batch). A node that restarts gives its
// old blocks up with a quarantine, because it may have granted leases it
// never replicated. The leader expires ended leases and takes back the
// blocks of nodes that stopped renewing.
package lease

import (
	"context"
	"net/netip"
	"time"

	"github.com/rollcall/rollcall/store"
)

// Grant is one lease granted or renewed from one of this node's blocks. It
// mirrors raftfsm.LeaseGrant field for field.
type Grant struct {
	IP       netip.Addr
	MAC      string
	ClientID string
	Hostname string
	Granted  time.Time
	Expires  time.Time
}

// Release is a client's RELEASE, or its DECLINE when Declined is set (the
// address stays out of use until Until). It mirrors raftfsm.LeaseRelease.
type Release struct {
	IP       netip.Addr
	MAC      string
	Declined bool
	Until    time.Time
}

// Replicator writes this node's lease state through Raft. Every method
// returns only once the write is applied to the local store (raftfsm's
// Cluster.Apply does), stamps the command's Now on the proposer, and reports
// a business refusal of the replicated state machine as an error wrapping
// store.ErrConflict or store.ErrInvalid, so that it is told apart from a
// write whose outcome is unknown (no quorum, timeout), which is retried.
type Replicator interface {
	// ClaimBlock takes [first, last] of a dynamic range of subnet for this
	// node until expires (raftfsm.LeaseBlockClaim).
	ClaimBlock(ctx context.Context, subnet netip.Prefix, first, last netip.Addr, expires time.Time) error
	// RenewBlocks extends this node's blocks (raftfsm.LeaseBlockRenew).
	RenewBlocks(ctx context.Context, firsts []netip.Addr, expires time.Time) error
	// ReleaseBlocks gives this node's blocks up, unusable by anyone until
	// quarantine (raftfsm.LeaseBlockRelease). With no blocks it is a no-op
	// write, used as a barrier: once it returns the local store has caught
	// up with the cluster.
	ReleaseBlocks(ctx context.Context, firsts []netip.Addr, quarantine time.Time) error
	// Batch records what this node's DHCP server did (raftfsm.LeaseBatch).
	Batch(ctx context.Context, grants []Grant, releases []Release, seen []store.Seen) error
}

// Housekeeper is what the leader needs to clean up after everyone.
type Housekeeper interface {
	// ExpireLeases removes leases in [first, last] that ended
	// (raftfsm.LeaseExpire).
	ExpireLeases(ctx context.Context, first, last netip.Addr) error
	// ReclaimBlocks releases blocks of node, which stopped renewing them,
	// on its behalf (raftfsm.LeaseBlockRelease with Node = node).
	ReclaimBlocks(ctx context.Context, node string, firsts []netip.Addr, quarantine time.Time) error
}
