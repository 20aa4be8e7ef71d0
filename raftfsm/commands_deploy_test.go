package raftfsm_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/pgexport/pgtest"
)

const jobA, jobB, jobC = "j-0000019ad5a10001", "j-0000019ad5a10002", "j-0000019ad5a10003"

// deployLog is a store with two commissioned machines, debian-13 20261201
// in the catalog and a subnet with a static range.
func deployLog(t *testing.T) *fsmtest.Log {
	t.Helper()
	l := fsmtest.Open(t)
	commissionFleet(t, l, 2)
	l.Must(t, addOS("debian-13", "", "20261201", t0))
	pfx := netip.MustParsePrefix
	l.Must(t,
		&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "fab1", Kind: store.FabricEthernet, Created: t0}},
		&raftfsm.SubnetPut{Subnet: raftfsm.Subnet{CIDR: pfx("10.9.0.0/24"), Fabric: "fab1", Purpose: "provisioning", Gateway: netip.MustParseAddr("10.9.0.1"), Domain: "lab.example", Created: t0}},
		&raftfsm.RangePut{Range: raftfsm.Range{Subnet: pfx("10.9.0.0/24"), Kind: store.RangeStatic, First: netip.MustParseAddr("10.9.0.100"), Last: netip.MustParseAddr("10.9.0.199"), Created: t0}},
	)
	return l
}

func deployJob(id, machine string) raftfsm.DeployJob {
	v := osVersion("20261201", t0)
	return raftfsm.DeployJob{
		ID: id, Machine: machine, Kind: store.JobKindDeploy, OS: "debian-13", OSVersion: "20261201",
		Image:    raftfsm.JobImage{SHA256: v.File.SHA256, Size: v.File.Size, RawSHA256: v.RawSHA256, RawSize: v.RawSize, SectorSize: 512, Family: "debian"},
		Disk:     raftfsm.JobDisk{Name: "sda", Serial: "S1", Size: 1 << 30, Rule: "the smallest"},
		Hostname: "node1", FQDN: "node1.lab.example",
		Addresses: []raftfsm.JobAddress{{IP: "10.9.0.100", Subnet: "10.9.0.0/24", Interface: "eno1"}},
		UserData:  raftfsm.JobUserData{SSHKeys: []string{"ssh-ed25519 AAAA op"}, Packages: []string{"htop"}},
	}
}

func start(j raftfsm.DeployJob, minute int) *raftfsm.DeployStart {
	return &raftfsm.DeployStart{Job: j, Now: t0.Add(time.Duration(minute) * time.Minute)}
}

func report(job, step, state string, minute int) *raftfsm.JobReport {
	return &raftfsm.JobReport{Job: job, Step: step, State: state, Bytes: 10, Total: 100, Now: t0.Add(time.Duration(minute) * time.Minute)}
}

func jobOf(t *testing.T, l *fsmtest.Log, id string) store.DeployJob {
	return view(t, l, func(tx *store.Tx) (store.DeployJob, error) { return tx.DeployJob(id) })
}

func addressOwner(t *testing.T, l *fsmtest.Log, ip string) string {
	var owner string
	l.DB.View(func(tx *store.Tx) error {
		if a, err := tx.Address(netip.MustParseAddr(ip)); err == nil {
			owner = a.Machine
		}
		return nil
	})
	return owner
}

