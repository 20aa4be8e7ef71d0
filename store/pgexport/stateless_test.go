package pgexport

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/pgexport/pgtest"
)

// overlaySecret is in an overlay file's content, which is never exported:
// it must reach no table. The sealed host keys and munge key carry
// SEALED-SECRET, which compareAll looks for in every table.
const overlaySecret = "OVERLAY-CONTENT-SECRET"

func hostKeyPub(i int) string {
	return "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + strings.Repeat(string(rune('A'+i)), 43)
}

// stateless gives the fleet (after network and dhcpImagesJobs: the subnet
// and the image) the munge key, two overlays, a profile naming them and
// three machines assigned to it, one of them booted and seen.
func (f *fleet) stateless(t testing.TB) {
	t.Helper()
	now := f.tick()
	f.apply(t,
		&raftfsm.MungeKeySet{Sealed: []byte("SEALED-SECRET-munge"), Now: now},
		&raftfsm.OverlayPut{Name: "base", Now: now, Files: []raftfsm.OverlayFile{
			{Path: "system/etc/hostname.tmpl", Mode: 0o644, Content: []byte("{{ .Node.Name }}\n")},
			{Path: "system/etc/motd", Mode: 0o644, Content: []byte("welcome\n")},
			{Path: "system/root/.ssh/id_ed25519", Mode: 0o600, Content: []byte(overlaySecret)},
		}},
		&raftfsm.OverlayPut{Name: "slurm", Now: now, Files: []raftfsm.OverlayFile{
			{Path: "runtime/etc/slurm/slurm.conf.tmpl", Mode: 0o644, Content: []byte("SlurmctldHost={{ .ClusterVars.slurm_controller }}\n")},
		}},
		&raftfsm.ProfilePut{Now: now, Profile: raftfsm.ProfileBody(store.Profile{Name: "compute", Image: "ubuntu-24.04", Overlays: []string{"base", "slurm"},
			Args: "console=ttyS0", Subnets: []string{poolSubnet.String()}, Vars: map[string]string{"partition": "batch"}}.WithDefaults())},
	)
	now = f.tick()
	for i := 3; i < 6; i++ {
		f.apply(t, &raftfsm.Assign{Machine: pgtest.ID(i), Profile: "compute",
			SSHHostKeySealed: []byte("SEALED-SECRET-hostkey-" + pgtest.ID(i)), SSHHostKeyPub: hostKeyPub(i), Now: now})
	}
	f.seen(t, pgtest.ID(3), true)
}

// seen records a heartbeat of a machine's node (its first fetch when boot).
func (f *fleet) seen(t testing.TB, machine string, boot bool) {
	t.Helper()
	var n store.StatelessNode
	if err := f.db.View(func(tx *store.Tx) (err error) { n, err = tx.StatelessNode(machine); return err }); err != nil {
		t.Fatal(err)
	}
	f.apply(t, &raftfsm.StatelessSeen{Nodes: []raftfsm.NodeSeen{{Machine: machine, Generation: n.Generation, Time: f.tick(), Booted: boot}}})
}

