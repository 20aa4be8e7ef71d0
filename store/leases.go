package store

import (
	"fmt"
	"net/netip"
	"time"
)

// DHCP state. Dynamic ranges are cut into blocks; each block is owned by one
// appliance node for a while (Expires), renewed by that node while it lives.
// A node leases only from blocks it owns, so no two nodes can hand out one
// address, and a lease never outlives its block (the DHCP server caps lease
// ends at the block's expiry). Grants are replicated in batches after the
// fact: a node that dies before its batch commits loses nothing unsafe,
// because its blocks stay its own, untouched, until they expire.

var (
	bucketLeases      = []byte("leases")        // 16-byte address → Lease
	bucketLeaseByMAC  = []byte("leases.by_mac") // mac + "\x00" + 16-byte address
	bucketLeaseBlocks = []byte("lease_blocks")  // 16-byte first address → LeaseBlock
	bucketSeen        = []byte("seen")          // mac → Seen
)

// TableLeases names leases and blocks for blocking queries.
const TableLeases = "leases"

// LeaseBlock is a span of a dynamic range owned by one node until Expires.
// After a node restarts it gives its blocks up with Quarantine set: nobody
// may lease from them until then, because the node may have granted leases
// it never replicated.
type LeaseBlock struct {
	Subnet     netip.Prefix `json:"subnet"`
	First      netip.Addr   `json:"first"`
	Last       netip.Addr   `json:"last"`
	Node       string       `json:"node,omitempty"`
	Expires    time.Time    `json:"expires"`
	Quarantine time.Time    `json:"quarantine,omitzero"`
	Index      uint64       `json:"index"`
}

// Free reports whether a node may claim the block at now.
func (b LeaseBlock) Free(now time.Time) bool {
	return (b.Node == "" || !now.Before(b.Expires)) && !now.Before(b.Quarantine)
}

// Lease is one DHCP lease.
type Lease struct {
	IP       netip.Addr   `json:"ip"`
	Subnet   netip.Prefix `json:"subnet"`
	MAC      string       `json:"mac"`
	ClientID string       `json:"client_id,omitempty"`
	Hostname string       `json:"hostname,omitempty"`
	Node     string       `json:"node"` // the node that granted or last renewed it
	Granted  time.Time    `json:"granted"`
	Expires  time.Time    `json:"expires"`
	Declined bool         `json:"declined,omitempty"` // a client said the address is in use: quarantined until Expires
	Index    uint64       `json:"index"`
}

// Seen records the last time a MAC was heard by a node's DHCP server.
type Seen struct {
	MAC       string    `json:"mac"`
	Node      string    `json:"node"`
	Interface string    `json:"interface,omitempty"`
	VLAN      string    `json:"vlan,omitempty"` // fabric/vid
	Arch      int       `json:"arch,omitempty"` // option 93
	UserClass string    `json:"user_class,omitempty"`
	Last      time.Time `json:"last"`
}

// LeaseBlocks lists the blocks inside p (all when p is not valid).
func (t *Tx) LeaseBlocks(p netip.Prefix) ([]LeaseBlock, error) {
	var out []LeaseBlock
	c := t.tx.Bucket(bucketLeaseBlocks).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var b LeaseBlock
		if err := decodeLeaseBlock(v, &b); err != nil {
			return nil, fmt.Errorf("decode lease block: %w", err)
		}
		if !p.IsValid() || p == b.Subnet {
			out = append(out, b)
		}
	}
	return out, nil
}

// LeaseBlock returns the block starting at first.
func (t *Tx) LeaseBlock(first netip.Addr) (LeaseBlock, error) {
	var b LeaseBlock
	v := t.tx.Bucket(bucketLeaseBlocks).Get(addrKey(first))
	if v == nil {
		return b, Errorf(ErrNotFound, "lease block %s", first)
	}
	return b, decodeLeaseBlock(v, &b)
}

// BlockOf returns the block that holds a, if any.
func (t *Tx) BlockOf(a netip.Addr) (LeaseBlock, bool) {
	c := t.tx.Bucket(bucketLeaseBlocks).Cursor()
	k, v := c.Seek(addrKey(a))
	switch {
	case k == nil:
		k, v = c.Last()
	case string(k) != string(addrKey(a)):
		k, v = c.Prev()
	}
	if k == nil {
		return LeaseBlock{}, false
	}
	var b LeaseBlock
	if decodeLeaseBlock(v, &b) != nil || a.Less(b.First) || b.Last.Less(a) {
		return LeaseBlock{}, false
	}
	return b, true
}