// A deployment's whole life: made (deploying, address claimed, name
// taken), reported on (running, steps), done (deployed), phoned home,
// released (releasing, then ready with the address freed and the name
// kept).
func TestDeployLifecycle(t *testing.T) {
	l := deployLog(t)
	m := pgtest.ID(0)
	l.Must(t, start(deployJob(jobA, m), 1))
	j := jobOf(t, l, jobA)
	if j.State != store.JobQueued || !j.Created.Equal(t0.Add(time.Minute)) || j.Disk.Serial != "S1" {
		t.Fatalf("job after DeployStart: %+v", j)
	}
	if mm := machineOf(t, l, m); mm.State != store.StateDeploying || mm.Name != "node1" {
		t.Fatalf("machine: %s %q", mm.State, mm.Name)
	}
	if owner := addressOwner(t, l, "10.9.0.100"); owner != m {
		t.Fatalf("10.9.0.100 held by %q", owner)
	}
	l.Must(t, report(jobA, "wipe", "running", 2), report(jobA, "wipe", "done", 2), report(jobA, "write", "running", 3), report(jobA, "write", "running", 4))
	j = jobOf(t, l, jobA)
	if j.State != store.JobRunning || !j.Started.Equal(t0.Add(2*time.Minute)) || len(j.Steps) != 2 || j.Steps[1].Step != "write" || !j.LastReport.Equal(t0.Add(4*time.Minute)) {
		t.Fatalf("job while writing: %+v", j)
	}
	// Phone home before done: refused (no deployed system yet).
	if err := l.Apply(&raftfsm.PhoneHome{Job: jobA, Now: t0}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("phone home while writing: %v", err)
	}
	l.Must(t, report(jobA, "write", "done", 5), report(jobA, "done", "done", 6))
	if j = jobOf(t, l, jobA); j.State != store.JobDone || !j.Finished.Equal(t0.Add(6*time.Minute)) {
		t.Fatalf("job done: %+v", j)
	}
	if mm := machineOf(t, l, m); mm.State != store.StateDeployed {
		t.Fatalf("machine after done: %s", mm.State)
	}
	if err := l.Apply(report(jobA, "done", "done", 7)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a report after done: %v", err)
	}
	l.Must(t, &raftfsm.PhoneHome{Job: jobA, Hostname: "node1.lab.example", Now: t0.Add(9 * time.Minute)})
	if j = jobOf(t, l, jobA); !j.PhonedHome.Equal(t0.Add(9*time.Minute)) || j.PhoneHost != "node1.lab.example" {
		t.Fatalf("phoned home: %+v", j)
	}
	// Release.
	if err := l.Apply(&raftfsm.ReleaseStart{ID: jobB, Machine: m, Wipe: "sideways", Now: t0}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("wipe sideways: %v", err)
	}
	l.Must(t, &raftfsm.ReleaseStart{ID: jobB, Machine: m, Wipe: store.WipeQuick, Now: t0.Add(10 * time.Minute)})
	r := jobOf(t, l, jobB)
	if r.Kind != store.JobKindRelease || r.Disk.Serial != "S1" || len(r.Addresses) != 1 || r.Prior != store.StateDeployed {
		t.Fatalf("release job: %+v", r)
	}
	if mm := machineOf(t, l, m); mm.State != store.StateReleasing {
		t.Fatalf("machine releasing: %s", mm.State)
	}
	// The phone-home token ends with the release.
	if err := l.Apply(&raftfsm.PhoneHome{Job: jobA, Now: t0}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("phone home while releasing: %v", err)
	}
	l.Must(t, report(jobB, "wipe", "running", 11), report(jobB, "done", "done", 12))
	mm := machineOf(t, l, m)
	if mm.State != store.StateReady || mm.Name != "node1" {
		t.Fatalf("released: %s %q (want ready, name kept)", mm.State, mm.Name)
	}
	if owner := addressOwner(t, l, "10.9.0.100"); owner != "" {
		t.Fatalf("10.9.0.100 still held by %s", owner)
	}
	jobs := view(t, l, func(tx *store.Tx) ([]store.DeployJob, error) { return tx.MachineDeployJobs(m, 0) })
	if len(jobs) != 2 || jobs[0].ID != jobB || jobs[1].ID != jobA {
		t.Fatalf("history %v", jobs)
	}
}

