package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/lab/bench/dhcp/replica"
	"github.com/rollcall/rollcall/power"
	"github.com/rollcall/rollcall/power/builtin"
	"github.com/rollcall/rollcall/power/ipmi/ipmitest"
	"github.com/rollcall/rollcall/power/powertest"
	"github.com/rollcall/rollcall/power/redfish/redfishtest"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// member is one node of a replicated store, as the runner sees its
// cluster.
type member struct {
	c      *replica.Cluster
	i      int
	leader bool
}

func (m member) Apply(ctx context.Context, cmd raftfsm.Command) (uint64, error) {
	return 0, m.c.Apply(ctx, m.i, cmd)
}

func (m member) IsLeader() bool { return m.leader }

// openSealed stands in for the node's master key: a test's "sealed"
// password is the password itself.
func openSealed(b store.BMC) (string, error) { return string(b.PasswordSealed), nil }

// nodes is a cluster of n members, each running a runner on its own copy
// of the replicated store; member 0 leads and every member is recorded as
// a node of the cluster.
type nodes struct {
	c       *replica.Cluster
	runners []*Runner
	stop    func() // stops the runners; they have recorded their jobs' end when it returns
}

func startNodes(t *testing.T, n int, logTo io.Writer) *nodes {
	t.Helper()
	c, err := replica.New(t.TempDir(), n, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithCancel(context.Background())
	for i := range n {
		if err := c.Apply0(ctx, &raftfsm.NodePut{Node: raftfsm.Node{Name: c.Name(i), RaftAddr: "replica/" + c.Name(i), Joined: time.Now().UTC()}}); err != nil {
			t.Fatal(err)
		}
	}
	ns := &nodes{c: c}
	done := make(chan error, n)
	log := slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for i := range n {
		r, err := New(Config{Node: c.Name(i), Store: c.DB(i), Cluster: member{c, i, i == 0}, Drivers: builtin.NewRegistry(), OpenPassword: openSealed})
		if err != nil {
			t.Fatal(err)
		}
		ns.runners = append(ns.runners, r)
		go func() { done <- r.Run(ctx, log.With("node", c.Name(i))) }()
	}
	stopped := false
	ns.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		for range n {
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Run returned %v after cancel, want context.Canceled", err)
			}
		}
	}
	t.Cleanup(ns.stop) // before the stores close
	return ns
}

