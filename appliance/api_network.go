package appliance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/ipam"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// The network model's endpoints: fabrics, VLANs, subnets, ranges and
// addresses. Every write is checked first against the local copy (to answer
// bad input without touching the log) and again by the state machine, whose
// error, naming both sides of a conflict, is what the client sees.

// netAPI serves the network routes. It keeps the proposer's side of auto
// allocation: the addresses this node has proposed and not yet seen applied,
// so that concurrent requests on one node do not pick the same address.
type netAPI struct {
	n *Node

	mu      sync.Mutex
	pending map[netip.Addr]bool
}

// allocAttempts is how often an auto allocation picks again after another
// node's claim won the address it picked (1 + 5 retries).
const allocAttempts = 6

func (n *Node) networkRoutes() []route {
	h := &netAPI{n: n, pending: map[netip.Addr]bool{}}
	return []route{
		{"GET", "/api/v1/fabrics", authAdmin, "fabrics (?index=&wait= ?min_index=)", nil, h.listFabrics},
		{"POST", "/api/v1/fabrics", authAdmin, "add a fabric (kind ethernet or infiniband)", wire.FabricRequest{}, h.createFabric},
		{"GET", "/api/v1/fabrics/:name", authAdmin, "a fabric with its VLANs", nil, h.getFabric},
		{"DELETE", "/api/v1/fabrics/:name", authAdmin, "remove a fabric that has no VLANs or subnets", nil, h.deleteFabric},

		{"GET", "/api/v1/vlans", authAdmin, "VLANs by fabric and VID (?index=&wait= ?min_index=)", nil, h.listVLANs},
		{"POST", "/api/v1/vlans", authAdmin, "add a VLAN: VID (0 untagged), MTU, DHCP mode off|full|proxy and the nodes serving it, boot loader ipxe|pxelinux", wire.VLANRequest{}, h.createVLAN},
		{"GET", "/api/v1/vlans/:fabric/:vid", authAdmin, "a VLAN with its subnets", nil, h.getVLAN},
		{"PUT", "/api/v1/vlans/:fabric/:vid", authAdmin, "replace a VLAN's DHCP mode, serving nodes, MTU and boot loader", wire.VLANUpdate{}, h.putVLAN},
		{"DELETE", "/api/v1/vlans/:fabric/:vid", authAdmin, "remove a VLAN that carries no subnet", nil, h.deleteVLAN},

		{"GET", "/api/v1/subnets", authAdmin, "subnets with their used address counts (?index=&wait= ?min_index=)", nil, h.listSubnets},
		{"POST", "/api/v1/subnets", authAdmin, "add a subnet (IPv4 or IPv6); addresses machines already have in it are adopted", wire.SubnetRequest{}, h.createSubnet},
		{"GET", "/api/v1/subnets/:addr/:bits", authAdmin, "a subnet with its ranges", nil, h.getSubnet},
		{"DELETE", "/api/v1/subnets/:addr/:bits", authAdmin, "remove a subnet and its ranges (?force=1: and release its addresses)", nil, h.deleteSubnet},

		{"GET", "/api/v1/ranges", authAdmin, "ranges (?subnet=CIDR ?index=&wait= ?min_index=)", nil, h.listRanges},
		{"POST", "/api/v1/ranges", authAdmin, "add a dynamic, reserved or static range to a subnet", wire.RangeRequest{}, h.createRange},
		{"DELETE", "/api/v1/ranges/:first", authAdmin, "remove the range that starts at an address", nil, h.deleteRange},

		{"GET", "/api/v1/ips", authAdmin, "used addresses (?subnet=CIDR: those inside any prefix; ?index=&wait= ?min_index=)", nil, h.listIPs},
		{"POST", "/api/v1/ips/reserve", authAdmin, "reserve a single address under a name (never handed out)", wire.ReserveRequest{}, h.reserveIP},
		{"POST", "/api/v1/ips/allocate", authAdmin, "give a machine an address: the one given (static), else the next free one of the subnet (auto)", wire.AllocateRequest{}, h.allocateIP},
		{"DELETE", "/api/v1/ips/:ip", authAdmin, "release an address", nil, h.releaseIP},
	}
}

