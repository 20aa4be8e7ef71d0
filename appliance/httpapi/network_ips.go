package httpapi

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/ipam"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// Single addresses: reservations, static and automatic allocation (the
// network model: network.go).

// ---- addresses

func (h *netAPI) listIPs(c *gin.Context) error {
	p, err := subnetQuery(c)
	if err != nil {
		return err
	}
	return h.read(c, true, func(tx *store.Tx, index uint64) (any, error) {
		as, err := tx.Addresses(p, 0) // any prefix filters, a subnet or not
		return wire.AddressList{Index: index, Addresses: nonNil(convert(as, wireAddress))}, err
	})
}

// checkClaim runs the state machine's checks for a claim on the local copy:
// every check of ipam.Claim comes before its write, which a read-only
// transaction refuses.
func checkClaim(tx *store.Tx, a store.Address) error {
	if old, err := tx.Address(a.IP); err == nil {
		return store.Errorf(store.ErrConflict, "address %s is already in use (%s %s)", a.IP, old.How, old.Machine+old.Name)
	}
	if err := ipam.Claim(tx, a); err != nil && !errors.Is(err, store.ErrReadOnly) {
		return err
	}
	return nil
}

func (h *netAPI) reserveIP(c *gin.Context) error {
	var req wire.ReserveRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	a, err := parseAddr("ip", req.IP)
	if err != nil {
		return err
	}
	if req.Name == "" {
		return BadRequest("a reserved address needs a name (what holds it: switch-1, pdu-a)")
	}
	if err := store.ValidName(req.Name); err != nil {
		return err
	}
	rec := store.Address{IP: a, How: store.HowReserved, Name: req.Name, Created: time.Now().UTC()}
	idx, err := h.propose(c, func(tx *store.Tx) error { return checkClaim(tx, rec) }, &raftfsm.AddressClaim{Address: raftfsm.AddressBody(rec)})
	if err != nil {
		return err
	}
	return h.respondAddress(c, a, idx)
}

func (h *netAPI) releaseIP(c *gin.Context) error {
	a, err := parseAddr("ip", c.Param("ip"))
	if err != nil {
		return err
	}
	idx, err := h.propose(c, func(tx *store.Tx) error { _, err := tx.Address(a); return err }, &raftfsm.AddressRelease{IP: a})
	if err != nil {
		return err
	}
	return deleted(c, idx, a.String())
}

func (h *netAPI) allocateIP(c *gin.Context) error {
	var req wire.AllocateRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	var p netip.Prefix
	var err error
	if req.Subnet != "" || req.IP == "" {
		if p, err = parsePrefix("subnet", req.Subnet); err != nil {
			return err
		}
	}
	if req.Machine == "" {
		return BadRequest("machine is required (an ID or a name)")
	}
	if err := h.s.minIndex(c); err != nil {
		return err
	}
	var m store.Machine
	if err := h.s.cfg.DB.View(func(tx *store.Tx) (err error) {
		if m, err = tx.MachineByRef(req.Machine); err != nil {
			return err
		}
		if p.IsValid() {
			_, err = tx.Subnet(p)
		}
		return err
	}); err != nil {
		return err
	}
	rec := store.Address{Subnet: p, Machine: m.ID, Interface: req.Interface, Created: time.Now().UTC()}
	if req.IP != "" {
		if rec.IP, err = parseAddr("ip", req.IP); err != nil {
			return err
		}
		rec.How = store.HowStatic
		idx, err := h.propose(c, func(tx *store.Tx) error { return checkClaim(tx, rec) }, &raftfsm.AddressClaim{Address: raftfsm.AddressBody(rec)})
		if err != nil {
			return err
		}
		return h.respondAddress(c, rec.IP, idx)
	}
	rec.How = store.HowAuto
	for attempt := range allocAttempts {
		if rec.IP, err = h.pick(p, attempt); err != nil {
			return err
		}
		var idx uint64
		idx, err = h.s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.AddressClaim{Address: raftfsm.AddressBody(rec)})
		h.unpend(rec.IP)
		if err == nil {
			return h.respondAddress(c, rec.IP, idx)
		}
		if !errors.Is(err, store.ErrConflict) {
			break
		}
		// Another node's claim took the address first. Apply returned once
		// this node had applied our refused claim, so the local copy now
		// shows the winner: pick again.
		h.s.log.Debug("address claim lost a race; picking again", "subnet", p, "ip", rec.IP, "attempt", attempt+1)
	}
	if errors.Is(err, store.ErrConflict) {
		return store.Errorf(store.ErrConflict, "allocate in %s: other claims took the address picked %d times in a row (last: %s); retry", p, allocAttempts, store.Public(err))
	}
	return err
}

func (h *netAPI) respondAddress(c *gin.Context, a netip.Addr, idx uint64) error {
	return h.respond(c, http.StatusCreated, idx, func(tx *store.Tx) (any, error) {
		rec, err := tx.Address(a)
		return wireAddress(rec), err
	})
}

// pick chooses the address an auto claim proposes, on the local copy,
// passing over the addresses this node already has in flight. With nothing
// in flight and on a first attempt it is the subnet's next free address; a
// node under concurrent load, or one that just lost a race, also passes over
// a random number of free addresses (a window that grows with each lost
// race), so that proposers on different nodes, whose copies all show the
// same lowest free address, seldom propose the same one.
func (h *netAPI) pick(p netip.Prefix, attempt int) (netip.Addr, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	spread := 0
	if attempt > 0 || len(h.pending) > 0 {
		spread = min(16*(len(h.pending)+1)<<attempt, 4096)
	}
	budget := 0
	if spread > 0 {
		budget = rand.IntN(spread)
	}
	var a netip.Addr
	err := h.s.cfg.DB.View(func(tx *store.Tx) error {
		var skipped netip.Addr // the last free address passed over for the window
		var err error
		a, err = ipam.PickSkipping(tx, p, func(x netip.Addr) bool {
			if h.pending[x] {
				return true
			}
			if budget > 0 {
				budget--
				skipped = x
				return true
			}
			return false
		})
		if errors.Is(err, ipam.ErrFull) && skipped.IsValid() {
			// The window ran past the end: take the last free one seen.
			a, err = skipped, nil
		}
		return err
	})
	if err != nil {
		return a, err
	}
	h.pending[a] = true
	return a, nil
}

func (h *netAPI) unpend(a netip.Addr) {
	h.mu.Lock()
	delete(h.pending, a)
	h.mu.Unlock()
}
