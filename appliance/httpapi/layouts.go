package httpapi

import (
	"errors"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/ipam/layout"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// Interface layouts and a machine's network: the layouts themselves, the
// layout and pinned addresses a machine is given, and its plan (which
// layout, the NICs each selector chose, the addresses it would claim, the
// two files a deployment writes). Every write is checked on the local
// copy by the state machine's own rules first (the cluster's precheck), so
// bad input takes no Raft entry.

func (s *Server) layoutRoutes() []Route {
	return []Route{
		{"GET", "/api/v1/layouts", AuthAdmin, "interface layouts by name (?index=&wait= ?min_index=)", nil, s.listLayouts},
		{"GET", "/api/v1/layouts/:name", AuthAdmin, "one layout, with its file as it was saved", nil, s.getLayout},
		{"POST", "/api/v1/layouts/:name", AuthAdmin, "add a layout: the body is the layout's JSON (?comment=)", wire.LayoutDoc{}, s.postLayout},
		{"PUT", "/api/v1/layouts/:name", AuthAdmin, "replace a layout (?comment=)", wire.LayoutDoc{}, s.putLayout},
		{"DELETE", "/api/v1/layouts/:name", AuthAdmin, "remove a layout no machine or tag uses", nil, s.deleteLayout},
		{"PUT", "/api/v1/machines/:id/network", AuthAdmin, "set a machine's layout (\"\" clears it) and the addresses pinned to its interfaces ({IFACE: ADDR}; {} clears them); a field left out stays", wire.NetworkRequest{}, s.putNetwork},
		{"GET", "/api/v1/machines/:id/network-plan", AuthAdmin, "the machine's network plan, a preview: which layout and why, the NICs each selector chose, the addresses it would allocate, the network-config and udev rules; 422 with the reason when it has none", nil, s.getNetworkPlan},
	}
}

func wireLayout(l store.Layout) wire.LayoutView {
	return wire.LayoutView{Name: l.Name, JSON: l.JSON, Comment: l.Comment, Created: l.Created, Index: l.Index}
}

func (s *Server) listLayouts(c *gin.Context) error {
	if err := s.minIndex(c); err != nil {
		return err
	}
	if err := s.blockingQuery(c, store.TableLayouts); err != nil {
		return err
	}
	var out wire.LayoutList
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		out.Index = tx.TableIndex(store.TableLayouts)
		ls, err := tx.Layouts()
		out.Layouts = nonNil(convert(ls, wireLayout))
		return err
	}); err != nil {
		return err
	}
	setIndex(c, out.Index)
	c.JSON(http.StatusOK, out)
	return nil
}

func (s *Server) getLayout(c *gin.Context) error {
	if err := s.minIndex(c); err != nil {
		return err
	}
	return s.respondLayout(c, http.StatusOK, c.Param("name"), 0)
}

func (s *Server) respondLayout(c *gin.Context, status int, name string, idx uint64) error {
	var l store.Layout
	if err := s.cfg.DB.View(func(tx *store.Tx) (err error) { l, err = tx.Layout(name); return err }); err != nil {
		return err
	}
	setIndex(c, max(idx, l.Index))
	c.JSON(status, wireLayout(l))
	return nil
}

func (s *Server) postLayout(c *gin.Context) error { return s.saveLayout(c, false) }
func (s *Server) putLayout(c *gin.Context) error  { return s.saveLayout(c, true) }

// saveLayout reads the body as the layout's file: parsed here (the reason
// of a refusal is the parser's, with the field and the interface it is
// about) and again by the state machine.
func (s *Server) saveLayout(c *gin.Context, replace bool) error {
	name := c.Param("name")
	if err := layout.CheckName(name); err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, layout.MaxBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return Errorf(http.StatusRequestEntityTooLarge, "too_large", "a layout is at most %d bytes", layout.MaxBytes)
		}
		return Wrap(http.StatusBadRequest, "bad_request", "cannot read request body", err)
	}
	if _, err := layout.Parse(body); err != nil {
		return err
	}
	cmd := &raftfsm.LayoutPut{Layout: raftfsm.Layout{Name: name, JSON: string(body), Comment: c.Query("comment"), Created: time.Now().UTC()}, Replace: replace}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), cmd)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if replace {
		status = http.StatusOK
	}
	return s.respondLayout(c, status, name, idx)
}

func (s *Server) deleteLayout(c *gin.Context) error {
	name := c.Param("name")
	if err := layout.CheckName(name); err != nil {
		return err
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.LayoutDelete{Name: name})
	if err != nil {
		return err
	}
	return deleted(c, idx, name)
}

// ---- a machine's network

// maxStaticValue bounds one interface's addresses in a request.
const maxStaticValue = 256