// ---- parsing: every bad value is named in the answer

func parsePrefix(field, s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, badRequest("%s is required (a CIDR such as 10.50.0.0/24)", field)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, badRequest("%s %q is not a CIDR such as 10.50.0.0/24 or fd00:50::/64", field, s)
	}
	if p.Addr().Zone() != "" {
		return p, badRequest("%s %q: a subnet has no IPv6 zone", field, s)
	}
	return p, nil
}

func parseAddr(field, s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, badRequest("%s is required (an address such as 10.50.0.5)", field)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return a, badRequest("%s %q is not an IP address", field, s)
	}
	if a.Zone() != "" {
		return a, badRequest("%s %q: an address here has no IPv6 zone", field, s)
	}
	return a.Unmap(), nil
}

// subnetParam reads /subnets/:addr/:bits.
func subnetParam(c *gin.Context) (netip.Prefix, error) {
	return parsePrefix("subnet", c.Param("addr")+"/"+c.Param("bits"))
}

// subnetQuery reads an optional ?subnet=CIDR; the zero prefix means all.
func subnetQuery(c *gin.Context) (netip.Prefix, error) {
	if s := c.Query("subnet"); s != "" {
		return parsePrefix("subnet", s)
	}
	return netip.Prefix{}, nil
}

func vlanParam(c *gin.Context) (string, int, error) {
	vid, err := ipam.ParseVID(c.Param("vid"))
	return c.Param("fabric"), vid, err
}

// ---- the common shape of reads and writes

// propose runs check on the local copy, then the command through Raft, and
// returns the index it was applied at (on this node too).
func (h *netAPI) propose(c *gin.Context, check func(*store.Tx) error, cmd raftfsm.Command) (uint64, bool) {
	if err := h.n.minIndex(c); err != nil {
		h.n.fail(c, err)
		return 0, false
	}
	if check != nil {
		if err := h.n.db.View(check); err != nil {
			h.n.fail(c, err)
			return 0, false
		}
	}
	idx, err := h.n.cluster.Apply(c.Request.Context(), cmd)
	if err != nil {
		h.n.fail(c, err)
		return 0, false
	}
	return idx, true
}

// respond reads the result of a write on the local copy (Apply waited for
// it) and answers with it.
func (h *netAPI) respond(c *gin.Context, status int, idx uint64, read func(*store.Tx) (any, error)) {
	var v any
	if err := h.n.db.View(func(tx *store.Tx) (err error) { v, err = read(tx); return err }); err != nil {
		h.n.fail(c, err)
		return
	}
	c.Header(headerIndex, strconv.FormatUint(idx, 10))
	c.JSON(status, v)
}

// read answers a GET: min_index and blocking queries on the network table,
// then fill on the local copy; X-Rollcall-Index is the table's change index.
func (h *netAPI) read(c *gin.Context, blocking bool, fill func(tx *store.Tx, index uint64) (any, error)) {
	if err := h.n.minIndex(c); err != nil {
		h.n.fail(c, err)
		return
	}
	if blocking {
		if err := h.n.blockingQuery(c, store.TableNetwork); err != nil {
			h.n.fail(c, err)
			return
		}
	}
	var v any
	var index uint64
	if err := h.n.db.View(func(tx *store.Tx) (err error) {
		index = tx.TableIndex(store.TableNetwork)
		v, err = fill(tx, index)
		return err
	}); err != nil {
		h.n.fail(c, err)
		return
	}
	c.Header(headerIndex, strconv.FormatUint(index, 10))
	c.JSON(http.StatusOK, v)
}

