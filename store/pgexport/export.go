package pgexport

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/store"
)

// Stats describes a full export.
type Stats struct {
	Index    uint64         `json:"index"` // Raft index of the snapshot exported
	Machines int            `json:"machines"`
	Rows     map[string]int `json:"rows"`    // per table
	Created  bool           `json:"created"` // the tables were (re)created
	Duration time.Duration  `json:"duration_ns"`
}

// machineChunk is how many machines are turned into rows before they are
// copied, which bounds memory whatever the fleet's size.
const machineChunk = 256

// Export copies the store into schema (default rollcall) of the database
// at dsn: it creates or migrates the tables and replaces their contents
// with one consistent snapshot (one store read transaction), copied with
// COPY inside one PostgreSQL transaction, so readers see the old rows or the
// new ones, never a mix. The password comes from PGPASSWORD or ~/.pgpass,
// never from the DSN.
func Export(ctx context.Context, db *store.DB, dsn string, schema string) (Stats, error) {
	return ExportTo(ctx, db, Target{DSN: dsn, Schema: schema})
}

// ExportTo is Export with a full Target (password, node name).
func ExportTo(ctx context.Context, db *store.DB, t Target) (Stats, error) {
	if err := t.Check(); err != nil {
		return Stats{}, err
	}
	conn, err := t.connect(ctx)
	if err != nil {
		return Stats{}, err
	}
	defer conn.Close(context.Background())
	st, err := fullExport(ctx, conn, db, t, "export")
	return st, t.scrub(err)
}

// fullExport runs a whole export in one PostgreSQL transaction.
func fullExport(ctx context.Context, conn *pgx.Conn, db *store.DB, t Target, mode string) (Stats, error) {
	start := time.Now()
	s, err := LoadSchema()
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		created, err := ensureSchema(ctx, tx, s, t.schema())
		if err != nil {
			return err
		}
		st.Created = created
		if _, err := lockState(ctx, tx, t.schema()); err != nil {
			return err
		}
		var names []string
		for _, tb := range s.Tables {
			names = append(names, ident(t.schema(), tb.Name))
		}
		if _, err := tx.Exec(ctx, "TRUNCATE "+strings.Join(names, ", ")); err != nil {
			return fmt.Errorf("truncate tables: %w", err)
		}
		for _, tb := range s.Tables {
			if tb.Parent != "" {
				q := "ALTER TABLE " + ident(t.schema(), tb.Name) + " DROP CONSTRAINT " + tb.foreignKeyName()
				if _, err := tx.Exec(ctx, q); err != nil {
					return fmt.Errorf("drop foreign key of %s for the load: %w", tb.Name, err)
				}
			}
		}
		st.Rows, st.Machines, st.Index, err = load(ctx, tx, db, s, t.schema())
		if err != nil {
			return err
		}
		for _, tb := range s.Tables {
			if tb.Parent != "" {
				if _, err := tx.Exec(ctx, "ALTER TABLE "+ident(t.schema(), tb.Name)+" ADD "+tb.foreignKey(t.schema())); err != nil {
					return fmt.Errorf("restore foreign key of %s: %w", tb.Name, err)
				}
			}
		}
		return saveState(ctx, tx, t, st.Index, mode, true)
	})
	if err != nil {
		return Stats{}, fmt.Errorf("export to %s: %w", t, err)
	}
	st.Duration = time.Since(start)
	return st, nil
}

// load copies one store snapshot into the (empty) tables.
func load(ctx context.Context, tx pgx.Tx, db *store.DB, s *Schema, schema string) (counts map[string]int, machines int, index uint64, err error) {
	counts = map[string]int{}
	// The store is read and turned into rows in one goroutine while this
	// one copies the previous chunk: decoding and COPY overlap.
	chunks := make(chan *rowSet, 2)
	stop := make(chan struct{})
	produced := make(chan error, 1)
	go func() {
		defer close(chunks)
		produced <- produce(db, s, chunks, stop, &machines, &index)
	}()
	for rs := range chunks {
		if err != nil {
			continue // drain so the producer ends
		}
		for _, tb := range s.Tables {
			rows := rs.rows[tb.Name]
			if len(rows) == 0 {
				continue
			}
			n, cerr := tx.CopyFrom(ctx, pgx.Identifier{schema, tb.Name}, tb.ColumnNames(), pgx.CopyFromRows(rows))
			if cerr != nil {
				err = fmt.Errorf("copy into %s: %w", tb.Name, cerr)
				close(stop)
				break
			}
			counts[tb.Name] += int(n)
		}
	}
	if perr := <-produced; err == nil {
		err = perr
	}
	return counts, machines, index, err
}