// parseStatic reads {IFACE: "ADDR[,ADDR…]"} into pins, sorted by
// interface, then address.
func parseStatic(static map[string]string) ([]layout.Pin, error) {
	var pins []layout.Pin
	for iface, v := range static {
		if len(v) > maxStaticValue {
			return nil, BadRequest("static %s: at most %d bytes of addresses", store.Clip(iface), maxStaticValue)
		}
		if strings.TrimSpace(v) == "" {
			return nil, BadRequest("static %s: no address (give IFACE=ADDR; {} clears every pin)", store.Clip(iface))
		}
		for _, a := range strings.Split(v, ",") {
			p, err := layout.ParsePin(iface + "=" + strings.TrimSpace(a))
			if err != nil {
				return nil, err
			}
			pins = append(pins, p)
		}
	}
	slices.SortFunc(pins, func(a, b layout.Pin) int {
		if c := strings.Compare(a.Interface, b.Interface); c != 0 {
			return c
		}
		return a.Address.Compare(b.Address)
	})
	return pins, nil
}

// staticView writes pins as {IFACE: "ADDR,ADDR"}.
func staticView(pins []layout.Pin) map[string]string {
	out := map[string]string{}
	for _, p := range pins {
		if o := out[p.Interface]; o != "" {
			out[p.Interface] = o + "," + p.Address.String()
		} else {
			out[p.Interface] = p.Address.String()
		}
	}
	return out
}

func (s *Server) putNetwork(c *gin.Context) error {
	var req wire.NetworkRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if req.Layout == nil && req.Static == nil {
		return BadRequest("give layout (\"\" clears it), static ({IFACE: ADDR}; {} clears the pins), or both")
	}
	cmd := &raftfsm.MachineNetSet{Now: time.Now().UTC()}
	if req.Layout != nil {
		cmd.SetLayout, cmd.Layout = true, *req.Layout
		if cmd.Layout != "" {
			if err := layout.CheckName(cmd.Layout); err != nil {
				return err
			}
		}
	}
	if req.Static != nil {
		pins, err := parseStatic(req.Static)
		if err != nil {
			return err
		}
		cmd.SetPins, cmd.Pins = true, raftfsm.NetPinsBody(pins)
	}
	if err := s.minIndex(c); err != nil {
		return err
	}
	m, err := s.machineRef(c)
	if err != nil {
		return err
	}
	cmd.Machine = m.ID
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), cmd)
	if err != nil {
		return err
	}
	var v wire.NetworkView
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		m, err := tx.Machine(m.ID)
		if err != nil {
			return err
		}
		held, err := tx.MachineAddresses(m.ID)
		if err != nil {
			return err
		}
		v = wire.NetworkView{Machine: m.ID, Layout: m.Layout, Static: staticView(layout.PinsOf(held)), Index: idx}
		if _, err := tx.Inventory(m.ID); err == nil {
			if _, _, err := raftfsm.PlanFor(tx, m, nil); err != nil {
				if !isRefusal(err) {
					return err
				}
				v.PlanError = store.Public(err)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(http.StatusOK, v)
	return nil
}

// isRefusal: a plan that cannot be made for a reason the operator can fix
// (store.ErrInvalid, ErrConflict), not a failed read.
func isRefusal(err error) bool {
	return errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound)
}

func (s *Server) getNetworkPlan(c *gin.Context) error {
	if err := s.minIndex(c); err != nil {
		return err
	}
	var out wire.NetworkPlan
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		m, err := tx.MachineByRef(c.Param("id"))
		if err != nil {
			return err
		}
		applied, _ := tx.Applied()
		p, src, err := raftfsm.PlanFor(tx, m, nil)
		if err != nil {
			if isRefusal(err) {
				return Errorf(http.StatusUnprocessableEntity, "no_plan", "machine %s has no network plan: %s", m.ID, store.Public(err))
			}
			return err
		}
		out = wireNetworkPlan(p, src)
		out.Index = applied
		return nil
	}); err != nil {
		return err
	}
	setIndex(c, out.Index)
	c.JSON(http.StatusOK, out)
	return nil
}

func wireNetworkPlan(p *layout.Plan, src raftfsm.LayoutSource) wire.NetworkPlan {
	out := wire.NetworkPlan{
		Machine: p.Machine, Layout: p.Layout, Source: src.Kind, Tag: src.Tag, Why: src.String(),
		Choices: []wire.PlanChoice{}, Addresses: []wire.PlanAddress{}, Notes: nonNil(p.Notes),
		NetworkConfig: string(p.NetworkConfig()), UdevRules: string(p.UdevRules()), UdevRulesPath: layout.UdevRulesPath,
	}
	for _, ch := range p.Choices {
		out.Choices = append(out.Choices, wire.PlanChoice{Interface: ch.Interface, Selector: ch.Selector, NIC: ch.NIC, MAC: ch.MAC, Reason: ch.Reason})
	}
	for _, a := range p.Addresses {
		out.Addresses = append(out.Addresses, wire.PlanAddress{
			Interface: a.Interface, Address: netip.PrefixFrom(a.IP, a.Subnet.Bits()).String(), Subnet: a.Subnet.String(),
			How: a.How, Held: a.Held, Reason: a.Reason,
		})
	}
	return out
}