func deleted(c *gin.Context, idx uint64, what string) {
	c.Header(headerIndex, strconv.FormatUint(idx, 10))
	c.JSON(http.StatusOK, wire.Deleted{Deleted: what})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ---- fabrics

func (h *netAPI) listFabrics(c *gin.Context) {
	h.read(c, true, func(tx *store.Tx, index uint64) (any, error) {
		fs, err := tx.Fabrics()
		return wire.FabricList{Index: index, Fabrics: nonNil(convert(fs, wireFabric))}, err
	})
}

func fabricDetail(tx *store.Tx, name string) (any, error) {
	f, err := tx.Fabric(name)
	if err != nil {
		return nil, err
	}
	vlans, err := tx.VLANs()
	d := wire.FabricDetail{Fabric: wireFabric(f), VLANs: []wire.VLAN{}}
	for _, v := range vlans {
		if v.Fabric == name {
			d.VLANs = append(d.VLANs, wireVLAN(v))
		}
	}
	return d, err
}

func (h *netAPI) getFabric(c *gin.Context) {
	h.read(c, false, func(tx *store.Tx, _ uint64) (any, error) { return fabricDetail(tx, c.Param("name")) })
}

func (h *netAPI) createFabric(c *gin.Context) {
	var req wire.FabricRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		h.n.fail(c, err)
		return
	}
	if req.Kind == "" {
		req.Kind = store.FabricEthernet
	}
	f := store.Fabric{Name: req.Name, Kind: req.Kind, Created: time.Now().UTC()}
	idx, ok := h.propose(c, func(tx *store.Tx) error { return ipam.CheckFabric(tx, f) }, &raftfsm.FabricPut{Fabric: raftfsm.FabricBody(f)})
	if ok {
		h.respond(c, http.StatusCreated, idx, func(tx *store.Tx) (any, error) { return fabricDetail(tx, f.Name) })
	}
}

func (h *netAPI) deleteFabric(c *gin.Context) {
	name := c.Param("name")
	idx, ok := h.propose(c, func(tx *store.Tx) error { return ipam.CheckDeleteFabric(tx, name) }, &raftfsm.FabricDelete{Name: name})
	if ok {
		deleted(c, idx, name)
	}
}

// ---- VLANs

func (h *netAPI) listVLANs(c *gin.Context) {
	h.read(c, true, func(tx *store.Tx, index uint64) (any, error) {
		vs, err := tx.VLANs()
		return wire.VLANList{Index: index, VLANs: nonNil(convert(vs, wireVLAN))}, err
	})
}

func vlanDetail(tx *store.Tx, fabric string, vid int) (any, error) {
	v, err := tx.VLAN(fabric, vid)
	if err != nil {
		return nil, err
	}
	subnets, err := tx.Subnets()
	d := wire.VLANDetail{VLAN: wireVLAN(v), Subnets: []wire.Subnet{}}
	for _, s := range subnets {
		if s.Fabric == fabric && s.VID == vid {
			d.Subnets = append(d.Subnets, wireSubnet(s))
		}
	}
	return d, err
}

func (h *netAPI) getVLAN(c *gin.Context) {
	fabric, vid, err := vlanParam(c)
	if err != nil {
		h.n.fail(c, err)
		return
	}
	h.read(c, false, func(tx *store.Tx, _ uint64) (any, error) { return vlanDetail(tx, fabric, vid) })
}

