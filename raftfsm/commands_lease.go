package raftfsm

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/binenc"
)

// DHCP lease commands. The scheme (see store/leases.go): nodes claim blocks
// of dynamic ranges through Raft, lease from their own blocks without
// consensus, and replicate grants in batches. Every rule that keeps two
// clients off one address is checked here against the replicated state.

// LeaseBlockClaim gives a node a block of a dynamic range until Expires.
type LeaseBlockClaim struct {
	Subnet  netip.Prefix `json:"subnet"`
	First   netip.Addr   `json:"first"`
	Last    netip.Addr   `json:"last"`
	Node    string       `json:"node"`
	Expires time.Time    `json:"expires"`
	Now     time.Time    `json:"now"`
}

// LeaseBlockRenew extends a node's blocks. Blocks it no longer owns are
// skipped (their per-entry error is reported).
type LeaseBlockRenew struct {
	Node    string       `json:"node"`
	Blocks  []netip.Addr `json:"blocks"`
	Expires time.Time    `json:"expires"`
	Now     time.Time    `json:"now"`
}

// LeaseBlockRelease gives blocks up. Quarantine keeps them unusable until
// then: a node that restarted may have granted leases it never replicated.
// A node releases its own blocks; the leader releases a dead node's.
type LeaseBlockRelease struct {
	Node       string       `json:"node"`
	Blocks     []netip.Addr `json:"blocks"`
	Quarantine time.Time    `json:"quarantine,omitzero"`
	Now        time.Time    `json:"now"`
}

// LeaseGrant is one lease a node granted (or renewed) from its block.
type LeaseGrant struct {
	IP       netip.Addr `json:"ip"`
	MAC      string     `json:"mac"`
	ClientID string     `json:"client_id,omitempty"`
	Hostname string     `json:"hostname,omitempty"`
	Granted  time.Time  `json:"granted"`
	Expires  time.Time  `json:"expires"`
}

// LeaseRelease is a client's RELEASE (or a DECLINE when Declined is set,
// which keeps the address out of use until Until).
type LeaseRelease struct {
	IP       netip.Addr `json:"ip"`
	MAC      string     `json:"mac"`
	Declined bool       `json:"declined,omitempty"`
	Until    time.Time  `json:"until,omitzero"`
}

// LeaseBatch carries what one node's DHCP server did since its last batch.
// Entries are applied one by one; an entry the state refuses is skipped and
// counted in Refused, never failing the others.
type LeaseBatch struct {
	Node     string         `json:"node"`
	Now      time.Time      `json:"now"`
	Grants   []LeaseGrant   `json:"grants,omitempty"`
	Releases []LeaseRelease `json:"releases,omitempty"`
	Seen     []Seen         `json:"seen,omitempty"`
}

// LeaseExpire removes leases that ended before Now in [First, Last].
type LeaseExpire struct {
	First netip.Addr `json:"first"`
	Last  netip.Addr `json:"last"`
	Now   time.Time  `json:"now"`
}

func (*LeaseBlockClaim) Type() Type     { return TypeLeaseBlockClaim }
func (*LeaseBlockRenew) Type() Type     { return TypeLeaseBlockRenew }
func (*LeaseBlockRelease) Type() Type   { return TypeLeaseBlockRelease }
func (*LeaseBatch) Type() Type          { return TypeLeaseBatch }
func (*LeaseExpire) Type() Type         { return TypeLeaseExpire }
func (*LeaseBlockClaim) Version() uint8 { return 1 }
func (*LeaseBlockRenew) Version() uint8 { return 1 }
func (*LeaseBlockRelease) Version() uint8 {
	return 1
}
func (*LeaseBatch) Version() uint8  { return 2 }
func (*LeaseExpire) Version() uint8 { return 1 }

