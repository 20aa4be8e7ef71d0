package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/boottoken"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// addOSVersion puts debian-13 (raw size raw) in the catalog through the
// OS catalog's own command, as an import would.
func addOSVersion(t testing.TB, n *nodetest.Node, version string, raw int64) {
	t.Helper()
	now := time.Now().UTC()
	_, err := n.Cluster().Apply(context.Background(), &raftfsm.OSVersionAdd{
		Name: "debian-13", Family: store.FamilyDebian, Node: n.Name(),
		New: raftfsm.OSVersion{
			Version: version, File: raftfsm.ImageFile{Name: raftfsm.OSFileName, Size: raw / 5, SHA256: fmt.Sprintf("%064x", "zst"+version)},
			RawSize: raw, RawSHA256: fmt.Sprintf("%064x", "raw"+version), SectorSize: 512, Format: "qcow2", Imported: now,
		},
		Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// provisioningSubnet is 10.0.0.0/24 (the test reports boot from 10.0.0.51)
// with a static range from .100.
func provisioningSubnet(t *testing.T, n *nodetest.Node) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	for _, c := range []raftfsm.Command{
		&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "fab1", Kind: store.FabricEthernet, Created: now}},
		&raftfsm.SubnetPut{Subnet: raftfsm.Subnet{CIDR: netip.MustParsePrefix("10.0.0.0/24"), Fabric: "fab1", Purpose: "provisioning", Gateway: netip.MustParseAddr("10.0.0.1"), Domain: "lab.example", Created: now}},
		&raftfsm.RangePut{Range: raftfsm.Range{Subnet: netip.MustParsePrefix("10.0.0.0/24"), Kind: store.RangeStatic, First: netip.MustParseAddr("10.0.0.100"), Last: netip.MustParseAddr("10.0.0.120"), Created: now}},
	} {
		if _, err := n.Cluster().Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
}

var jobTokenPattern = regexp.MustCompile(`rollcall\.job=(rcj1\.[A-Za-z0-9_.-]+)`)

// bootScript is the machine's iPXE script and, when it deploys, its job
// token.
func bootScript(t *testing.T, n *nodetest.Node, mac string) (string, string) {
	t.Helper()
	n.Store().View(func(tx *store.Tx) error {
		if _, err := tx.Image("commissioning"); err != nil {
			defer n.ImportImage(t, n.Admin, "commissioning", []byte("kernel"), []byte("initrd"))
		}
		return nil
	})
	r := n.Do(t, "GET", "/boot/ipxe?mac="+mac, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("boot script: %s", r)
	}
	m := jobTokenPattern.FindStringSubmatch(string(r.Body))
	if m == nil {
		return string(r.Body), ""
	}
	return string(r.Body), m[1]
}

func jobHeader(tok string) []string { return []string{"X-Rollcall-Job", tok} }

func deployJobOf(t *testing.T, n *nodetest.Node, r nodetest.Response) wire.DeployJob {
	t.Helper()
	var j wire.DeployJob
	r.Decode(t, &j)
	return j
}

func progress(t *testing.T, n *nodetest.Node, tok, step, state string) wire.ProgressReply {
	t.Helper()
	r := n.Do(t, "POST", "/api/v1/jobs/self/progress", wire.ProgressRequest{Step: step, State: state, Bytes: 1 << 20, Total: 4 << 20}, jobHeader(tok)...)
	if r.Status != http.StatusOK {
		t.Fatalf("progress %s %s: %s", step, state, r)
	}
	var p wire.ProgressReply
	r.Decode(t, &p)
	return p
}

func machineState(t *testing.T, n *nodetest.Node, id string) wire.MachineDetail {
	d, _ := getMachine(t, n, n.Admin, id)
	return d
}

// A deployment end to end through the API: the job and its disk shown
// before anything is written, the boot script handing the deploy agent
// its token, /jobs/self as the contract says, progress moving the job,
// done → deployed and the local disk, phone home, release → ready with
// the address freed; and every token misuse refused with nothing changed.
func TestDeployAndRelease(t *testing.T) {
	n := nodetest.Start(t)
	rep := testReport("4c4c4544-0042-3510-8052-b4c04f5644aa", "DEPLOY-1")
	id := commission(t, n, n.Agent, rep).ID
	provisioningSubnet(t, n)
	addOSVersion(t, n, "20261201", 3<<30)
	admin := nodetest.Bearer(n.Admin)

	r := n.Do(t, "POST", "/api/v1/machines/"+id+"/deploy", wire.DeployRequest{OS: "debian-13", Hostname: "node1", Packages: []string{"htop"}, SSHKeys: []string{"ssh-ed25519 AAAAC3Nz op@example"}}, admin...)
	if r.Status != http.StatusCreated {
		t.Fatalf("deploy: %s", r)
	}
	job := deployJobOf(t, n, r)
	if job.State != store.JobQueued || job.Disk.Name != "sda" || job.Disk.Serial != "S455NY0M000000" || !strings.Contains(job.Disk.Rule, "smallest") ||
		job.OSVersion != "20261201" || len(job.Addresses) != 1 || job.Addresses[0].IP != "10.0.0.100" || job.FQDN != "node1.lab.example" {
		t.Fatalf("job: %+v", job)
	}
	if d := machineState(t, n, id); d.State != store.StateDeploying || d.Deployment == nil || d.Deployment.Job != job.ID {
		t.Fatalf("machine: %s %+v", d.State, d.Deployment)
	}
	script, tok := bootScript(t, n, rep.BootMAC)
	if tok == "" || !strings.Contains(script, "rollcall.mode=deploy") || !strings.Contains(script, "rollcall.token=rcb1.") {
		t.Fatalf("boot script of a deploying machine:\n%s", script)
	}

	// Token misuse: refused, nothing changes.
	before := stateOf(n)
	for name, c := range map[string]struct {
		method, path string
		header       []string
		status       int
	}{
		"no token":        {"GET", "/api/v1/jobs/self", nil, http.StatusUnauthorized},
		"wrong token":     {"GET", "/api/v1/jobs/self", jobHeader(tok[:len(tok)-3] + "AAA"), http.StatusUnauthorized},
		"boot token":      {"GET", "/api/v1/jobs/self", jobHeader(n.BootToken(t, rep.BootMAC)), http.StatusUnauthorized},
		"other machine":   {"GET", "/api/v1/jobs/self", append(jobHeader(tok), nodetest.AgentHeader(n.BootToken(t, "52:54:00:ee:00:09"))...), http.StatusForbidden},
		"report no token": {"POST", "/api/v1/jobs/self/progress", nil, http.StatusUnauthorized},
		"phone home now":  {"POST", "/api/v1/phone-home/" + tok, nil, http.StatusNotFound},
		"phone home junk": {"POST", "/api/v1/phone-home/rcj1.j-0000000000000000.x", nil, http.StatusNotFound},
	} {
		if r := n.Do(t, c.method, c.path, wire.ProgressRequest{Step: "write", State: "running"}, c.header...); r.Status != c.status {
			t.Errorf("%s: %s, want %d", name, r, c.status)
		}
	}
	if after := stateOf(n); after.applied != before.applied {
		t.Errorf("refused calls took Raft entries: %d → %d", before.applied, after.applied)
	}

	// The agent's view.
	r = n.Do(t, "GET", "/api/v1/jobs/self", nil, append(jobHeader(tok), nodetest.AgentHeader(n.BootToken(t, rep.BootMAC))...)...)
	if r.Status != http.StatusOK {
		t.Fatalf("jobs/self: %s", r)
	}
	var self wire.JobSelf
	r.Decode(t, &self)
	if self.ID != job.ID || self.Machine != id || self.Kind != "deploy" || self.Wipe != "quick" || self.Image == nil ||
		self.Image.URL != "/os/blobs/"+job.Image.SHA256 || self.Image.Format != "raw+zstd" || self.Image.RawSize != 3<<30 || self.Image.SectorSize != 512 ||
		self.Disk.Serial != "S455NY0M000000" || self.Disk.Name != "sda" || !strings.HasPrefix(self.CAPEM, "-----BEGIN CERTIFICATE") ||
		self.EFILabel != "rollcall debian-13" || self.SELinuxRelabel || self.Seed == nil {
		t.Fatalf("jobs/self: %+v", self)
	}
	for _, want := range []string{"/api/v1/phone-home/" + tok, `"htop"`, "ssh-ed25519 AAAAC3Nz op@example", `hostname: "node1"`, "Merge-Type: list(append)"} {
		if !strings.Contains(self.Seed.UserData, want) {
			t.Errorf("user-data lacks %q:\n%s", want, self.Seed.UserData)
		}
	}
	if !strings.Contains(self.Seed.MetaData, job.ID) || !strings.Contains(self.Seed.NetworkConfig, "10.0.0.100/24") {
		t.Errorf("meta-data %q, network-config %q", self.Seed.MetaData, self.Seed.NetworkConfig)
	}
	for _, bad := range []wire.ProgressRequest{{Step: "format", State: "running"}, {Step: "write", State: "running", Message: strings.Repeat("x", 1025)}} {
		if r := n.Do(t, "POST", "/api/v1/jobs/self/progress", bad, jobHeader(tok)...); r.Status != http.StatusBadRequest {
			t.Errorf("bad report %+v: %s", bad, r)
		}
	}
	if r := n.Do(t, "POST", "/api/v1/jobs/self/progress", map[string]string{"step": strings.Repeat("x", 9000)}, jobHeader(tok)...); r.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("9 KB report: %s", r)
	}
	if p := progress(t, n, tok, "write", "running"); p.Cancel {
		t.Fatal("cancel asked")
	}
	r = n.Do(t, "GET", "/api/v1/machines/"+id+"/jobs", nil, admin...)
	var list wire.JobList
	r.Decode(t, &list)
	if len(list.Deploy) != 1 || list.Deploy[0].State != store.JobRunning || list.Deploy[0].Progress.Step != "write" || list.Deploy[0].Progress.Bytes != 1<<20 {
		t.Fatalf("jobs: %+v", list.Deploy)
	}
	progress(t, n, tok, "write", "done")
	progress(t, n, tok, "done", "done")
	if d := machineState(t, n, id); d.State != store.StateDeployed || d.Name != "node1" {
		t.Fatalf("after done: %s %q", d.State, d.Name)
	}
	if script, tok2 := bootScript(t, n, rep.BootMAC); tok2 != "" || !strings.Contains(script, "boots from its local disk") {
		t.Fatalf("boot script of a deployed machine:\n%s", script)
	}
	if r := n.Do(t, "GET", "/api/v1/jobs/self", nil, jobHeader(tok)...); r.Status != http.StatusUnauthorized || r.ErrorCode() != "job_ended" {
		t.Errorf("a done job's token: %s", r)
	}

	// Phone home.
	req, _ := http.NewRequest("POST", "http://"+n.HTTPAddr()+"/api/v1/phone-home/"+tok, strings.NewReader("instance_id="+job.ID+"&hostname=node1&fqdn=node1.lab.example&pub_key_ed25519=ssh-ed25519+AAAA"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("phone home: %v %v", resp, err)
	}
	resp.Body.Close()
	if d := machineState(t, n, id); d.Deployment == nil || d.Deployment.PhonedHome.IsZero() {
		t.Fatalf("phoned home not shown: %+v", d.Deployment)
	}

	// Deploying a deployed machine is refused.
	if r := n.Do(t, "POST", "/api/v1/machines/"+id+"/deploy", wire.DeployRequest{OS: "debian-13"}, admin...); r.Status != http.StatusConflict {
		t.Errorf("deploy of a deployed machine: %s", r)
	}

	// Release.
	r = n.Do(t, "POST", "/api/v1/machines/"+id+"/release", wire.ReleaseRequest{Wipe: "full"}, admin...)
	if r.Status != http.StatusCreated {
		t.Fatalf("release: %s", r)
	}
	rel := deployJobOf(t, n, r)
	_, rtok := bootScript(t, n, rep.BootMAC)
	if rtok == "" || rtok == tok {
		t.Fatalf("release token %q", rtok)
	}
	r = n.Do(t, "GET", "/api/v1/jobs/self", nil, jobHeader(rtok)...)
	self = wire.JobSelf{}
	r.Decode(t, &self)
	if self.Kind != "release" || self.Wipe != "full" || self.Disk.Serial != "S455NY0M000000" || self.Image != nil {
		t.Fatalf("release jobs/self: %+v", self)
	}
	progress(t, n, rtok, "wipe-full", "running")
	progress(t, n, rtok, "done", "done")
	if d := machineState(t, n, id); d.State != store.StateReady || d.Name != "node1" {
		t.Fatalf("after release: %s %q", d.State, d.Name)
	}
	n.Store().View(func(tx *store.Tx) error {
		if a, err := tx.Address(netip.MustParseAddr("10.0.0.100")); err == nil {
			t.Errorf("10.0.0.100 after release: %+v", a)
		}
		return nil
	})
	if r := n.Do(t, "GET", "/api/v1/jobs/"+rel.ID, nil, admin...); r.Status != http.StatusOK || deployJobOf(t, n, r).State != store.JobDone {
		t.Errorf("release job: %s", r)
	}
	// The old deployment's token phones home no more.
	before = stateOf(n)
	if r := n.Do(t, "POST", "/api/v1/phone-home/"+tok, nil); r.Status != http.StatusNotFound {
		t.Errorf("phone home after release: %s", r)
	}
	if stateOf(n).applied != before.applied {
		t.Error("a refused phone home took a Raft entry")
	}
}

func TestDeployRefused(t *testing.T) {
	n := nodetest.Start(t)
	admin := nodetest.Bearer(n.Admin)
	rep := testReport("4c4c4544-0042-3510-8052-b4c04f5644bb", "DEPLOY-2", "0c:c4:7a:00:01:01")
	id := commission(t, n, n.Agent, rep).ID
	usb := testReport("4c4c4544-0042-3510-8052-b4c04f5644cc", "DEPLOY-3", "0c:c4:7a:00:02:01")
	usb.Disks = []inventory.Disk{{Name: "sda", SizeBytes: 64 << 30, Serial: "USB-1", Transport: "usb", Removable: true}}
	usb.BMC = nil
	usbID := commission(t, n, n.Agent, usb).ID
	fresh := n.Do(t, "POST", "/api/v1/machines", wire.CreateMachineRequest{Name: "fresh", MAC: "52:54:00:aa:00:07"}, admin...)
	var freshM wire.MachineView
	fresh.Decode(t, &freshM)
	addOSVersion(t, n, "huge", 4<<40)
	addOSVersion(t, n, "20261201", 3<<30) // current
	before := stateOf(n)
	for name, c := range map[string]struct {
		machine string
		req     wire.DeployRequest
		status  int
		message string
	}{
		"unknown OS":      {id, wire.DeployRequest{OS: "plan9"}, http.StatusNotFound, "plan9"},
		"unknown version": {id, wire.DeployRequest{OS: "debian-13", Version: "1999"}, http.StatusNotFound, "1999"},
		"no OS":           {id, wire.DeployRequest{}, http.StatusBadRequest, "os is required"},
		"does not fit":    {id, wire.DeployRequest{OS: "debian-13", Version: "huge"}, http.StatusUnprocessableEntity, "smaller than the image's 4.0 TiB"},
		"usb only":        {usbID, wire.DeployRequest{OS: "debian-13"}, http.StatusUnprocessableEntity, "on USB: never a deployment's target"},
		"not ready":       {freshM.ID, wire.DeployRequest{OS: "debian-13"}, http.StatusConflict, "only a ready machine deploys"},
		"unknown disk":    {id, wire.DeployRequest{OS: "debian-13", Disk: "/dev/sdz"}, http.StatusUnprocessableEntity, `no disk of the machine is "/dev/sdz"`},
		"bad user-data":   {id, wire.DeployRequest{OS: "debian-13", UserData: "hello"}, http.StatusBadRequest, "user_data"},
		"bad key":         {id, wire.DeployRequest{OS: "debian-13", SSHKeys: []string{"not a key"}}, http.StatusBadRequest, "SSH key 1"},
		"boot, no BMC":    {usbID, wire.DeployRequest{OS: "debian-13", Boot: true, Disk: "sda"}, http.StatusConflict, "no BMC with power control"},
	} {
		r := n.Do(t, "POST", "/api/v1/machines/"+c.machine+"/deploy", c.req, admin...)
		if r.Status != c.status || !strings.Contains(r.ErrorMessage(), c.message) {
			t.Errorf("%s: %s; want %d with %q", name, r, c.status, c.message)
		}
	}
	if after := stateOf(n); after.applied != before.applied {
		t.Errorf("refused deploys took Raft entries")
	}
}

func TestDeployCancel(t *testing.T) {
	n := nodetest.Start(t)
	admin := nodetest.Bearer(n.Admin)
	rep := testReport("4c4c4544-0042-3510-8052-b4c04f5644dd", "DEPLOY-4", "0c:c4:7a:00:03:01")
	id := commission(t, n, n.Agent, rep).ID
	provisioningSubnet(t, n)
	addOSVersion(t, n, "20261201", 3<<30)
	deploy := func() string {
		if r := n.Do(t, "POST", "/api/v1/machines/"+id+"/deploy", wire.DeployRequest{OS: "debian-13"}, admin...); r.Status != http.StatusCreated {
			t.Fatalf("deploy: %s", r)
		}
		_, tok := bootScript(t, n, rep.BootMAC)
		return tok
	}
	// Before it writes: at once, back to ready, the address freed.
	tok := deploy()
	r := n.Do(t, "POST", "/api/v1/machines/"+id+"/jobs/cancel", nil, admin...)
	if r.Status != http.StatusOK || deployJobOf(t, n, r).State != store.JobCancelled {
		t.Fatalf("cancel: %s", r)
	}
	if d := machineState(t, n, id); d.State != store.StateReady {
		t.Fatalf("after cancel: %s", d.State)
	}
	if r := n.Do(t, "GET", "/api/v1/jobs/self", nil, jobHeader(tok)...); r.Status != http.StatusUnauthorized {
		t.Errorf("a cancelled job's token: %s", r)
	}
	if r := n.Do(t, "POST", "/api/v1/machines/"+id+"/jobs/cancel", nil, admin...); r.Status != http.StatusConflict {
		t.Errorf("cancel without a job: %s", r)
	}
	// After it started writing: the next report says cancel; the agent
	// wipes and fails.
	tok = deploy()
	progress(t, n, tok, "write", "running")
	if r := n.Do(t, "POST", "/api/v1/machines/"+id+"/jobs/cancel", nil, admin...); r.Status != http.StatusOK || !deployJobOf(t, n, r).Cancel {
		t.Fatalf("cancel while writing: %s", r)
	}
	if p := progress(t, n, tok, "write", "running"); !p.Cancel {
		t.Fatal("the agent was not told to cancel")
	}
	progress(t, n, tok, "wipe", "running")
	progress(t, n, tok, "wipe", "failed")
	if d := machineState(t, n, id); d.State != store.StateDeployFailed {
		t.Fatalf("after a cancel while writing: %s", d.State)
	}
}

func TestDeployTimeout(t *testing.T) {
	n := nodetest.StartWith(t, nodetest.Options{Config: `{"deploy_timeout": "1s", "deploy_boot_timeout": "1s"}`})
	admin := nodetest.Bearer(n.Admin)
	rep := testReport("4c4c4544-0042-3510-8052-b4c04f5644ee", "DEPLOY-5", "0c:c4:7a:00:04:01")
	id := commission(t, n, n.Agent, rep).ID
	addOSVersion(t, n, "20261201", 3<<30)
	r := n.Do(t, "POST", "/api/v1/machines/"+id+"/deploy", wire.DeployRequest{OS: "debian-13"}, admin...)
	if r.Status != http.StatusCreated {
		t.Fatalf("deploy: %s", r)
	}
	job := deployJobOf(t, n, r)
	_, tok := bootScript(t, n, rep.BootMAC)
	progress(t, n, tok, "write", "running")
	var got wire.DeployJob
	nodetest.WaitFor(t, "the job to time out", func() bool {
		r := n.Do(t, "GET", "/api/v1/jobs/"+job.ID, nil, admin...)
		r.Decode(t, &got)
		return got.State == store.JobFailed
	})
	if !strings.Contains(got.Error, "last step write (running)") {
		t.Fatalf("timeout error %q", got.Error)
	}
	if d := machineState(t, n, id); d.State != store.StateDeployFailed {
		t.Fatalf("after timeout: %s", d.State)
	}
}

// The deploy agent's progress body, fuzzed against a node with a running
// job: every answer is 200 or a 4xx with the error shape, and an accepted
// report leaves the job with the reported step.
func FuzzProgressBody(f *testing.F) {
	n := nodetest.Start(f)
	rep := testReport("4c4c4544-0042-3510-8052-b4c04f5644ff", "FUZZ-DEPLOY", "0c:c4:7a:00:05:01")
	r := n.Do(f, "POST", "/api/v1/commission", rep, nodetest.AgentHeader(n.BootToken(f, rep.BootMAC))...)
	var reply wire.CommissionReply
	r.Decode(f, &reply)
	addOSVersion(f, n, "20261201", 3<<30)
	r = n.Do(f, "POST", "/api/v1/machines/"+reply.ID+"/deploy", wire.DeployRequest{OS: "debian-13"}, nodetest.Bearer(n.Admin)...)
	if r.Status != http.StatusCreated {
		f.Fatalf("deploy: %s", r)
	}
	var job wire.DeployJob
	r.Decode(f, &job)
	tok, err := boottoken.MintJob(n.Key(f), job.ID)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"step":"write","state":"running","bytes":1,"total":2}`))
	f.Add([]byte(`{"step":"write","state":"running","message":"\u0000"}`))
	f.Add([]byte(`{"step":"wipe","state":"done","bytes":-1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req wire.ProgressRequest
		if json.Unmarshal(body, &req) == nil && req.Step == "done" {
			return // would end the job the fuzzer reports on
		}
		if req.State == "failed" {
			return
		}
		r := n.Do(t, "POST", "/api/v1/jobs/self/progress", body, jobHeader(tok)...)
		checkFuzzReply(t, r, http.StatusOK)
	})
}