func (h *netAPI) createVLAN(c *gin.Context) {
	var req wire.VLANRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		h.n.fail(c, err)
		return
	}
	if req.Fabric == "" {
		h.n.fail(c, badRequest("fabric is required"))
		return
	}
	if req.VID == nil {
		h.n.fail(c, badRequest("vid is required (0 for untagged)"))
		return
	}
	if req.DHCP == "" {
		req.DHCP = store.DHCPOff
	}
	v := store.VLAN{Fabric: req.Fabric, VID: *req.VID, MTU: req.MTU, DHCP: req.DHCP, Servers: convert(req.Servers, storeVLANServer), BootLoader: req.BootLoader, Created: time.Now().UTC()}
	idx, ok := h.propose(c, func(tx *store.Tx) error { return ipam.CheckVLAN(tx, v, false) }, &raftfsm.VLANPut{VLAN: raftfsm.VLANBody(v)})
	if ok {
		h.respond(c, http.StatusCreated, idx, func(tx *store.Tx) (any, error) { return vlanDetail(tx, v.Fabric, v.VID) })
	}
}

func (h *netAPI) putVLAN(c *gin.Context) {
	fabric, vid, err := vlanParam(c)
	if err != nil {
		h.n.fail(c, err)
		return
	}
	var req wire.VLANUpdate
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		h.n.fail(c, err)
		return
	}
	if req.DHCP == "" {
		req.DHCP = store.DHCPOff
	}
	var v store.VLAN
	check := func(tx *store.Tx) error {
		old, err := tx.VLAN(fabric, vid)
		if err != nil {
			return err
		}
		v = old
		v.DHCP, v.Servers, v.MTU, v.BootLoader = req.DHCP, convert(req.Servers, storeVLANServer), req.MTU, req.BootLoader
		return ipam.CheckVLAN(tx, v, true)
	}
	if err := h.n.db.View(check); err != nil {
		h.n.fail(c, err)
		return
	}
	idx, ok := h.propose(c, nil, &raftfsm.VLANPut{VLAN: raftfsm.VLANBody(v), Replace: true})
	if ok {
		h.respond(c, http.StatusOK, idx, func(tx *store.Tx) (any, error) { return vlanDetail(tx, fabric, vid) })
	}
}

func (h *netAPI) deleteVLAN(c *gin.Context) {
	fabric, vid, err := vlanParam(c)
	if err != nil {
		h.n.fail(c, err)
		return
	}
	idx, ok := h.propose(c, func(tx *store.Tx) error { return ipam.CheckDeleteVLAN(tx, fabric, vid) }, &raftfsm.VLANDelete{Fabric: fabric, VID: vid})
	if ok {
		deleted(c, idx, fmt.Sprintf("%s/%d", fabric, vid))
	}
}

// ---- subnets

func subnetView(tx *store.Tx, s store.Subnet) (wire.SubnetView, error) {
	used, err := tx.Addresses(s.CIDR, 0)
	return wire.SubnetView{Subnet: wireSubnet(s), Used: len(used)}, err
}

