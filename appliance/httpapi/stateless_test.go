package httpapi_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/overlay"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

var nodeTokenPattern = regexp.MustCompile(`rollcall\.node=(rcn1\.[A-Za-z0-9_.-]+)`)

func nodeHeader(tok string) []string { return []string{"X-Rollcall-Node", tok} }

// statelessImage imports the image compute with a kernel, an initrd and a
// squashfs.
func statelessImage(t *testing.T, n *nodetest.Node) {
	t.Helper()
	var files []wire.ImageFile
	for _, f := range []string{"kernel", "initrd", "squashfs"} {
		files = append(files, n.Upload(t, n.Admin, "compute", f, []byte("the "+f)))
	}
	if r := n.Do(t, "POST", "/api/v1/images", wire.ImageRequest{Name: "compute", Files: files}, nodetest.Bearer(n.Admin)...); r.Status != http.StatusCreated {
		t.Fatalf("image: %s", r)
	}
}

func exampleOverlay(t *testing.T) wire.OverlayRequest {
	t.Helper()
	files, err := overlay.Example("compute")
	if err != nil {
		t.Fatal(err)
	}
	var req wire.OverlayRequest
	for _, f := range files {
		req.Files = append(req.Files, wire.OverlayFile{Path: f.Path, Mode: f.Mode, Content: f.Content})
	}
	return req
}

func untarResponse(t *testing.T, r nodetest.Response) map[string]string {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("overlay: %s", r)
	}
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(r.Body))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
	}
}

// appliedIndex is the node's last applied index: a refused write leaves
// it where it was.
func appliedIndex(n *nodetest.Node) uint64 { return n.Cluster().FSM().AppliedIndex() }

