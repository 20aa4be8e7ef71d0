package appliance

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
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

func (n *Node) createMachine(c *gin.Context) {
	var req wire.CreateMachineRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		n.fail(c, err)
		return
	}
	if req.Name != "" {
		if err := store.ValidName(req.Name); err != nil {
			n.fail(c, err)
			return
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
			n.fail(c, err)
			return
		}
		macs = append(macs, norm)
	}
	if req.Name == "" && len(macs) == 0 {
		n.fail(c, badRequest("a machine needs a name or a mac"))
		return
	}
	id := newMachineID()
	idx, err := n.cluster.Apply(c.Request.Context(), &raftfsm.MachineCreate{ID: id, Name: req.Name, MACs: dedupe(macs), Now: time.Now().UTC()})
	if err != nil {
		n.fail(c, err)
		return
	}
	n.respondMachine(c, http.StatusCreated, id, idx)
}

func (n *Node) respondMachine(c *gin.Context, status int, ref string, idx uint64) {
	var m store.Machine
	if err := n.db.View(func(tx *store.Tx) error {
		var err error
		m, err = tx.MachineByRef(ref)
		return err
	}); err != nil {
		n.fail(c, err)
		return
	}
	c.Header(headerIndex, strconv.FormatUint(max(idx, m.Index), 10))
	c.JSON(status, wireMachine(m))
}

// maxListLimit bounds one page of ?limit=.
const maxListLimit = 10000

func (n *Node) listMachines(c *gin.Context) {
	if err := n.minIndex(c); err != nil {
		n.fail(c, err)
		return
	}
	if err := n.blockingQuery(c, store.TableMachines); err != nil {
		n.fail(c, err)
		return
	}
	state := c.Query("state")
	if state != "" {
		if _, ok := store.Transitions[state]; !ok {
			n.fail(c, badRequest("unknown state %q (known: %s)", clip(state), strings.Join(knownStates(), ", ")))
			return
		}
	}
	limit := 0
	if v := c.Query("limit"); v != "" {
		l, err := strconv.Atoi(v)
		if err != nil || l < 1 || l > maxListLimit {
			n.fail(c, badRequest("limit must be an integer from 1 to %d", maxListLimit))
			return
		}
		limit = l
	}
	after := c.Query("after")
	q := strings.ToLower(strings.TrimSpace(c.Query("q")))
	if state == "" && q == "" && limit == 0 && after == "" {
		// The whole list, the one every watcher asks for: encoded (and
		// gzipped) once per change and shared by every request.
		full, err := n.machines.fullList(n.db)
		if err != nil {
			n.fail(c, err)
			return
		}
		c.Header(headerIndex, strconv.FormatUint(full.index, 10))
		writeShared(c, full)
		return
	}
	rows, index, err := n.machines.snapshot(n.db)
	if err != nil {
		n.fail(c, err)
		return
	}
	// The rows' JSON is ready: write the wire.MachineList shape around it.
	var buf bytes.Buffer
	buf.Grow(64 + min(len(rows), max(limit, 64))*1100)
	fmt.Fprintf(&buf, `{"index":%d,"machines":[`, index)
	count, next := 0, ""
	start, _ := slices.BinarySearchFunc(rows, after, func(r *listRow, id string) int { return strings.Compare(r.id, id) })
	for _, r := range rows[start:] {
		if after != "" && r.id <= after || state != "" && r.state != state || q != "" && !r.matches(q) {
			continue
		}
		if limit > 0 && count == limit {
			break
		}
		if count > 0 {
			buf.WriteByte(',')
		}
		buf.Write(r.json)
		count++
		next = r.id
	}
	buf.WriteString("]")
	if limit > 0 && count == limit && next != "" && hasMore(rows, next, state, q) {
		fmt.Fprintf(&buf, `,"next":%q`, next)
	}
	buf.WriteString("}")
	c.Header(headerIndex, strconv.FormatUint(index, 10))
	c.Data(http.StatusOK, "application/json; charset=utf-8", buf.Bytes())
}

