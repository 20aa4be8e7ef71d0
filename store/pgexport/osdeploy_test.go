package pgexport

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/pgexport/pgtest"
)

// operatorSecret is in an operator's own user-data part, which may carry
// secrets: it must reach no table.
const operatorSecret = "OPERATOR-USERDATA-SECRET"

func osVersionOf(v string, at time.Time) raftfsm.OSVersion {
	return raftfsm.OSVersion{
		Version: v, File: raftfsm.ImageFile{Name: raftfsm.OSFileName, Size: 600 << 20, SHA256: fmt.Sprintf("%064x", "zst"+v)},
		RawSize: 3 << 30, RawSHA256: fmt.Sprintf("%064x", "raw"+v), SectorSize: 512, Format: "qcow2",
		Upstream: "sha512:" + strings.Repeat("ab", 64), Source: "https://cloud.debian.org/x.qcow2", Imported: at,
	}
}

func deployJobFor(id, machine, host, version string, disk raftfsm.JobDisk) raftfsm.DeployJob {
	v := osVersionOf(version, time.Time{})
	return raftfsm.DeployJob{
		ID: id, Machine: machine, Kind: store.JobKindDeploy, OS: "debian-13", OSVersion: version,
		Image:    raftfsm.JobImage{SHA256: v.File.SHA256, Size: v.File.Size, RawSHA256: v.RawSHA256, RawSize: v.RawSize, SectorSize: 512, Family: "debian"},
		Disk:     disk,
		Hostname: host, FQDN: host + ".lab.example",
		UserData: raftfsm.JobUserData{SSHKeys: []string{"ssh-ed25519 AAAA op"}, Packages: []string{"htop"}, Upgrade: true,
			Operator: "#cloud-config\nchpasswd: {list: 'root:" + operatorSecret + "'}\n"},
	}
}

const depJob1, depJob2 = "j-0000019ad5a10001", "j-0000019ad5a10002"

// osDeploy puts two OS names in the catalog (one with two versions, held
// by two nodes) and deploys two machines: one done and phoned home, one
// still writing.
func (f *fleet) osDeploy(t testing.TB) {
	t.Helper()
	now := f.tick()
	f.apply(t,
		&raftfsm.OSVersionAdd{Name: "debian-13", Family: store.FamilyDebian, New: osVersionOf("20261130-1", now), Node: "node1", Now: now},
		&raftfsm.OSVersionAdd{Name: "debian-13", Family: store.FamilyDebian, New: osVersionOf("20261201-1", now), Node: "node1", Now: now},
		&raftfsm.OSHave{Name: "debian-13", OSVersion: "20261201-1", Node: "node2", SHA256: osVersionOf("20261201-1", now).File.SHA256, Now: now},
		&raftfsm.OSVersionAdd{Name: "rocky-9", Family: store.FamilyRHEL, Track: store.TrackPinned, New: osVersionOf("9.5-1", now), Node: "node1", Now: now},
	)
	now = f.tick()
	f.apply(t,
		&raftfsm.DeployStart{Job: deployJobFor(depJob1, pgtest.ID(4), "web1", "20261201-1", raftfsm.JobDisk{Name: "sda", Serial: "S455NY0M100004", Size: 480 << 30, Rule: "the smallest non-removable, writable disk that fits"}), Now: now},
		&raftfsm.DeployStart{Job: deployJobFor(depJob2, pgtest.ID(5), "web2", "20261130-1", raftfsm.JobDisk{Name: "nvme0n1", WWN: "eui.0025388b91b2c5d1", Size: 960 << 30, Rule: "operator: nvme0n1"}), Now: now},
	)
	now = f.tick()
	for _, r := range []struct{ job, step, state string }{
		{depJob1, "wipe", "done"}, {depJob1, "write", "done"}, {depJob1, "verify", "done"}, {depJob1, "done", "done"},
		{depJob2, "wipe", "done"}, {depJob2, "write", "running"},
	} {
		f.apply(t, &raftfsm.JobReport{Job: r.job, Step: r.step, State: r.state, Bytes: 1 << 30, Total: 3 << 30, Now: now})
	}
	f.apply(t, &raftfsm.PhoneHome{Job: depJob1, Hostname: "web1.lab.example", Now: f.tick()})
}

