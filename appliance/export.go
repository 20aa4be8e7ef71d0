package appliance

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
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

// cmdExport runs `rollcall export postgres` and `rollcall export status`.
func cmdExport(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: rollcall export postgres -dsn URL [-schema rollcall] [-password-file FILE] | rollcall export status [-json]")
	}
	switch args[0] {
	case "postgres":
		return cmdExportPostgres(args[1:], stdout, stderr)
	case "status":
		return cmdExportStatus(args[1:], stdout, stderr)
	}
	return fmt.Errorf("export: %q is not one of postgres, status", args[0])
}

func cmdExportPostgres(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export postgres", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", "", "PostgreSQL connection string or postgres:// URL, without a password")
	schema := fs.String("schema", pgexport.DefaultSchema, "PostgreSQL schema for the tables")
	pwFile := fs.String("password-file", "", "file holding the database password (default: $PGPASSWORD)")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	c, err := newClient(fs, args)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	t := pgexport.Target{DSN: *dsn, Schema: *schema}
	if pgexport.DSNHasPassword(*dsn) {
		return errors.New("-dsn carries a password, which would show in the process list and shell history: remove it and use -password-file FILE or PGPASSWORD")
	}
	if err := t.Check(); err != nil {
		return err
	}
	req := wire.ExportRequest{DSN: *dsn, Schema: *schema, Password: os.Getenv("PGPASSWORD")}
	if *pwFile != "" {
		if req.Password, err = pgexport.ReadPasswordFile(*pwFile); err != nil {
			return err
		}
	}
	return exchange(c, http.MethodPost, "/api/v1/export/postgres", req, *asJSON, stdout, printExportReply)
}

func printExportReply(stdout io.Writer, r wire.ExportReply) error {
	rows := 0
	for _, n := range r.Stats.Rows {
		rows += n
	}
	fmt.Fprintf(stdout, "exported %d machines (%d rows in %d tables) at index %d from node %s to %s in %s\n",
		r.Stats.Machines, rows, len(r.Stats.Rows), r.Stats.Index, r.Node, r.Target, r.Stats.Duration.Round(time.Millisecond))
	return nil
}

func cmdExportStatus(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	c, err := newClient(fs, args)
	if err != nil {
		return err
	}
	return exchange(c, http.MethodGet, "/api/v1/export/status", nil, *asJSON, stdout, printExportStatus)
}

func printExportStatus(stdout io.Writer, v wire.ExportStatusView) error {
	if !v.Configured {
		fmt.Fprintf(stdout, "node %s: no postgres_export in its configuration\n", v.Node)
		return nil
	}
	fmt.Fprintf(stdout, "node %s: %s (leader %s)\n", v.Node, v.Role, dash(v.Leader))
	if m := v.Mirror; m != nil {
		fmt.Fprintf(stdout, "target:    %s\n", m.Target)
		fmt.Fprintf(stdout, "exported:  index %d", m.ExportedIndex)
		if !m.LastExport.IsZero() {
			fmt.Fprintf(stdout, " at %s", m.LastExport.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(stdout, "\napplied:   index %d\nlag:       %d indexes, %.1fs\n", m.AppliedIndex, m.LagIndexes, m.LagSeconds)
		if m.LastError != "" {
			fmt.Fprintf(stdout, "error:     %s (at %s)\n", m.LastError, m.LastErrorAt.UTC().Format(time.RFC3339))
		}
	}
	return nil
}
