package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"
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
	s *Server

	mu      sync.Mutex
	pending map[netip.Addr]bool
}

// allocAttempts is how often an auto allocation picks again after another
// node's claim won the address it picked (1 + 5 retries).
const allocAttempts = 6

func (h *netAPI) routes() []Route {
	return []Route{
		{"GET", "/api/v1/fabrics", AuthAdmin, "fabrics (?index=&wait= ?min_index=)", nil, h.listFabrics},
		{"POST", "/api/v1/fabrics", AuthAdmin, "add a fabric (kind ethernet or infiniband)", wire.FabricRequest{}, h.createFabric},
		{"GET", "/api/v1/fabrics/:name", AuthAdmin, "a fabric with its VLANs", nil, h.getFabric},
		{"DELETE", "/api/v1/fabrics/:name", AuthAdmin, "remove a fabric that has no VLANs or subnets", nil, h.deleteFabric},

		{"GET", "/api/v1/vlans", AuthAdmin, "VLANs by fabric and VID (?index=&wait= ?min_index=)", nil, h.listVLANs},
		{"POST", "/api/v1/vlans", AuthAdmin, "add a VLAN: VID (0 untagged), MTU, DHCP mode off|full|proxy and the nodes serving it, boot loader ipxe|pxelinux", wire.VLANRequest{}, h.createVLAN},
		{"GET", "/api/v1/vlans/:fabric/:vid", AuthAdmin, "a VLAN with its subnets", nil, h.getVLAN},
		{"PUT", "/api/v1/vlans/:fabric/:vid", AuthAdmin, "replace a VLAN's DHCP mode, serving nodes, MTU and boot loader", wire.VLANUpdate{}, h.putVLAN},
		{"DELETE", "/api/v1/vlans/:fabric/:vid", AuthAdmin, "remove a VLAN that carries no subnet", nil, h.deleteVLAN},

		{"GET", "/api/v1/subnets", AuthAdmin, "subnets with their used address counts (?index=&wait= ?min_index=)", nil, h.listSubnets},
		{"POST", "/api/v1/subnets", AuthAdmin, "add a subnet (IPv4 or IPv6); addresses machines already have in it are adopted", wire.SubnetRequest{}, h.createSubnet},
		{"GET", "/api/v1/subnets/:addr/:bits", AuthAdmin, "a subnet with its ranges", nil, h.getSubnet},
		{"DELETE", "/api/v1/subnets/:addr/:bits", AuthAdmin, "remove a subnet and its ranges (?force=1: and release its addresses)", nil, h.deleteSubnet},

		{"GET", "/api/v1/ranges", AuthAdmin, "ranges (?subnet=CIDR ?index=&wait= ?min_index=)", nil, h.listRanges},
		{"POST", "/api/v1/ranges", AuthAdmin, "add a dynamic, reserved or static range to a subnet", wire.RangeRequest{}, h.createRange},
		{"DELETE", "/api/v1/ranges/:first", AuthAdmin, "remove the range that starts at an address", nil, h.deleteRange},

		{"GET", "/api/v1/ips", AuthAdmin, "used addresses (?subnet=CIDR: those inside any prefix; ?index=&wait= ?min_index=)", nil, h.listIPs},
		{"POST", "/api/v1/ips/reserve", AuthAdmin, "reserve a single address under a name (never handed out)", wire.ReserveRequest{}, h.reserveIP},
		{"POST", "/api/v1/ips/allocate", AuthAdmin, "give a machine an address: the one given (static), else the next free one of the subnet (auto)", wire.AllocateRequest{}, h.allocateIP},
		{"DELETE", "/api/v1/ips/:ip", AuthAdmin, "release an address", nil, h.releaseIP},
	}
}

// ---- parsing: every bad value is named in the answer

func parsePrefix(field, s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, BadRequest("%s is required (a CIDR such as 10.50.0.0/24)", field)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, BadRequest("%s %q is not a CIDR such as 10.50.0.0/24 or fd00:50::/64", field, s)
	}
	if p.Addr().Zone() != "" {
		return p, BadRequest("%s %q: a subnet has no IPv6 zone", field, s)
	}
	return p, nil
}

