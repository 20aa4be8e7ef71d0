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
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store/pgexport"
)

// PostgresExportConfig is postgres_export in rollcall.json: the continuous
// mirror of the store into PostgreSQL, run by the leader. Give every node
// the same configuration so that the next leader takes over.
type PostgresExportConfig struct {
	// DSN is a libpq connection string or postgres:// URL without a
	// password.
	DSN string `json:"dsn"`
	// Schema holds the tables (default rollcall).
	Schema string `json:"schema,omitempty"`
	// PasswordFile holds the password (one line); without it PGPASSWORD
	// and ~/.pgpass of the node's user apply.
	PasswordFile string `json:"password_file,omitempty"`
}

func (p *PostgresExportConfig) check() error {
	if p.Schema == "" {
		p.Schema = pgexport.DefaultSchema
	}
	if err := (pgexport.Target{DSN: p.DSN, Schema: p.Schema}).Check(); err != nil {
		return fmt.Errorf("postgres_export: %w", err)
	}
	if p.PasswordFile != "" {
		if _, err := readPasswordFile(p.PasswordFile); err != nil {
			return fmt.Errorf("postgres_export: %w", err)
		}
	}
	return nil
}

// target reads the password file each time, so a rotated password is
// picked up by the next connection.
func (p *PostgresExportConfig) target(node string) (pgexport.Target, error) {
	t := pgexport.Target{DSN: p.DSN, Schema: p.Schema, Node: node}
	if p.PasswordFile != "" {
		pw, err := readPasswordFile(p.PasswordFile)
		if err != nil {
			return t, err
		}
		t.Password = pw
	}
	return t, nil
}

func readPasswordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("password file: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" || strings.ContainsAny(pw, "\r\n") {
		return "", fmt.Errorf("password file %s must hold the password on one line", path)
	}
	return pw, nil
}

// exportRunner is a node's continuous mirror, when configured.
type exportRunner struct {
	conf *PostgresExportConfig
	mu   sync.Mutex
	m    *pgexport.Mirror // the last mirror this node ran; nil if never leader
	err  string           // why the mirror could not start
}

func (r *exportRunner) mirror() (*pgexport.Mirror, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m, r.err
}

func (n *Node) exportRunner() *exportRunner { return n.export.Load() }

// runExportMirror runs the PostgreSQL mirror while this node leads, until
// ctx ends or the node closes. A node that loses leadership stops its
// mirror (an open transaction rolls back); the next leader resumes from the
// index kept in PostgreSQL.
func (n *Node) runExportMirror(ctx context.Context, conf *PostgresExportConfig) {
	n.runExportMirrorWhile(ctx, conf, n.cluster.IsLeader, time.Second)
}

func (n *Node) runExportMirrorWhile(ctx context.Context, conf *PostgresExportConfig, isLeader func() bool, poll time.Duration) {
	r := &exportRunner{conf: conf}
	n.export.Store(r)
	defer n.export.Store(nil)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-n.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	log := n.log.With("component", "pgexport")
	whileLeader(ctx, isLeader, poll, func(ctx context.Context) {
		t, err := conf.target(n.opts.Name)
		var m *pgexport.Mirror
		if err == nil {
			m, err = pgexport.NewMirror(n.db, pgexport.MirrorConfig{Target: t, Logger: n.log})
		}
		r.mu.Lock()
		r.err = ""
		if err != nil {
			r.err = err.Error()
		} else {
			r.m = m
		}
		r.mu.Unlock()
		if err != nil {
			log.Error("PostgreSQL mirror cannot start", "err", err)
			return
		}
		log.Info("leader: running the PostgreSQL mirror", "target", t.String())
		m.Run(ctx)
		log.Info("PostgreSQL mirror stopped")
	})
}

// whileLeader calls run while isLeader holds, cancelling it when
// leadership is lost (checked every poll) and calling it again, after a
// poll, if it returns on its own.
func whileLeader(ctx context.Context, isLeader func() bool, poll time.Duration, run func(context.Context)) {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		if isLeader() {
			rctx, rcancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); run(rctx) }()
		watch:
			for {
				select {
				case <-ctx.Done():
					rcancel()
					<-done
					return
				case <-done:
					break watch
				case <-tick.C:
					if !isLeader() {
						rcancel()
						<-done
						break watch
					}
				}
			}
			rcancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

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
	r := n.exportRunner()
	if r == nil {
		c.JSON(http.StatusOK, v)
		return
	}
	v.Configured = true
	m, startErr := r.mirror()
	if m != nil {
		if st := m.Status(); st.Running {
			ws := wireExportStatus(st)
			v.Role, v.Mirror = "mirror", &ws
			c.JSON(http.StatusOK, v)
			return
		}
	}
	// Not running here: read the position the leader's mirror keeps.
	v.Role = "standby"
	t, err := r.conf.target(n.opts.Name)
	st := pgexport.Status{Target: t.String(), LastError: startErr}
	st.AppliedIndex, _, _ = n.db.Applied()
	if err == nil {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
		var ps pgexport.State
		ps, err = pgexport.ReadState(ctx, t)
		cancel()
		st.ExportedIndex, st.LastExport = ps.Index, ps.ExportedAt
		st.Connected = err == nil
	}
	if err != nil {
		n.log.Warn("export status: cannot read the export state", "err", err)
		st.LastError = exportError(err, t).Error()
	}
	if st.AppliedIndex > st.ExportedIndex {
		st.LagIndexes = st.AppliedIndex - st.ExportedIndex
		if !st.LastExport.IsZero() {
			st.LagSeconds = time.Since(st.LastExport).Seconds()
		}
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
		if req.Password, err = readPasswordFile(*pwFile); err != nil {
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
