// Package jobs owns the BMC job runner: power, boot-device, probe and
// Redfish-detection commands queued through Raft (store/jobs.go). Any node
// accepts a request and queues it; the node that reaches the BMC's network
// runs it (the leader when no node is named, or when the named one left);
// the outcome comes back as the job's record and events on the machine. A
// job started by a node that then died is started again elsewhere once its
// lease runs out.
//
// A job's record carries a public message, written here where the failure
// is made ("power on: BMC 10.0.0.5 did not answer"); the driver's full
// error chain goes only to the node's log, with the job and the machine.
//
// The runner knows the store, the power drivers and the Raft commands of
// the job queue; it is handed the cluster as the small interface it
// declares, and neither the API nor how the node is wired.
package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/rollcall/rollcall/power"
	"github.com/rollcall/rollcall/power/redfish"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

const (
	jobLease   = 2 * time.Minute // a runner must finish within this, or another node starts the job again
	jobTimeout = 90 * time.Second
	jobRunners = 16
)

// Cluster is what the runner needs of the Raft cluster: to propose the
// queue's commands (JobEnqueue, JobStart, JobFinish) and to know whether
// this node leads.
type Cluster interface {
	Apply(ctx context.Context, cmd raftfsm.Command) (uint64, error)
	IsLeader() bool
}