// compareOSDeploy compares os_images (with os_versions folded back in) and
// deploy_jobs with the store, and the machines' deploy_* columns with
// their latest deploy job.
func compareOSDeploy(t *testing.T, conn *pgx.Conn, schema string, s *Schema, db *store.DB) {
	t.Helper()
	var images []store.OSImage
	var jobs []store.DeployJob
	latest := map[string]*store.DeployJob{}
	err := db.View(func(tx *store.Tx) error {
		var err error
		if images, err = tx.OSImages(); err != nil {
			return err
		}
		ms, err := tx.Machines(store.MachineFilter{})
		if err != nil {
			return err
		}
		for _, m := range ms {
			if latest[m.ID], err = machineDeployment(tx, m.ID); err != nil {
				return err
			}
		}
		return tx.ForEachDeployJob(func(j store.DeployJob) error {
			j.UserData.Operator = "" // never exported
			jobs = append(jobs, j)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	want, got := map[string]*store.OSImage{}, map[string]*store.OSImage{}
	for i := range images {
		want[images[i].Name] = &images[i]
	}
	to := s.Table("os_images")
	for _, r := range readTable(t, conn, schema, to) {
		o := &store.OSImage{}
		decode(t, to, r, o)
		got[o.Name] = o
	}
	tv := s.Table("os_versions")
	for _, r := range readTable(t, conn, schema, tv) {
		o := got[r[0].(string)]
		if o == nil {
			t.Fatalf("os_versions row for %s, which has no os_images row", r[0])
		}
		var v store.OSVersion
		decode(t, tv, r, &v)
		o.Versions = append(o.Versions, v) // primary key order: version, as the record keeps them
	}
	if d := diffFast(want, got); d != "" {
		t.Errorf("os_images differ from the store (-store +postgres):\n%s", d)
	}
	compareList(t, conn, schema, s.Table("deploy_jobs"), jobs)

	tm := s.Table("machines")
	cols := tm.ColumnNames()
	for _, r := range readTable(t, conn, schema, tm) {
		id := r[0].(string)
		wantRow := deploymentRow(latest[id])
		for i, c := range deploymentColumns {
			v := r[indexOf(cols, c.Name)]
			w := wantRow[i]
			if tw, ok := w.(time.Time); ok {
				if tv, ok := v.(time.Time); !ok || !tv.Equal(tw.Truncate(time.Microsecond)) {
					t.Errorf("machine %s: %s = %v, want %v", id, c.Name, v, w)
				}
				continue
			}
			if fmt.Sprint(v) != fmt.Sprint(w) {
				t.Errorf("machine %s: %s = %v, want %v", id, c.Name, v, w)
			}
		}
	}
	for _, tb := range s.Tables {
		var n int
		q := "SELECT count(*) FROM " + ident(schema, tb.Name) + " x WHERE x::text LIKE '%" + operatorSecret + "%'"
		if err := conn.QueryRow(t.Context(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			t.Errorf("table %s: %d rows carry the operator's user-data", tb.Name, n)
		}
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// The OS catalog and the deploy jobs reach PostgreSQL in a full export
// and follow the store through the mirror: a job's progress, a release, a
// version removed, a name deleted; the machines' deploy_* columns follow
// their latest deploy job.
func TestMirrorFollowsOSAndDeployJobs(t *testing.T) {
	srv := server(t)
	f := newFleet(t)
	f.commission(t, 0, 10)
	f.osDeploy(t)
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
		{"names", "SELECT count(*) FROM S.os_images", 2},
		{"versions", "SELECT count(*) FROM S.os_versions", 3},
		{"current", "SELECT count(*) FROM S.os_images i JOIN S.os_versions v ON v.os = i.name AND v.version = i.current WHERE i.name = 'debian-13' AND v.version = '20261201-1'", 1},
		{"held by two", "SELECT count(*) FROM S.os_versions WHERE cardinality(nodes) = 2", 1},
		{"pinned", "SELECT count(*) FROM S.os_images WHERE track = 'pinned' AND family = 'rhel'", 1},
		{"jobs", "SELECT count(*) FROM S.deploy_jobs", 2},
		{"deployed", "SELECT count(*) FROM S.machines WHERE state = 'deployed' AND deploy_state = 'done' AND deploy_disk = 'S455NY0M100004' AND deploy_phoned_home IS NOT NULL", 1},
		{"by WWN", "SELECT count(*) FROM S.machines WHERE deploy_disk = 'eui.0025388b91b2c5d1' AND deploy_state = 'running'", 1},
		{"never deployed", "SELECT count(*) FROM S.machines WHERE deploy_job IS NULL", 8},
		{"steps", "SELECT count(*) FROM S.deploy_jobs WHERE jsonb_array_length(steps) = 4 AND steps->3->>'step' = 'done'", 1},
		{"user-data", "SELECT count(*) FROM S.deploy_jobs WHERE 'htop' = ANY(user_data_packages) AND user_data_upgrade", 2},
	} {
		if got := count(c.q); got != c.want {
			t.Errorf("full export: %s: %d, want %d", c.what, got, c.want)
		}
	}

	// The mirror follows: progress, a failure, a release, a version
	// removed and a name gone.
	now := f.tick()
	f.apply(t,
		&raftfsm.JobReport{Job: depJob2, Step: "write", State: "failed", Message: "disk vanished", Now: now},
		&raftfsm.ReleaseStart{ID: "j-0000019ad5a10003", Machine: pgtest.ID(4), Wipe: "full", Now: now},
		&raftfsm.OSImageDelete{Name: "rocky-9"},
	)
	waitExported(t, m, f.db)
	compareAll(t, conn, schema, f.db)
	for _, c := range []struct {
		what, q string
		want    int
	}{
		{"names", "SELECT count(*) FROM S.os_images", 1},
		{"versions went with their name", "SELECT count(*) FROM S.os_versions WHERE os = 'rocky-9'", 0},
		{"jobs", "SELECT count(*) FROM S.deploy_jobs", 3},
		{"failed", "SELECT count(*) FROM S.deploy_jobs WHERE state = 'failed' AND error <> ''", 1},
		{"releasing", "SELECT count(*) FROM S.machines WHERE state = 'releasing' AND deploy_job = '" + depJob1 + "'", 1},
		{"release job", "SELECT count(*) FROM S.deploy_jobs WHERE kind = 'release' AND wipe = 'full' AND state = 'queued'", 1},
		{"failed machine", "SELECT count(*) FROM S.machines WHERE state = 'deploy-failed' AND deploy_state = 'failed'", 1},
	} {
		if got := count(c.q); got != c.want {
			t.Errorf("mirror: %s: %d, want %d", c.what, got, c.want)
		}
	}
}
