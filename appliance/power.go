package appliance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/power"
	"github.com/rollcall/rollcall/power/redfish"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// BMC commands run as jobs queued through Raft (store/jobs.go): any node
// accepts the request, the node that reaches the BMC's network runs it, and
// the result comes back as the job's record and an event.

const (
	jobLease      = 2 * time.Minute // a runner must finish within this, or another node starts the job again
	jobTimeout    = 90 * time.Second
	jobWait       = 110 * time.Second // how long an API call waits for its job
	jobRunners    = 16
	aadBMCMachine = "bmc-password/machine/"
	aadBMCAgent   = "bmc-password/"
)

func newJobID() string {
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("j-%016x%s", time.Now().UnixNano(), hex.EncodeToString(b[:]))
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

// enqueueJob queues a job for a machine and returns its ID.
func (n *Node) enqueueJob(ctx context.Context, m store.Machine, j store.Job) (string, error) {
	j.ID, j.Machine = newJobID(), m.ID
	n.db.View(func(tx *store.Tx) error { j.Runner = runnerFor(tx, m); return nil })
	if _, err := n.cluster.Apply(ctx, &raftfsm.JobEnqueue{Job: j, Now: time.Now().UTC()}); err != nil {
		return "", err
	}
	n.wakeJobs()
	return j.ID, nil
}

// waitJob blocks until a job is done or ctx ends.
func (n *Node) waitJob(ctx context.Context, id string) (store.Job, error) {
	for {
		ch := n.db.WatchTables(store.TableJobs)
		var j store.Job
		err := n.db.View(func(tx *store.Tx) error {
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

func (n *Node) wakeJobs() { notifyOnce(n.jobWake) }

// runJobs takes the jobs this node should run and runs them, at most
// jobRunners at once.
func (n *Node) runJobs(ctx context.Context) {
	sem := make(chan struct{}, jobRunners)
	var running sync.Map
	var jobs sync.WaitGroup
	defer jobs.Wait() // a node stops only once its jobs have recorded their end
	n.db.Follow(ctx, []string{store.TableJobs, store.TableCluster}, 10*time.Second, n.jobWake, func(ctx context.Context) error {
		var pending []store.Job
		members := map[string]bool{}
		n.db.View(func(tx *store.Tx) error {
			pending, _ = tx.PendingJobs()
			nodes, _ := tx.Nodes()
			for _, nd := range nodes {
				members[nd.Name] = true
			}
			return nil
		})
		leader := n.cluster.IsLeader()
		now := time.Now()
		for _, j := range pending {
			mine := j.Runner == n.opts.Name || leader && (j.Runner == "" || !members[j.Runner])
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
				n.runJob(ctx, j)
			}(j)
		}
		return nil
	})
}

func (n *Node) runJob(ctx context.Context, j store.Job) {
	now := time.Now().UTC()
	if _, err := n.cluster.Apply(ctx, &raftfsm.JobStart{ID: j.ID, Node: n.opts.Name, Until: now.Add(jobLease), Now: now}); err != nil {
		return // another node took it, or no quorum: it stays queued
	}
	log := n.log.With("job", j.ID, "machine", j.Machine, "kind", j.Kind, "arg", j.Arg)
	jctx, cancel := context.WithTimeout(ctx, jobTimeout)
	fin := n.execJob(jctx, j, log)
	cancel()
	fin.ID, fin.Node, fin.Now = j.ID, n.opts.Name, time.Now().UTC()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := n.cluster.Apply(fctx, &fin); err != nil {
		log.Warn("job result not recorded", "err", err)
		return
	}
	if fin.Error != "" {
		log.Warn("bmc job failed", "err", fin.Error)
	} else {
		log.Info("bmc job done", "result", fin.Result)
	}
}

// execJob talks to the BMC. Every outcome, good or bad, becomes the job's
// result and an event; the BMC password never enters either.
func (n *Node) execJob(ctx context.Context, j store.Job, log interface {
	Warn(string, ...any)
}) raftfsm.JobFinish {
	var m store.Machine
	if err := n.db.View(func(tx *store.Tx) error {
		var err error
		m, err = tx.Machine(j.Machine)
		return err
	}); err != nil || m.BMC == nil {
		return raftfsm.JobFinish{Error: "machine or its BMC is gone"}
	}
	b := *m.BMC
	target := power.Target{Address: b.Address, User: b.User, Settings: b.Settings, PinnedCertSHA256: b.CertSHA256}
	if len(b.PasswordSealed) > 0 {
		pw, err := n.openBMCPassword(b)
		if err != nil {
			return raftfsm.JobFinish{Error: err.Error()}
		}
		target.Password = pw
	}
	fin := raftfsm.JobFinish{}
	event := func(kind, msg string) { fin.Events = append(fin.Events, store.Event{Kind: kind, Message: msg}) }
	fail := func(step string, err error) raftfsm.JobFinish {
		var changed power.ErrCertificateChanged
		if errors.As(err, &changed) {
			event("bmc certificate changed", fmt.Sprintf("%s presents certificate %s, pinned %s: no credentials were sent; check the BMC, then re-pin with rollcall bmc %s -probe", b.Address, short(changed.New), short(changed.Old), m.ID))
		}
		fin.Error = step + ": " + err.Error()
		event("bmc-job", fmt.Sprintf("%s %s failed: %s", j.Kind, j.Arg, fin.Error))
		return fin
	}
	if j.Kind == store.JobDetect {
		if b.Operator || b.Driver != "ipmi" {
			fin.Result = "kept " + b.Driver
			return fin
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
			fin.Result = "no redfish; kept ipmi"
			return fin
		}
		fin.BMC = &raftfsm.BMCUpdate{Driver: name, CertSHA256: pin}
		fin.Result = name
		return fin
	}
	drv, err := n.power.New(b.Driver, target, n.log.With("machine", m.ID))
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
			return fin
		}
		a, err := power.ParseAction(j.Arg)
		if err != nil {
			return fail("power", err)
		}
		if err := drv.Power(ctx, a); err != nil {
			return fail("power "+j.Arg, err)
		}
		fin.Result = "ok"
		event("power", "power "+j.Arg+" done through "+b.Driver)
	case store.JobBootDev:
		d, err := power.ParseDevice(j.Arg)
		if err != nil {
			return fail("bootdev", err)
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
		return fail("job", fmt.Errorf("unknown job kind %q", j.Kind))
	}
	return fin
}

func short(fp string) string {
	if len(fp) > 16 {
		return fp[:16] + "…"
	}
	return fp
}

// machineRef resolves :id for a handler.
func (n *Node) machineRef(c *gin.Context) (store.Machine, bool) {
	var m store.Machine
	if err := n.db.View(func(tx *store.Tx) error {
		var err error
		m, err = tx.MachineByRef(c.Param("id"))
		return err
	}); err != nil {
		n.fail(c, err)
		return m, false
	}
	return m, true
}

// runAndRespond queues a job, waits for it and answers with its record: a
// BMC failure is a 502 naming the BMC and the step.
func (n *Node) runAndRespond(c *gin.Context, m store.Machine, j store.Job) {
	id, err := n.enqueueJob(c.Request.Context(), m, j)
	if err != nil {
		n.fail(c, err)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), jobWait)
	defer cancel()
	done, err := n.waitJob(ctx, id)
	job := wireJob(done)
	if err != nil {
		c.JSON(http.StatusAccepted, job)
		return
	}
	if done.Error != "" {
		c.AbortWithStatusJSON(http.StatusBadGateway, wire.ErrorReply{Error: wire.ErrorDetail{Code: "bmc_error", Message: done.Error}, Job: &job})
		return
	}
	c.JSON(http.StatusOK, job)
}

func (n *Node) postPower(c *gin.Context) {
	var req wire.PowerRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		n.fail(c, err)
		return
	}
	if req.Action != "status" {
		if _, err := power.ParseAction(req.Action); err != nil {
			n.fail(c, badRequest("%v (or status)", err))
			return
		}
	}
	m, ok := n.machineRef(c)
	if !ok {
		return
	}
	n.runAndRespond(c, m, store.Job{Kind: store.JobPower, Arg: req.Action, Requester: "api"})
}

func (n *Node) postBootdev(c *gin.Context) {
	var req wire.BootdevRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		n.fail(c, err)
		return
	}
	if _, err := power.ParseDevice(req.Device); err != nil {
		n.fail(c, badRequest("%v", err))
		return
	}
	m, ok := n.machineRef(c)
	if !ok {
		return
	}
	n.runAndRespond(c, m, store.Job{Kind: store.JobBootDev, Arg: req.Device, Persistent: req.Persistent, UEFI: req.UEFI, Requester: "api"})
}

