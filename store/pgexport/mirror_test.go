package pgexport

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/pgexport/pgtest"
)

// runMirror starts a mirror; stop cancels it and checks that Run returned
// nil.
func runMirror(t *testing.T, db *store.DB, dsn, schema string, exported func(uint64)) (m *Mirror, stop func()) {
	t.Helper()
	m, err := NewMirror(db, MirrorConfig{
		Target: Target{DSN: dsn, Schema: schema, Node: "node1"}, RetryMin: 50 * time.Millisecond, RetryMax: 300 * time.Millisecond,
		Idle: 200 * time.Millisecond, Exported: exported,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v after cancel, want nil", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Run did not return within 10s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return m, stop
}

// The mirror loads everything once, then follows creates, updates and
// deletes of every kind of record.
func TestMirrorFollows(t *testing.T) {
	srv := server(t)
	f := newFleet(t)
	f.commission(t, 0, 50)
	f.network(t)
	schema := schemaName(t)
	m, _ := runMirror(t, f.db, srv.DSN(), schema, nil)
	waitExported(t, m, f.db)
	conn := srv.Conn(t)
	compareAll(t, conn, schema, f.db)

	f.commission(t, 50, 120)
	for i := range 10 { // commissioned again: new inventories replace the old rows
		f.apply(t, &raftfsm.Recommission{ID: pgtest.ID(i), Now: f.tick()})
	}
	f.commission(t, 0, 10)
	f.apply(t,
		&raftfsm.Recommission{ID: pgtest.ID(11), Reason: "burn-in failed", Now: f.tick()},
		&raftfsm.MachineDelete{ID: pgtest.ID(12)},
		&raftfsm.MachineDelete{ID: pgtest.ID(13)},
		&raftfsm.MachineEvent{Event: raftfsm.Event{Machine: pgtest.ID(14), Time: f.tick(), Kind: "note", Message: "rack B7 U12"}},
		&raftfsm.MachineCreate{ID: "m-0000000000aa", Name: "by-hand", MACs: []string{"02:00:00:00:00:aa"}, Now: f.tick()},
		&raftfsm.AddressRelease{IP: netip.MustParseAddr("10.20.0.11")},
		&raftfsm.NodeRemove{Name: "node2"},
		&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "dc2", Kind: store.FabricEthernet, Created: f.tick()}},
		&raftfsm.RangeDelete{Subnet: netip.MustParsePrefix("10.20.0.0/16"), First: netip.MustParseAddr("10.20.0.1")},
	)
	// A machine deleted and created again under the same ID in one batch:
	// its old events must not survive in PostgreSQL.
	if err := f.log.ApplyBatch(
		&raftfsm.MachineDelete{ID: pgtest.ID(15)},
		&raftfsm.MachineCreate{ID: pgtest.ID(15), Name: "reborn", Now: f.tick()},
	); err != nil {
		t.Fatal(err)
	}
	st := waitExported(t, m, f.db)
	compareAll(t, conn, schema, f.db)
	if st.FullExports != 1 || st.LagIndexes != 0 || !st.Running || !st.Connected || st.Changes == 0 || st.LastError != "" {
		t.Errorf("status %+v: want one full export, no lag, running, connected, changes applied, no error", st)
	}
	var mode string
	if err := conn.QueryRow(t.Context(), "SELECT mode FROM "+ident(schema, "export_state")).Scan(&mode); err != nil || mode != "mirror" {
		t.Errorf("export_state.mode = %q (%v), want mirror", mode, err)
	}
}