func (c *LeaseBlockClaim) apply(tx *store.Tx) error {
	if c.Node == "" || !c.Expires.After(c.Now) {
		return store.Errorf(store.ErrInvalid, "block claim needs a node and an expiry after now")
	}
	if c.Last.Less(c.First) {
		return store.Errorf(store.ErrInvalid, "block %s–%s ends before it starts", c.First, c.Last)
	}
	ranges, err := tx.Ranges(c.Subnet)
	if err != nil {
		return err
	}
	inDynamic := false
	for _, r := range ranges {
		if r.Kind == store.RangeDynamic && r.Contains(c.First) && r.Contains(c.Last) {
			inDynamic = true
		}
	}
	if !inDynamic {
		return store.Errorf(store.ErrInvalid, "block %s–%s is not inside one dynamic range of %s", c.First, c.Last, c.Subnet)
	}
	blocks, err := tx.LeaseBlocks(c.Subnet)
	if err != nil {
		return err
	}
	for _, b := range blocks {
		if b.Last.Less(c.First) || c.Last.Less(b.First) {
			continue
		}
		if b.First != c.First || b.Last != c.Last {
			return store.Errorf(store.ErrConflict, "block %s–%s overlaps block %s–%s", c.First, c.Last, b.First, b.Last)
		}
		if !b.Free(c.Now) && b.Node != c.Node {
			return store.Errorf(store.ErrConflict, "block %s–%s belongs to %s until %s", b.First, b.Last, b.Node, b.Expires.UTC().Format(time.RFC3339))
		}
		if c.Now.Before(b.Quarantine) {
			return store.Errorf(store.ErrConflict, "block %s–%s is quarantined until %s", b.First, b.Last, b.Quarantine.UTC().Format(time.RFC3339))
		}
	}
	return tx.PutLeaseBlock(store.LeaseBlock{Subnet: c.Subnet, First: c.First, Last: c.Last, Node: c.Node, Expires: c.Expires})
}