func (n *Node) getJobs(c *gin.Context) {
	m, ok := n.machineRef(c)
	if !ok {
		return
	}
	var jobs []store.Job
	n.db.View(func(tx *store.Tx) error { jobs, _ = tx.MachineJobs(m.ID, 100); return nil })
	c.JSON(http.StatusOK, wire.JobList{Jobs: nonNil(convert(jobs, wireJob))})
}

// maxBMCSettings bounds a BMC's settings: the drivers read a handful.
const maxBMCSettings = 32

// check holds an operator's BMC to the limits an agent's report has.
func checkBMCRequest(r wire.BMCRequest) error {
	for _, f := range [][2]string{{"driver", r.Driver}, {"address", r.Address}, {"user", r.User}, {"password", r.Password}} {
		if err := inventory.CheckText(f[0], f[1], false); err != nil {
			return badRequest("%v", err)
		}
	}
	if len(r.Settings) > maxBMCSettings {
		return badRequest("settings: %d entries is more than the %d allowed", len(r.Settings), maxBMCSettings)
	}
	for k, v := range r.Settings {
		if err := inventory.CheckText("settings key", k, false); err != nil {
			return badRequest("%v", err)
		}
		if err := inventory.CheckText("settings."+clip(k), v, false); err != nil {
			return badRequest("%v", err)
		}
	}
	return nil
}