var errStopped = errors.New("load stopped")

// produce reads one store snapshot into chunks of rows.
func produce(db *store.DB, s *Schema, out chan<- *rowSet, stop <-chan struct{}, machines *int, index *uint64) error {
	rs := newRowSet(s)
	flush := func() error {
		select {
		case out <- rs:
		case <-stop:
			return errStopped
		}
		rs = newRowSet(s)
		return nil
	}
	return db.View(func(stx *store.Tx) error {
		*index, _ = stx.Applied()
		ms, err := stx.Machines(store.MachineFilter{})
		if err != nil {
			return err
		}
		*machines = len(ms)
		for i, m := range ms {
			doc, err := stx.Inventory(m.ID)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			dep, err := machineDeployment(stx, m.ID)
			if err != nil {
				return err
			}
			if err := rs.addMachine(m, doc, dep); err != nil {
				return err
			}
			if (i+1)%machineChunk == 0 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
		err = stx.ForEachEvent(func(_ string, seq uint32, e store.Event) error {
			rs.addEvent(e, seq)
			if rs.n >= 20000 {
				return flush()
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := rs.addNetwork(stx); err != nil {
			return err
		}
		addrs, err := stx.Addresses(netip.Prefix{}, 0)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			rs.add("addresses", s.Table("addresses").row(nil, a))
		}
		nodes, err := stx.Nodes()
		if err != nil {
			return err
		}
		for _, n := range nodes {
			rs.add("nodes", s.Table("nodes").row(nil, n))
		}
		if err := rs.addDHCPImagesJobs(stx); err != nil {
			return err
		}
		if err := rs.addTagsRacks(stx); err != nil {
			return err
		}
		if err := rs.addClusterCAs(stx); err != nil {
			return err
		}
		if err := rs.addCertsAudit(stx); err != nil {
			return err
		}
		if err := rs.addOSDeploy(stx); err != nil {
			return err
		}
		if err := rs.addStateless(stx); err != nil {
			return err
		}
		return flush()
	})
}

// ensureSchema creates the tables, or recreates them when they were made
// for another layout; created says the caller must load everything.
func ensureSchema(ctx context.Context, tx pgx.Tx, s *Schema, schema string) (created bool, err error) {
	// Two exporters (an old and a new leader) must not both create.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "rollcall-export:"+schema); err != nil {
		return false, fmt.Errorf("lock schema %s: %w", schema, err)
	}
	if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return false, fmt.Errorf("create schema %s: %w", schema, err)
	}
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", ident(schema, "schema_version")).Scan(&exists); err != nil {
		return false, fmt.Errorf("look for %s.schema_version: %w", schema, err)
	}
	if exists {
		var version int
		var layout string
		err := tx.QueryRow(ctx, "SELECT version, layout FROM "+ident(schema, "schema_version")).Scan(&version, &layout)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return false, fmt.Errorf("read %s.schema_version: %w", schema, err)
		}
		if version > SchemaVersion {
			return false, fmt.Errorf("schema %s holds layout %d, newer than this node's %d: upgrade this node, or export to another schema: %w", schema, version, SchemaVersion, ErrNewerLayout)
		}
		if version == SchemaVersion && layout == s.Layout {
			return false, nil
		}
		if err := dropTables(ctx, tx, s, schema); err != nil {
			return false, err
		}
	}
	for _, stmt := range append(s.ddl(schema), metaDDL(schema)...) {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return false, fmt.Errorf("create tables in %s: %s: %w", schema, firstLine(stmt), err)
		}
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+ident(schema, "schema_version")+" (version, layout, created) VALUES ($1, $2, now())", SchemaVersion, s.Layout); err != nil {
		return false, fmt.Errorf("record schema version: %w", err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+ident(schema, "export_state")+" (id) VALUES (true)"); err != nil {
		return false, fmt.Errorf("create export state: %w", err)
	}
	return true, nil
}

// dropTables removes the exporter's tables (children first). Objects of
// the site's own that depend on them (views) make this fail rather than
// vanish: PostgreSQL names them.
func dropTables(ctx context.Context, tx pgx.Tx, s *Schema, schema string) error {
	names := []string{"export_state", "schema_version"}
	for _, t := range slices.Backward(s.Tables) {
		names = append(names, t.Name)
	}
	for _, n := range names {
		if _, err := tx.Exec(ctx, "DROP TABLE IF EXISTS "+ident(schema, n)); err != nil {
			return fmt.Errorf("drop %s.%s to recreate it for layout %d (move your own views out of schema %s): %w", schema, n, SchemaVersion, schema, err)
		}
	}
	return nil
}