// hasMore says whether a row after id passes the filters.
func hasMore(rows []*listRow, id, state, q string) bool {
	i, _ := slices.BinarySearchFunc(rows, id, func(r *listRow, id string) int { return strings.Compare(r.id, id) })
	for _, r := range rows[i:] {
		if r.id > id && (state == "" || r.state == state) && (q == "" || r.matches(q)) {
			return true
		}
	}
	return false
}

func knownStates() []string { return store.States }

func (n *Node) getMachine(c *gin.Context) {
	if err := n.minIndex(c); err != nil {
		n.fail(c, err)
		return
	}
	var d wire.MachineDetail
	if err := n.db.View(func(tx *store.Tx) error {
		m, err := tx.MachineByRef(c.Param("id"))
		if err != nil {
			return err
		}
		d.MachineView = wireMachine(m)
		if inv, err := tx.Inventory(m.ID); err == nil {
			d.Inventory = inv
		}
		events, err := tx.Events(m.ID)
		d.Events = nonNil(convert(events, wireEvent))
		return err
	}); err != nil {
		n.fail(c, err)
		return
	}
	c.Header(headerIndex, strconv.FormatUint(d.Index, 10))
	c.JSON(http.StatusOK, d)
}

func (n *Node) getEvents(c *gin.Context) {
	if err := n.minIndex(c); err != nil {
		n.fail(c, err)
		return
	}
	var events []store.Event
	if err := n.db.View(func(tx *store.Tx) error {
		m, err := tx.MachineByRef(c.Param("id"))
		if err != nil {
			return err
		}
		events, err = tx.Events(m.ID)
		return err
	}); err != nil {
		n.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, wire.EventList{Events: nonNil(convert(events, wireEvent))})
}

func (n *Node) postRecommission(c *gin.Context) {
	now := c.Query("now")
	if now != "" && now != "0" && now != "1" && now != "true" && now != "false" {
		n.fail(c, badRequest("now must be 1 or 0"))
		return
	}
	var m store.Machine
	if err := n.db.View(func(tx *store.Tx) error {
		var err error
		m, err = tx.MachineByRef(c.Param("id"))
		return err
	}); err != nil {
		n.fail(c, err)
		return
	}
	if now == "1" || now == "true" {
		n.recommissionNow(c, m)
		return
	}
	idx, err := n.cluster.Apply(c.Request.Context(), &raftfsm.Recommission{ID: m.ID, Now: time.Now().UTC()})
	if err != nil {
		n.fail(c, err)
		return
	}
	n.respondMachine(c, http.StatusOK, m.ID, idx)
}

func (n *Node) deleteMachine(c *gin.Context) {
	var m store.Machine
	if err := n.db.View(func(tx *store.Tx) error {
		var err error
		m, err = tx.MachineByRef(c.Param("id"))
		return err
	}); err != nil {
		n.fail(c, err)
		return
	}
	idx, err := n.cluster.Apply(c.Request.Context(), &raftfsm.MachineDelete{ID: m.ID})
	if err != nil {
		n.fail(c, err)
		return
	}
	c.Header(headerIndex, strconv.FormatUint(idx, 10))
	c.JSON(http.StatusOK, wire.Deleted{Deleted: m.ID})
}

// getRecentEvents is GET /api/v1/events?limit=N: the fleet's newest events
// (default 100, at most 1000), newest first; ?index=&wait= waits for a change.
func (n *Node) getRecentEvents(c *gin.Context) {
	limit := 100
	if v := c.Query("limit"); v != "" {
		l, err := strconv.Atoi(v)
		if err != nil || l < 1 || l > 1000 {
			n.fail(c, badRequest("limit must be a number from 1 to 1000"))
			return
		}
		limit = l
	}
	if err := n.blockingQuery(c, store.TableMachines); err != nil {
		n.fail(c, err)
		return
	}
	var events []store.Event
	var idx uint64
	if err := n.db.View(func(tx *store.Tx) error {
		idx = tx.TableIndex(store.TableMachines)
		var err error
		events, err = tx.RecentEvents(limit)
		return err
	}); err != nil {
		n.fail(c, err)
		return
	}
	c.Header(headerIndex, strconv.FormatUint(idx, 10))
	c.JSON(http.StatusOK, wire.RecentEvents{Index: idx, Events: nonNil(convert(events, wireEvent))})
}