func (c *LeaseBlockRenew) apply(tx *store.Tx) error {
	var firstErr error
	for _, first := range c.Blocks {
		b, err := tx.LeaseBlock(first)
		if err == nil && (b.Node != c.Node || !c.Now.Before(b.Expires)) {
			err = store.Errorf(store.ErrConflict, "block %s is not held by %s", first, c.Node)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if c.Expires.After(b.Expires) {
			b.Expires = c.Expires
		}
		if err := tx.PutLeaseBlock(b); err != nil {
			return err
		}
	}
	return firstErr
}

func (c *LeaseBlockRelease) apply(tx *store.Tx) error {
	for _, first := range c.Blocks {
		b, err := tx.LeaseBlock(first)
		if err != nil || b.Node != c.Node {
			continue
		}
		b.Node, b.Expires = "", c.Now
		if c.Quarantine.After(b.Quarantine) {
			b.Quarantine = c.Quarantine
		}
		if err := tx.PutLeaseBlock(b); err != nil {
			return err
		}
	}
	return nil
}

// apply records each grant only if the address lies in a block the granting
// node held when it granted, and no other client holds an unexpired lease on
// it. A refused grant is a bug or a clock far off; it is skipped, not fatal.
func (c *LeaseBatch) apply(tx *store.Tx) error {
	refused := 0
	var b store.LeaseBlock // grants come in address runs: most share the last block
	ok := false
	for _, g := range c.Grants {
		if !ok || g.IP.Less(b.First) || b.Last.Less(g.IP) {
			b, ok = tx.BlockOf(g.IP)
		}
		old, oldErr := tx.Lease(g.IP)
		subnet := b.Subnet
		if !ok || b.Node != c.Node || g.Expires.After(b.Expires.Add(time.Second)) {
			// Only a renewal of a lease this client already holds may come
			// from outside the node's own blocks.
			if oldErr != nil || old.MAC != g.MAC || old.Declined {
				refused++
				continue
			}
			subnet = old.Subnet
		}
		if oldErr == nil && old.MAC != g.MAC && c.Now.Before(old.Expires) {
			refused++
			continue
		}
		if err := tx.PutLease(store.Lease{
			IP: g.IP, Subnet: subnet, MAC: g.MAC, ClientID: g.ClientID, Hostname: g.Hostname,
			Node: c.Node, Granted: g.Granted, Expires: g.Expires,
		}); err != nil {
			return err
		}
	}
	for _, r := range c.Releases {
		old, err := tx.Lease(r.IP)
		if r.Declined {
			// A DECLINE holds the address out of use whoever had it.
			l := store.Lease{IP: r.IP, MAC: r.MAC, Node: c.Node, Granted: c.Now, Expires: r.Until, Declined: true}
			if err == nil {
				l.Subnet = old.Subnet
			}
			if err := tx.PutLease(l); err != nil {
				return err
			}
			continue
		}
		if err != nil || old.MAC != r.MAC {
			continue
		}
		if err := tx.DeleteLease(r.IP); err != nil {
			return err
		}
	}
	for _, s := range c.Seen {
		if err := tx.PutSeen(s.record()); err != nil {
			return err
		}
	}
	if refused > 0 {
		return store.Errorf(store.ErrConflict, "%d of %d grants from %s were refused (address outside its blocks or leased to another client)", refused, len(c.Grants), c.Node)
	}
	return nil
}

// LeaseBatch body, version 2: binenc fields in declaration order, each list
// a count then its entries. It is the command sent at DHCP rates and decoded
// on every node; version 1 was JSON and still decodes.
func (c *LeaseBatch) marshalBody() ([]byte, error) {
	w := binenc.NewWriter(32 + 80*len(c.Grants) + 40*len(c.Releases) + 64*len(c.Seen))
	w.String(c.Node)
	w.Time(c.Now)
	w.Uvarint(uint64(len(c.Grants)))
	for _, g := range c.Grants {
		w.Addr(g.IP)
		w.String(g.MAC)
		w.String(g.ClientID)
		w.String(g.Hostname)
		w.Time(g.Granted)
		w.Time(g.Expires)
	}
	w.Uvarint(uint64(len(c.Releases)))
	for _, r := range c.Releases {
		w.Addr(r.IP)
		w.String(r.MAC)
		w.Bool(r.Declined)
		w.Time(r.Until)
	}
	w.Uvarint(uint64(len(c.Seen)))
	for _, s := range c.Seen {
		w.String(s.MAC)
		w.String(s.Node)
		w.String(s.Interface)
		w.String(s.VLAN)
		w.Varint(int64(s.Arch))
		w.String(s.UserClass)
		w.Time(s.Last)
	}
	return w.Bytes(), nil
}

// Smallest encodings of a grant, a release and a sighting: what a count in
// the body may claim at most per remaining byte.
const minGrantBytes, minReleaseBytes, minSeenBytes = 6, 4, 7

func (c *LeaseBatch) unmarshalBody(version uint8, b []byte) error {
	if version == 1 {
		if err := decodeStrict(b, c); err != nil {
			return err
		}
		// Version 2 carries no IPv6 zone (DHCPv4 leases never have one):
		// drop it here so an old entry reads as its re-encoding does.
		for i := range c.Grants {
			c.Grants[i].IP = c.Grants[i].IP.WithZone("")
		}
		for i := range c.Releases {
			c.Releases[i].IP = c.Releases[i].IP.WithZone("")
		}
		return nil
	}
	r := binenc.NewReader(b)
	c.Node, c.Now = r.String(), r.Time()
	c.Grants = make([]LeaseGrant, r.Len(minGrantBytes))
	for i := range c.Grants {
		c.Grants[i] = LeaseGrant{IP: r.Addr(), MAC: r.String(), ClientID: r.String(), Hostname: r.String(), Granted: r.Time(), Expires: r.Time()}
	}
	c.Releases = make([]LeaseRelease, r.Len(minReleaseBytes))
	for i := range c.Releases {
		c.Releases[i] = LeaseRelease{IP: r.Addr(), MAC: r.String(), Declined: r.Bool(), Until: r.Time()}
	}
	c.Seen = make([]Seen, r.Len(minSeenBytes))
	for i := range c.Seen {
		c.Seen[i] = Seen{
			MAC: r.String(), Node: r.String(), Interface: r.String(), VLAN: r.String(),
			Arch: int(r.Varint()), UserClass: r.String(), Last: r.Time(),
		}
	}
	if err := r.Done(); err != nil {
		return fmt.Errorf("lease batch body: %w", err)
	}
	return nil
}

func (c *LeaseExpire) apply(tx *store.Tx) error {
	var ended []netip.Addr
	err := tx.Leases(c.First, c.Last, func(l store.Lease) bool {
		if !c.Now.Before(l.Expires) {
			ended = append(ended, l.IP)
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, a := range ended {
		if err := tx.DeleteLease(a); err != nil {
			return err
		}
	}
	return nil
}

func leaseCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeLeaseBlockClaim:   {"lease-block-claim", 1, func() Command { return &LeaseBlockClaim{} }},
		TypeLeaseBlockRenew:   {"lease-block-renew", 1, func() Command { return &LeaseBlockRenew{} }},
		TypeLeaseBlockRelease: {"lease-block-release", 1, func() Command { return &LeaseBlockRelease{} }},
		TypeLeaseBatch:        {"lease-batch", 2, func() Command { return &LeaseBatch{} }},
		TypeLeaseExpire:       {"lease-expire", 1, func() Command { return &LeaseExpire{} }},
	}
}