func metaDDL(schema string) []string {
	v, st := ident(schema, "schema_version"), ident(schema, "export_state")
	return []string{
		"CREATE TABLE " + v + " (version integer NOT NULL, layout text NOT NULL, created timestamptz NOT NULL)",
		"COMMENT ON TABLE " + v + " IS " + quoteLit("The layout of the tables in this schema. A Rollcall node whose layout differs drops and recreates them (they are derived from the store); one whose version is older refuses to touch them."),
		"COMMENT ON COLUMN " + v + ".version IS 'pgexport.SchemaVersion of the node that created the tables'",
		"COMMENT ON COLUMN " + v + ".layout IS 'SHA-256 of the DDL generated from the store''s Go types'",
		"COMMENT ON COLUMN " + v + ".created IS 'when the tables were created'",
		"CREATE TABLE " + st + " (id boolean PRIMARY KEY DEFAULT true CHECK (id), raft_index bigint, exported_at timestamptz, full_export_at timestamptz, mode text, node text)",
		"COMMENT ON TABLE " + st + " IS " + quoteLit("Where the export stands: one row, updated in the same transaction as the rows it describes. The continuous mirror resumes from raft_index after a restart, an outage or a change of leader."),
		"COMMENT ON COLUMN " + st + ".raft_index IS 'every change up to this Raft index is in the tables; NULL before the first full export'",
		"COMMENT ON COLUMN " + st + ".exported_at IS 'when the last transaction committed (PostgreSQL clock)'",
		"COMMENT ON COLUMN " + st + ".full_export_at IS 'when the tables were last loaded in full'",
		"COMMENT ON COLUMN " + st + ".mode IS 'export (rollcall export postgres), mirror (continuous) or mirror-full (the mirror reloaded everything)'",
		"COMMENT ON COLUMN " + st + ".node IS 'the appliance node that wrote it'",
	}
}

// lockState locks the state row until the transaction ends and returns the
// exported index (ok false before the first full export).
func lockState(ctx context.Context, tx pgx.Tx, schema string) (state, error) {
	var st state
	var idx *int64
	err := tx.QueryRow(ctx, "SELECT raft_index FROM "+ident(schema, "export_state")+" FOR UPDATE").Scan(&idx)
	if errors.Is(err, pgx.ErrNoRows) {
		_, err = tx.Exec(ctx, "INSERT INTO "+ident(schema, "export_state")+" (id) VALUES (true)")
		return st, err
	}
	if err != nil {
		return st, fmt.Errorf("read export state: %w", err)
	}
	if idx != nil {
		st.index, st.loaded = uint64(*idx), true
	}
	return st, nil
}

type state struct {
	index  uint64
	loaded bool
}

func saveState(ctx context.Context, tx pgx.Tx, t Target, index uint64, mode string, full bool) error {
	q := "UPDATE " + ident(t.schema(), "export_state") + " SET raft_index = $1, exported_at = now(), mode = $2, node = $3"
	if full {
		q += ", full_export_at = now()"
	}
	if _, err := tx.Exec(ctx, q, int64(index), mode, t.Node); err != nil {
		return fmt.Errorf("record export state: %w", err)
	}
	return nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// ErrNewerLayout means the schema was written by a newer Rollcall.
var ErrNewerLayout = errors.New("schema holds a newer layout")

// State is the export position recorded in PostgreSQL.
type State struct {
	Loaded     bool      `json:"loaded"` // a full export happened
	Index      uint64    `json:"index"`
	ExportedAt time.Time `json:"exported_at,omitzero"`
	Mode       string    `json:"mode,omitempty"`
	Node       string    `json:"node,omitempty"`
}

// ReadState reads the export position from the target without changing
// anything (for a node that does not run the mirror).
func ReadState(ctx context.Context, t Target) (State, error) {
	var st State
	if err := t.Check(); err != nil {
		return st, err
	}
	conn, err := t.connect(ctx)
	if err != nil {
		return st, err
	}
	defer conn.Close(context.Background())
	var idx *int64
	var at *time.Time
	var mode, node *string
	err = conn.QueryRow(ctx, "SELECT raft_index, exported_at, mode, node FROM "+ident(t.schema(), "export_state")).Scan(&idx, &at, &mode, &node)
	if err != nil {
		return st, t.scrub(fmt.Errorf("read export state from %s: %w", t, err))
	}
	if idx != nil {
		st.Loaded, st.Index = true, uint64(*idx)
	}
	if at != nil {
		st.ExportedAt = *at
	}
	if mode != nil {
		st.Mode = *mode
	}
	if node != nil {
		st.Node = *node
	}
	return st, nil
}
