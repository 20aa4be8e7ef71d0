package appliance

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store/pgexport"
)

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
