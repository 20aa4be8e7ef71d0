package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store/pgexport"
)

// postExport copies this node's local store into PostgreSQL: one snapshot,
// one PostgreSQL transaction (see pgexport.Export).
func (s *Server) postExport(c *gin.Context) error {
	var req wire.ExportRequest
	if err := decodeBody(c, 64<<10, &req); err != nil {
		return err
	}
	t := pgexport.Target{DSN: req.DSN, Schema: req.Schema, Password: req.Password, Node: s.cfg.Name}
	if err := t.Check(); err != nil {
		// Check's refusals are written for the operator (the CLI prints
		// the same) and show the DSN only redacted.
		return Wrap(http.StatusBadRequest, "bad_request", err.Error(), err)
	}
	st, err := pgexport.ExportTo(c.Request.Context(), s.cfg.DB, t)
	if err != nil {
		return exportError(err, t)
	}
	s.log.Info("exported to PostgreSQL", "target", t.String(), "index", st.Index, "machines", st.Machines, "took", st.Duration)
	c.JSON(http.StatusOK, wire.ExportReply{Node: s.cfg.Name, Target: t.String(), Stats: wireExportStats(st)})
	return nil
}

// exportError says what went wrong with PostgreSQL in words an operator
// can act on; the full (redacted) cause goes to the node's log. What
// PostgreSQL itself said (its message and SQLSTATE) is passed on: it is
// the server's answer to the operator's own database, and what they need
// to fix it.
func exportError(err error, t pgexport.Target) error {
	var pgErr *pgconn.PgError
	said := ""
	if errors.As(err, &pgErr) {
		said = fmt.Sprintf(": PostgreSQL said: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return Wrap(499, "canceled", "the export was cancelled", err)
	case errors.Is(err, pgexport.ErrConnect):
		return Wrap(http.StatusBadGateway, "postgres_unreachable", "cannot connect to PostgreSQL at "+t.String()+said, err)
	case errors.Is(err, pgexport.ErrNewerLayout):
		return Wrap(http.StatusConflict, "conflict", "schema "+t.String()+" holds a layout newer than this node's: upgrade this node, or export to another schema", err)
	case pgErr != nil:
		return Wrap(http.StatusBadGateway, "postgres_refused", "PostgreSQL refused the export into "+t.String()+said, err)
	}
	return err
}

func (s *Server) getExportStatus(c *gin.Context) error {
	v := wire.ExportStatusView{Node: s.cfg.Name, Role: "off"}
	v.Leader, _ = s.cfg.Cluster.Leader()
	r := s.cfg.Export()
	if r == nil {
		c.JSON(http.StatusOK, v)
		return nil
	}
	v.Configured = true
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	st, running, err := r.Status(ctx)
	cancel()
	v.Role = "standby" // not running here: the position the leader's mirror keeps
	if running {
		v.Role = "mirror"
	}
	if err != nil {
		s.log.Warn("export status: cannot read the export state", "err", err)
		st.LastError = classify(exportError(err, r.Target()), nil).Message
	}
	ws := wireExportStatus(st)
	v.Mirror = &ws
	c.JSON(http.StatusOK, v)
	return nil
}
