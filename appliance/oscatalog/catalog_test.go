package oscatalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/rollcall/rollcall/appliance/bootfiles"
	"github.com/rollcall/rollcall/lab/testenv"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
)

// testCluster proposes to the real state machine as a leader's cluster
// does: a command the state machine would refuse takes no entry
// (FSM.Precheck), the rest are applied one entry each.
type testCluster struct {
	mu      sync.Mutex
	l       *fsmtest.Log
	leader  atomic.Value // node name
	entries atomic.Int64
}

func (c *testCluster) Apply(_ context.Context, cmd raftfsm.Command) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.l.FSM.Precheck(cmd); err != nil {
		return 0, err
	}
	c.entries.Add(1)
	err := c.l.Apply(cmd)
	return c.l.Index, err
}

// node is one catalog over the shared cluster: IsLeader asks who leads.
type node struct {
	*testCluster
	name string
}

func (n node) IsLeader() bool { return n.leader.Load() == n.name }

// mirror plays a vendor mirror: files by path, requests counted, and a
// file that can be made to die half-way.
type mirror struct {
	mu    sync.Mutex
	files map[string][]byte
	hits  map[string]int
	die   map[string]bool // close the connection half-way through
}

func (m *mirror) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.hits[r.URL.Path]++
	b, ok := m.files[r.URL.Path]
	die := m.die[r.URL.Path]
	m.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	if die {
		w.Write(b[:len(b)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the server closes the connection
	}
	w.Write(b)
}

func (m *mirror) set(path string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[path] = b
}

func (m *mirror) count(path string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hits[path]
}

// rawDisk is a small raw disk image with an MBR signature and content
// that differs by seed.
func rawDisk(seed uint64) []byte {
	b := make([]byte, 4<<20)
	r := rand.New(rand.NewPCG(seed, 7))
	for i := 1 << 20; i < 2<<20; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	copy(b[446:], []byte{0x80, 0, 2, 0, 0x83})
	b[510], b[511] = 0x55, 0xaa
	return b
}

func qemuImg(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// qcow2Of converts a raw disk to qcow2 with qemu-img.
func qcow2Of(t *testing.T, raw []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "in.raw"), raw, 0o644)
	qemuImg(t, "convert", "-f", "raw", "-O", "qcow2", filepath.Join(dir, "in.raw"), filepath.Join(dir, "out.qcow2"))
	b, err := os.ReadFile(filepath.Join(dir, "out.qcow2"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha256Hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
func sha512Hex(b []byte) string { s := sha512.Sum512(b); return hex.EncodeToString(s[:]) }

type fixture struct {
	t       *testing.T
	cl      *testCluster
	mirror  *mirror
	srv     *httptest.Server
	blobs   *bootfiles.Blobs
	dataDir string
	clock   atomic.Pointer[time.Time]
}

func newFixture(t *testing.T) *fixture {
	testenv.NeedTool(t, "qemu-img")
	f := &fixture{t: t, cl: &testCluster{l: fsmtest.Open(t)}, mirror: &mirror{files: map[string][]byte{}, hits: map[string]int{}, die: map[string]bool{}}}
	f.cl.leader.Store("n1")
	f.srv = httptest.NewServer(f.mirror)
	t.Cleanup(f.srv.Close)
	f.dataDir = t.TempDir()
	f.blobs = bootfiles.OpenBlobs(f.dataDir)
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	f.clock.Store(&now)
	return f
}

func (f *fixture) advance(d time.Duration) {
	now := f.clock.Load().Add(d)
	f.clock.Store(&now)
}

func (f *fixture) sources() []Source {
	u := f.srv.URL
	return []Source{
		{Name: "debian-13", Family: store.FamilyDebian, URL: u + "/debian/latest/debian-13-genericcloud-amd64.qcow2", ChecksumURL: u + "/debian/latest/SHA512SUMS"},
		{Name: "ubuntu-24.04", Family: store.FamilyDebian, URL: u + "/ubuntu/noble-server-cloudimg-amd64.img", ChecksumURL: u + "/ubuntu/SHA256SUMS"},
		{Name: "rocky-9", Family: store.FamilyRHEL, Track: store.TrackPinned, URL: u + "/rocky/Rocky-9-GenericCloud-Base.latest.x86_64.qcow2", ChecksumURL: u + "/rocky/CHECKSUM"},
	}
}

func (f *fixture) catalog(name string, keep int) *Catalog {
	c, err := New(Config{
		DB: f.cl.l.DB, Cluster: node{f.cl, name}, Blobs: f.blobs, Node: name, WorkDir: filepath.Join(f.dataDir, "os-work-"+name),
		Sources: f.sources(), Keep: keep, Now: func() time.Time { return *f.clock.Load() }, Log: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// publish puts an image and its checksum file on the mirror, each vendor
// in its own format.
func (f *fixture) publish(name string, img []byte) {
	switch name {
	case "debian-13":
		f.mirror.set("/debian/latest/debian-13-genericcloud-amd64.qcow2", img)
		f.mirror.set("/debian/latest/SHA512SUMS", []byte(sha512Hex([]byte("json"))+"  debian-13-genericcloud-amd64.json\n"+sha512Hex(img)+"  debian-13-genericcloud-amd64.qcow2\n"))
	case "ubuntu-24.04":
		f.mirror.set("/ubuntu/noble-server-cloudimg-amd64.img", img)
		f.mirror.set("/ubuntu/SHA256SUMS", []byte(sha256Hex(img)+" *noble-server-cloudimg-amd64.img\n"+sha256Hex([]byte("arm"))+" *noble-server-cloudimg-arm64.img\n"))
	case "rocky-9":
		f.mirror.set("/rocky/Rocky-9-GenericCloud-Base.latest.x86_64.qcow2", img)
		f.mirror.set("/rocky/CHECKSUM", []byte(fmt.Sprintf("# Rocky-9-GenericCloud-Base.latest.x86_64.qcow2: %d bytes\nSHA256 (Rocky-9-GenericCloud-Base.latest.x86_64.qcow2) = %s\n", len(img), sha256Hex(img))))
	}
}

func (f *fixture) os(name string) store.OSImage {
	f.t.Helper()
	var o store.OSImage
	if err := f.cl.l.DB.View(func(tx *store.Tx) error {
		var err error
		o, err = tx.OSImage(name)
		return err
	}); err != nil {
		f.t.Fatal(err)
	}
	return o
}

// blobFiles lists the blob directory, partial files included.
func (f *fixture) blobFiles() []string {
	entries, _ := os.ReadDir(filepath.Join(f.dataDir, "images", "blobs"))
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// checkVersion: the record's hashes are of the raw image the source
// holds, and the blob decompresses to it.
func (f *fixture) checkVersion(v store.OSVersion, raw []byte, format string) {
	f.t.Helper()
	if v.RawSHA256 != sha256Hex(raw) || v.RawSize != int64(len(raw)) || v.Format != format || v.SectorSize != 512 {
		f.t.Errorf("version %s: raw %s/%d format %s sector %d; want %s/%d %s 512", v.Version, v.RawSHA256[:12], v.RawSize, v.Format, v.SectorSize, sha256Hex(raw)[:12], len(raw), format)
	}
	z, err := os.ReadFile(f.blobs.Path(v.File.SHA256))
	if err != nil {
		f.t.Fatalf("blob of %s: %v", v.Version, err)
	}
	if sha256Hex(z) != v.File.SHA256 || int64(len(z)) != v.File.Size {
		f.t.Errorf("blob of %s is not the file its record names", v.Version)
	}
	dec, _ := zstd.NewReader(bytes.NewReader(z))
	defer dec.Close()
	got, err := io.ReadAll(dec)
	if err != nil || !bytes.Equal(got, raw) {
		f.t.Errorf("blob of %s decompresses to %d bytes (%v), not the raw image", v.Version, len(got), err)
	}
}

func byName(rs []NameResult) map[string]NameResult {
	m := map[string]NameResult{}
	for _, r := range rs {
		m[r.Name] = r
	}
	return m
}

// TestSync against a local mirror that serves each vendor's checksum file
// in its own format: a first sync makes a version of each, a second
// downloads nothing, a changed checksum brings a new version (current for
// latest, not for pinned), -force downloads again.
func TestSync(t *testing.T) {
	f := newFixture(t)
	c := f.catalog("n1", 3)
	ctx := context.Background()
	debRaw, ubuRaw, rockyRaw := rawDisk(1), rawDisk(2), rawDisk(3)
	f.publish("debian-13", qcow2Of(t, debRaw))
	f.publish("ubuntu-24.04", ubuRaw)
	f.publish("rocky-9", qcow2Of(t, rockyRaw))

	var steps []string
	var mu sync.Mutex
	res, err := c.Sync(ctx, SyncRequest{}, func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		if k := p.Name + "/" + p.Step; !slices.Contains(steps, k) {
			steps = append(steps, k)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Action != SyncNew {
			t.Fatalf("first sync of %s: %+v, want a new version", r.Name, r)
		}
	}
	for _, want := range []string{"debian-13/checksum", "debian-13/download", "debian-13/verify", "debian-13/inspect", "debian-13/convert", "debian-13/compress", "debian-13/record", "ubuntu-24.04/compress"} {
		if !slices.Contains(steps, want) {
			t.Errorf("no progress for %s (got %v)", want, steps)
		}
	}
	if slices.Contains(steps, "ubuntu-24.04/convert") {
		t.Error("a raw image was converted: raw passes through")
	}
	deb := f.os("debian-13")
	if len(deb.Versions) != 1 || deb.Current != deb.Versions[0].Version || deb.Family != store.FamilyDebian {
		t.Fatalf("debian-13 after the first sync: %+v", deb)
	}
	f.checkVersion(deb.Versions[0], debRaw, FormatQCOW2)
	if want := "sha512:" + sha512Hex(f.mirror.files["/debian/latest/debian-13-genericcloud-amd64.qcow2"]); deb.Versions[0].Upstream != want {
		t.Errorf("upstream %s, want %s", deb.Versions[0].Upstream, want)
	}
	f.checkVersion(f.os("ubuntu-24.04").Versions[0], ubuRaw, FormatRaw)
	rocky := f.os("rocky-9")
	if rocky.Track != store.TrackPinned || rocky.Current != rocky.Versions[0].Version {
		t.Errorf("rocky-9 (pinned, no current yet): %+v, want its first version current", rocky)
	}
	f.checkVersion(rocky.Versions[0], rockyRaw, FormatQCOW2)

	// Unchanged upstream: checksum files only.
	entries := f.cl.entries.Load()
	f.advance(time.Hour)
	res, err = c.Sync(ctx, SyncRequest{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Action != SyncUnchanged {
			t.Errorf("second sync of %s: %+v, want unchanged", r.Name, r)
		}
	}
	for path, want := range map[string]int{
		"/debian/latest/debian-13-genericcloud-amd64.qcow2": 1, "/ubuntu/noble-server-cloudimg-amd64.img": 1,
		"/rocky/Rocky-9-GenericCloud-Base.latest.x86_64.qcow2": 1, "/debian/latest/SHA512SUMS": 2, "/rocky/CHECKSUM": 2,
	} {
		if got := f.mirror.count(path); got != want {
			t.Errorf("%s requested %d times, want %d", path, got, want)
		}
	}
	if got := f.cl.entries.Load() - entries; got != 2 {
		t.Errorf("an unchanged sync took %d entries, want 2 (its claim and its end)", got)
	}

	// New upstream versions.
	debRaw2, rockyRaw2 := rawDisk(11), rawDisk(13)
	f.publish("debian-13", qcow2Of(t, debRaw2))
	f.publish("rocky-9", qcow2Of(t, rockyRaw2))
	f.advance(time.Hour)
	res, err = c.Sync(ctx, SyncRequest{Names: []string{"debian-13", "rocky-9"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := byName(res)
	if r["debian-13"].Action != SyncNew || !r["debian-13"].Current || r["rocky-9"].Action != SyncNew || r["rocky-9"].Current {
		t.Errorf("changed upstream: %+v; want new versions, current for debian (latest), not for rocky (pinned)", res)
	}
	deb = f.os("debian-13")
	if len(deb.Versions) != 2 || deb.Current != deb.Versions[1].Version {
		t.Errorf("debian-13: %+v, want the new version current", deb)
	}
	f.checkVersion(deb.Versions[1], debRaw2, FormatQCOW2)
	rocky = f.os("rocky-9")
	if len(rocky.Versions) != 2 || rocky.Current != rocky.Versions[0].Version {
		t.Errorf("rocky-9 (pinned): current %s of %s, want the old one kept", rocky.Current, versionsOf(rocky))
	}
	if _, err := f.cl.Apply(ctx, &raftfsm.OSPromote{Name: "rocky-9", OSVersion: rocky.Versions[1].Version, Now: *f.clock.Load()}); err != nil {
		t.Fatal(err)
	}
	if rocky = f.os("rocky-9"); rocky.Current != rocky.Versions[1].Version {
		t.Errorf("after promote: current %s", rocky.Current)
	}

	// -force downloads an unchanged image again.
	res, err = c.Sync(ctx, SyncRequest{Names: []string{"ubuntu-24.04"}, Force: true}, nil)
	if err != nil || res[0].Action != SyncNew {
		t.Fatalf("forced sync: %+v, %v", res, err)
	}
	if got := f.mirror.count("/ubuntu/noble-server-cloudimg-amd64.img"); got != 2 {
		t.Errorf("forced sync: image requested %d times in all, want 2", got)
	}

	// Unknown names are refused before anything runs.
	entries = f.cl.entries.Load()
	if _, err := c.Sync(ctx, SyncRequest{Names: []string{"slackware"}}, nil); err == nil || !strings.Contains(store.Public(err), `"slackware" is not in os_sources (configured: debian-13, ubuntu-24.04, rocky-9)`) {
		t.Errorf("unknown name: %v", err)
	}
	if f.cl.entries.Load() != entries {
		t.Error("a refused sync took a Raft entry")
	}
}

func versionsOf(o store.OSImage) string {
	var vs []string
	for _, v := range o.Versions {
		vs = append(vs, v.Version)
	}
	return strings.Join(vs, ",")
}

// TestSyncFaults: a download that dies half-way, a checksum mismatch, a
// qcow2 with a backing file or an external data file, a mirror that
// answers 404: each fails that name with a clear message, leaves the old
// current, and no blob (whole or partial) behind.
func TestSyncFaults(t *testing.T) {
	f := newFixture(t)
	c := f.catalog("n1", 3)
	ctx := context.Background()
	f.publish("debian-13", qcow2Of(t, rawDisk(1)))
	if res, err := c.Sync(ctx, SyncRequest{Names: []string{"debian-13"}}, nil); err != nil || res[0].Action != SyncNew {
		t.Fatalf("first sync: %+v %v", res, err)
	}
	current := f.os("debian-13").Current
	blobs := f.blobFiles()
	const img = "/debian/latest/debian-13-genericcloud-amd64.qcow2"

	backing := func() []byte {
		dir := t.TempDir()
		qemuImg(t, "create", "-q", "-f", "qcow2", filepath.Join(dir, "base.qcow2"), "4M")
		qemuImg(t, "create", "-q", "-f", "qcow2", "-b", filepath.Join(dir, "base.qcow2"), "-F", "qcow2", filepath.Join(dir, "child.qcow2"))
		b, _ := os.ReadFile(filepath.Join(dir, "child.qcow2"))
		return b
	}()
	external := func() []byte {
		dir := t.TempDir()
		qemuImg(t, "create", "-q", "-f", "qcow2", "-o", "data_file="+filepath.Join(dir, "data.raw"), filepath.Join(dir, "ext.qcow2"), "4M")
		b, _ := os.ReadFile(filepath.Join(dir, "ext.qcow2"))
		return b
	}()
	for name, fault := range map[string]struct {
		setup func()
		says  string
	}{
		"a download that dies half-way": {func() {
			f.publish("debian-13", qcow2Of(t, rawDisk(2)))
			f.mirror.mu.Lock()
			f.mirror.die[img] = true
			f.mirror.mu.Unlock()
		}, "download of debian-13-genericcloud-amd64.qcow2 ended before the whole file arrived"},
		"a checksum mismatch": {func() {
			f.publish("debian-13", qcow2Of(t, rawDisk(3)))
			f.mirror.set(img, qcow2Of(t, rawDisk(4)))
		}, "checksum mismatch"},
		"a backing file":        {func() { f.publish("debian-13", backing) }, "has a backing file"},
		"an external data file": {func() { f.publish("debian-13", external) }, "external data file"},
		"not a disk image":      {func() { f.publish("debian-13", []byte("<html>mirror maintenance</html>")) }, "not a disk image"},
		"a gzip":                {func() { f.publish("debian-13", []byte("\x1f\x8b\x08\x00rest")) }, "gzip images are not accepted"},
		"a 404 checksum file":   {func() { f.mirror.mu.Lock(); delete(f.mirror.files, "/debian/latest/SHA512SUMS"); f.mirror.mu.Unlock() }, "checksum file answered 404"},
		"a file it does not list": {func() {
			f.mirror.set("/debian/latest/SHA512SUMS", []byte(sha512Hex([]byte("x"))+"  debian-12-genericcloud-amd64.qcow2\n"))
		}, `does not list "debian-13-genericcloud-amd64.qcow2"`},
	} {
		t.Run(name, func(t *testing.T) {
			f.mirror.mu.Lock()
			f.mirror.die = map[string]bool{}
			f.mirror.mu.Unlock()
			fault.setup()
			res, err := c.Sync(ctx, SyncRequest{Names: []string{"debian-13"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Action != SyncFailed || !strings.Contains(res[0].Message, fault.says) {
				t.Errorf("got %+v, want failed saying %q", res[0], fault.says)
			}
			if o := f.os("debian-13"); o.Current != current || len(o.Versions) != 1 {
				t.Errorf("after the fault: current %s of %s, want %s alone", o.Current, versionsOf(o), current)
			}
			if got := f.blobFiles(); !slices.Equal(got, blobs) {
				t.Errorf("blobs %v, want %v: a failed sync left a file", got, blobs)
			}
			if e, _ := os.ReadDir(c.cfg.WorkDir); len(e) != 0 {
				t.Errorf("work directory keeps %d entries", len(e))
			}
		})
	}
	var s store.OSSync
	f.cl.l.DB.View(func(tx *store.Tx) error { s, _ = tx.OSSyncState(); return nil })
	if s.Running(*f.clock.Load()) || len(s.Result) != 1 || !strings.HasPrefix(s.Result[0], "debian-13: failed: ") {
		t.Errorf("sync state %+v: want the claim ended, with the failure recorded", s)
	}
}

// TestPrune: keep N per name, but never current, never younger than a
// day, never one a job uses.
func TestPrune(t *testing.T) {
	f := newFixture(t)
	c := f.catalog("n1", 2)
	ctx := context.Background()
	var versions []string
	for i := range 5 {
		f.publish("debian-13", qcow2Of(t, rawDisk(uint64(100+i))))
		res, err := c.Sync(ctx, SyncRequest{Names: []string{"debian-13"}}, nil)
		if err != nil || res[0].Action != SyncNew {
			t.Fatalf("sync %d: %+v %v", i, res, err)
		}
		versions = append(versions, res[0].Version)
		if i == 0 {
			// The first is used by a running job.
			if err := f.cl.l.DB.Update(func(tx *store.Tx) error {
				return tx.PutDeployJob(store.DeployJob{ID: "j-0000000000000001", Machine: "m-00000000c0de", Kind: store.JobKindDeploy, OS: "debian-13", OSVersion: versions[0], State: store.JobRunning})
			}); err != nil {
				t.Fatal(err)
			}
		}
		if i < 3 {
			f.advance(48 * time.Hour)
		} else {
			f.advance(time.Hour)
		}
	}
	// v0 in use, v1 and v2 old, v3 younger than a day at the fifth sync,
	// v4 current: the syncs pruned v1 and v2 only.
	o := f.os("debian-13")
	if got, want := versionsOf(o), strings.Join([]string{versions[0], versions[3], versions[4]}, ","); got != want {
		t.Errorf("after pruning: %s, want %s (in use, young, current)", got, want)
	}
	if o.Current != versions[4] {
		t.Errorf("current %s, want %s", o.Current, versions[4])
	}
	// The job ends; a day on, the next prune drops the oldest two.
	f.cl.l.DB.Update(func(tx *store.Tx) error {
		return tx.PutDeployJob(store.DeployJob{ID: "j-0000000000000001", Machine: "m-00000000c0de", Kind: store.JobKindDeploy, OS: "debian-13", OSVersion: versions[0], State: store.JobDone})
	})
	f.advance(25 * time.Hour)
	pruned, err := c.Prune(ctx, "debian-13")
	if err != nil || !slices.Equal(pruned, []string{versions[0]}) {
		t.Errorf("prune: %v %v, want %s", pruned, err, versions[0])
	}
	if got := versionsOf(f.os("debian-13")); got != versions[3]+","+versions[4] {
		t.Errorf("after the last prune: %s", got)
	}
}

// TestSyncLeaderOnly: the timer syncs on the leader only; after it, a new
// leader finds the last start in the store and does not start again; a
// sync held by one node refuses another's.
func TestSyncLeaderOnly(t *testing.T) {
	f := newFixture(t)
	a, b := f.catalog("n1", 3), f.catalog("n2", 3)
	f.publish("debian-13", qcow2Of(t, rawDisk(1)))
	f.publish("ubuntu-24.04", rawDisk(2))
	f.publish("rocky-9", qcow2Of(t, rawDisk(3)))
	if b.Due() {
		t.Error("a follower finds the sync due")
	}
	if !a.Due() {
		t.Fatal("the leader does not find the first sync due")
	}
	a.syncByTimer(context.Background(), a.log)
	if got := f.mirror.count("/debian/latest/SHA512SUMS"); got != 1 {
		t.Fatalf("timer sync fetched the checksum %d times", got)
	}
	// Leadership moves to n2 an hour later: not due (the last start is in
	// the store), and a day later it is.
	f.cl.leader.Store("n2")
	f.advance(time.Hour)
	if a.Due() || b.Due() {
		t.Errorf("after a leader change an hour on: due on n1 %v, on n2 %v; want neither", a.Due(), b.Due())
	}
	b.syncByTimer(context.Background(), b.log) // as if Run fired anyway: the state machine refuses
	if got := f.mirror.count("/debian/latest/SHA512SUMS"); got != 1 {
		t.Errorf("a second timer start ran: checksum fetched %d times", got)
	}
	f.advance(24 * time.Hour)
	if !b.Due() {
		t.Error("a day later the new leader does not find the sync due")
	}
	// n1 holds a claim (a sync under way there): n2's is refused.
	now := *f.clock.Load()
	if _, err := f.cl.Apply(context.Background(), &raftfsm.OSSyncStart{Node: "n1", Now: now, Until: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	entries := f.cl.entries.Load()
	_, err := b.Sync(context.Background(), SyncRequest{}, nil)
	if e, ok := err.(*Error); !ok || e.Kind != "conflict" || !strings.Contains(e.Message, "running on n1") {
		t.Errorf("sync while n1 holds the claim: %v", err)
	}
	if f.cl.entries.Load() != entries || f.mirror.count("/debian/latest/SHA512SUMS") != 1 {
		t.Error("the refused sync took an entry or fetched")
	}
}

// TestImport: raw and qcow2, from an upload and from a URL, told by magic
// bytes whatever the name says; bad input refused with no Raft entry.
func TestImport(t *testing.T) {
	f := newFixture(t)
	c := f.catalog("n1", 3)
	ctx := context.Background()
	raw, qraw := rawDisk(21), rawDisk(22)
	f.mirror.set("/local/disk.qcow2", qcow2Of(t, qraw))
	f.mirror.set("/local/image.qcow2", raw) // a raw image with a qcow2 name

	for _, c2 := range []struct {
		req    ImportRequest
		raw    []byte
		format string
	}{
		{ImportRequest{Name: "custom", Family: store.FamilyRHEL, Body: bytes.NewReader(raw), Source: "/home/op/disk.img"}, raw, FormatRaw},
		{ImportRequest{Name: "custom", Body: bytes.NewReader(qcow2Of(t, qraw)), Source: "disk.qcow2"}, qraw, FormatQCOW2},
		{ImportRequest{Name: "custom", URL: f.srv.URL + "/local/disk.qcow2"}, qraw, FormatQCOW2},
		{ImportRequest{Name: "custom", URL: f.srv.URL + "/local/image.qcow2"}, raw, FormatRaw},
	} {
		v, err := c.Import(ctx, c2.req, nil)
		if err != nil {
			t.Fatalf("import %+v: %v", c2.req.Source+c2.req.URL, err)
		}
		f.checkVersion(v, c2.raw, c2.format)
		if o := f.os("custom"); o.Current != v.Version || o.Family != store.FamilyRHEL {
			t.Errorf("after import: current %s family %s, want %s rhel", o.Current, o.Family, v.Version)
		}
	}
	if o := f.os("custom"); len(o.Versions) != 4 || o.Versions[0].Source != "disk.img" || o.Versions[2].Source != f.srv.URL+"/local/disk.qcow2" {
		t.Errorf("versions %+v", o.Versions)
	}

	entries, blobs := f.cl.entries.Load(), f.blobFiles()
	for name, bad := range map[string]struct {
		req  ImportRequest
		says string
	}{
		"a bad name":          {ImportRequest{Name: "../etc", Body: bytes.NewReader(raw)}, "OS image name"},
		"a bad family":        {ImportRequest{Name: "x", Family: "arch", Body: bytes.NewReader(raw)}, `family "arch"`},
		"a text file":         {ImportRequest{Name: "x", Body: strings.NewReader("hello\n")}, "not a disk image"},
		"an ISO":              {ImportRequest{Name: "x", Body: bytes.NewReader(append(make([]byte, 0x8001), "CD001rest"...))}, "ISO 9660 images are not accepted"},
		"a truncated qcow2":   {ImportRequest{Name: "x", Body: bytes.NewReader(qcow2Of(t, raw)[:600])}, "corrupt or truncated"},
		"a URL with a secret": {ImportRequest{Name: "x", URL: "http://op:hunter2@mirror/disk.img"}, "user:password@"},
		"a file: URL":         {ImportRequest{Name: "x", URL: "file:///etc/shadow"}, "only http and https"},
		"a 404":               {ImportRequest{Name: "x", URL: f.srv.URL + "/local/none.img"}, "download of none.img answered 404"},
		"both body and URL":   {ImportRequest{Name: "x", URL: f.srv.URL + "/a.img", Body: bytes.NewReader(raw)}, "either a URL or an uploaded file"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.Import(ctx, bad.req, nil)
			if err == nil || !strings.Contains(publicText(err), bad.says) {
				t.Errorf("got %v (public %q), want %q", err, publicText(err), bad.says)
			}
			if strings.Contains(publicText(err), "hunter2") {
				t.Error("the password reached the message")
			}
		})
	}
	if f.cl.entries.Load() != entries || !slices.Equal(f.blobFiles(), blobs) {
		t.Error("refused imports took Raft entries or left blobs")
	}
	if _, err := os.Stat(filepath.Join(f.dataDir, "os-work-n1")); err != nil {
		t.Error(err)
	}
}

// TestWaitReplicated counts the nodes that hold a version as OSHave
// commands arrive.
func TestWaitReplicated(t *testing.T) {
	f := newFixture(t)
	c := f.catalog("n1", 3)
	ctx := context.Background()
	for _, n := range []string{"n1", "n2", "n3"} {
		f.cl.Apply(ctx, &raftfsm.NodePut{Node: raftfsm.Node{Name: n, RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"}})
	}
	v, err := c.Import(ctx, ImportRequest{Name: "custom", Body: bytes.NewReader(rawDisk(5))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	var mu sync.Mutex
	done := make(chan error, 1)
	go func() {
		done <- c.WaitReplicated(ctx, "custom", v.Version, func(p Progress) {
			mu.Lock()
			seen = append(seen, p.Message)
			mu.Unlock()
		})
	}()
	for _, n := range []string{"n2", "n3"} {
		if _, err := f.cl.Apply(ctx, &raftfsm.OSHave{Name: "custom", OSVersion: v.Version, Node: n, SHA256: v.File.SHA256, Now: *f.clock.Load()}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("WaitReplicated did not return once every node held the version")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[len(seen)-1] != "3 of 3 nodes hold it" || seen[0] == "3 of 3 nodes hold it" {
		t.Errorf("replicate reports %q", seen)
	}
}