func (h *netAPI) listSubnets(c *gin.Context) {
	h.read(c, true, func(tx *store.Tx, index uint64) (any, error) {
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

func (h *netAPI) getSubnet(c *gin.Context) {
	p, err := subnetParam(c)
	if err != nil {
		h.n.fail(c, err)
		return
	}
	h.read(c, false, func(tx *store.Tx, _ uint64) (any, error) { return subnetDetail(tx, p) })
}

func (h *netAPI) createSubnet(c *gin.Context) {
	var req wire.SubnetRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		h.n.fail(c, err)
		return
	}
	s, err := subnetOf(req)
	if err != nil {
		h.n.fail(c, err)
		return
	}
	idx, ok := h.propose(c, func(tx *store.Tx) error { return ipam.CheckSubnet(tx, s) }, &raftfsm.SubnetPut{Subnet: raftfsm.SubnetBody(s)})
	if ok {
		h.respond(c, http.StatusCreated, idx, func(tx *store.Tx) (any, error) { return subnetDetail(tx, s.CIDR) })
	}
}

// subnetOf checks a subnet request and makes the record it asks for.
func subnetOf(req wire.SubnetRequest) (store.Subnet, error) {
	p, err := parsePrefix("cidr", req.CIDR)
	if err != nil {
		return store.Subnet{}, err
	}
	if req.Fabric == "" {
		return store.Subnet{}, badRequest("fabric is required")
	}
	if req.VID == nil {
		return store.Subnet{}, badRequest("vid is required (0 for untagged)")
	}
	if req.Purpose == "" {
		return store.Subnet{}, badRequest("purpose is required (one of %s)", strings.Join(store.Purposes, ", "))
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

func (h *netAPI) deleteSubnet(c *gin.Context) {
	p, err := subnetParam(c)
	if err != nil {
		h.n.fail(c, err)
		return
	}
	force := false
	switch f := c.Query("force"); f {
	case "", "0", "false":
	case "1", "true":
		force = true
	default:
		h.n.fail(c, badRequest("force must be 1 or 0, not %q", f))
		return
	}
	idx, ok := h.propose(c, func(tx *store.Tx) error { return ipam.CheckDeleteSubnet(tx, p, force) }, &raftfsm.SubnetDelete{CIDR: p, Force: force})
	if ok {
		deleted(c, idx, p.String())
	}
}

// ---- ranges

func (h *netAPI) listRanges(c *gin.Context) {
	p, err := subnetQuery(c)
	if err != nil {
		h.n.fail(c, err)
		return
	}
	h.read(c, true, func(tx *store.Tx, index uint64) (any, error) {
		if p.IsValid() {
			if _, err := tx.Subnet(p); err != nil {
				return nil, err
			}
		}
		rs, err := tx.Ranges(p)
		return wire.RangeList{Index: index, Ranges: nonNil(convert(rs, wireRange))}, err
	})
}

func (h *netAPI) createRange(c *gin.Context) {
	var req wire.RangeRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		h.n.fail(c, err)
		return
	}
	p, err := parsePrefix("subnet", req.Subnet)
	if err != nil {
		h.n.fail(c, err)
		return
	}
	first, err := parseAddr("first", req.First)
	if err != nil {
		h.n.fail(c, err)
		return
	}
	last, err := parseAddr("last", req.Last)
	if err != nil {
		h.n.fail(c, err)
		return
	}
	r := store.Range{Subnet: p, Kind: req.Kind, First: first, Last: last, Comment: req.Comment, Created: time.Now().UTC()}
	idx, ok := h.propose(c, func(tx *store.Tx) error { return ipam.CheckRange(tx, r) }, &raftfsm.RangePut{Range: raftfsm.RangeBody(r)})
	if ok {
		h.respond(c, http.StatusCreated, idx, func(tx *store.Tx) (any, error) {
			r, err := rangeAt(tx, p, first)
			return wireRange(r), err
		})
	}
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

func (h *netAPI) deleteRange(c *gin.Context) {
	first, err := parseAddr("first address", c.Param("first"))
	if err != nil {
		h.n.fail(c, err)
		return
	}
	var r store.Range
	if err := h.n.db.View(func(tx *store.Tx) error {
		s, err := ipam.SubnetOf(tx, first)
		if err != nil {
			return err
		}
		r, err = rangeAt(tx, s.CIDR, first)
		return err
	}); err != nil {
		h.n.fail(c, err)
		return
	}
	idx, ok := h.propose(c, nil, &raftfsm.RangeDelete{Subnet: r.Subnet, First: first})
	if ok {
		deleted(c, idx, fmt.Sprintf("%s range %s–%s", r.Kind, r.First, r.Last))
	}
}

// ---- addresses

func (h *netAPI) listIPs(c *gin.Context) {
	p, err := subnetQuery(c)
	if err != nil {
		h.n.fail(c, err)
		return
	}
	h.read(c, true, func(tx *store.Tx, index uint64) (any, error) {
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

func (h *netAPI) reserveIP(c *gin.Context) {
	var req wire.ReserveRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		h.n.fail(c, err)
		return
	}
	a, err := parseAddr("ip", req.IP)
	if err != nil {
		h.n.fail(c, err)
		return
	}
	if req.Name == "" {
		h.n.fail(c, badRequest("a reserved address needs a name (what holds it: switch-1, pdu-a)"))
		return
	}
	if err := store.ValidName(req.Name); err != nil {
		h.n.fail(c, err)
		return
	}
	rec := store.Address{IP: a, How: store.HowReserved, Name: req.Name, Created: time.Now().UTC()}
	idx, ok := h.propose(c, func(tx *store.Tx) error { return checkClaim(tx, rec) }, &raftfsm.AddressClaim{Address: raftfsm.AddressBody(rec)})
	if ok {
		h.respondAddress(c, a, idx)
	}
}

func (h *netAPI) releaseIP(c *gin.Context) {
	a, err := parseAddr("ip", c.Param("ip"))
	if err != nil {
		h.n.fail(c, err)
		return
	}
	idx, ok := h.propose(c, func(tx *store.Tx) error { _, err := tx.Address(a); return err }, &raftfsm.AddressRelease{IP: a})
	if ok {
		deleted(c, idx, a.String())
	}
}

func (h *netAPI) allocateIP(c *gin.Context) {
	var req wire.AllocateRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		h.n.fail(c, err)
		return
	}
	var p netip.Prefix
	var err error
	if req.Subnet != "" || req.IP == "" {
		if p, err = parsePrefix("subnet", req.Subnet); err != nil {
			h.n.fail(c, err)
			return
		}
	}
	if req.Machine == "" {
		h.n.fail(c, badRequest("machine is required (an ID or a name)"))
		return
	}
	if err := h.n.minIndex(c); err != nil {
		h.n.fail(c, err)
		return
	}
	var m store.Machine
	if err := h.n.db.View(func(tx *store.Tx) (err error) {
		if m, err = tx.MachineByRef(req.Machine); err != nil {
			return err
		}
		if p.IsValid() {
			_, err = tx.Subnet(p)
		}
		return err
	}); err != nil {
		h.n.fail(c, err)
		return
	}
	rec := store.Address{Subnet: p, Machine: m.ID, Interface: req.Interface, Created: time.Now().UTC()}
	if req.IP != "" {
		if rec.IP, err = parseAddr("ip", req.IP); err != nil {
			h.n.fail(c, err)
			return
		}
		rec.How = store.HowStatic
		idx, ok := h.propose(c, func(tx *store.Tx) error { return checkClaim(tx, rec) }, &raftfsm.AddressClaim{Address: raftfsm.AddressBody(rec)})
		if ok {
			h.respondAddress(c, rec.IP, idx)
		}
		return
	}
	rec.How = store.HowAuto
	for attempt := range allocAttempts {
		if rec.IP, err = h.pick(p, attempt); err != nil {
			h.n.fail(c, err)
			return
		}
		var idx uint64
		idx, err = h.n.cluster.Apply(c.Request.Context(), &raftfsm.AddressClaim{Address: raftfsm.AddressBody(rec)})
		h.unpend(rec.IP)
		if err == nil {
			h.respondAddress(c, rec.IP, idx)
			return
		}
		if !errors.Is(err, store.ErrConflict) {
			break
		}
		// Another node's claim took the address first. Apply returned once
		// this node had applied our refused claim, so the local copy now
		// shows the winner: pick again.
		h.n.log.Debug("address claim lost a race; picking again", "subnet", p, "ip", rec.IP, "attempt", attempt+1)
	}
	if errors.Is(err, store.ErrConflict) {
		err = fmt.Errorf("allocate in %s: other claims took the address picked %d times in a row (last: %w); retry", p, allocAttempts, err)
	}
	h.n.fail(c, err)
}

func (h *netAPI) respondAddress(c *gin.Context, a netip.Addr, idx uint64) {
	h.respond(c, http.StatusCreated, idx, func(tx *store.Tx) (any, error) {
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
	err := h.n.db.View(func(tx *store.Tx) error {
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
