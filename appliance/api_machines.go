package appliance

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
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
	c.JSON(status, m)
}

// MachineList is GET /api/v1/machines.
type MachineList struct {
	Index    uint64          `json:"index"`
	Machines []store.Machine `json:"machines"`
}

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
			n.fail(c, badRequest("unknown state %q (known: %s)", state, strings.Join(knownStates(), ", ")))
			return
		}
	}
	q := strings.ToLower(strings.TrimSpace(c.Query("q")))
	out := MachineList{Machines: []store.Machine{}}
	err := n.db.View(func(tx *store.Tx) error {
		out.Index = tx.TableIndex(store.TableMachines)
		ms, err := tx.Machines(store.MachineFilter{State: state})
		if err != nil {
			return err
		}
		for _, m := range ms {
			if q == "" || machineMatches(m, q) {
				out.Machines = append(out.Machines, m)
			}
		}
		return nil
	})
	if err != nil {
		n.fail(c, err)
		return
	}
	c.Header(headerIndex, strconv.FormatUint(out.Index, 10))
	c.JSON(http.StatusOK, out)
}

func knownStates() []string {
	return []string{store.StateNew, store.StateCommissioning, store.StateReady}
}

// machineMatches is the q= filter: a substring of the ID, name or serial, or
// a MAC in any common notation.
func machineMatches(m store.Machine, q string) bool {
	if strings.Contains(m.ID, q) || strings.Contains(strings.ToLower(m.Name), q) || strings.Contains(strings.ToLower(m.Serial), q) {
		return true
	}
	qm := strings.NewReplacer("-", ":", ".", "").Replace(q)
	for _, mac := range m.MACs {
		if strings.Contains(mac, qm) || strings.Contains(strings.ReplaceAll(mac, ":", ""), strings.ReplaceAll(qm, ":", "")) {
			return true
		}
	}
	return false
}

func (n *Node) getMachine(c *gin.Context) {
	if err := n.minIndex(c); err != nil {
		n.fail(c, err)
		return
	}
	n.respondMachine(c, http.StatusOK, c.Param("id"), 0)
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
