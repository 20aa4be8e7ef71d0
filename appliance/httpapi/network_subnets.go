package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/ipam"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// Subnets and the ranges inside them (the network model: network.go).

// ---- subnets

func subnetView(tx *store.Tx, s store.Subnet) (wire.SubnetView, error) {
	used, err := tx.Addresses(s.CIDR, 0)
	return wire.SubnetView{Subnet: wireSubnet(s), Used: len(used)}, err
}

func (h *netAPI) listSubnets(c *gin.Context) error {
	return h.read(c, true, func(tx *store.Tx, index uint64) (any, error) {
		subnets, err := tx.Subnets()
		if err != nil {
			return nil, err
		}
		out := wire.SubnetList{Index: index, Subnets: []wire.SubnetView{}}
		for _, s := range subnets {
			v, err := subnetView(tx, s)
			if err != nil {
				return nil, err
			}
			out.Subnets = append(out.Subnets, v)
		}
		return out, nil
	})
}

func subnetDetail(tx *store.Tx, p netip.Prefix) (any, error) {
	s, err := tx.Subnet(p)
	if err != nil {
		return nil, err
	}
	v, err := subnetView(tx, s)
	if err != nil {
		return nil, err
	}
	ranges, err := tx.Ranges(p)
	return wire.SubnetDetail{SubnetView: v, Ranges: nonNil(convert(ranges, wireRange))}, err
}

func (h *netAPI) getSubnet(c *gin.Context) error {
	p, err := subnetParam(c)
	if err != nil {
		return err
	}
	return h.read(c, false, func(tx *store.Tx, _ uint64) (any, error) { return subnetDetail(tx, p) })
}

func (h *netAPI) createSubnet(c *gin.Context) error {
	var req wire.SubnetRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	s, err := subnetOf(req)
	if err != nil {
		return err
	}
	idx, err := h.propose(c, func(tx *store.Tx) error { return ipam.CheckSubnet(tx, s) }, &raftfsm.SubnetPut{Subnet: raftfsm.SubnetBody(s)})
	if err != nil {
		return err
	}
	return h.respond(c, http.StatusCreated, idx, func(tx *store.Tx) (any, error) { return subnetDetail(tx, s.CIDR) })
}

// subnetOf checks a subnet request and makes the record it asks for.
func subnetOf(req wire.SubnetRequest) (store.Subnet, error) {
	p, err := parsePrefix("cidr", req.CIDR)
	if err != nil {
		return store.Subnet{}, err
	}
	if req.Fabric == "" {
		return store.Subnet{}, BadRequest("fabric is required")
	}
	if req.VID == nil {
		return store.Subnet{}, BadRequest("vid is required (0 for untagged)")
	}
	if req.Purpose == "" {
		return store.Subnet{}, BadRequest("purpose is required (one of %s)", strings.Join(store.Purposes, ", "))
	}
	s := store.Subnet{CIDR: p, Name: req.Name, Fabric: req.Fabric, VID: *req.VID, Purpose: req.Purpose, Domain: req.Domain, Created: time.Now().UTC()}
	if req.Gateway != "" {
		if s.Gateway, err = parseAddr("gateway", req.Gateway); err != nil {
			return s, err
		}
	}
	for _, d := range req.DNS {
		a, err := parseAddr("dns server", d)
		if err != nil {
			return s, err
		}
		s.DNS = append(s.DNS, a)
	}
	return s, nil
}

func (h *netAPI) deleteSubnet(c *gin.Context) error {
	p, err := subnetParam(c)
	if err != nil {
		return err
	}
	force := false
	switch f := c.Query("force"); f {
	case "", "0", "false":
	case "1", "true":
		force = true
	default:
		return BadRequest("force must be 1 or 0, not %q", f)
	}
	idx, err := h.propose(c, func(tx *store.Tx) error { return ipam.CheckDeleteSubnet(tx, p, force) }, &raftfsm.SubnetDelete{CIDR: p, Force: force})
	if err != nil {
		return err
	}
	return deleted(c, idx, p.String())
}

// ---- ranges

func (h *netAPI) listRanges(c *gin.Context) error {
	p, err := subnetQuery(c)
	if err != nil {
		return err
	}
	return h.read(c, true, func(tx *store.Tx, index uint64) (any, error) {
		if p.IsValid() {
			if _, err := tx.Subnet(p); err != nil {
				return nil, err
			}
		}
		rs, err := tx.Ranges(p)
		return wire.RangeList{Index: index, Ranges: nonNil(convert(rs, wireRange))}, err
	})
}

func (h *netAPI) createRange(c *gin.Context) error {
	var req wire.RangeRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	p, err := parsePrefix("subnet", req.Subnet)
	if err != nil {
		return err
	}
	first, err := parseAddr("first", req.First)
	if err != nil {
		return err
	}
	last, err := parseAddr("last", req.Last)
	if err != nil {
		return err
	}
	r := store.Range{Subnet: p, Kind: req.Kind, First: first, Last: last, Comment: req.Comment, Created: time.Now().UTC()}
	idx, err := h.propose(c, func(tx *store.Tx) error { return ipam.CheckRange(tx, r) }, &raftfsm.RangePut{Range: raftfsm.RangeBody(r)})
	if err != nil {
		return err
	}
	return h.respond(c, http.StatusCreated, idx, func(tx *store.Tx) (any, error) {
		r, err := rangeAt(tx, p, first)
		return wireRange(r), err
	})
}

func rangeAt(tx *store.Tx, p netip.Prefix, first netip.Addr) (store.Range, error) {
	rs, err := tx.Ranges(p)
	if err != nil {
		return store.Range{}, err
	}
	if i := slices.IndexFunc(rs, func(r store.Range) bool { return r.First == first }); i >= 0 {
		return rs[i], nil
	}
	return store.Range{}, store.Errorf(store.ErrNotFound, "no range of %s starts at %s", p, first)
}

func (h *netAPI) deleteRange(c *gin.Context) error {
	first, err := parseAddr("first address", c.Param("first"))
	if err != nil {
		return err
	}
	var r store.Range
	if err := h.s.cfg.DB.View(func(tx *store.Tx) error {
		s, err := ipam.SubnetOf(tx, first)
		if err != nil {
			return err
		}
		r, err = rangeAt(tx, s.CIDR, first)
		return err
	}); err != nil {
		return err
	}
	idx, err := h.propose(c, nil, &raftfsm.RangeDelete{Subnet: r.Subnet, First: first})
	if err != nil {
		return err
	}
	return deleted(c, idx, fmt.Sprintf("%s range %s–%s", r.Kind, r.First, r.Last))
}