// PutLeaseBlock writes a block.
func (t *Tx) PutLeaseBlock(b LeaseBlock) error {
	if !t.write {
		return ErrReadOnly
	}
	b.Index = t.Index
	if err := t.tx.Bucket(bucketLeaseBlocks).Put(addrKey(b.First), encodeLeaseBlock(b)); err != nil {
		return err
	}
	if err := t.logChange("lease_blocks", b.First.String(), OpPut); err != nil {
		return err
	}
	return t.touch(TableLeases)
}

// DeleteLeaseBlock removes a block record (its range went away).
func (t *Tx) DeleteLeaseBlock(first netip.Addr) error {
	if err := t.tx.Bucket(bucketLeaseBlocks).Delete(addrKey(first)); err != nil {
		return err
	}
	if err := t.logChange("lease_blocks", first.String(), OpDelete); err != nil {
		return err
	}
	return t.touch(TableLeases)
}

// Lease returns the lease of an address.
func (t *Tx) Lease(a netip.Addr) (Lease, error) {
	var l Lease
	v := t.tx.Bucket(bucketLeases).Get(addrKey(a))
	if v == nil {
		return l, Errorf(ErrNotFound, "lease %s", a)
	}
	return l, decodeLease(v, &l)
}

// LeasesByMAC returns the leases held by a MAC.
func (t *Tx) LeasesByMAC(mac string) ([]Lease, error) {
	var out []Lease
	p := []byte(mac + "\x00")
	c := t.tx.Bucket(bucketLeaseByMAC).Cursor()
	for k, _ := c.Seek(p); k != nil && hasPrefix(k, p); k, _ = c.Next() {
		l, err := t.Lease(netip.AddrFrom16([16]byte(k[len(p):])).Unmap())
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// Leases calls fn for every lease in [first, last], in address order, until
// fn returns false.
func (t *Tx) Leases(first, last netip.Addr, fn func(Lease) bool) error {
	c := t.tx.Bucket(bucketLeases).Cursor()
	end := string(addrKey(last))
	for k, v := c.Seek(addrKey(first)); k != nil && string(k) <= end; k, v = c.Next() {
		var l Lease
		if err := decodeLease(v, &l); err != nil {
			return err
		}
		if !fn(l) {
			return nil
		}
	}
	return nil
}

// PutLease writes a lease, replacing any lease of the address.
func (t *Tx) PutLease(l Lease) error {
	if !t.write {
		return ErrReadOnly
	}
	if old, err := t.Lease(l.IP); err == nil && old.MAC != l.MAC {
		if err := t.tx.Bucket(bucketLeaseByMAC).Delete(append([]byte(old.MAC+"\x00"), addrKey(l.IP)...)); err != nil {
			return err
		}
	}
	l.Index = t.Index
	if err := t.tx.Bucket(bucketLeases).Put(addrKey(l.IP), encodeLease(l)); err != nil {
		return err
	}
	if l.MAC != "" {
		if err := t.tx.Bucket(bucketLeaseByMAC).Put(append([]byte(l.MAC+"\x00"), addrKey(l.IP)...), nil); err != nil {
			return err
		}
	}
	if err := t.logChange("leases", l.IP.String(), OpPut); err != nil {
		return err
	}
	return t.touch(TableLeases)
}

// DeleteLease removes a lease.
func (t *Tx) DeleteLease(a netip.Addr) error {
	l, err := t.Lease(a)
	if err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketLeaseByMAC).Delete(append([]byte(l.MAC+"\x00"), addrKey(a)...)); err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketLeases).Delete(addrKey(a)); err != nil {
		return err
	}
	if err := t.logChange("leases", a.String(), OpDelete); err != nil {
		return err
	}
	return t.touch(TableLeases)
}

// PutSeen records a MAC heard by a node (the newest sighting wins).
func (t *Tx) PutSeen(s Seen) error {
	if !t.write {
		return ErrReadOnly
	}
	if old, err := t.SeenMAC(s.MAC); err == nil && old.Last.After(s.Last) {
		return nil
	}
	if err := t.tx.Bucket(bucketSeen).Put([]byte(s.MAC), encodeSeen(s)); err != nil {
		return err
	}
	return t.logChange("seen", s.MAC, OpPut)
}

// SeenMAC returns the last sighting of a MAC.
func (t *Tx) SeenMAC(mac string) (Seen, error) {
	var s Seen
	v := t.tx.Bucket(bucketSeen).Get([]byte(mac))
	if v == nil {
		return s, ErrNotFound
	}
	return s, decodeSeen(v, &s)
}
