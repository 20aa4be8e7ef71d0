package pgexport

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store/pgexport/pgtest"
)

// The layout follows the Go types: every field of every exported type is a
// column or is skipped with a reason, every column is documented, and no
// secret is a column.
func TestSchemaFromGoTypes(t *testing.T) {
	s, err := LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"machines", "machine_macs", "bmcs", "inventories", "dimms", "cpus", "disks", "nvme",
		"nvme_namespaces", "nics", "ib_hcas", "ib_ports", "gpus", "pci_devices", "lldp_neighbors",
		"inventory_errors", "events", "fabrics", "vlans", "subnets", "ranges", "addresses", "nodes", "certificates", "cluster_cas", "audit",
		"lease_blocks", "leases", "images", "image_files", "tags", "racks", "layouts", "os_images", "os_versions", "deploy_jobs",
		"profiles", "overlays", "overlay_files", "stateless_nodes", "cluster_vars", "bmc_jobs"}
	var names []string
	for _, tb := range s.Tables {
		names = append(names, tb.Name)
	}
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("tables (-want +got):\n%s", d)
	}
	for _, tb := range s.Tables {
		if tb.Comment == "" {
			t.Errorf("table %s has no comment", tb.Name)
		}
		for _, c := range tb.Columns {
			if c.Comment == "" {
				t.Errorf("column %s.%s has no comment", tb.Name, c.Name)
			}
			for _, secret := range []string{"password", "sealed", "secret", "private", "munge", "content", "token"} {
				if strings.Contains(c.Name, secret) {
					t.Errorf("column %s.%s: no secret (%s) is exported", tb.Name, c.Name, secret)
				}
			}
		}
		for k := range columnComments {
			if tbl, col, _ := strings.Cut(k, "."); tbl == tb.Name && !contains(tb.ColumnNames(), col) {
				t.Errorf("comment for %s, which is not a column", k)
			}
		}
		if tb.goType == nil {
			continue
		}
		// Field by field: the leaves of the Go type are the columns plus
		// the skipped fields, nothing lost and nothing invented.
		var leaves []string
		walkLeaves(tb.goType, "", tb.Skipped, &leaves)
		var fromType []string
		for _, c := range tb.Columns {
			if c.Field != "" {
				fromType = append(fromType, c.Field)
			}
		}
		sort.Strings(leaves)
		sort.Strings(fromType)
		if d := cmp.Diff(leaves, fromType); d != "" {
			t.Errorf("table %s does not cover %s field by field (-type +columns):\n%s", tb.Name, tb.goType, d)
		}
	}
	for table, fields := range map[string][]string{
		"bmcs":            {"password_sealed", "password_aad"},
		"stateless_nodes": {"ssh_host_key_sealed"},
		"overlay_files":   {"content"},
	} {
		for _, k := range fields {
			if _, ok := s.Table(table).Skipped[k]; !ok {
				t.Errorf("%s must skip %s", table, k)
			}
		}
	}
	// Children reference their parent's key: a machine's tables machines.id,
	// image_files images.name.
	for _, tb := range s.Tables {
		if tb.Child && (tb.Parent != "machines" || tb.ParentKey != "machine_id") {
			t.Errorf("machine child table %s references %s(%s)", tb.Name, tb.Parent, tb.ParentKey)
		}
	}
	if tf := s.Table("image_files"); tf.Parent != "images" || tf.ParentKey != "image" || tf.Child {
		t.Errorf("image_files: parent %s(%s), machine child %v; want images(image), not a machine's", tf.Parent, tf.ParentKey, tf.Child)
	}
	if tf := s.Table("overlay_files"); tf.Parent != "overlays" || tf.ParentKey != "overlay" || tf.Child {
		t.Errorf("overlay_files: parent %s(%s), machine child %v; want overlays(overlay), not a machine's", tf.Parent, tf.ParentKey, tf.Child)
	}
	// A field of a kind the generator does not know stops it, by name.
	type future struct {
		Name  string        `json:"name"`
		Ports chan struct{} `json:"ports"`
	}
	_, err = build(spec{name: "future", comment: "x", of: future{}})
	if err == nil || !strings.Contains(err.Error(), "future.Ports") {
		t.Errorf("an unmappable field: got %v, want an error naming future.Ports", err)
	}
}

