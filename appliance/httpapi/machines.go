package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// newMachineID picks a fresh machine ID (the proposer picks IDs, never the
// state machine).
func newMachineID() string {
	var b [6]byte
	rand.Read(b[:])
	return "m-" + hex.EncodeToString(b[:])
}

func (s *Server) createMachine(c *gin.Context) error {
	var req wire.CreateMachineRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if req.Name != "" {
		if err := store.ValidName(req.Name); err != nil {
			return err
		}
	}
	raw := req.MACs
	if req.MAC != "" {
		raw = append([]string{req.MAC}, raw...)
	}
	var macs []string
	for _, m := range raw {
		norm, err := store.NormalizeMAC(m)
		if err != nil {
			return err
		}
		macs = append(macs, norm)
	}
	if req.Name == "" && len(macs) == 0 {
		return BadRequest("a machine needs a name or a mac")
	}
	id := newMachineID()
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.MachineCreate{ID: id, Name: req.Name, MACs: dedupe(macs), Now: time.Now().UTC()})
	if err != nil {
		return err
	}
	return s.respondMachine(c, http.StatusCreated, id, idx)
}

func (s *Server) respondMachine(c *gin.Context, status int, ref string, idx uint64) error {
	var m store.Machine
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		m, err = tx.MachineByRef(ref)
		return err
	}); err != nil {
		return err
	}
	setIndex(c, max(idx, m.Index))
	c.JSON(status, wireMachine(m))
	return nil
}

// maxListLimit bounds one page of ?limit=.
const maxListLimit = 10000

func (s *Server) listMachines(c *gin.Context) error {
	if err := s.minIndex(c); err != nil {
		return err
	}
	if err := s.blockingQuery(c, store.TableMachines); err != nil {
		return err
	}
	state := c.Query("state")
	if state != "" {
		if _, ok := store.Transitions[state]; !ok {
			return BadRequest("unknown state %q (known: %s)", store.Clip(state), strings.Join(knownStates(), ", "))
		}
	}
	limit := 0
	if v := c.Query("limit"); v != "" {
		l, err := strconv.Atoi(v)
		if err != nil || l < 1 || l > maxListLimit {
			return BadRequest("limit must be an integer from 1 to %d", maxListLimit)
		}
		limit = l
	}
	after := c.Query("after")
	f := listFilter{state: state, q: strings.ToLower(strings.TrimSpace(c.Query("q"))), tag: c.Query("tag"), rack: c.Query("rack")}
	if f.tag != "" {
		if err := store.ValidTagName(f.tag); err != nil {
			return FieldError("tag", "%s", store.Public(err))
		}
	}
	if f.rack != "" {
		if err := store.ValidRackName(f.rack); err != nil {
			return FieldError("rack", "%s", store.Public(err))
		}
	}
	// Encoded (and gzipped) once per change and shared by every request
	// that asks the same: the whole list is the one every watcher asks for.
	a, err := s.machines.answer(s.cfg.DB, listQuery{f: f, limit: limit, after: after})
	if err != nil {
		return err
	}
	setIndex(c, a.index)
	writeShared(c, a)
	return nil
}

// listFilter is what ?state=, ?q=, ?tag= and ?rack= ask of a row; a tag
// matches a manual or an auto tag.
type listFilter struct{ state, q, tag, rack string }

func (f listFilter) keep(r *listRow) bool {
	return (f.state == "" || r.state == f.state) && (f.q == "" || r.matches(f.q)) &&
		(f.tag == "" || slices.Contains(r.tags, f.tag)) && (f.rack == "" || r.rack == f.rack)
}

// hasMore says whether a row after id passes the filters.
func hasMore(rows []*listRow, id string, f listFilter) bool {
	i, _ := slices.BinarySearchFunc(rows, id, func(r *listRow, id string) int { return strings.Compare(r.id, id) })
	for _, r := range rows[i:] {
		if r.id > id && f.keep(r) {
			return true
		}
	}
	return false
}

func knownStates() []string { return store.States }