func parseAddr(field, s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, BadRequest("%s is required (an address such as 10.50.0.5)", field)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return a, BadRequest("%s %q is not an IP address", field, s)
	}
	if a.Zone() != "" {
		return a, BadRequest("%s %q: an address here has no IPv6 zone", field, s)
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
func (h *netAPI) propose(c *gin.Context, check func(*store.Tx) error, cmd raftfsm.Command) (uint64, error) {
	if err := h.s.minIndex(c); err != nil {
		return 0, err
	}
	if check != nil {
		if err := h.s.cfg.DB.View(check); err != nil {
			return 0, err
		}
	}
	return h.s.cfg.Cluster.Apply(c.Request.Context(), cmd)
}

// respond reads the result of a write on the local copy (Apply waited for
// it) and answers with it.
func (h *netAPI) respond(c *gin.Context, status int, idx uint64, read func(*store.Tx) (any, error)) error {
	var v any
	if err := h.s.cfg.DB.View(func(tx *store.Tx) (err error) { v, err = read(tx); return err }); err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(status, v)
	return nil
}

// read answers a GET: min_index and blocking queries on the network table,
// then fill on the local copy; X-Rollcall-Index is the table's change index.
func (h *netAPI) read(c *gin.Context, blocking bool, fill func(tx *store.Tx, index uint64) (any, error)) error {
	if err := h.s.minIndex(c); err != nil {
		return err
	}
	if blocking {
		if err := h.s.blockingQuery(c, store.TableNetwork); err != nil {
			return err
		}
	}
	var v any
	var index uint64
	if err := h.s.cfg.DB.View(func(tx *store.Tx) (err error) {
		index = tx.TableIndex(store.TableNetwork)
		v, err = fill(tx, index)
		return err
	}); err != nil {
		return err
	}
	setIndex(c, index)
	c.JSON(http.StatusOK, v)
	return nil
}

func deleted(c *gin.Context, idx uint64, what string) error {
	setIndex(c, idx)
	c.JSON(http.StatusOK, wire.Deleted{Deleted: what})
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ---- fabrics

func (h *netAPI) listFabrics(c *gin.Context) error {
	return h.read(c, true, func(tx *store.Tx, index uint64) (any, error) {
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

func (h *netAPI) getFabric(c *gin.Context) error {
	return h.read(c, false, func(tx *store.Tx, _ uint64) (any, error) { return fabricDetail(tx, c.Param("name")) })
}

func (h *netAPI) createFabric(c *gin.Context) error {
	var req wire.FabricRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if req.Kind == "" {
		req.Kind = store.FabricEthernet
	}
	f := store.Fabric{Name: req.Name, Kind: req.Kind, Created: time.Now().UTC()}
	idx, err := h.propose(c, func(tx *store.Tx) error { return ipam.CheckFabric(tx, f) }, &raftfsm.FabricPut{Fabric: raftfsm.FabricBody(f)})
	if err != nil {
		return err
	}
	return h.respond(c, http.StatusCreated, idx, func(tx *store.Tx) (any, error) { return fabricDetail(tx, f.Name) })
}

func (h *netAPI) deleteFabric(c *gin.Context) error {
	name := c.Param("name")
	idx, err := h.propose(c, func(tx *store.Tx) error { return ipam.CheckDeleteFabric(tx, name) }, &raftfsm.FabricDelete{Name: name})
	if err != nil {
		return err
	}
	return deleted(c, idx, name)
}

// ---- VLANs

func (h *netAPI) listVLANs(c *gin.Context) error {
	return h.read(c, true, func(tx *store.Tx, index uint64) (any, error) {
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

func (h *netAPI) getVLAN(c *gin.Context) error {
	fabric, vid, err := vlanParam(c)
	if err != nil {
		return err
	}
	return h.read(c, false, func(tx *store.Tx, _ uint64) (any, error) { return vlanDetail(tx, fabric, vid) })
}

func (h *netAPI) createVLAN(c *gin.Context) error {
	var req wire.VLANRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if req.Fabric == "" {
		return BadRequest("fabric is required")
	}
	if req.VID == nil {
		return BadRequest("vid is required (0 for untagged)")
	}
	if req.DHCP == "" {
		req.DHCP = store.DHCPOff
	}
	v := store.VLAN{Fabric: req.Fabric, VID: *req.VID, MTU: req.MTU, DHCP: req.DHCP, Servers: convert(req.Servers, storeVLANServer), BootLoader: req.BootLoader, Created: time.Now().UTC()}
	idx, err := h.propose(c, func(tx *store.Tx) error { return ipam.CheckVLAN(tx, v, false) }, &raftfsm.VLANPut{VLAN: raftfsm.VLANBody(v)})
	if err != nil {
		return err
	}
	return h.respond(c, http.StatusCreated, idx, func(tx *store.Tx) (any, error) { return vlanDetail(tx, v.Fabric, v.VID) })
}

func (h *netAPI) putVLAN(c *gin.Context) error {
	fabric, vid, err := vlanParam(c)
	if err != nil {
		return err
	}
	var req wire.VLANUpdate
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
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
	if err := h.s.cfg.DB.View(check); err != nil {
		return err
	}
	idx, err := h.propose(c, nil, &raftfsm.VLANPut{VLAN: raftfsm.VLANBody(v), Replace: true})
	if err != nil {
		return err
	}
	return h.respond(c, http.StatusOK, idx, func(tx *store.Tx) (any, error) { return vlanDetail(tx, fabric, vid) })
}

func (h *netAPI) deleteVLAN(c *gin.Context) error {
	fabric, vid, err := vlanParam(c)
	if err != nil {
		return err
	}
	idx, err := h.propose(c, func(tx *store.Tx) error { return ipam.CheckDeleteVLAN(tx, fabric, vid) }, &raftfsm.VLANDelete{Fabric: fabric, VID: vid})
	if err != nil {
		return err
	}
	return deleted(c, idx, fmt.Sprintf("%s/%d", fabric, vid))
}