// walkLeaves lists the Go paths (Type.Field.Sub) of the fields that become
// columns, the way a reader of the Go type would count them.
func walkLeaves(t reflect.Type, prefix string, skipped map[string]string, out *[]string) {
	var walk func(t reflect.Type, jsonPrefix, goPath string)
	walk = func(t reflect.Type, jsonPrefix, goPath string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			full := jsonPrefix + name
			if _, skip := skipped[full]; skip {
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft != typeTime && ft != typeAddr && ft != typePrefix {
				walk(ft, full+"_", goPath+"."+f.Name)
				continue
			}
			*out = append(*out, goPath+"."+f.Name)
		}
	}
	walk(t, prefix, t.Name())
}

func TestDSNHandling(t *testing.T) {
	cases := map[string]struct {
		dsn      string
		password bool
		redacted string
	}{
		"url":              {"postgres://rc@db.example/fleet?sslmode=require", false, "postgres://rc@db.example/fleet?sslmode=require"},
		"url password":     {"postgres://rc:hunter2@db.example/fleet", true, "postgres://rc:xxxxx@db.example/fleet"},
		"url query":        {"postgres://rc@db.example/fleet?password=hunter2", true, "postgres://rc@db.example/fleet?password=xxxxx"},
		"keywords":         {"host=db.example user=rc dbname=fleet", false, "host=db.example user=rc dbname=fleet"},
		"keyword password": {"host=db.example password=hunter2 dbname=fleet", true, "host=db.example password=xxxxx dbname=fleet"},
		"quoted password":  {"host=db.example password='hunt er2' dbname=fleet", true, "host=db.example password=xxxxx dbname=fleet"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := DSNHasPassword(c.dsn); got != c.password {
				t.Errorf("DSNHasPassword = %v, want %v", got, c.password)
			}
			if got := RedactDSN(c.dsn); got != c.redacted {
				t.Errorf("RedactDSN = %q, want %q", got, c.redacted)
			}
			err := Target{DSN: c.dsn}.Check()
			if c.password && (err == nil || strings.Contains(err.Error(), "hunt")) {
				t.Errorf("Check = %v, want a refusal that does not repeat the password", err)
			}
			if !c.password && err != nil {
				t.Errorf("Check = %v", err)
			}
		})
	}
	if err := (Target{DSN: "host=x", Schema: "Robert'); DROP"}).Check(); err == nil {
		t.Error("a schema that is not a plain identifier was accepted")
	}
	// A failed connection names the target without the password.
	tg := Target{DSN: "host=/nonexistent/socket user=rc dbname=fleet connect_timeout=1", Password: "s3cr3t-pw"}
	_, err := ExportTo(context.Background(), nil, tg)
	if err == nil || !errors.Is(err, ErrConnect) || strings.Contains(err.Error(), "s3cr3t-pw") {
		t.Errorf("connect error = %v, want ErrConnect without the password", err)
	}
}

// A fleet of 1,000 realistic machines, the network model and the cluster
// nodes are exported, and every table matches the store.
func TestExportFleet(t *testing.T) {
	srv := server(t)
	f := newFleet(t)
	f.commission(t, 0, 1000)
	f.network(t)
	f.dhcpImagesJobs(t)
	// Some history: machines added by hand, sent back to new, forgotten.
	f.apply(t,
		&raftfsm.MachineCreate{ID: "m-00000000aaaa", Name: "spare-1", MACs: []string{"02:00:00:00:00:01"}, Now: f.tick()},
		&raftfsm.Recommission{ID: pgtest.ID(5), Reason: "replaced a DIMM", Now: f.tick()},
		&raftfsm.Recommission{ID: pgtest.ID(6), Now: f.tick()},
		&raftfsm.MachineDelete{ID: pgtest.ID(7)},
	)
	schema := schemaName(t)
	st, err := Export(t.Context(), f.db, srv.DSN(), schema)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Created || st.Machines != 1000 || st.Rows["machines"] != 1000 {
		t.Errorf("stats: created %v, %d machines, %d machine rows; want created, 1000, 1000", st.Created, st.Machines, st.Rows["machines"])
	}
	wantRows := map[string]int{"lease_blocks": 2, "leases": 4, "images": 2, "image_files": 5, "bmc_jobs": 3}
	for tb, n := range wantRows {
		if st.Rows[tb] != n {
			t.Errorf("%s: %d rows exported, want %d", tb, st.Rows[tb], n)
		}
	}
	applied, _, _ := f.db.Applied()
	if st.Index != applied {
		t.Errorf("exported index %d, store applied %d", st.Index, applied)
	}
	t.Logf("exported %d machines, %d rows in %d tables in %s", st.Machines, sum(st.Rows), len(st.Rows), st.Duration)
	conn := srv.Conn(t)
	compareAll(t, conn, schema, f.db)

	// Every table and column is documented in PostgreSQL itself.
	var undocumented []string
	rows, err := conn.Query(t.Context(), `
		SELECT c.relname || coalesce('.' || a.attname, '')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE n.nspname = $1 AND c.relkind = 'r'
		  AND coalesce(col_description(c.oid, a.attnum), obj_description(c.oid, 'pg_class')) IS NULL`, schema)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		undocumented = append(undocumented, s)
	}
	if len(undocumented) > 0 {
		t.Errorf("undocumented in PostgreSQL: %v", undocumented)
	}

	// Re-running replaces: a machine deleted since disappears, nothing doubles.
	f.apply(t, &raftfsm.MachineDelete{ID: pgtest.ID(8)})
	st2, err := Export(t.Context(), f.db, srv.DSN(), schema)
	if err != nil {
		t.Fatal(err)
	}
	if st2.Created || st2.Rows["machines"] != 999 {
		t.Errorf("second export: created %v, %d machines; want false, 999", st2.Created, st2.Rows["machines"])
	}
	compareAll(t, conn, schema, f.db)
	var versions int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM "+ident(schema, "schema_version")+" WHERE version = $1", SchemaVersion).Scan(&versions); err != nil || versions != 1 {
		t.Errorf("schema_version rows: %d (%v), want 1", versions, err)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// The reports an operator writes against the export give the answers the