// A job made on one node of three, reported on through another, survives
// the leader's loss: the remaining two finish it and agree.
func TestDeployClusterLeaderChange(t *testing.T) {
	nodes := nodetest.StartCluster(t, 3, nodetest.Options{})
	n1 := nodes[0]
	rep := testReport("4c4c4544-0042-3510-8052-b4c04f564411", "DEPLOY-C1", "0c:c4:7a:00:06:01")
	id := commission(t, n1, n1.Agent, rep).ID
	addOSVersion(t, n1, "20261201", 3<<30)
	nodetest.WaitFor(t, "node2 to catch up", func() bool {
		return nodes[1].Cluster().FSM().AppliedIndex() >= n1.Cluster().FSM().AppliedIndex()
	})
	r := nodes[1].Do(t, "POST", "/api/v1/machines/"+id+"/deploy", wire.DeployRequest{OS: "debian-13"}, nodetest.Bearer(n1.Admin)...)
	if r.Status != http.StatusCreated {
		t.Fatalf("deploy on a follower: %s", r)
	}
	job := deployJobOf(t, nodes[1], r)
	tok, _ := boottoken.MintJob(n1.Key(t), job.ID)
	nodetest.WaitFor(t, "node3 to have the job", func() bool {
		var ok bool
		nodes[2].Store().View(func(tx *store.Tx) error { _, err := tx.DeployJob(job.ID); ok = err == nil; return nil })
		return ok
	})
	progress(t, nodes[2], tok, "write", "running")
	// Stop the leader.
	var leader *nodetest.Node
	var rest []*nodetest.Node
	lid, _ := n1.Cluster().Leader()
	for _, n := range nodes {
		if n.Name() == lid {
			leader = n
		} else {
			rest = append(rest, n)
		}
	}
	if leader == nil {
		t.Fatalf("no leader among %s", lid)
	}
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	nodetest.WaitFor(t, "a new leader", func() bool {
		id, _ := rest[0].Cluster().Leader()
		return id != "" && id != lid
	})
	var p wire.ProgressReply
	nodetest.WaitFor(t, "a report through the new leader", func() bool {
		r := rest[0].Do(t, "POST", "/api/v1/jobs/self/progress", wire.ProgressRequest{Step: "done", State: "done"}, jobHeader(tok)...)
		if r.Status == http.StatusOK {
			r.Decode(t, &p)
			return true
		}
		return false
	})
	for _, n := range rest {
		nodetest.WaitFor(t, n.Name()+" to see the machine deployed", func() bool {
			var st string
			n.Store().View(func(tx *store.Tx) error {
				m, _ := tx.Machine(id)
				st = m.State
				return nil
			})
			return st == store.StateDeployed
		})
		var j store.DeployJob
		n.Store().View(func(tx *store.Tx) (err error) { j, err = tx.DeployJob(job.ID); return err })
		if j.State != store.JobDone || len(j.Steps) != 2 {
			t.Errorf("%s: job %+v", n.Name(), j)
		}
	}
}
