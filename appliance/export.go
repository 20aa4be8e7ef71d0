package appliance

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
func (n *Node) postExport(c *gin.Context) {
	var req wire.ExportRequest
	if err := decodeBody(c, 64<<10, &req); err != nil {
		n.fail(c, err)
		return
	}
	t := pgexport.Target{DSN: req.DSN, Schema: req.Schema, Password: req.Password, Node: n.opts.Name}
	if err := t.Check(); err != nil {
		n.fail(c, badRequest("%s", err.Error()))
		return
	}
	st, err := pgexport.ExportTo(c.Request.Context(), n.db, t)
	if err != nil {
		n.fail(c, exportError(err, t))
		return
	}
	n.log.Info("exported to PostgreSQL", "target", t.String(), "index", st.Index, "machines", st.Machines, "took", st.Duration)
	c.JSON(http.StatusOK, wire.ExportReply{Node: n.opts.Name, Target: t.String(), Stats: wireExportStats(st)})
}

// exportError says what went wrong with PostgreSQL in words an operator
// can act on; the full (redacted) cause goes to the node's log.
func exportError(err error, t pgexport.Target) error {
	var pgErr *pgconn.PgError
	said := ""
	if errors.As(err, &pgErr) {
		said = fmt.Sprintf(": PostgreSQL said: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &apiError{Status: 499, Code: "canceled", Message: "the export was cancelled", cause: err}
	case errors.Is(err, pgexport.ErrConnect):
		return &apiError{Status: http.StatusBadGateway, Code: "postgres_unreachable",
			Message: "cannot connect to PostgreSQL at " + t.String() + said, cause: err}
	case errors.Is(err, pgexport.ErrNewerLayout):
		return &apiError{Status: http.StatusConflict, Code: "conflict", Message: err.Error(), cause: err}
	case pgErr != nil:
		return &apiError{Status: http.StatusBadGateway, Code: "postgres_refused",
			Message: "PostgreSQL refused the export into " + t.String() + said, cause: err}
	}
	return err
}

func (n *Node) getExportStatus(c *gin.Context) {
	v := wire.ExportStatusView{Node: n.opts.Name, Role: "off"}
	if n.cluster != nil {
		v.Leader, _ = n.cluster.Leader()
	}
	r := n.export.Load()
	if r == nil {
		c.JSON(http.StatusOK, v)
		return
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
		n.log.Warn("export status: cannot read the export state", "err", err)
		st.LastError = exportError(err, r.Target()).Error()
	}
	ws := wireExportStatus(st)
	v.Mirror = &ws
	c.JSON(http.StatusOK, v)
}