func (s *Server) getMachine(c *gin.Context) error {
	if err := s.minIndex(c); err != nil {
		return err
	}
	var d wire.MachineDetail
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		m, err := tx.MachineByRef(c.Param("id"))
		if err != nil {
			return err
		}
		d.MachineView = wireMachine(m)
		if inv, err := tx.Inventory(m.ID); err == nil {
			d.Inventory = inv
		}
		d.Deployment = deploymentOf(tx, m)
		events, err := tx.Events(m.ID)
		d.Events = nonNil(convert(events, wireEvent))
		return err
	}); err != nil {
		return err
	}
	setIndex(c, d.Index)
	c.JSON(http.StatusOK, d)
	return nil
}

func (s *Server) getEvents(c *gin.Context) error {
	if err := s.minIndex(c); err != nil {
		return err
	}
	var events []store.Event
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		m, err := tx.MachineByRef(c.Param("id"))
		if err != nil {
			return err
		}
		events, err = tx.Events(m.ID)
		return err
	}); err != nil {
		return err
	}
	c.JSON(http.StatusOK, wire.EventList{Events: nonNil(convert(events, wireEvent))})
	return nil
}

func (s *Server) postRecommission(c *gin.Context) error {
	now := c.Query("now")
	if now != "" && now != "0" && now != "1" && now != "true" && now != "false" {
		return BadRequest("now must be 1 or 0")
	}
	m, err := s.machineRef(c)
	if err != nil {
		return err
	}
	if now == "1" || now == "true" {
		return s.recommissionNow(c, m)
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.Recommission{ID: m.ID, Now: time.Now().UTC()})
	if err != nil {
		return err
	}
	return s.respondMachine(c, http.StatusOK, m.ID, idx)
}

// postRename is POST /api/v1/machines/:id/rename. A bad or taken name is
// answered about the field name, so a form shows it there; the state
// machine checks again (another rename may take the name in between).
func (s *Server) postRename(c *gin.Context) error {
	var req wire.RenameMachineRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if err := store.ValidName(req.Name); err != nil {
		return FieldError("name", "%s", store.Public(err))
	}
	m, err := s.machineRef(c)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.MachineRename{ID: m.ID, Name: req.Name, Now: now})
	if err != nil {
		return onField(err, "name", "conflict", "invalid")
	}
	// Rules may read a machine's name (.Node.Name), as its manual tags.
	_, at, err := s.followAutoTags(c.Request.Context(), []string{m.ID}, nil, now)
	if err != nil {
		return err
	}
	return s.respondMachine(c, http.StatusOK, m.ID, max(idx, at))
}

// onField points a store refusal of one of codes at a request field, for
// a handler that knows the only field such a refusal can concern (the
// name of a rename, the height of a rack); other errors pass as they are.
// The message stays the store's public text.
func onField(err error, field string, codes ...string) error {
	code := store.Code(err)
	k, ok := kinds[code]
	if !ok || !slices.Contains(codes, code) {
		return err
	}
	return &Error{Status: k.status, Code: code, Message: store.Public(err), Field: field, cause: err}
}

func (s *Server) deleteMachine(c *gin.Context) error {
	m, err := s.machineRef(c)
	if err != nil {
		return err
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.MachineDelete{ID: m.ID})
	if err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(http.StatusOK, wire.Deleted{Deleted: m.ID})
	return nil
}

// getRecentEvents is GET /api/v1/events?limit=N: the fleet's newest events
// (default 100, at most 1000), newest first; ?index=&wait= waits for a change.
func (s *Server) getRecentEvents(c *gin.Context) error {
	limit := 100
	if v := c.Query("limit"); v != "" {
		l, err := strconv.Atoi(v)
		if err != nil || l < 1 || l > 1000 {
			return BadRequest("limit must be a number from 1 to 1000")
		}
		limit = l
	}
	if err := s.blockingQuery(c, store.TableMachines); err != nil {
		return err
	}
	var events []store.Event
	var idx uint64
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		idx = tx.TableIndex(store.TableMachines)
		var err error
		events, err = tx.RecentEvents(limit)
		return err
	}); err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(http.StatusOK, wire.RecentEvents{Index: idx, Events: nonNil(convert(events, wireEvent))})
	return nil
}