// compareStateless compares profiles, overlays (with overlay_files folded
// back in, their size and hash checked against the content the store
// keeps) and stateless_nodes with the store.
func compareStateless(t *testing.T, conn *pgx.Conn, schema string, s *Schema, db *store.DB) {
	t.Helper()
	var profiles []store.Profile
	var overlays []store.Overlay
	var nodes []store.StatelessNode
	err := db.View(func(tx *store.Tx) (err error) {
		if profiles, err = tx.Profiles(); err != nil {
			return err
		}
		if overlays, err = tx.Overlays(); err != nil {
			return err
		}
		nodes, err = tx.StatelessNodes()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	compareList(t, conn, schema, s.Table("profiles"), profiles)
	for i := range nodes {
		nodes[i].SSHHostKeySealed = nil // never exported
	}
	compareList(t, conn, schema, s.Table("stateless_nodes"), nodes)

	type file struct {
		Mode   uint32
		Size   int64
		SHA256 string
	}
	type tree struct {
		SHA256  string
		Size    int64
		Count   int32
		Updated time.Time
		Files   map[string]file
	}
	want, got := map[string]tree{}, map[string]tree{}
	for _, o := range overlays {
		tr := tree{SHA256: o.SHA256, Size: o.Size, Count: int32(len(o.Files)), Updated: o.Updated, Files: map[string]file{}}
		for _, f := range o.Files {
			sum := sha256.Sum256(f.Content)
			tr.Files[f.Path] = file{Mode: f.Mode, Size: int64(len(f.Content)), SHA256: hex.EncodeToString(sum[:])}
		}
		want[o.Name] = tr
	}
	to := s.Table("overlays")
	count := indexOf(to.ColumnNames(), "file_count")
	for _, r := range readTable(t, conn, schema, to) {
		var o store.Overlay
		decode(t, to, r, &o)
		got[o.Name] = tree{SHA256: o.SHA256, Size: o.Size, Count: r[count].(int32), Updated: o.Updated, Files: map[string]file{}}
	}
	tf := s.Table("overlay_files")
	cols := tf.ColumnNames()
	for _, r := range readTable(t, conn, schema, tf) {
		tr, ok := got[r[0].(string)]
		if !ok {
			t.Fatalf("overlay_files row for %s, which has no overlays row", r[0])
		}
		var f store.OverlayFile
		decode(t, tf, r, &f)
		tr.Files[f.Path] = file{Mode: f.Mode, Size: r[indexOf(cols, "size")].(int64), SHA256: r[indexOf(cols, "sha256")].(string)}
	}
	if d := diffFast(want, got); d != "" {
		t.Errorf("overlays differ from the store (-store +postgres):\n%s", d)
	}
	for _, tb := range s.Tables {
		var n int
		q := "SELECT count(*) FROM " + ident(schema, tb.Name) + " x WHERE x::text LIKE '%" + overlaySecret + "%'"
		if err := conn.QueryRow(t.Context(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			t.Errorf("table %s: %d rows carry an overlay file's content", tb.Name, n)
		}
	}
}

// Profiles, overlays and stateless nodes reach PostgreSQL in a full
// export and follow the store through the mirror: a heartbeat, an
// unassign, an overlay replaced, one deleted with the profile naming it;
// no sealed key and no file content reaches a table.
func TestMirrorFollowsStatelessNodes(t *testing.T) {
	srv := server(t)
	f := newFleet(t)
	f.commission(t, 0, 10)
	f.network(t)
	f.dhcpImagesJobs(t)
	f.stateless(t)
	schema := schemaName(t)
	m, _ := runMirror(t, f.db, srv.DSN(), schema, nil)
	waitExported(t, m, f.db)
	conn := srv.Conn(t)
	compareAll(t, conn, schema, f.db)
	count := func(q string) int {
		t.Helper()
		var n int
		if err := conn.QueryRow(t.Context(), strings.ReplaceAll(q, "S.", pgxIdent(schema)+".")).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	for _, c := range []struct {
		what, q string
		want    int
	}{
		{"profile", "SELECT count(*) FROM S.profiles WHERE name = 'compute' AND image = 'ubuntu-24.04' AND overlays = ARRAY['base','slurm'] AND name_format = 'node%03d' AND vars->>'partition' = 'batch'", 1},
		{"overlays", "SELECT count(*) FROM S.overlays", 2},
		{"files", "SELECT count(*) FROM S.overlay_files", 4},
		{"file count", "SELECT count(*) FROM S.overlays WHERE name = 'base' AND file_count = 3 AND size = 25 + length('" + overlaySecret + "')", 1},
		{"key mode", "SELECT count(*) FROM S.overlay_files WHERE overlay = 'base' AND path = 'system/root/.ssh/id_ed25519' AND mode = 384", 1},
		{"nodes", "SELECT count(*) FROM S.stateless_nodes WHERE profile = 'compute'", 3},
		{"names", "SELECT count(*) FROM S.stateless_nodes WHERE name IN ('node001', 'node002', 'node003')", 3},
		{"addresses", "SELECT count(*) FROM S.stateless_nodes n JOIN S.addresses a ON a.machine_id = n.machine_id AND a.how = 'stateless' WHERE cardinality(n.addresses) = 1", 3},
		{"booted", "SELECT count(*) FROM S.stateless_nodes n JOIN S.machines m ON m.id = n.machine_id WHERE m.state = 'booted' AND n.booted IS NOT NULL AND n.last_seen IS NOT NULL", 1},
		{"assigned", "SELECT count(*) FROM S.machines WHERE state = 'stateless'", 2},
		{"public keys", "SELECT count(*) FROM S.stateless_nodes WHERE ssh_host_key_pub LIKE 'ssh-ed25519 %'", 3},
	} {
		if got := count(c.q); got != c.want {
			t.Errorf("full export: %s: %d, want %d", c.what, got, c.want)
		}
	}

	// The mirror follows.
	f.seen(t, pgtest.ID(4), true)
	now := f.tick()
	f.apply(t,
		&raftfsm.Unassign{Machine: pgtest.ID(5), Now: now},
		&raftfsm.OverlayPut{Name: "base", Now: now, Files: []raftfsm.OverlayFile{
			{Path: "system/etc/hostname.tmpl", Mode: 0o644, Content: []byte("{{ .Node.Name }}\n")},
		}},
		&raftfsm.OverlayPut{Name: "scratch", Now: now, Files: []raftfsm.OverlayFile{{Path: "system/etc/x", Content: []byte("x")}}},
		&raftfsm.ProfilePut{Now: now, Profile: raftfsm.ProfileBody(store.Profile{Name: "spare", Image: "rescue", Overlays: []string{"scratch"}}.WithDefaults())},
	)
	waitExported(t, m, f.db)
	compareAll(t, conn, schema, f.db)
	f.apply(t, &raftfsm.ProfileDelete{Name: "spare"}, &raftfsm.OverlayDelete{Name: "scratch"},
		&raftfsm.ClusterVarsSet{Vars: map[string]string{"slurm_controller": "head2", "cluster_name": "hpc"}, Now: now})
	waitExported(t, m, f.db)
	if got := count("SELECT count(*) FROM S.cluster_vars WHERE (name = 'slurm_controller' AND value = 'head2') OR (name = 'cluster_name' AND value = 'hpc')"); got != 2 {
		t.Errorf("cluster vars after a set: %d rows of the two", got)
	}
	f.apply(t, &raftfsm.ClusterVarsSet{Vars: map[string]string{"cluster_name": "hpc2"}, Now: now})
	waitExported(t, m, f.db)
	if got := count("SELECT count(*) FROM S.cluster_vars"); got != 1 || count("SELECT count(*) FROM S.cluster_vars WHERE value = 'hpc2'") != 1 {
		t.Errorf("cluster vars after a replace: %d rows", got)
	}
	compareAll(t, conn, schema, f.db)
	for _, c := range []struct {
		what, q string
		want    int
	}{
		{"nodes", "SELECT count(*) FROM S.stateless_nodes", 2},
		{"unassigned", "SELECT count(*) FROM S.stateless_nodes WHERE machine_id = '" + pgtest.ID(5) + "'", 0},
		{"ready again", "SELECT count(*) FROM S.machines WHERE id = '" + pgtest.ID(5) + "' AND state = 'ready'", 1},
		{"booted", "SELECT count(*) FROM S.machines WHERE state = 'booted'", 2},
		{"files replaced", "SELECT count(*) FROM S.overlay_files WHERE overlay = 'base'", 1},
		{"file count", "SELECT count(*) FROM S.overlays WHERE name = 'base' AND file_count = 1", 1},
		{"overlay gone with its files", "SELECT count(*) FROM S.overlay_files WHERE overlay = 'scratch'", 0},
		{"overlays", "SELECT count(*) FROM S.overlays", 2},
		{"profiles", "SELECT count(*) FROM S.profiles", 1},
	} {
		if got := count(c.q); got != c.want {
			t.Errorf("mirror: %s: %d, want %d", c.what, got, c.want)
		}
	}
}