// putBMC is PUT /api/v1/machines/:id/bmc: an operator sets the BMC. The
// password is sealed here and never returned.
func (n *Node) putBMC(c *gin.Context) {
	var req wire.BMCRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		n.fail(c, err)
		return
	}
	if err := checkBMCRequest(req); err != nil {
		n.fail(c, err)
		return
	}
	if !n.power.Has(req.Driver) {
		n.fail(c, badRequest("driver %q is not one of %s", clip(req.Driver), strings.Join(n.power.Names(), ", ")))
		return
	}
	if req.Driver != "manual" && req.Address == "" {
		n.fail(c, badRequest("address is required for driver %s", req.Driver))
		return
	}
	m, ok := n.machineRef(c)
	if !ok {
		return
	}
	b := store.BMC{Driver: req.Driver, Address: req.Address, User: req.User, Settings: req.Settings, Source: "operator", Operator: true}
	if req.Password != "" {
		aad := bmcAAD(aadBMCMachine+m.ID, req.Address)
		sealed, err := n.key.Seal([]byte(req.Password), []byte(aad))
		if err != nil {
			n.fail(c, err)
			return
		}
		b.PasswordSealed, b.PasswordAAD = sealed, aad
	}
	if _, err := n.cluster.Apply(c.Request.Context(), &raftfsm.BMCSet{Machine: m.ID, BMC: b, Now: time.Now().UTC()}); err != nil {
		n.fail(c, err)
		return
	}
	if req.Verify || req.Probe {
		n.db.View(func(tx *store.Tx) error { m, _ = tx.Machine(m.ID); return nil })
		n.runAndRespond(c, m, store.Job{Kind: store.JobProbe, Requester: "api"})
		return
	}
	n.respondMachine(c, http.StatusOK, m.ID, 0)
}

func (n *Node) getBMCDrivers(c *gin.Context) {
	c.JSON(http.StatusOK, wire.DriverList{Drivers: convert(n.power.Drivers(), wireDriver)})
}

// recommissionNow is the ?now=1 path: back to new, then PXE + power cycle
// through the BMC.
func (n *Node) recommissionNow(c *gin.Context, m store.Machine) {
	if m.BMC == nil || m.BMC.Driver == "" || m.BMC.Driver == "manual" {
		n.fail(c, &apiError{Status: http.StatusConflict, Code: "no_power_control", Message: fmt.Sprintf("machine %s has no BMC with power control: recommission without now and power-cycle it by hand", m.ID)})
		return
	}
	if _, err := n.cluster.Apply(c.Request.Context(), &raftfsm.Recommission{ID: m.ID, Reason: "now: PXE and power cycle through the BMC", Now: time.Now().UTC()}); err != nil {
		n.fail(c, err)
		return
	}
	n.runAndRespond(c, m, store.Job{Kind: store.JobRecommit, Requester: "api"})
}

// queueDetect asks, after commissioning, whether an IPMI BMC speaks Redfish
// with the same account (best effort: a failure only leaves ipmi in place).
func (n *Node) queueDetect(ctx context.Context, id string) {
	if !n.opts.RedfishDetect {
		return
	}
	var m store.Machine
	if n.db.View(func(tx *store.Tx) error { var err error; m, err = tx.Machine(id); return err }) != nil {
		return
	}
	if m.BMC == nil || m.BMC.Driver != "ipmi" || m.BMC.Operator || len(m.BMC.PasswordSealed) == 0 {
		return
	}
	if _, err := n.enqueueJob(ctx, m, store.Job{Kind: store.JobDetect, Requester: "commission"}); err != nil {
		n.log.Debug("redfish detection not queued", "machine", id, "err", err)
	}
}
