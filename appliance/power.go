package appliance

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/power"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// BMC commands run as jobs (power/jobs): any node accepts the request and
// queues it, the node that reaches the BMC's network runs it, and the
// handlers here wait for the job's record and answer with it.

const (
	jobWait       = 110 * time.Second // how long an API call waits for its job
	aadBMCMachine = "bmc-password/machine/"
	aadBMCAgent   = "bmc-password/"
)

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
// BMC failure is a 502 with the job's public message, which names the BMC
// and the step (the cause is in the log of the node that ran it).
func (n *Node) runAndRespond(c *gin.Context, m store.Machine, j store.Job) {
	id, err := n.jobs.Enqueue(c.Request.Context(), m, j)
	if err != nil {
		n.fail(c, err)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), jobWait)
	defer cancel()
	done, err := n.jobs.Wait(ctx, id)
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
	if _, err := n.cluster.Apply(c.Request.Context(), &raftfsm.BMCSet{Machine: m.ID, BMC: raftfsm.BMCBody(b), Now: time.Now().UTC()}); err != nil {
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
	if err := n.jobs.QueueDetect(ctx, id); err != nil {
		n.log.Debug("redfish detection not queued", "machine", id, "err", err)
	}
}
