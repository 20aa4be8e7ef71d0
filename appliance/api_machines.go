package appliance

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

type createMachineRequest struct {
	Name string   `json:"name"`
	MAC  string   `json:"mac"`
	MACs []string `json:"macs"`
}

// newMachineID picks a fresh machine ID (the proposer picks IDs, never the
// state machine).
func newMachineID() string {
	var b [6]byte
	rand.Read(b[:])
	return "m-" + hex.EncodeToString(b[:])
}

func (n *Node) createMachine(c *gin.Context) {
	var req createMachineRequest
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

// BMCView is a machine's BMC as the API shows it: never the password.
type BMCView struct {
	Driver      string            `json:"driver,omitempty"`
	Address     string            `json:"address,omitempty"`
	MAC         string            `json:"mac,omitempty"`
	User        string            `json:"user,omitempty"`
	HasPassword bool              `json:"has_password"`
	Source      string            `json:"source,omitempty"`
	Settings    map[string]string `json:"settings,omitempty"`
	Errors      []string          `json:"errors,omitempty"`
	UpdatedAt   time.Time         `json:"updated_at,omitzero"`
}

// MachineView is a machine record as the API shows it (lists and show).
type MachineView struct {
	ID           string            `json:"id"`
	Name         string            `json:"name,omitempty"`
	State        string            `json:"state"`
	SystemUUID   string            `json:"system_uuid,omitempty"`
	Serial       string            `json:"serial,omitempty"`
	MACs         []string          `json:"macs,omitempty"`
	BootMAC      string            `json:"boot_mac,omitempty"`
	IdentityKey  string            `json:"identity_key,omitempty"`
	IPs          []string          `json:"ips,omitempty"`
	Summary      inventory.Summary `json:"summary,omitzero"`
	CreatedAt    time.Time         `json:"created_at"`
	UpdatedAt    time.Time         `json:"updated_at"`
	LastSeen     time.Time         `json:"last_seen,omitzero"`
	Commissioned time.Time         `json:"commissioned,omitzero"`
	Index        uint64            `json:"index"`
	BMC          *BMCView          `json:"bmc,omitempty"`
}

// viewOf writes a machine record into its wire type, field by field: a
// field added to store.Machine reaches clients only when it is written
// here too (TestMachineViewIsWritten keeps the two lists in step).
func viewOf(m store.Machine) MachineView {
	v := MachineView{
		ID: m.ID, Name: m.Name, State: m.State, SystemUUID: m.SystemUUID, Serial: m.Serial,
		MACs: m.MACs, BootMAC: m.BootMAC, IdentityKey: m.IdentityKey, IPs: m.IPs, Summary: m.Summary,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, LastSeen: m.LastSeen, Commissioned: m.Commissioned, Index: m.Index,
	}
	if b := m.BMC; b != nil {
		v.BMC = &BMCView{
			Driver: b.Driver, Address: b.Address, MAC: b.MAC, User: b.User, HasPassword: len(b.PasswordSealed) > 0,
			Source: b.Source, Settings: b.Settings, Errors: b.Errors, UpdatedAt: b.UpdatedAt,
		}
	}
	return v
}

// MachineDetail is GET /api/v1/machines/{id}: the record, the inventory as
// the agent sent it (without the BMC password) and the history.
type MachineDetail struct {
	MachineView
	Inventory json.RawMessage `json:"inventory,omitempty"`
	Events    []store.Event   `json:"events"`
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
	c.JSON(status, viewOf(m))
}

// MachineList is GET /api/v1/machines.
type MachineList struct {
	Index    uint64        `json:"index"`
	Machines []MachineView `json:"machines"`
	// Next is the ?after= of the next page when ?limit= cut the list.
	Next string `json:"next,omitempty"`
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
	// The rows' JSON is ready: write the MachineList shape around it.
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
	var d MachineDetail
	if err := n.db.View(func(tx *store.Tx) error {
		m, err := tx.MachineByRef(c.Param("id"))
		if err != nil {
			return err
		}
		d.MachineView = viewOf(m)
		if inv, err := tx.Inventory(m.ID); err == nil {
			d.Inventory = inv
		}
		d.Events, err = tx.Events(m.ID)
		return err
	}); err != nil {
		n.fail(c, err)
		return
	}
	if d.Events == nil {
		d.Events = []store.Event{}
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
	if events == nil {
		events = []store.Event{}
	}
	c.JSON(http.StatusOK, gin.H{"events": events})
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
	c.JSON(http.StatusOK, gin.H{"deleted": m.ID})
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
	if events == nil {
		events = []store.Event{}
	}
	c.Header(headerIndex, strconv.FormatUint(idx, 10))
	c.JSON(http.StatusOK, gin.H{"index": idx, "events": events})
}
