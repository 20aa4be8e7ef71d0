package overlay_test

import (
	"archive/tar"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"flag"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/overlay"
	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/lab/fleet"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/pgexport/pgtest"
)

var update = flag.Bool("update", false, "rewrite testdata/golden")

var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// cluster is a store with fleet machines 0..n-1 assigned to the profile
// compute (the example compute overlay), their host keys and the munge key
// sealed under key.
type cluster struct {
	l     *fsmtest.Log
	key   pki.MasterKey
	ids   []string
	privs map[string]string // machine → the host key the test sealed
}

func newCluster(t *testing.T, shapes ...string) *cluster {
	t.Helper()
	key, err := pki.NewMasterKey()
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{l: fsmtest.Open(t), key: key, privs: map[string]string{}}
	// The first machine of the fleet of each shape asked for.
	var cmds []raftfsm.Command
	for _, shape := range shapes {
		for i := 0; ; i++ {
			if fleet.ShapeOf(1, i) != shape || containsID(c.ids, pgtest.ID(i)) {
				continue
			}
			cmd, err := pgtest.Commission(fleet.Generate(1, i), i, t0)
			if err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, cmd)
			c.ids = append(c.ids, pgtest.ID(i))
			break
		}
	}
	files, err := overlay.Example("compute")
	if err != nil {
		t.Fatal(err)
	}
	munge, err := key.Seal(bytes.Repeat([]byte{0x5a}, store.MungeKeySize), []byte(store.MungeKeyAAD))
	if err != nil {
		t.Fatal(err)
	}
	pfx := netip.MustParsePrefix("10.40.0.0/24")
	cmds = append(cmds,
		&raftfsm.ImagePut{Image: raftfsm.Image{Name: "compute", Files: []raftfsm.ImageFile{
			{Name: "kernel", Size: 1, SHA256: strings.Repeat("a", 64)},
			{Name: "initrd", Size: 1, SHA256: strings.Repeat("b", 64)},
			{Name: "squashfs", Size: 1, SHA256: strings.Repeat("c", 64)},
		}, Nodes: []string{"n1"}, Created: t0}},
		&raftfsm.OverlayPut{Name: "compute", Files: bodies(files), Now: t0},
		&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "fab1", Kind: store.FabricEthernet, Created: t0}},
		&raftfsm.SubnetPut{Subnet: raftfsm.Subnet{CIDR: pfx, Fabric: "fab1", Purpose: "other", Gateway: netip.MustParseAddr("10.40.0.1"), Created: t0}},
		&raftfsm.MungeKeySet{Sealed: munge, Now: t0},
		&raftfsm.ClusterVarsSet{Vars: map[string]string{"cluster_name": "hpc", "slurm_controller": "head1", "slurm_controller_ip": "10.40.0.250",
			"root_authorized_keys": "ssh-ed25519 AAAAtest operator@example"}, Now: t0},
		&raftfsm.ProfilePut{Profile: raftfsm.Profile{Name: "compute", Image: "compute", Overlays: []string{"compute"},
			NameFormat: "cn%03d", NameFirst: 1, NameLast: 99, Subnets: []string{pfx.String()}, Vars: map[string]string{"partition": "batch"}}, Now: t0},
	)
	for i, id := range c.ids {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		pem := "-----BEGIN TEST KEY-----\n" + string(priv.Seed()[:4]) + id + "\n-----END TEST KEY-----"
		sealed, err := key.Seal([]byte(pem), []byte(store.SSHHostKeyAAD(id)))
		if err != nil {
			t.Fatal(err)
		}
		c.privs[id] = pem
		_ = pub
		cmds = append(cmds, &raftfsm.Assign{Machine: id, Profile: "compute", SSHHostKeySealed: sealed,
			SSHHostKeyPub: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA" + id, Now: t0.Add(time.Duration(i) * time.Minute)})
	}
	c.l.Must(t, cmds...)
	return c
}

func containsID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func bodies(files []store.OverlayFile) []raftfsm.OverlayFile {
	out := make([]raftfsm.OverlayFile, len(files))
	for i, f := range files {
		out[i] = raftfsm.OverlayFileBody(f)
	}
	return out
}

func (c *cluster) view(t *testing.T, f func(tx *store.Tx) error) {
	t.Helper()
	if err := c.l.DB.View(f); err != nil {
		t.Fatal(err)
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test ./appliance/overlay -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from its golden (go test ./appliance/overlay -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func fileOf(t *testing.T, files []overlay.File, p string) overlay.File {
	t.Helper()
	for _, f := range files {
		if f.Path == p {
			return f
		}
	}
	t.Fatalf("no %s in %d files", p, len(files))
	return overlay.File{}
}

// The compute overlay for the fleet simulator's CPU and GPU shapes:
// slurm.conf's node lines and gres.conf from the inventory, /etc/hosts of
// every node, the node's own host key and the munge key in its own tree.
func TestComputeOverlayGoldens(t *testing.T) {
	c := newCluster(t, "server", "gpu", "storage")
	r := &overlay.Renderer{Key: c.key, CAPEM: func() []byte { return []byte("-----BEGIN CERTIFICATE-----\nTEST\n-----END CERTIFICATE-----\n") }}
	var sys, run []overlay.File
	c.view(t, func(tx *store.Tx) (err error) {
		if sys, err = r.Tree(tx, overlay.Target{Machine: c.ids[1], Secrets: true}, store.TreeSystem); err != nil {
			return err
		}
		run, err = r.Tree(tx, overlay.Target{Machine: c.ids[1], Secrets: true}, store.TreeRuntime)
		return err
	})
	for _, p := range []string{"etc/slurm/slurm.conf", "etc/slurm/gres.conf", "etc/hosts", "etc/hostname"} {
		golden(t, strings.ReplaceAll(p, "/", "_"), fileOf(t, sys, p).Data)
	}
	if h := fileOf(t, run, "etc/hosts"); !bytes.Equal(h.Data, fileOf(t, sys, "etc/hosts").Data) {
		t.Fatalf("runtime /etc/hosts differs from the system one:\n%s", h.Data)
	}
	if k := fileOf(t, sys, "etc/ssh/ssh_host_ed25519_key"); string(k.Data) != c.privs[c.ids[1]]+"\n" || k.Mode != 0o600 {
		t.Fatalf("host key: mode %o, %q", k.Mode, k.Data)
	}
	if k := fileOf(t, sys, "etc/munge/munge.key"); !bytes.Equal(k.Data, bytes.Repeat([]byte{0x5a}, store.MungeKeySize)) || k.Mode != 0o400 {
		t.Fatalf("munge key: mode %o, %d bytes", k.Mode, len(k.Data))
	}
	if a := fileOf(t, sys, "root/.ssh/authorized_keys"); string(a.Data) != "ssh-ed25519 AAAAtest operator@example\n" {
		t.Fatalf("authorized_keys: %q", a.Data)
	}
	// The GPU node's line has its GRES, the server's has none.
	conf := string(fileOf(t, sys, "etc/slurm/slurm.conf").Data)
	if !strings.Contains(conf, "NodeName=cn002 NodeAddr=10.40.0.") || !strings.Contains(conf, "Gres=gpu:") || strings.Count(conf, "Gres=gpu:") != 1 {
		t.Fatalf("slurm.conf node lines:\n%s", conf)
	}
}

// The token boundary inside the renderer: node A's tree never holds B's
// private key, and an operator's render holds none.
func TestSecretsStayWithTheirNode(t *testing.T) {
	c := newCluster(t, "server", "server")
	r := &overlay.Renderer{Key: c.key}
	a, b := c.ids[0], c.ids[1]
	c.view(t, func(tx *store.Tx) error {
		arch, err := r.Tar(tx, overlay.Target{Machine: a, Secrets: true}, store.TreeSystem)
		if err != nil {
			return err
		}
		ta := arch.Bytes()
		if !bytes.Contains(ta, []byte(c.privs[a])) || bytes.Contains(ta, []byte(c.privs[b])) {
			t.Errorf("node A's tar: has A's key %v, B's key %v", bytes.Contains(ta, []byte(c.privs[a])), bytes.Contains(ta, []byte(c.privs[b])))
		}
		files := untar(t, ta)
		if len(files) == 0 || files["etc/hostname"] != "cn001\n" {
			t.Errorf("node A's tar: %d files, hostname %q", len(files), files["etc/hostname"])
		}
		for _, target := range []overlay.Target{{Machine: a}, {Profile: "compute"}} {
			for _, tree := range []string{store.TreeSystem, store.TreeRuntime} {
				arch, err := r.Tar(tx, target, tree)
				if err != nil {
					return err
				}
				tb := arch.Bytes()
				if bytes.Contains(tb, []byte(c.privs[a])) || bytes.Contains(tb, []byte(c.privs[b])) || bytes.Contains(tb, bytes.Repeat([]byte{0x5a}, 64)) {
					t.Errorf("operator's render of %+v %s holds a secret", target, tree)
				}
			}
		}
		f, tree, err := r.Lookup(tx, overlay.Target{Machine: a}, "/etc/ssh/ssh_host_ed25519_key")
		if err != nil || tree != store.TreeSystem || string(f.Data) != overlay.RedactedHostKey+"\n" {
			t.Errorf("lookup of the host key: %v %s %q", err, tree, f.Data)
		}
		return nil
	})
}

func untar(t *testing.T, b []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out[h.Name] = string(data)
	}
}

// A template that does not parse or does not render names its file and
// line; one that recurses or floods is refused.
func TestTemplateErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		content string
		want    string
	}{
		"parse":    {"line one\n{{ .Node.Name \n", "system/etc/bad.tmpl:2"},
		"function": {"{{ nosuch .Node }}", `system/etc/bad.tmpl:1: function "nosuch" not defined`},
		"define":   {`{{ define "x" }}{{ template "x" . }}{{ end }}{{ template "x" . }}`, "not supported"},
		"template": {`{{ template "y" . }}`, "not supported"},
	} {
		err := overlay.Check([]store.OverlayFile{{Path: "system/etc/bad.tmpl", Content: []byte(tc.content)}})
		if !errors.Is(err, overlay.ErrTemplate) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	// Render-time errors: a field that does not exist, output beyond the
	// bound, a template that runs too long.
	c := newCluster(t, "server")
	r := &overlay.Renderer{Key: c.key}
	c.l.Must(t, &raftfsm.Unassign{Machine: c.ids[0], Now: t0},
		&raftfsm.OverlayPut{Name: "bad", Files: []raftfsm.OverlayFile{{Path: "system/etc/ok", Mode: 0o644}}, Now: t0},
		&raftfsm.ProfilePut{Profile: raftfsm.Profile{Name: "bad", Image: "compute", Overlays: []string{"bad"}}, Now: t0},
		&raftfsm.Assign{Machine: c.ids[0], Profile: "bad", SSHHostKeySealed: []byte("x"), SSHHostKeyPub: "ssh-ed25519 AAAA", Now: t0})
	for name, tc := range map[string]struct {
		content string
		want    string
	}{
		"field":  {"a\nb {{ .Node.NoSuchField }}", "system/etc/bad.tmpl:2:"},
		"flood":  {"{{ range 100000000 }}{{ $.Node.SSHHostKeyPub }}{{ end }}", "renders more than 8 MiB"},
		"slow":   {"{{ range 100000000000 }}{{ end }}", "takes more than"},
		"nested": {"{{ range .Nodes }}{{ range 100000 }}{{ range 1000 }}{{ end }}{{ end }}{{ end }}", "takes more than"},
	} {
		c.l.Must(t, &raftfsm.OverlayPut{Name: "bad", Files: []raftfsm.OverlayFile{{Path: "system/etc/bad.tmpl", Mode: 0o644, Content: []byte(tc.content)}}, Now: t0})
		c.view(t, func(tx *store.Tx) error {
			_, err := r.Tree(tx, overlay.Target{Machine: c.ids[0]}, store.TreeSystem)
			if !errors.Is(err, overlay.ErrTemplate) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", name, err, tc.want)
			}
			return nil
		})
	}
}

// A later overlay's file replaces an earlier one's; a tag's overlays come
// after the profile's.
func TestOverlayOrder(t *testing.T) {
	c := newCluster(t, "server")
	c.l.Must(t,
		&raftfsm.OverlayPut{Name: "site", Files: []raftfsm.OverlayFile{{Path: "system/etc/motd", Mode: 0o644, Content: []byte("site\n")}}, Now: t0},
		&raftfsm.OverlayPut{Name: "gpu", Files: []raftfsm.OverlayFile{{Path: "system/etc/motd.tmpl", Mode: 0o644, Content: []byte("gpu {{ .Node.Name }}\n")}}, Now: t0},
		&raftfsm.ProfilePut{Profile: raftfsm.Profile{Name: "compute", Image: "compute", Overlays: []string{"compute", "site"},
			NameFormat: "cn%03d", NameFirst: 1, NameLast: 99, Subnets: []string{"10.40.0.0/24"}}, Replace: true, Now: t0},
	)
	r := &overlay.Renderer{Key: c.key}
	motd := func() string {
		var f overlay.File
		c.view(t, func(tx *store.Tx) (err error) {
			f, _, err = r.Lookup(tx, overlay.Target{Machine: c.ids[0]}, "system/etc/motd")
			return err
		})
		return string(f.Data)
	}
	if got := motd(); got != "site\n" {
		t.Fatalf("before the tag: %q", got)
	}
	c.l.Must(t, &raftfsm.TagPut{Tag: raftfsm.Tag{Name: "gpu", Overlays: []string{"gpu"}}, Now: t0},
		&raftfsm.MachineTags{Machines: []string{c.ids[0]}, Add: []string{"gpu"}, Now: t0})
	if got := motd(); got != "gpu cn001\n" {
		t.Fatalf("after the tag: %q", got)
	}
}

// The view the templates see follows the store when many fetches render
// at once: they agree on a tree, a heartbeat (the nodes table changes,
// nothing a template reads) leaves the trees as they were, a change to a
// machine (its rack) reaches every node's slurm.conf although the view
// before it had that machine's data and slurm.conf was rendered once for
// both nodes, and so does a change of the cluster's variables; the
// templates that read the node still render for each, and a new version
// of the overlay replaces the parsed one.
func TestViewFollowsChanges(t *testing.T) {
	c := newCluster(t, "server", "server")
	r := &overlay.Renderer{Key: c.key}
	a, b := c.ids[0], c.ids[1]
	render := func(machine, tree string) []byte {
		var out []byte
		c.view(t, func(tx *store.Tx) (err error) {
			arch, err := r.Tar(tx, overlay.Target{Machine: machine, Secrets: true}, tree)
			out = arch.Bytes()
			return err
		})
		return out
	}
	const fetches = 16
	got := make([][]byte, fetches)
	var wg sync.WaitGroup
	for i := range fetches {
		wg.Go(func() { got[i] = render([]string{a, b}[i%2], store.TreeSystem) })
	}
	wg.Wait()
	for i := range fetches {
		if !bytes.Equal(got[i], got[i%2]) || len(got[i]) == 0 {
			t.Fatalf("fetch %d of node %d differs from the first (%d and %d bytes)", i, i%2, len(got[i]), len(got[i%2]))
		}
	}

	var seen []raftfsm.NodeSeen
	c.view(t, func(tx *store.Tx) error {
		for _, id := range c.ids {
			n, err := tx.StatelessNode(id)
			if err != nil {
				return err
			}
			seen = append(seen, raftfsm.NodeSeen{Machine: id, Generation: n.Generation, Time: t0.Add(time.Hour), Booted: true})
		}
		return nil
	})
	c.l.Must(t, &raftfsm.StatelessSeen{Nodes: seen})
	if after := render(b, store.TreeSystem); !bytes.Equal(after, got[1]) {
		t.Fatalf("a heartbeat changed node B's tree:\n%s", untar(t, after)["etc/slurm/slurm.conf"])
	}

	c.l.Must(t, &raftfsm.RackPut{Rack: raftfsm.Rack{Name: "r7", Height: 42}, Now: t0},
		&raftfsm.LocationSet{Machines: []raftfsm.MachineLocation{{ID: a, Location: raftfsm.Location{Rack: "r7", Unit: 3}}}, Now: t0})
	conf := untar(t, render(b, store.TreeSystem))["etc/slurm/slurm.conf"]
	var lineA string
	for _, l := range strings.Split(conf, "\n") {
		if strings.HasPrefix(l, "NodeName=cn001 ") {
			lineA = l
		}
	}
	if !strings.Contains(lineA, "Features=rack-r7") {
		t.Fatalf("node A's line in B's slurm.conf after A moved to rack r7: %q\n%s", lineA, conf)
	}

	// slurm.conf renders once for both nodes; hostname for each.
	c.l.Must(t, &raftfsm.ClusterVarsSet{Vars: map[string]string{"slurm_controller": "head2"}, Now: t0})
	ta, tb := untar(t, render(a, store.TreeSystem)), untar(t, render(b, store.TreeSystem))
	if !strings.Contains(ta["etc/slurm/slurm.conf"], "SlurmctldHost=head2") || ta["etc/slurm/slurm.conf"] != tb["etc/slurm/slurm.conf"] {
		t.Fatalf("slurm.conf after the cluster variables changed:\n%s\n--- B's:\n%s", ta["etc/slurm/slurm.conf"], tb["etc/slurm/slurm.conf"])
	}
	if ta["etc/hostname"] != "cn001\n" || tb["etc/hostname"] != "cn002\n" {
		t.Fatalf("hostnames: %q %q", ta["etc/hostname"], tb["etc/hostname"])
	}

	// A new version of the overlay is parsed again.
	files, err := overlay.Example("compute")
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		if f.Path == "system/etc/hostname.tmpl" {
			files[i].Content = []byte("{{ .Node.Name }}.v2\n")
		}
	}
	c.l.Must(t, &raftfsm.OverlayPut{Name: "compute", Files: bodies(files), Now: t0})
	if got := untar(t, render(a, store.TreeSystem))["etc/hostname"]; got != "cn001.v2\n" {
		t.Fatalf("hostname after the overlay changed: %q", got)
	}
}