// Stateless nodes through the API: an overlay and a profile, two machines
// assigned (names and addresses from the pool), their boot scripts
// booting the image with their node tokens, each fetching its own tree
// (its own host key, never the other's), the fetch marking it booted, an
// operator's render without secrets, the token boundary, and unassign.
// Bad input takes no Raft entry.
func TestStatelessNodes(t *testing.T) {
	n := nodetest.Start(t)
	admin := nodetest.Bearer(n.Admin)
	repA := testReport("4c4c4544-0042-3510-8052-b4c04f5644a1", "ST-A", "0c:c4:7a:00:01:01")
	repB := testReport("4c4c4544-0042-3510-8052-b4c04f5644a2", "ST-B", "0c:c4:7a:00:01:02")
	a, b := commission(t, n, n.Agent, repA).ID, commission(t, n, n.Agent, repB).ID
	provisioningSubnet(t, n)
	statelessImage(t, n)
	bootScript(t, n, repA.BootMAC) // imports the commissioning image

	// Bad overlays and profiles: refused with the reason, no entry.
	before := appliedIndex(n)
	for name, tc := range map[string]struct {
		body   any
		status int
		want   string
	}{
		"parse":   {wire.OverlayRequest{Files: []wire.OverlayFile{{Path: "system/etc/x.tmpl", Content: []byte("a\n{{ .Node.Name ")}}}, 422, "system/etc/x.tmpl:2"},
		"escape":  {wire.OverlayRequest{Files: []wire.OverlayFile{{Path: "system/../../etc/passwd", Content: []byte("x")}}}, 400, ""},
		"tree":    {wire.OverlayRequest{Files: []wire.OverlayFile{{Path: "etc/passwd", Content: []byte("x")}}}, 400, ""},
		"unknown": {map[string]any{"files": []any{}, "extra": 1}, 400, ""},
	} {
		r := n.Do(t, "PUT", "/api/v1/overlays/compute", tc.body, admin...)
		if r.Status != tc.status || !strings.Contains(r.ErrorMessage(), tc.want) {
			t.Errorf("overlay %s: %s", name, r)
		}
	}
	for name, req := range map[string]wire.ProfileRequest{
		"no image":       {Image: "nosuch"},
		"no overlay":     {Image: "compute", Overlays: []string{"nosuch"}},
		"rollcall arg":   {Image: "compute", Args: "rollcall.node=x"},
		"bad format":     {Image: "compute", NameFormat: "node%s"},
		"bad subnet":     {Image: "compute", Subnets: []string{"10.0.0.1/24"}},
		"missing subnet": {Image: "compute", Subnets: []string{"10.9.0.0/24"}},
	} {
		if r := n.Do(t, "POST", "/api/v1/profiles/compute", req, admin...); r.Status < 400 || r.Status >= 500 {
			t.Errorf("profile %s: %s", name, r)
		}
	}
	if r := n.Do(t, "POST", "/api/v1/machines/"+a+"/assign", wire.AssignRequest{Profile: "nosuch"}, admin...); r.Status != http.StatusNotFound {
		t.Errorf("assign to a missing profile: %s", r)
	}
	// (a profile's first save makes the munge key; a refused one may
	// have made it: that is the one entry allowed)
	if got := appliedIndex(n); got > before+1 {
		t.Fatalf("bad input took %d entries", got-before)
	}

	if r := n.Do(t, "PUT", "/api/v1/overlays/compute", exampleOverlay(t), admin...); r.Status != http.StatusCreated {
		t.Fatalf("overlay: %s", r)
	}
	if r := n.Do(t, "PUT", "/api/v1/cluster/vars", wire.ClusterVars{Vars: map[string]string{"slurm_controller": "head1"}}, admin...); r.Status != http.StatusOK {
		t.Fatalf("cluster vars: %s", r)
	}
	r := n.Do(t, "POST", "/api/v1/profiles/compute", wire.ProfileRequest{Image: "compute", Overlays: []string{"compute"}, NameFormat: "cn%02d", Subnets: []string{"10.0.0.0/24"}, Args: "console=ttyS0"}, admin...)
	if r.Status != http.StatusCreated {
		t.Fatalf("profile: %s", r)
	}
	var nodeA, nodeB wire.AssignResult
	r = n.Do(t, "POST", "/api/v1/machines/"+a+"/assign", wire.AssignRequest{Profile: "compute"}, admin...)
	r.Decode(t, &nodeA)
	// B with boot: assigned, and a power cycle queued through its BMC.
	n.Do(t, "POST", "/api/v1/machines/"+b+"/assign", wire.AssignRequest{Profile: "compute", Boot: true}, admin...).Decode(t, &nodeB)
	if nodeB.PowerJob == "" || nodeB.PowerError != "" {
		t.Fatalf("assign -boot: %+v", nodeB)
	}
	var jobs wire.JobList
	n.Do(t, "GET", "/api/v1/machines/"+b+"/jobs", nil, admin...).Decode(t, &jobs)
	if len(jobs.Jobs) == 0 || jobs.Jobs[0].ID != nodeB.PowerJob || jobs.Jobs[0].Kind != store.JobPower || jobs.Jobs[0].Arg != "cycle" {
		t.Fatalf("B's jobs after assign -boot: %+v", jobs.Jobs)
	}
	if nodeA.Node.Name != "cn01" || nodeB.Node.Name != "cn02" || len(nodeA.Node.Addresses) != 1 || !strings.HasPrefix(nodeA.Node.Addresses[0], "10.0.0.") ||
		!strings.HasPrefix(nodeA.Node.SSHHostKeyPub, "ssh-ed25519 ") || strings.Contains(string(r.Body), "PRIVATE") {
		t.Fatalf("assigned: %+v %+v", nodeA, nodeB)
	}
	if d := machineState(t, n, a); d.State != store.StateStateless {
		t.Fatalf("machine A: %s", d.State)
	}

	// The boot scripts hand each node its token.
	scriptA, _ := bootScript(t, n, repA.BootMAC)
	scriptB, _ := bootScript(t, n, repB.BootMAC)
	tokA, tokB := nodeTokenPattern.FindStringSubmatch(scriptA), nodeTokenPattern.FindStringSubmatch(scriptB)
	if tokA == nil || tokB == nil || !strings.Contains(scriptA, "hostname=cn01") || !strings.Contains(scriptA, "/images/compute/squashfs") {
		t.Fatalf("boot script:\n%s", scriptA)
	}

	// Each node gets its own tree: its hostname and host key, never B's.
	filesA := untarResponse(t, n.Do(t, "GET", "/api/v1/stateless/self/overlay/system", nil, nodeHeader(tokA[1])...))
	filesB := untarResponse(t, n.Do(t, "GET", "/api/v1/stateless/self/overlay/system", nil, nodeHeader(tokB[1])...))
	if filesA["etc/hostname"] != "cn01\n" || filesB["etc/hostname"] != "cn02\n" || !strings.Contains(filesA["etc/slurm/slurm.conf"], "SlurmctldHost=head1") {
		t.Fatalf("trees: %q %q", filesA["etc/hostname"], filesB["etc/hostname"])
	}
	for who, c := range map[string]struct {
		files map[string]string
		pub   string
	}{"A": {filesA, nodeA.Node.SSHHostKeyPub}, "B": {filesB, nodeB.Node.SSHHostKeyPub}} {
		key, err := ssh.ParsePrivateKey([]byte(c.files["etc/ssh/ssh_host_ed25519_key"]))
		if err != nil {
			t.Fatalf("%s's host key: %v", who, err)
		}
		if got := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key.PublicKey()))); got != c.pub {
			t.Fatalf("%s's host key is not its record's: %s vs %s", who, got, c.pub)
		}
		if len(c.files["etc/munge/munge.key"]) != store.MungeKeySize {
			t.Fatalf("%s's munge key: %d bytes", who, len(c.files["etc/munge/munge.key"]))
		}
	}
	if filesA["etc/ssh/ssh_host_ed25519_key"] == filesB["etc/ssh/ssh_host_ed25519_key"] {
		t.Fatal("A and B got the same host key")
	}
	var self wire.StatelessSelf
	n.Do(t, "GET", "/api/v1/stateless/self", nil, nodeHeader(tokA[1])...).Decode(t, &self)
	if self.Name != "cn01" || self.Machine != a || self.RefreshSeconds != 300 {
		t.Fatalf("self: %+v", self)
	}
	// The fetch is the heartbeat: booted, last seen.
	nodetest.WaitFor(t, "machine A booted", func() bool { return machineState(t, n, a).State == store.StateBooted })
	var got wire.StatelessNode
	n.Do(t, "GET", "/api/v1/stateless/nodes/cn01", nil, admin...).Decode(t, &got)
	if got.Booted.IsZero() || got.LastSeen.IsZero() || got.Stale || got.Machine != a {
		t.Fatalf("node A: %+v", got)
	}

	// Token misuse.
	bootTok := n.BootToken(t, repA.BootMAC)
	for name, h := range map[string][]string{
		"none":       nil,
		"garbage":    nodeHeader("rcn1.nope"),
		"forged":     nodeHeader(tokA[1][:len(tokA[1])-4] + "AAAA"),
		"boot token": nodeHeader(bootTok),
		"admin":      admin,
	} {
		if r := n.Do(t, "GET", "/api/v1/stateless/self/overlay/system", nil, h...); r.Status != http.StatusUnauthorized {
			t.Errorf("%s: %s", name, r)
		}
	}
	if r := n.Do(t, "GET", "/api/v1/stateless/self/overlay/etc", nil, nodeHeader(tokA[1])...); r.Status != http.StatusBadRequest {
		t.Errorf("tree etc: %s", r)
	}

	// An operator's render: what the node gets, without its secrets.
	var rd wire.Render
	n.Do(t, "GET", "/api/v1/profiles/compute/render?path=/etc/hostname&node=cn02", nil, admin...).Decode(t, &rd)
	if rd.Content != "cn02\n" || rd.Path != "system/etc/hostname" || rd.Overlay != "compute" {
		t.Fatalf("render: %+v", rd)
	}
	for _, p := range []string{"system/etc/ssh/ssh_host_ed25519_key", "/etc/munge/munge.key"} {
		r := n.Do(t, "GET", "/api/v1/profiles/compute/render?path="+p+"&node=cn01", nil, admin...)
		if r.Status != http.StatusOK || strings.Contains(string(r.Body), "PRIVATE KEY") || bytes.Contains(r.Body, []byte(filesA["etc/munge/munge.key"][:32])) {
			t.Fatalf("render %s shows a secret: %s", p, r)
		}
	}
	if r := n.Do(t, "GET", "/api/v1/profiles/compute/render?path=/etc/nosuch", nil, admin...); r.Status != http.StatusNotFound {
		t.Fatalf("render of a missing file: %s", r)
	}

	// A change that would not render for the assigned nodes is refused;
	// so are deletes of what is in use.
	before = appliedIndex(n)
	bad := exampleOverlay(t)
	bad.Files = append(bad.Files, wire.OverlayFile{Path: "system/etc/bad.tmpl", Content: []byte("{{ index .Node.GPUModels 3 }}")})
	if r := n.Do(t, "PUT", "/api/v1/overlays/compute", bad, admin...); r.Status != http.StatusUnprocessableEntity || !strings.Contains(r.ErrorMessage(), "system/etc/bad.tmpl:1") {
		t.Errorf("overlay failing for the nodes: %s", r)
	}
	if r := n.Do(t, "DELETE", "/api/v1/overlays/compute", nil, admin...); r.Status != http.StatusConflict {
		t.Errorf("delete an overlay in use: %s", r)
	}
	if r := n.Do(t, "DELETE", "/api/v1/profiles/compute", nil, admin...); r.Status != http.StatusConflict {
		t.Errorf("delete a profile in use: %s", r)
	}
	if got := appliedIndex(n); got != before {
		t.Fatalf("refusals took %d entries", got-before)
	}

	// Unassign: ready, the token dead, the name free for the next node.
	if r := n.Do(t, "POST", "/api/v1/machines/"+a+"/unassign", nil, admin...); r.Status != http.StatusOK {
		t.Fatalf("unassign: %s", r)
	}
	if d := machineState(t, n, a); d.State != store.StateReady {
		t.Fatalf("after unassign: %s", d.State)
	}
	if r := n.Do(t, "GET", "/api/v1/stateless/self", nil, nodeHeader(tokA[1])...); r.Status != http.StatusUnauthorized {
		t.Fatalf("the unassigned node's token: %s", r)
	}
	if r := n.Do(t, "POST", "/api/v1/machines/"+a+"/unassign", nil, admin...); r.Status != http.StatusConflict {
		t.Fatalf("unassign twice: %s", r)
	}
	var list wire.StatelessNodeList
	n.Do(t, "GET", "/api/v1/stateless/nodes", nil, admin...).Decode(t, &list)
	if len(list.Nodes) != 1 || list.Nodes[0].Name != "cn02" {
		t.Fatalf("nodes: %+v", list.Nodes)
	}
}