// PostgreSQL stopped and restarted while the store keeps changing: the
// mirror reports the outage and its lag, then catches up without a full
// reload and without losing a change.
func TestMirrorSurvivesOutage(t *testing.T) {
	srv := pgtest.Start(t)
	f := newFleet(t)
	f.commission(t, 0, 20)
	schema := "outage"
	m, _ := runMirror(t, f.db, srv.DSN(), schema, nil)
	waitExported(t, m, f.db)

	feed := func(from, to int) {
		for i := from; i < to; i++ {
			f.commission(t, i, i+1)
			if i%7 == 0 {
				f.apply(t, &raftfsm.Recommission{ID: pgtest.ID(i - 5), Now: f.tick()})
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	feed(20, 60)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	feed(60, 120)
	f.apply(t, &raftfsm.MachineDelete{ID: pgtest.ID(30)})
	deadline := time.Now().Add(10 * time.Second)
	var st Status
	for st = m.Status(); st.LastError == "" && time.Now().Before(deadline); st = m.Status() {
		time.Sleep(20 * time.Millisecond)
	}
	if st.LastError == "" || st.Connected || st.LagIndexes == 0 || st.LagSeconds <= 0 {
		t.Errorf("during the outage: %+v; want an error, not connected, a lag in indexes and seconds", st)
	}
	t.Logf("during the outage: lag %d indexes, %.2fs, error %q", st.LagIndexes, st.LagSeconds, st.LastError)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	feed(120, 150)
	st = waitExported(t, m, f.db)
	compareAll(t, srv.Conn(t), schema, f.db)
	if st.FullExports != 1 {
		t.Errorf("%d full exports, want 1: the mirror should resume from its index", st.FullExports)
	}
}

// A change of leader: the old leader's mirror stops, the new leader's
// (another copy of the store, fed the same log) resumes at the index the
// old one stored, without reloading; and two mirrors that overlap for a
// while (an old leader that has not noticed yet) do not corrupt anything.
func TestMirrorHandover(t *testing.T) {
	srv := server(t)
	a, b := newFleet(t), newFleet(t)
	both := func(fn func(f *fleet)) { fn(a); fn(b) }
	both(func(f *fleet) { f.commission(t, 0, 40); f.network(t) })
	schema := schemaName(t)
	ma, stopA := runMirror(t, a.db, srv.DSN(), schema, nil)
	stA := waitExported(t, ma, a.db)
	stopA()
	handedOver := stA.ExportedIndex

	both(func(f *fleet) {
		f.commission(t, 40, 60)
		f.apply(t, &raftfsm.MachineDelete{ID: pgtest.ID(3)})
	})
	var mu sync.Mutex
	var first uint64
	mb, _ := runMirror(t, b.db, srv.DSN(), schema, func(i uint64) {
		mu.Lock()
		defer mu.Unlock()
		if first == 0 {
			first = i
		}
	})
	stB := waitExported(t, mb, b.db)
	conn := srv.Conn(t)
	compareAll(t, conn, schema, b.db)
	mu.Lock()
	if first != handedOver || stB.FullExports != 0 {
		t.Errorf("new leader started at index %d with %d full exports; want %d and none", first, stB.FullExports, handedOver)
	}
	mu.Unlock()

	// Overlap: the old leader's mirror runs again beside the new one.
	ma2, _ := runMirror(t, a.db, srv.DSN(), schema, nil)
	for i := 60; i < 90; i++ {
		both(func(f *fleet) { f.commission(t, i, i+1) })
	}
	waitExported(t, ma2, a.db)
	waitExported(t, mb, b.db)
	compareAll(t, conn, schema, b.db)
}

// When the change log no longer reaches the exported index (the mirror
// was away for more than the log's window), the mirror reloads everything.
func TestMirrorFallsBackToFullExport(t *testing.T) {
	srv := server(t)
	f := newFleet(t)
	f.commission(t, 0, 30)
	schema := schemaName(t)
	m, stop := runMirror(t, f.db, srv.DSN(), schema, nil)
	waitExported(t, m, f.db)
	stop()

	f.log.Index += 1_000_010 // the log moved on past the change window
	f.commission(t, 30, 40)
	f.apply(t, &raftfsm.MachineDelete{ID: pgtest.ID(1)})
	var truncated error
	f.db.View(func(tx *store.Tx) error { _, _, truncated = tx.ChangeBatch(m.Status().ExportedIndex, 10); return nil })
	if truncated == nil {
		t.Fatal("the change log still reaches the exported index; the test does not test the fallback")
	}
	m2, _ := runMirror(t, f.db, srv.DSN(), schema, nil)
	st := waitExported(t, m2, f.db)
	if st.FullExports != 1 {
		t.Errorf("%d full exports, want 1", st.FullExports)
	}
	compareAll(t, srv.Conn(t), schema, f.db)
}

// The mirror follows lease blocks, leases, images (with their files) and
// BMC jobs through creates, updates and deletes.
func TestMirrorFollowsLeasesImagesJobs(t *testing.T) {
	srv := server(t)
	f := newFleet(t)
	f.commission(t, 0, 10)
	f.network(t)
	f.dhcpImagesJobs(t)
	schema := schemaName(t)
	m, _ := runMirror(t, f.db, srv.DSN(), schema, nil)
	waitExported(t, m, f.db)
	conn := srv.Conn(t)
	compareAll(t, conn, schema, f.db)

	now := f.tick()
	ip := netip.MustParseAddr
	f.apply(t,
		// Blocks: one claimed, one renewed, one given up in quarantine.
		&raftfsm.LeaseBlockClaim{Subnet: poolSubnet, First: ip("10.20.200.129"), Last: ip("10.20.200.192"), Node: "node1", Expires: now.Add(time.Hour), Now: now},
		&raftfsm.LeaseBlockRenew{Node: "node1", Blocks: []netip.Addr{pxeBlock1}, Expires: now.Add(2 * time.Hour), Now: now},
		&raftfsm.LeaseBlockRelease{Node: "node2", Blocks: []netip.Addr{pxeBlock2}, Quarantine: now.Add(5 * time.Minute), Now: now},
		// Leases: one granted, one renewed under a new name, one released.
		&raftfsm.LeaseBatch{Node: "node1", Now: now, Grants: []raftfsm.LeaseGrant{
			{IP: ip("10.20.200.7"), MAC: "02:aa:00:00:00:07", Granted: now, Expires: now.Add(50 * time.Minute)},
			{IP: ip("10.20.200.5"), MAC: "02:aa:00:00:00:05", Hostname: "renamed-05", Granted: now, Expires: now.Add(50 * time.Minute)},
			{IP: ip("10.20.200.130"), MAC: "02:aa:00:00:00:82", Granted: now, Expires: now.Add(40 * time.Minute)},
		}, Releases: []raftfsm.LeaseRelease{{IP: ip("10.20.200.6"), MAC: "02:aa:00:00:00:06"}}},
		// Leases that ended: node2's and the declined address.
		&raftfsm.LeaseExpire{First: ip("10.20.200.1"), Last: ip("10.20.200.254"), Now: now.Add(25 * time.Minute)},
		// Images: one more node holds one, another is gone with its files,
		// a third is new.
		&raftfsm.ImageHave{Name: "rescue", Node: "node1", Now: now, Files: []raftfsm.ImageFile{
			{Name: "initrd", Size: 30_000_000, SHA256: sha(4)}, {Name: "kernel", Size: 12_000_000, SHA256: sha(5)},
		}},
		&raftfsm.ImageDelete{Name: "ubuntu-24.04"},
		&raftfsm.ImagePut{Image: raftfsm.Image{Name: "alma-9", Nodes: []string{"node2"}, Created: now, Files: []raftfsm.ImageFile{
			{Name: "kernel", Size: 13_000_000, SHA256: sha(6)}, {Name: "initrd", Size: 70_000_000, SHA256: sha(7)},
		}}},
		// Jobs: one taken, one finished with an error.
		&raftfsm.JobStart{ID: "j-0003", Node: "node1", Until: now.Add(time.Minute), Now: now},
		&raftfsm.JobFinish{ID: "j-0002", Node: "node2", Error: "BMC did not answer", Now: now},
	)
	// An image deleted and imported again under its name in one batch:
	// only the new files remain.
	if err := f.log.ApplyBatch(
		&raftfsm.ImageDelete{Name: "rescue"},
		&raftfsm.ImagePut{Image: raftfsm.Image{Name: "rescue", Nodes: []string{"node1"}, Created: f.tick(), Files: []raftfsm.ImageFile{
			{Name: "kernel", Size: 12_500_000, SHA256: sha(8)}, {Name: "initrd", Size: 31_000_000, SHA256: sha(9)}, {Name: "squashfs", Size: 1_000, SHA256: sha(10)},
		}}},
	); err != nil {
		t.Fatal(err)
	}
	// A week later a new job prunes the machine's finished ones; the
	// machine of a pending job is deleted, and its job stays on record.
	f.apply(t,
		&raftfsm.JobEnqueue{Now: now.Add(8 * 24 * time.Hour), Job: raftfsm.Job{ID: "j-0004", Machine: pgtest.ID(0), Kind: store.JobRecommit}},
		&raftfsm.MachineDelete{ID: pgtest.ID(1)},
	)
	// No command deletes a block yet (a range's removal will): do what it
	// will do, in a store transaction of its own index.
	f.log.Index++
	err := f.db.Update(func(tx *store.Tx) error {
		tx.Index = f.log.Index
		if err := tx.DeleteLeaseBlock(pxeBlock2); err != nil {
			return err
		}
		return tx.SetApplied(f.log.Index, 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitExported(t, m, f.db)
	compareAll(t, conn, schema, f.db)

	// The cases above happened, rather than failing quietly.
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := conn.QueryRow(t.Context(), strings.ReplaceAll(q, "S.", pgxIdent(schema)+"."), args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	checks := []struct {
		what string
		q    string
		args []any
		want int
	}{
		{"lease blocks", "SELECT count(*) FROM S.lease_blocks", nil, 2},
		{"leases", "SELECT count(*) FROM S.leases", nil, 3},
		{"renamed lease", "SELECT count(*) FROM S.leases WHERE hostname = 'renamed-05'", nil, 1},
		{"ubuntu files", "SELECT count(*) FROM S.image_files WHERE image = 'ubuntu-24.04'", nil, 0},
		{"rescue files", "SELECT count(*) FROM S.image_files WHERE image = 'rescue'", nil, 3},
		{"jobs", "SELECT count(*) FROM S.bmc_jobs", nil, 2},
		{"job of a deleted machine", "SELECT count(*) FROM S.bmc_jobs j WHERE j.machine_id = $1 AND NOT EXISTS (SELECT 1 FROM S.machines m WHERE m.id = j.machine_id)", []any{pgtest.ID(1)}, 1},
	}
	for _, c := range checks {
		if got := count(c.q, c.args...); got != c.want {
			t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
	}
}

// Tags and racks follow the store: rules saved again, tags and racks
// deleted, machines retagged and moved.
func TestMirrorFollowsTagsAndRacks(t *testing.T) {
	srv := server(t)
	f := newFleet(t)
	f.commission(t, 0, 20)
	f.tagsRacks(t)
	// A certificate record and an audited write, for tables certificates
	// and audit.
	now0 := f.tick()
	audited, err := raftfsm.NewAudited(&raftfsm.RackPut{Rack: raftfsm.Rack{Name: "R30", Height: 42}, Now: now0}, "admin:ada", "10.0.0.9", "node1", "PUT /api/v1/racks/:name", "/api/v1/racks/R30", now0)
	if err != nil {
		t.Fatal(err)
	}
	rootA, rootB := selfSignedPEM(t, "root A"), selfSignedPEM(t, "root B")
	f.apply(t, &raftfsm.ClusterInit{Identity: raftfsm.ClusterIdentity{CACertPEM: rootA, SealedCAKey: []byte("sealed"), AdminTokenHash: "00", Created: now0}},
		&raftfsm.GateOpen{Types: map[string]uint8{"50": 1, "51": 1, "52": 1, "53": 1}}, // as the leader opens them once every node reads them
		&raftfsm.CertPut{Cert: raftfsm.Cert{Serial: "0a01", Kind: "admin", Name: "ada", NotAfter: now0.Add(time.Hour), Issued: now0, IssuedBy: "token"}, Now: now0}, audited)
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
	if got := count("SELECT count(*) FROM S.cluster_cas WHERE role = 'current' AND subject = 'CN=root A' AND rotated IS NULL"); got != 1 {
		t.Fatalf("full export: %d current roots A, want 1", got)
	}
	gpus := count("SELECT count(*) FROM S.machines WHERE summary_gpus > 0")
	if gpus == 0 {
		t.Fatal("the generated fleet has no GPU machine")
	}

	f.putTag(t, raftfsm.Tag{Name: "gpu", Match: `{{ eq .Node.GPUs 8 }}`})
	f.putTag(t, raftfsm.Tag{Name: "big", Match: `{{ ge .Node.MemoryGiB 1000 }}`})
	now := f.tick()
	f.apply(t,
		&raftfsm.TagDelete{Name: "burn-in", Now: now},
		&raftfsm.LocationSet{Now: now, Machines: []raftfsm.MachineLocation{
			{ID: pgtest.ID(1), Location: raftfsm.Location{Rack: "R12", Unit: 3}},
			{ID: pgtest.ID(3), Location: raftfsm.Location{Rack: "R12", Unit: 4, Height: 4}},
		}},
		&raftfsm.RackDelete{Name: "R7"},
		&raftfsm.RackPut{Rack: raftfsm.Rack{Name: "R12", Building: "DC1", Room: "Hall C", Height: 48}, Now: now},
		&raftfsm.LayoutPut{Layout: raftfsm.Layout{Name: "storage", Comment: "bonded", Created: now,
			JSON: `{"interfaces": [{"type": "bond", "name": "bond0", "members": ["all"], "links": [{"mode": "dhcp"}]}]}`}},
		&raftfsm.LayoutPut{Layout: raftfsm.Layout{Name: "gpu-bond", Created: now,
			JSON: `{"interfaces": [{"type": "physical", "select": "boot", "mtu": 9000, "links": [{"subnet": "boot", "mode": "auto"}]}]}`}, Replace: true},
		&raftfsm.MachineNetSet{Machine: pgtest.ID(3), SetLayout: true, Layout: "storage", Now: now},
		&raftfsm.MachineNetSet{Machine: pgtest.ID(1), SetLayout: true, Now: now},
		&raftfsm.CertRevoke{Kind: "admin", Name: "ada", By: "token", Require: true, Now: now},
		&raftfsm.CertPut{Cert: raftfsm.Cert{Serial: "0a02", Kind: "node", Name: "node1", NotAfter: now.Add(time.Hour), Issued: now}, Now: now},
		&raftfsm.CARotate{From: rootA, CACertPEM: rootB, SealedCAKey: []byte("sealed B"), By: "admin:ada", Now: now,
			Previous: []raftfsm.PreviousCA{{CertPEM: rootA, SealedKey: []byte("sealed"), CrossPEM: "cross", Until: now.Add(time.Hour)}}},
	)
	waitExported(t, m, f.db)
	compareAll(t, conn, schema, f.db)
	for _, c := range []struct {
		what, q string
		want    int
	}{
		{"tags", "SELECT count(*) FROM S.tags", 2},
		{"roots", "SELECT count(*) FROM S.cluster_cas", 2},
		{"current root", "SELECT count(*) FROM S.cluster_cas WHERE role = 'current' AND subject = 'CN=root B' AND rotated_by = 'admin:ada' AND trusted_until IS NULL", 1},
		{"previous root", "SELECT count(*) FROM S.cluster_cas WHERE role = 'previous' AND subject = 'CN=root A' AND trusted_until IS NOT NULL AND length(fingerprint) = 64", 1},
		{"racks", "SELECT count(*) FROM S.racks", 2},
		{"certificates", "SELECT count(*) FROM S.certificates", 2},
		{"revoked", "SELECT count(*) FROM S.certificates WHERE serial = '0a01' AND revoked IS NOT NULL AND revoked_by = 'token'", 1},
		{"audited", "SELECT count(*) FROM S.audit WHERE actor = 'admin:ada' AND action = 'PUT /api/v1/racks/:name' AND outcome = 'ok' AND command = 'rack-put'", 1},
		{"burn-in left", "SELECT count(*) FROM S.machines WHERE 'burn-in' = ANY(tags || auto_tags)", 0},
		{"in R12", "SELECT count(*) FROM S.machines WHERE location_rack = 'R12' AND location_room = 'Hall C'", 3},
		{"8-GPU machines", "SELECT count(*) FROM S.machines WHERE 'gpu' = ANY(auto_tags)", count("SELECT count(*) FROM S.machines WHERE summary_gpus = 8")},
		{"manual gpu kept", "SELECT count(*) FROM S.machines WHERE 'gpu' = ANY(tags)", 2},
		{"layouts", "SELECT count(*) FROM S.layouts", 2},
		{"by layout", "SELECT count(*) FROM S.machines WHERE layout = 'storage'", 1},
		{"layout cleared", "SELECT count(*) FROM S.machines WHERE layout = 'gpu-bond'", 0},
		{"body is a document", "SELECT count(*) FROM S.layouts WHERE body->'interfaces'->0->>'mtu' = '9000'", 1},
	} {
		if got := count(c.q); got != c.want {
			t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
	}
}

// selfSignedPEM is a CA certificate named cn (its key is thrown away).
func selfSignedPEM(t *testing.T, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
