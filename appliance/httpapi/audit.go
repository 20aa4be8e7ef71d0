package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// The audit log: every administrator's write the cluster applies is
// proposed wrapped in a raftfsm.Audited with who made it (the token, or
// admin:NAME), from which address, through which node and by which route;
// applying it appends an event with the outcome. It is replicated state,
// the same on every node, and the PostgreSQL export carries it. A request
// refused before anything is proposed (bad input, a refused certificate)
// takes no entry: the node's log has it. While the gate has not opened
// the wrapper (a rolling upgrade), writes go in bare and are not audited.

type auditCtxKey struct{}

type auditInfo struct{ actor, from, action, target string }

// withAudit marks an admitted admin write's context for auditing.
func withAudit(c *gin.Context) {
	if c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead {
		return
	}
	info := auditInfo{actor: actor(c), from: c.ClientIP(), action: c.Request.Method + " " + c.FullPath(), target: c.Request.URL.Path}
	c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), auditCtxKey{}, info))
}

// auditing is the Cluster every handler applies through: commands proposed
// in an admin write's context go in wrapped.
type auditing struct {
	Cluster
	node string
}

func (a auditing) Apply(ctx context.Context, cmd raftfsm.Command) (uint64, error) {
	info, ok := ctx.Value(auditCtxKey{}).(auditInfo)
	if !ok {
		return a.Cluster.Apply(ctx, cmd)
	}
	fsm := a.Cluster.FSM()
	if _, err := fsm.ForGate(&raftfsm.Audited{}); err != nil {
		return a.Cluster.Apply(ctx, cmd) // not open yet: bare
	}
	inner, err := fsm.ForGate(cmd)
	if err != nil {
		return 0, err
	}
	w, err := raftfsm.NewAudited(inner, info.actor, info.from, a.node, info.action, info.target, time.Now().UTC())
	if err != nil {
		return 0, err
	}
	return a.Cluster.Apply(ctx, w)
}

func (s *Server) auditRoutes() []Route {
	return []Route{
		{"GET", "/api/v1/audit", AuthAdmin, "the audit log, newest first: who (token or admin:NAME), from where, through which node, what, outcome (?limit= default 100, at most 1000; ?before=SEQ pages)", nil, s.getAudit},
	}
}

func (s *Server) getAudit(c *gin.Context) error {
	limit, before := 100, uint64(0)
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return BadRequest("limit must be 1 to 1000")
		}
		limit = n
	}
	if v := c.Query("before"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return BadRequest("before must be an event's seq")
		}
		before = n
	}
	var evs []store.AuditEvent
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		evs, err = tx.Audit(before, limit)
		return err
	}); err != nil {
		return err
	}
	out := wire.AuditLog{Events: make([]wire.AuditEvent, 0, len(evs))}
	for _, e := range evs {
		out.Events = append(out.Events, wireAudit(e))
	}
	if len(evs) == limit && evs[len(evs)-1].Seq > 1 {
		out.Next = evs[len(evs)-1].Seq
	}
	c.JSON(http.StatusOK, out)
	return nil
}

func wireAudit(e store.AuditEvent) wire.AuditEvent {
	return wire.AuditEvent{Seq: e.Seq, Index: e.Index, Time: e.Time, Actor: e.Actor, From: e.From, Node: e.Node,
		Action: e.Action, Target: e.Target, Command: e.Command, Outcome: e.Outcome}
}
