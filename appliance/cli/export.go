package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store/pgexport"
)

// cmdExport is `rollcall export postgres` and `rollcall export status`.
func cmdExport(args []string, s streams) error {
	if len(args) == 0 {
		return errors.New("usage: rollcall export postgres -dsn URL [-schema rollcall] [-password-file FILE] | rollcall export status [-json]")
	}
	switch args[0] {
	case "postgres":
		return exportPostgres(args[1:], s)
	case "status":
		return exportStatus(args[1:], s)
	}
	return fmt.Errorf("export: %q is not one of postgres, status", args[0])
}

// exportPostgres asks the node to copy its store into PostgreSQL. The
// password never goes on the command line: it comes from a file or
// $PGPASSWORD, and travels in the request body.
func exportPostgres(args []string, s streams) error {
	fs := newFlags("export postgres", "")
	fs.SetOutput(s.stderr)
	dsn := fs.String("dsn", "", "PostgreSQL connection string or postgres:// URL, without a password")
	schema := fs.String("schema", pgexport.DefaultSchema, "PostgreSQL schema for the tables")
	pwFile := fs.String("password-file", "", "file holding the database password (default: $PGPASSWORD)")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	c, err := fs.client(args, anyArgs)
	if err != nil {
		return err
	}
	if err := noArgs(fs.FlagSet); err != nil {
		return err
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
	return fetch(c, http.MethodPost, "/api/v1/export/postgres", req, *asJSON, s.stdout, printExportReply)
}

func printExportReply(w io.Writer, r wire.ExportReply) error {
	rows := 0
	for _, n := range r.Stats.Rows {
		rows += n
	}
	fmt.Fprintf(w, "exported %d machines (%d rows in %d tables) at index %d from node %s to %s in %s\n",
		r.Stats.Machines, rows, len(r.Stats.Rows), r.Stats.Index, r.Node, r.Target, r.Stats.Duration.Round(time.Millisecond))
	return nil
}

// exportStatus is where the continuous mirror stands, as the node asked
// sees it.
func exportStatus(args []string, s streams) error {
	fs := newFlags("export status", "")
	fs.SetOutput(s.stderr)
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	c, err := fs.client(args, anyArgs)
	if err != nil {
		return err
	}
	return fetch(c, http.MethodGet, "/api/v1/export/status", nil, *asJSON, s.stdout, printExportStatus)
}

func printExportStatus(w io.Writer, v wire.ExportStatusView) error {
	if !v.Configured {
		fmt.Fprintf(w, "node %s: no postgres_export in its configuration\n", v.Node)
		return nil
	}
	fmt.Fprintf(w, "node %s: %s (leader %s)\n", v.Node, v.Role, dash(v.Leader))
	if m := v.Mirror; m != nil {
		fmt.Fprintf(w, "target:    %s\n", m.Target)
		fmt.Fprintf(w, "exported:  index %d", m.ExportedIndex)
		if !m.LastExport.IsZero() {
			fmt.Fprintf(w, " at %s", m.LastExport.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(w, "\napplied:   index %d\nlag:       %d indexes, %.1fs\n", m.AppliedIndex, m.LagIndexes, m.LagSeconds)
		if m.LastError != "" {
			fmt.Fprintf(w, "error:     %s (at %s)\n", m.LastError, m.LastErrorAt.UTC().Format(time.RFC3339))
		}
	}
	return nil
}