// Every refusal names the reason and changes nothing.
func TestDeployStartRefusals(t *testing.T) {
	m0, m1 := pgtest.ID(0), pgtest.ID(1)
	cases := map[string]struct {
		setup func(l *fsmtest.Log)
		job   func() raftfsm.DeployJob
		kind  error
		text  string
	}{
		"unknown OS":      {job: func() raftfsm.DeployJob { j := deployJob(jobB, m1); j.OS = "plan9"; return j }, kind: store.ErrNotFound, text: "plan9"},
		"unknown version": {job: func() raftfsm.DeployJob { j := deployJob(jobB, m1); j.OSVersion = "19990101"; return j }, kind: store.ErrNotFound, text: "19990101"},
		"image changed": {job: func() raftfsm.DeployJob {
			j := deployJob(jobB, m1)
			j.Image.RawSHA256 = strings.Repeat("ab", 32)
			return j
		}, kind: store.ErrConflict, text: "not the image the job pins"},
		"disk too small": {job: func() raftfsm.DeployJob { j := deployJob(jobB, m1); j.Disk.Size = 100; return j }, kind: store.ErrInvalid, text: "smaller than"},
		"4Kn disk":       {job: func() raftfsm.DeployJob { j := deployJob(jobB, m1); j.Disk.LogicalBlockSize = 4096; return j }, kind: store.ErrInvalid, text: "4096-byte logical blocks"},
		"address taken": {setup: func(l *fsmtest.Log) {}, job: func() raftfsm.DeployJob {
			j := deployJob(jobB, m1)
			j.Hostname, j.FQDN = "node2", ""
			return j
		}, kind: store.ErrConflict, text: "10.9.0.100"},
		"hostname taken": {job: func() raftfsm.DeployJob {
			j := deployJob(jobB, m1)
			j.Addresses = nil
			return j
		}, kind: store.ErrConflict, text: "hostname node1"},
		"not ready": {job: func() raftfsm.DeployJob {
			j := deployJob(jobB, m0)
			j.Addresses, j.Hostname, j.FQDN = nil, "other", ""
			return j
		}, kind: store.ErrTransition, text: "only a ready machine deploys"},
		"bad key": {job: func() raftfsm.DeployJob {
			j := deployJob(jobB, m1)
			j.UserData.SSHKeys = []string{"AAAA\nssh-rsa x"}
			return j
		}, kind: store.ErrInvalid, text: "SSH key 1"},
		"bad package": {job: func() raftfsm.DeployJob {
			j := deployJob(jobB, m1)
			j.UserData.Packages = []string{"htop; rm -rf /"}
			return j
		}, kind: store.ErrInvalid, text: "not a package name"},
		"job exists": {job: func() raftfsm.DeployJob {
			j := deployJob(jobA, m1)
			j.Addresses, j.Hostname, j.FQDN = nil, "x1", ""
			return j
		}, kind: store.ErrConflict, text: "exists"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l := deployLog(t)
			l.Must(t, start(deployJob(jobA, m0), 1)) // m0 deploying, holding node1 and 10.9.0.100
			before := view(t, l, func(tx *store.Tx) (uint64, error) { return tx.TableIndex(store.TableDeployJobs), nil })
			err := l.Apply(start(c.job(), 2))
			if !errors.Is(err, c.kind) || !strings.Contains(store.Public(err), c.text) {
				t.Fatalf("got %v; want %v naming %q", err, c.kind, c.text)
			}
			if mm := machineOf(t, l, m1); mm.State != store.StateReady || mm.Name == "node1" || mm.Name == "node2" {
				t.Errorf("refused deploy moved the machine: %s %q", mm.State, mm.Name)
			}
			if after := view(t, l, func(tx *store.Tx) (uint64, error) { return tx.TableIndex(store.TableDeployJobs), nil }); after != before {
				t.Errorf("refused deploy wrote a job")
			}
			if owner := addressOwner(t, l, "10.9.0.100"); owner != m0 {
				t.Errorf("10.9.0.100 now held by %q", owner)
			}
		})
	}
}

func TestJobCancel(t *testing.T) {
	m := pgtest.ID(0)
	t.Run("before writing", func(t *testing.T) {
		l := deployLog(t)
		l.Must(t, start(deployJob(jobA, m), 1), &raftfsm.JobCancel{Job: jobA, Requester: "admin", Now: t0.Add(2 * time.Minute)})
		if j := jobOf(t, l, jobA); j.State != store.JobCancelled || !strings.Contains(j.Error, "by admin") {
			t.Fatalf("job: %+v", j)
		}
		if mm := machineOf(t, l, m); mm.State != store.StateReady {
			t.Fatalf("machine: %s", mm.State)
		}
		if owner := addressOwner(t, l, "10.9.0.100"); owner != "" {
			t.Fatalf("address still held by %s", owner)
		}
		if err := l.Apply(report(jobA, "wipe", "running", 3)); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("a report for a cancelled job: %v", err)
		}
		// The machine deploys again.
		l.Must(t, start(deployJob(jobB, m), 4))
	})
	t.Run("after writing started", func(t *testing.T) {
		l := deployLog(t)
		l.Must(t, start(deployJob(jobA, m), 1), report(jobA, "write", "running", 2), &raftfsm.JobCancel{Job: jobA, Now: t0.Add(3 * time.Minute)})
		j := jobOf(t, l, jobA)
		if j.State != store.JobRunning || !j.Cancel {
			t.Fatalf("job: %+v", j)
		}
		if err := l.Apply(&raftfsm.JobCancel{Job: jobA, Now: t0}); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second cancel: %v", err)
		}
		// The agent wipes and fails.
		l.Must(t, report(jobA, "wipe", "running", 4), &raftfsm.JobReport{Job: jobA, Step: "wipe", State: "failed", Message: "cancelled: disk wiped", Now: t0.Add(5 * time.Minute)})
		j = jobOf(t, l, jobA)
		if j.State != store.JobFailed || !strings.HasPrefix(j.Error, "cancelled by an operator") {
			t.Fatalf("job: %+v", j)
		}
		if mm := machineOf(t, l, m); mm.State != store.StateDeployFailed {
			t.Fatalf("machine: %s", mm.State)
		}
		if owner := addressOwner(t, l, "10.9.0.100"); owner != m {
			t.Fatalf("a failed deployment keeps its address until released: %q", owner)
		}
		// Release from deploy-failed, cancelled before it wipes: back to
		// deploy-failed.
		l.Must(t, &raftfsm.ReleaseStart{ID: jobB, Machine: m, Wipe: store.WipeFull, Now: t0.Add(6 * time.Minute)}, &raftfsm.JobCancel{Job: jobB, Now: t0.Add(7 * time.Minute)})
		if mm := machineOf(t, l, m); mm.State != store.StateDeployFailed {
			t.Fatalf("machine after the cancelled release: %s", mm.State)
		}
	})
}