// TestTarPieces checks that a Tar's pieces make the archive archive/tar
// writes for the same files: short and long (PAX) names, empty content,
// content that ends on a block and content that does not.
func TestTarPieces(t *testing.T) {
	files := []overlay.File{
		{Path: "etc/empty", Mode: 0o644},
		{Path: "etc/block", Mode: 0o600, Data: bytes.Repeat([]byte{'b'}, 1024)},
		{Path: "etc/" + strings.Repeat("long-name/", 12) + "file", Mode: 0o755, Data: []byte("x\n")},
		{Path: "etc/odd", Mode: 0o400, Data: bytes.Repeat([]byte{'o'}, 1500)},
		{Path: "etc/large", Mode: 0o644, Data: bytes.Repeat([]byte{'l'}, 100<<10+3)},
		{Path: "etc/small", Mode: 0o644, Data: []byte("after the large one\n")},
	}
	var want bytes.Buffer
	w := tar.NewWriter(&want)
	for _, f := range files {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.Path, Mode: int64(f.Mode), Size: int64(len(f.Data)), ModTime: time.Unix(0, 0).UTC(), Format: tar.FormatPAX}
		if err := w.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(f.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	arch, err := overlay.NewTar(files)
	if err != nil {
		t.Fatal(err)
	}
	if arch.Size != int64(want.Len()) {
		t.Errorf("Size %d, archive/tar wrote %d bytes", arch.Size, want.Len())
	}
	var got bytes.Buffer
	if n, err := arch.WriteTo(&got); err != nil || n != arch.Size {
		t.Fatalf("WriteTo: %d bytes, %v", n, err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) || !bytes.Equal(arch.Bytes(), want.Bytes()) {
		t.Errorf("the pieces differ from archive/tar's archive (%d and %d bytes)", got.Len(), want.Len())
	}
	// A large file's content is the rendering itself, not a copy.
	large := files[4].Data
	shared := false
	for _, p := range arch.Pieces {
		shared = shared || &p[0] == &large[0]
	}
	if !shared || len(arch.Pieces) != 3 {
		t.Errorf("%d pieces, the large file's content one of them: %v (want 3: before, the content, after)", len(arch.Pieces), shared)
	}
}