// generated fleet holds.
func TestOperatorReports(t *testing.T) {
	srv := server(t)
	f := newFleet(t)
	const n = 300
	f.commission(t, 0, n)
	f.apply(t,
		&raftfsm.Recommission{ID: pgtest.ID(1), Now: f.tick()},
		&raftfsm.Recommission{ID: pgtest.ID(2), Now: f.tick()},
		&raftfsm.MachineCreate{ID: "m-00000000bbbb", Now: f.tick()},
	)
	schema := schemaName(t)
	if _, err := Export(t.Context(), f.db, srv.DSN(), schema); err != nil {
		t.Fatal(err)
	}
	conn := srv.Conn(t)
	query := func(q string) map[string]int64 {
		t.Helper()
		rows, err := conn.Query(t.Context(), strings.ReplaceAll(q, "S.", pgxIdent(schema)+"."))
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		out := map[string]int64{}
		for rows.Next() {
			var k string
			var v int64
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			out[k] = v
		}
		return out
	}

	// What the generator made, counted in Go.
	perState := map[string]int64{"ready": n - 2, "new": 3}
	gpus := map[string]int64{}
	disks := map[string]int64{}
	bucket := func(b int64) string {
		switch {
		case b < 1e12:
			return "< 1 TB"
		case b < 4e12:
			return "1-4 TB"
		}
		return ">= 4 TB"
	}
	var memTB int64
	for i := range n {
		r := pgtest.Machine(1, i)
		for _, g := range r.GPUs {
			gpus[g.Model]++
		}
		for _, d := range r.Disks {
			disks[bucket(d.SizeBytes)]++
		}
		memTB += r.Memory.TotalBytes
	}
	if len(gpus) < 2 {
		t.Fatalf("the generated fleet has %d GPU models; the report needs several", len(gpus))
	}

	got := query(`SELECT state, count(*) FROM S.machines GROUP BY state`)
	if d := cmp.Diff(perState, got); d != "" {
		t.Errorf("machines per state (-want +got):\n%s", d)
	}
	got = query(`SELECT model, count(*) FROM S.gpus GROUP BY model`)
	if d := cmp.Diff(gpus, got); d != "" {
		t.Errorf("GPUs per model (-want +got):\n%s", d)
	}
	got = query(`SELECT CASE WHEN size_bytes < 1e12 THEN '< 1 TB' WHEN size_bytes < 4e12 THEN '1-4 TB' ELSE '>= 4 TB' END, count(*)
		FROM S.disks GROUP BY 1`)
	if d := cmp.Diff(disks, got); d != "" {
		t.Errorf("disks by size (-want +got):\n%s", d)
	}
	// The summary on machines and the inventory tables agree.
	got = query(`SELECT 'memory', sum(memory_total_bytes)::bigint FROM S.inventories`)
	if got["memory"] != memTB {
		t.Errorf("total memory %d, want %d", got["memory"], memTB)
	}
	// Machines with 8 GPUs on an InfiniBand fabric: a join across three tables.
	want8 := int64(0)
	for i := range n {
		r := pgtest.Machine(1, i)
		if len(r.GPUs) == 8 && len(r.IB) > 0 && i != 1 && i != 2 {
			want8++
		}
	}
	got = query(`SELECT 'n', count(*) FROM S.machines m WHERE m.state = 'ready'
		AND (SELECT count(*) FROM S.gpus g WHERE g.machine_id = m.id) = 8
		AND EXISTS (SELECT 1 FROM S.ib_ports p WHERE p.machine_id = m.id AND p.state = 'ACTIVE')`)
	if got["n"] != want8 || want8 == 0 {
		t.Errorf("ready 8-GPU machines with an active IB port: %d, want %d (> 0)", got["n"], want8)
	}
	// jsonb: the raw report answers what no column holds.
	got = query(`SELECT 'n', count(*) FROM S.machines WHERE inventory->'bios'->>'vendor' = 'Dell Inc.'`)
	wantDell := int64(0)
	for i := range n {
		if pgtest.Machine(1, i).BIOS.Vendor == "Dell Inc." {
			wantDell++
		}
	}
	if got["n"] != wantDell {
		t.Errorf("machines with Dell BIOS via jsonb: %d, want %d", got["n"], wantDell)
	}
}