func TestJobTimeout(t *testing.T) {
	m := pgtest.ID(0)
	l := deployLog(t)
	l.Must(t, start(deployJob(jobA, m), 1), report(jobA, "write", "running", 2))
	var due []*raftfsm.JobTimeout
	l.DB.View(func(tx *store.Tx) (err error) {
		due, err = raftfsm.DueTimeouts(tx, t0.Add(20*time.Minute), 30*time.Minute, time.Hour)
		return err
	})
	if len(due) != 0 {
		t.Fatalf("due after 18 minutes: %v", due)
	}
	l.DB.View(func(tx *store.Tx) (err error) {
		due, err = raftfsm.DueTimeouts(tx, t0.Add(40*time.Minute), 30*time.Minute, time.Hour)
		return err
	})
	if len(due) != 1 || due[0].Job != jobA || !due[0].Basis.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("due after 38 minutes: %+v", due)
	}
	// A report applied after the leader decided voids its timeout.
	l.Must(t, report(jobA, "write", "running", 39))
	if err := l.Apply(due[0]); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale timeout: %v", err)
	}
	l.Must(t, &raftfsm.JobTimeout{Job: jobA, Basis: t0.Add(39 * time.Minute), After: 30 * time.Minute, Now: t0.Add(70 * time.Minute)})
	j := jobOf(t, l, jobA)
	if j.State != store.JobFailed || !strings.Contains(j.Error, "no report for 30m0s; last step write (running)") {
		t.Fatalf("job: %+v", j)
	}
	if mm := machineOf(t, l, m); mm.State != store.StateDeployFailed {
		t.Fatalf("machine: %s", mm.State)
	}
	// A queued job whose machine never booted: the queued timeout.
	m1 := pgtest.ID(1)
	j2 := deployJob(jobB, m1)
	j2.Addresses, j2.Hostname, j2.FQDN = nil, "node2", ""
	l.Must(t, start(j2, 100))
	l.DB.View(func(tx *store.Tx) (err error) {
		due, err = raftfsm.DueTimeouts(tx, t0.Add(150*time.Minute), 30*time.Minute, time.Hour)
		return err
	})
	if len(due) != 0 {
		t.Fatalf("queued job due after 50 minutes: %+v", due)
	}
	l.DB.View(func(tx *store.Tx) (err error) {
		due, err = raftfsm.DueTimeouts(tx, t0.Add(161*time.Minute), 30*time.Minute, time.Hour)
		return err
	})
	l.Must(t, due[0])
	if j := jobOf(t, l, jobB); !strings.Contains(j.Error, "did not start the deploy agent within 1h0m0s") {
		t.Fatalf("queued timeout: %+v", j)
	}
}

func TestRecommissionFreesDeployment(t *testing.T) {
	m := pgtest.ID(0)
	l := deployLog(t)
	l.Must(t, start(deployJob(jobA, m), 1), report(jobA, "done", "done", 2))
	if err := l.Apply(&raftfsm.Recommission{ID: m, Now: t0.Add(3 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if owner := addressOwner(t, l, "10.9.0.100"); owner != "" {
		t.Fatalf("address still held by %s after re-commission", owner)
	}
	if mm := machineOf(t, l, m); mm.State != store.StateNew {
		t.Fatalf("machine: %s", mm.State)
	}
}

func TestJobReportBounds(t *testing.T) {
	m := pgtest.ID(0)
	l := deployLog(t)
	l.Must(t, start(deployJob(jobA, m), 1))
	for name, r := range map[string]*raftfsm.JobReport{
		"unknown step":  {Job: jobA, Step: "format-c", State: "running"},
		"unknown state": {Job: jobA, Step: "write", State: "meh"},
		"negative":      {Job: jobA, Step: "write", State: "running", Bytes: -1},
		"long message":  {Job: jobA, Step: "write", State: "running", Message: strings.Repeat("x", store.MaxJobMessage+1)},
		"done running":  {Job: jobA, Step: "done", State: "running"},
		"unknown job":   {Job: jobC, Step: "write", State: "running"},
	} {
		if err := l.Apply(r); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if j := jobOf(t, l, jobA); j.State != store.JobQueued || len(j.Steps) != 0 {
		t.Fatalf("refused reports changed the job: %+v", j)
	}
	// Steps are bounded: the oldest go.
	for i := range store.MaxJobSteps + 10 {
		step := []string{"wipe", "write"}[i%2]
		l.Must(t, report(jobA, step, "done", 2+i))
	}
	if j := jobOf(t, l, jobA); len(j.Steps) != store.MaxJobSteps {
		t.Fatalf("%d steps kept", len(j.Steps))
	}
}