// machine records a machine with an IPMI BMC.
func (ns *nodes) machine(t *testing.T, id string, b store.BMC) store.Machine {
	t.Helper()
	ctx := context.Background()
	if err := ns.c.Apply0(ctx, &raftfsm.MachineCreate{ID: id, Now: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := ns.c.Apply0(ctx, &raftfsm.BMCSet{Machine: id, BMC: raftfsm.BMCBody(b), Now: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	var m store.Machine
	ns.c.DB(0).View(func(tx *store.Tx) error { m, _ = tx.Machine(id); return nil })
	return m
}

// startBMC starts a simulated IPMI BMC with one admin account.
func startBMC(t *testing.T, password string) *ipmitest.BMC {
	t.Helper()
	bmc, err := ipmitest.Start("admin", password)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bmc.Close)
	return bmc
}

// A job queued while its runner is down is run by another node: the queue is
// in the replicated state, not in the node that accepted the request.
func TestJobSurvivesItsRunner(t *testing.T) {
	bmc := startBMC(t, "pw-Survive-1")
	ns := startNodes(t, 3, t.Output())
	id := "m-0000000000b2"
	ns.machine(t, id, store.BMC{Driver: "ipmi", Address: bmc.Address(), User: "admin", PasswordSealed: []byte("pw-Survive-1"), Settings: map[string]string{"cipher": "17"}})
	// Queue a job for a runner that is taken and whose lease has run out:
	// as if the node that started it died.
	now := time.Now().UTC()
	job := store.Job{ID: newID(now), Machine: id, Kind: store.JobPower, Arg: "on", Runner: "ghost"}
	// Queued and taken in one entry, so no live node takes it first.
	batch, err := raftfsm.NewBatch(&raftfsm.JobEnqueue{Job: raftfsm.JobBody(job), Now: now}, &raftfsm.JobStart{ID: job.ID, Node: "ghost", Until: now.Add(-time.Second), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := ns.c.Apply(ctx, 1, batch); err != nil {
		t.Fatal(err)
	}
	leader := ns.runners[0]
	leader.Wake()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done, err := leader.Wait(wctx, job.ID)
	if err != nil || done.Error != "" || done.StartedBy != ns.c.Name(0) || done.Attempts != 2 {
		t.Fatalf("job after its runner was lost: %+v %v; want it run by the leader %s on its second attempt", done, err, ns.c.Name(0))
	}
	if !bmc.PowerOn() {
		t.Fatal("the BMC never got the command")
	}
}

// A job queued through any node runs where it should, and every node's
// Wait sees its end.
func TestEnqueueAndWait(t *testing.T) {
	bmc := startBMC(t, "pw-Queue-2")
	ns := startNodes(t, 3, t.Output())
	m := ns.machine(t, "m-0000000000b3", store.BMC{Driver: "ipmi", Address: bmc.Address(), User: "admin", PasswordSealed: []byte("pw-Queue-2"),
		Settings: map[string]string{"cipher": "17", "runner": ns.c.Name(2)}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := ns.runners[1].Enqueue(ctx, m, store.Job{Kind: store.JobPower, Arg: "on", Requester: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range ns.runners {
		j, err := r.Wait(ctx, id)
		if err != nil || !j.Done || j.Result != "ok" || j.Runner != ns.c.Name(2) || j.StartedBy != ns.c.Name(2) {
			t.Fatalf("node %d: %+v %v; want ok, run by %s as the BMC's runner setting says", i, j, err, ns.c.Name(2))
		}
	}
	if !bmc.PowerOn() {
		t.Fatal("the BMC never got the command")
	}
}

// A failed job's record says what failed in words written for the
// operator, naming the step and the BMC; the driver's error chain goes to
// the log with the job and the machine, and nowhere in the record.
func TestFailureIsPublicAndCauseLogged(t *testing.T) {
	bmc := startBMC(t, "pw-Right-3")
	var logs bytes.Buffer // written by one slog handler, which serialises its writes; read once the runners stop
	ns := startNodes(t, 1, &logs)
	m := ns.machine(t, "m-0000000000b4", store.BMC{Driver: "ipmi", Address: bmc.Address(), User: "admin", PasswordSealed: []byte("pw-Wrong-3"), Settings: map[string]string{"cipher": "17"}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := ns.runners[0]
	id, err := r.Enqueue(ctx, m, store.Job{Kind: store.JobPower, Arg: "status"})
	if err != nil {
		t.Fatal(err)
	}
	j, err := r.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := "power status: BMC " + bmc.Address() + " refused the credentials (wrong user or password, or not enough privilege)"
	if j.Error != want {
		t.Errorf("job error %q, want %q", j.Error, want)
	}
	var events []store.Event
	ns.c.DB(0).View(func(tx *store.Tx) error { events, _ = tx.Events(m.ID); return nil })
	if e := events[len(events)-1]; e.Kind != "bmc-job" || e.Message != "power status failed: "+want {
		t.Errorf("last event %+v, want the bmc-job event with the public message", e)
	}
	ns.stop()
	var failed string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, `msg="bmc job failed"`) {
			failed = line
		}
	}
	// The cause is the driver's chain: *power.Error's text, with the sentinel.
	cause := "ipmi bmc " + bmc.Address()
	for _, s := range []string{"job=" + id, "machine=" + m.ID, cause, power.ErrAuth.Error()} {
		if !strings.Contains(failed, s) {
			t.Errorf("the log line of the failure lacks %q: %q", s, failed)
		}
	}
	if strings.Contains(j.Error, cause) || strings.Contains(j.Error, power.ErrAuth.Error()) {
		t.Errorf("the record carries the driver's error: %q", j.Error)
	}
	// Neither the password tried nor the BMC's own reaches the log, the
	// record or the events.
	for _, pw := range []string{"pw-Wrong-3", "pw-Right-3"} {
		if strings.Contains(logs.String(), pw) || strings.Contains(j.Error, pw) || strings.Contains(fmt.Sprint(events), pw) {
			t.Errorf("password %q reached the log, the job record or an event", pw)
		}
	}
}

// The public reason comes from the error's class, never from its text.
func TestPublicReason(t *testing.T) {
	b := store.BMC{Driver: "redfish", Address: "10.0.0.5"}
	wrap := func(sentinel error) error {
		return power.Errorf("redfish", b.Address, "login", fmt.Errorf("%w: POST /redfish/v1/SessionService/Sessions: 401 internal-detail", sentinel))
	}
	for name, c := range map[string]struct {
		err  error
		want string
	}{
		"auth":        {wrap(power.ErrAuth), "BMC 10.0.0.5 refused the credentials (wrong user or password, or not enough privilege)"},
		"unreachable": {wrap(power.ErrUnreachable), "BMC 10.0.0.5 did not answer"},
		"deadline":    {power.Errorf("redfish", b.Address, "login", fmt.Errorf("%w: %w", power.ErrUnreachable, context.DeadlineExceeded)), "BMC 10.0.0.5 did not answer in time"},
		"busy":        {wrap(power.ErrBusy), "BMC 10.0.0.5 is still busy; try again later"},
		"unsupported": {wrap(power.ErrUnsupported), "BMC 10.0.0.5 does not offer this"},
		"no redfish":  {wrap(power.ErrNoRedfish), "BMC 10.0.0.5 does not speak Redfish"},
		"unsafe link": {wrap(power.ErrUnsafeLink), "BMC 10.0.0.5 sent a link that leaves the BMC or /redfish/; it was not followed"},
		"bad answer":  {wrap(power.ErrBadAnswer), "BMC 10.0.0.5 answered something that is not a valid reply"},
		"no control":  {wrap(power.ErrNoPowerControl), "driver redfish has no power control for this machine"},
		"driver":      {fmt.Errorf("power driver %q: %w", "redfish", power.ErrUnknownDriver), `this node has no power driver "redfish"`},
		"invalid":     {wrap(power.ErrInvalid), "driver redfish does not accept the address or a setting of BMC 10.0.0.5 (the node's log says which)"},
		"certificate": {power.ErrCertificateChanged{Old: "aa", New: "bb"}, "BMC 10.0.0.5 shows a certificate other than the pinned one; no credentials were sent"},
		"other":       {errors.New("internal-detail"), "BMC 10.0.0.5: failed (the node's log has the cause)"},
	} {
		if got := publicReason(c.err, b); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}

// After commissioning, an IPMI BMC that speaks Redfish with the same account
// gets its vendor driver (event "bmc driver"); an operator's choice is never
// overridden.
func TestRedfishDetection(t *testing.T) {
	dir, err := redfishtest.MockupDir("public-rackmount1")
	if err != nil {
		powertest.Unavailable(t, err.Error())
	}
	fake, err := redfishtest.New(redfishtest.Config{Mockup: dir, RootVendor: "Dell", RootOem: "Dell", ManagerManufacturer: "Dell Inc."})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	ns := startNodes(t, 1, t.Output())
	r, db := ns.runners[0], ns.c.DB(0)
	ctx := context.Background()
	for _, c := range []struct {
		id       string
		operator bool
		want     string
	}{{"m-0000000000d1", false, "idrac"}, {"m-0000000000d2", true, "ipmi"}} {
		ns.machine(t, c.id, store.BMC{
			Driver: "ipmi", Address: "127.0.0.1", User: "admin", PasswordSealed: []byte("secret"),
			Settings: map[string]string{"redfish_address": fake.URL()}, Operator: c.operator,
		})
		if err := r.QueueDetect(ctx, c.id); err != nil {
			t.Fatal(err)
		}
		var m store.Machine
		var events []store.Event
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			done := false
			db.View(func(tx *store.Tx) error {
				m, _ = tx.Machine(c.id)
				events, _ = tx.Events(c.id)
				jobs, _ := tx.MachineJobs(c.id, 0)
				// An operator's choice queues nothing at all.
				done = c.operator && len(jobs) == 0 || len(jobs) == 1 && jobs[0].Done
				return nil
			})
			if done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: detection did not settle", c.id)
			}
		}
		if m.BMC.Driver != c.want {
			t.Fatalf("%s: driver %s, want %s", c.id, m.BMC.Driver, c.want)
		}
		if !c.operator && (!hasEventKind(events, "bmc driver") || m.BMC.CertSHA256 == "") {
			t.Fatalf("%s: no bmc driver event or no pinned certificate: %+v %+v", c.id, events, m.BMC)
		}
	}
}

func hasEventKind(events []store.Event, kind string) bool {
	for _, e := range events {
		if e.Kind == kind {
			return true
		}
	}
	return false
}