// Config is what a Runner needs.
type Config struct {
	Node    string    // this node's name: jobs whose runner it is run here
	Store   *store.DB // the node's local copy
	Cluster Cluster
	Drivers *power.Registry
	// OpenPassword opens a BMC's sealed password (the node holds the
	// master key). Its error's text is recorded in the job as it is, so it
	// must be written for the operator (what is wrong, what to do) and
	// carry nothing internal.
	OpenPassword func(store.BMC) (string, error)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Runner runs the jobs this node should run, and queues and waits for
// jobs on behalf of the API.
type Runner struct {
	cfg  Config
	wake chan struct{}
}

// New checks the configuration; nothing runs until Run.
func New(cfg Config) (*Runner, error) {
	if cfg.Node == "" || cfg.Store == nil || cfg.Cluster == nil || cfg.Drivers == nil || cfg.OpenPassword == nil {
		return nil, errors.New("bmc jobs: a node name, a store, a cluster, the power drivers and a password opener are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Runner{cfg: cfg, wake: make(chan struct{}, 1)}, nil
}

func newID(now time.Time) string {
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("j-%016x%s", now.UnixNano(), hex.EncodeToString(b[:]))
}

// runnerFor picks the node that should talk to a BMC: the machine's
// "runner" setting, else a node serving DHCP on the VLAN of the subnet that
// holds the BMC's address (it has an interface there), else "" (the leader).
func runnerFor(tx *store.Tx, m store.Machine) string {
	if m.BMC == nil {
		return ""
	}
	if r := m.BMC.Settings["runner"]; r != "" {
		return r
	}
	host := m.BMC.Address
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return ""
	}
	subnets, _ := tx.Subnets()
	for _, s := range subnets {
		if !s.CIDR.Contains(ip.Unmap()) {
			continue
		}
		if v, err := tx.VLAN(s.Fabric, s.VID); err == nil && len(v.Servers) > 0 {
			return v.Servers[0].Node
		}
	}
	return ""
}

// Enqueue queues a job for a machine and returns its ID; the job's ID,
// machine and runner are chosen here.
func (r *Runner) Enqueue(ctx context.Context, m store.Machine, j store.Job) (string, error) {
	now := r.cfg.Now().UTC()
	j.ID, j.Machine = newID(now), m.ID
	r.cfg.Store.View(func(tx *store.Tx) error { j.Runner = runnerFor(tx, m); return nil })
	if _, err := r.cfg.Cluster.Apply(ctx, &raftfsm.JobEnqueue{Job: raftfsm.JobBody(j), Now: now}); err != nil {
		return "", err
	}
	r.Wake()
	return j.ID, nil
}

// Wait blocks until a job is done or ctx ends.
func (r *Runner) Wait(ctx context.Context, id string) (store.Job, error) {
	for {
		ch := r.cfg.Store.WatchTables(store.TableJobs)
		var j store.Job
		err := r.cfg.Store.View(func(tx *store.Tx) error {
			var err error
			j, err = tx.Job(id)
			return err
		})
		if err != nil || j.Done {
			return j, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return j, fmt.Errorf("job %s still running (state it with GET /api/v1/machines/%s/jobs): %w", id, j.Machine, ctx.Err())
		}
	}
}

// Wake makes Run look at the queue now rather than at its next change or
// tick (a job queued elsewhere arrives as a change anyway).
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// QueueDetect asks, after commissioning, whether an IPMI BMC speaks Redfish
// with the same account (best effort: a failure only leaves ipmi in place).
// A machine without such a BMC queues nothing and is no error.
func (r *Runner) QueueDetect(ctx context.Context, id string) error {
	var m store.Machine
	if err := r.cfg.Store.View(func(tx *store.Tx) error { var err error; m, err = tx.Machine(id); return err }); err != nil {
		return err
	}
	if m.BMC == nil || m.BMC.Driver != "ipmi" || m.BMC.Operator || len(m.BMC.PasswordSealed) == 0 {
		return nil
	}
	_, err := r.Enqueue(ctx, m, store.Job{Kind: store.JobDetect, Requester: "commission"})
	return err
}

// Run takes the jobs this node should run and runs them, at most
// jobRunners at once, until ctx ends; it returns once the jobs it started
// have recorded their end, with ctx's error.
func (r *Runner) Run(ctx context.Context, log *slog.Logger) error {
	sem := make(chan struct{}, jobRunners)
	var running sync.Map
	var jobs sync.WaitGroup
	defer jobs.Wait() // a node stops only once its jobs have recorded their end
	return r.cfg.Store.Follow(ctx, []string{store.TableJobs, store.TableCluster}, 10*time.Second, r.wake, func(ctx context.Context) error {
		var pending []store.Job
		members := map[string]bool{}
		r.cfg.Store.View(func(tx *store.Tx) error {
			pending, _ = tx.PendingJobs()
			nodes, _ := tx.Nodes()
			for _, nd := range nodes {
				members[nd.Name] = true
			}
			return nil
		})
		leader := r.cfg.Cluster.IsLeader()
		now := r.cfg.Now()
		for _, j := range pending {
			mine := j.Runner == r.cfg.Node || leader && (j.Runner == "" || !members[j.Runner])
			free := j.StartedBy == "" || now.After(j.StartedUntil)
			if !mine || !free {
				continue
			}
			if _, busy := running.LoadOrStore(j.ID, true); busy {
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			jobs.Add(1)
			go func(j store.Job) {
				defer func() { <-sem; running.Delete(j.ID); jobs.Done() }()
				r.runJob(ctx, j, log)
			}(j)
		}
		return nil
	})
}

func (r *Runner) runJob(ctx context.Context, j store.Job, log *slog.Logger) {
	now := r.cfg.Now().UTC()
	if _, err := r.cfg.Cluster.Apply(ctx, &raftfsm.JobStart{ID: j.ID, Node: r.cfg.Node, Until: now.Add(jobLease), Now: now}); err != nil {
		return // another node took it, or no quorum: it stays queued
	}
	log = log.With("job", j.ID, "machine", j.Machine, "kind", j.Kind, "arg", j.Arg)
	jctx, cancel := context.WithTimeout(ctx, jobTimeout)
	fin, cause := r.execJob(jctx, j, log)
	cancel()
	fin.ID, fin.Node, fin.Now = j.ID, r.cfg.Node, r.cfg.Now().UTC()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := r.cfg.Cluster.Apply(fctx, &fin); err != nil {
		log.Warn("job result not recorded", "err", err)
		return
	}
	if fin.Error != "" {
		// The record says what the operator reads; the cause is for here.
		log.Warn("bmc job failed", "error", fin.Error, "err", cause)
	} else {
		log.Info("bmc job done", "result", fin.Result)
	}
}

// execJob talks to the BMC. Every outcome, good or bad, becomes the job's
// result and an event; the BMC password never enters either. A failure's
// Error is public text written here; cause is the error behind it, for the
// log only.
func (r *Runner) execJob(ctx context.Context, j store.Job, log *slog.Logger) (fin raftfsm.JobFinish, cause error) {
	var m store.Machine
	if err := r.cfg.Store.View(func(tx *store.Tx) error {
		var err error
		m, err = tx.Machine(j.Machine)
		return err
	}); err != nil || m.BMC == nil {
		return raftfsm.JobFinish{Error: "machine or its BMC is gone"}, err
	}
	b := *m.BMC
	target := power.Target{Address: b.Address, User: b.User, Settings: b.Settings, PinnedCertSHA256: b.CertSHA256}
	if len(b.PasswordSealed) > 0 {
		pw, err := r.cfg.OpenPassword(b)
		if err != nil {
			return raftfsm.JobFinish{Error: err.Error()}, err // written for the operator (Config.OpenPassword)
		}
		target.Password = pw
	}
	event := func(kind, msg string) { fin.Events = append(fin.Events, raftfsm.Event{Kind: kind, Message: msg}) }
	// failWith records a failure: public is what the record and the event
	// say, err the cause.
	failWith := func(public string, err error) (raftfsm.JobFinish, error) {
		fin.Error = public
		event("bmc-job", fmt.Sprintf("%s %s failed: %s", j.Kind, j.Arg, fin.Error))
		return fin, err
	}
	// fail records a driver's failure at a step, in words chosen from the
	// error's class.
	fail := func(step string, err error) (raftfsm.JobFinish, error) {
		var changed power.ErrCertificateChanged
		if errors.As(err, &changed) {
			event("bmc certificate changed", fmt.Sprintf("%s presents certificate %s, pinned %s: no credentials were sent; check the BMC, then re-pin with rollcall bmc %s -probe", b.Address, short(changed.New), short(changed.Old), m.ID))
		}
		return failWith(step+": "+publicReason(err, b), err)
	}
	if j.Kind == store.JobDetect {
		if b.Operator || b.Driver != "ipmi" {
			fin.Result = "kept " + b.Driver
			return fin, nil
		}
		pin := b.CertSHA256
		if pin == "" {
			addr := target.Setting("redfish_address", b.Address)
			if p, err := power.FetchCertificate(ctx, addr); err == nil {
				pin = p
				target.PinnedCertSHA256 = p
			}
		}
		name, err := redfish.DetectRedfish(ctx, target)
		if err != nil || name == "" {
			log.Debug("no redfish; kept ipmi", "err", err)
			fin.Result = "no redfish; kept ipmi"
			return fin, nil
		}
		fin.BMC = &raftfsm.BMCUpdate{Driver: name, CertSHA256: pin}
		fin.Result = name
		return fin, nil
	}
	drv, err := r.cfg.Drivers.New(b.Driver, target, log)
	if err != nil {
		return fail("driver", err)
	}
	defer drv.Close()
	switch j.Kind {
	case store.JobPower:
		if j.Arg == "status" {
			st, err := drv.Status(ctx)
			if err != nil {
				return fail("power status", err)
			}
			fin.Result = string(st)
			return fin, nil
		}
		a, err := power.ParseAction(j.Arg)
		if err != nil {
			return failWith(fmt.Sprintf("power: %q is not a power action this node knows", j.Arg), err)
		}
		if err := drv.Power(ctx, a); err != nil {
			return fail("power "+j.Arg, err)
		}
		fin.Result = "ok"
		event("power", "power "+j.Arg+" done through "+b.Driver)
	case store.JobBootDev:
		d, err := power.ParseDevice(j.Arg)
		if err != nil {
			return failWith(fmt.Sprintf("bootdev: %q is not a boot device this node knows", j.Arg), err)
		}
		if err := drv.SetBootDevice(ctx, power.BootDevice{Device: d, Persistent: j.Persistent, UEFI: j.UEFI}); err != nil {
			return fail("boot device "+j.Arg, err)
		}
		fin.Result = "ok"
		event("bootdev", fmt.Sprintf("boot device %s (persistent %v, uefi %v)", j.Arg, j.Persistent, j.UEFI))
	case store.JobRecommit:
		if err := drv.SetBootDevice(ctx, power.BootDevice{Device: power.DevicePXE, UEFI: j.UEFI}); err != nil {
			return fail("boot device pxe", err)
		}
		if err := drv.Power(ctx, power.ActionCycle); err != nil {
			return fail("power cycle", err)
		}
		fin.Result = "ok"
		event("recommission", "boot device PXE and power cycle through "+b.Driver)
	case store.JobProbe:
		p, err := drv.Probe(ctx)
		if err != nil {
			return fail("probe", err)
		}
		if p.CertSHA256 != "" && b.CertSHA256 == "" {
			fin.BMC = &raftfsm.BMCUpdate{CertSHA256: p.CertSHA256}
		}
		out, _ := json.Marshal(p)
		fin.Result = string(out)
		event("bmc probe", fmt.Sprintf("%s %s %s firmware %s, power %s, redfish %v", b.Address, p.Vendor, p.Model, p.Firmware, p.PowerState, p.RedfishAvailable))
	default:
		return failWith(fmt.Sprintf("job: unknown job kind %q", j.Kind), nil)
	}
	return fin, nil
}

// publicReason says why a driver failed, in words chosen from the error's
// class (power's sentinels), never taken from its text: a driver's chain
// carries library internals, URLs and the BMC's own words. Each names the
// BMC as configured, which the operator set and may see.
func publicReason(err error, b store.BMC) string {
	bmc := "BMC " + b.Address
	var changed power.ErrCertificateChanged
	switch {
	case errors.As(err, &changed):
		return bmc + " shows a certificate other than the pinned one; no credentials were sent"
	case errors.Is(err, power.ErrAuth):
		return bmc + " refused the credentials (wrong user or password, or not enough privilege)"
	case errors.Is(err, context.DeadlineExceeded):
		return bmc + " did not answer in time"
	case errors.Is(err, power.ErrUnreachable):
		return bmc + " did not answer"
	case errors.Is(err, power.ErrBusy):
		return bmc + " is still busy; try again later"
	case errors.Is(err, power.ErrUnsupported):
		return bmc + " does not offer this"
	case errors.Is(err, power.ErrNoRedfish):
		return bmc + " does not speak Redfish"
	case errors.Is(err, power.ErrUnsafeLink):
		return bmc + " sent a link that leaves the BMC or /redfish/; it was not followed"
	case errors.Is(err, power.ErrBadAnswer):
		return bmc + " answered something that is not a valid reply"
	case errors.Is(err, power.ErrNoPowerControl):
		return "driver " + b.Driver + " has no power control for this machine"
	case errors.Is(err, power.ErrUnknownDriver):
		return fmt.Sprintf("this node has no power driver %q", b.Driver)
	case errors.Is(err, power.ErrInvalid):
		return "driver " + b.Driver + " does not accept the address or a setting of " + bmc + " (the node's log says which)"
	}
	return bmc + ": failed (the node's log has the cause)"
}

func short(fp string) string {
	if len(fp) > 16 {
		return fp[:16] + "…"
	}
	return fp
}