func pgxIdent(s string) string { return `"` + s + `"` }

// An inventory string with NUL bytes (firmware padding) and a report that
// still carries a BMC password are exported without either.
func TestExportCleansInventory(t *testing.T) {
	srv := server(t)
	f := newFleet(t)
	rep := pgtest.Machine(1, 0)
	rep.System.Product = "R650\x00\x00"
	rep.BMC.Password = "plain-bmc-password"
	c, err := pgtest.Commission(rep, 0, f.tick())
	if err != nil {
		t.Fatal(err)
	}
	c.Inventory = []byte(strings.Replace(string(c.Inventory), `"bmc":{`, `"bmc":{"password":"plain-bmc-password",`, 1))
	f.apply(t, c)
	schema := schemaName(t)
	if _, err := Export(t.Context(), f.db, srv.DSN(), schema); err != nil {
		t.Fatal(err)
	}
	conn := srv.Conn(t)
	var product string
	var leaks int
	if err := conn.QueryRow(t.Context(), "SELECT system_product FROM "+ident(schema, "inventories")).Scan(&product); err != nil {
		t.Fatal(err)
	}
	if product != "R650" {
		t.Errorf("system_product = %q, want R650", product)
	}
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM "+ident(schema, "machines")+" m WHERE m::text LIKE '%plain-bmc-password%'").Scan(&leaks); err != nil || leaks != 0 {
		t.Errorf("machines rows carrying the BMC password: %d (%v)", leaks, err)
	}
}

// A schema left by another layout is rebuilt; one from a newer version is
// refused untouched.
func TestSchemaMigration(t *testing.T) {
	srv := server(t)
	f := newFleet(t)
	f.commission(t, 0, 20)
	schema := schemaName(t)
	conn := srv.Conn(t)
	if _, err := Export(t.Context(), f.db, srv.DSN(), schema); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "UPDATE "+ident(schema, "schema_version")+" SET layout = 'older'"); err != nil {
		t.Fatal(err)
	}
	st, err := Export(t.Context(), f.db, srv.DSN(), schema)
	if err != nil || !st.Created || st.Machines != 20 {
		t.Fatalf("export over an older layout: %+v, %v; want recreated with 20 machines", st, err)
	}
	// An export made by the previous version (before leases, images and
	// jobs) is rebuilt with the new tables.
	if _, err := conn.Exec(t.Context(), "UPDATE "+ident(schema, "schema_version")+fmt.Sprintf(" SET version = %d", SchemaVersion-1)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "DROP TABLE "+ident(schema, "bmc_jobs")); err != nil {
		t.Fatal(err)
	}
	st, err = Export(t.Context(), f.db, srv.DSN(), schema)
	if err != nil || !st.Created {
		t.Fatalf("export over the previous version: %+v, %v; want recreated", st, err)
	}
	var jobs int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM "+ident(schema, "bmc_jobs")).Scan(&jobs); err != nil || jobs != 0 {
		t.Errorf("bmc_jobs after the migration: %d rows (%v), want an empty table", jobs, err)
	}
	if _, err := conn.Exec(t.Context(), "UPDATE "+ident(schema, "schema_version")+fmt.Sprintf(" SET version = %d", SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	_, err = Export(t.Context(), f.db, srv.DSN(), schema)
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("export over a newer layout: %v, want a refusal", err)
	}
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM "+ident(schema, "machines")).Scan(&n); err != nil || n != 20 {
		t.Errorf("after the refusal: %d machines (%v), want the 20 left alone", n, err)
	}
}
