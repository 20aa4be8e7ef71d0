package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/pki"
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

// bmcAAD is what a BMC password is sealed to: the record it belongs to and
// the address it was made for. A password opens only for that address
// (OpenBMCPassword): moved to another, it is never sent.
func bmcAAD(owner, address string) string { return owner + "@" + address }

// OpenBMCPassword opens a BMC's sealed password for use against its current
// address (the BMC job runner's OpenPassword). Seals older than the address
// binding (no "@") open as before: the state machine drops a password
// whenever the address changes.
func OpenBMCPassword(key pki.MasterKey, b store.BMC) (string, error) {
	if i := strings.LastIndexByte(b.PasswordAAD, '@'); i >= 0 && b.PasswordAAD[i+1:] != b.Address {
		return "", errors.New("the BMC password was set for another address: set it again (rollcall bmc ID -password -)")
	}
	pw, err := key.Open(b.PasswordSealed, []byte(b.PasswordAAD))
	if err != nil {
		return "", errors.New("cannot open the sealed BMC password on this node")
	}
	return string(pw), nil
}

// machineRef resolves :id for a handler.
func (s *Server) machineRef(c *gin.Context) (store.Machine, error) {
	var m store.Machine
	err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		m, err = tx.MachineByRef(c.Param("id"))
		return err
	})
	return m, err
}

// runAndRespond queues a job, waits for it and answers with its record: a
// BMC failure is a 502 with the job's public message, which names the BMC
// and the step (the cause is in the log of the node that ran it).
func (s *Server) runAndRespond(c *gin.Context, m store.Machine, j store.Job) error {
	id, err := s.cfg.Jobs.Enqueue(c.Request.Context(), m, j)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), jobWait)
	defer cancel()
	done, err := s.cfg.Jobs.Wait(ctx, id)
	job := wireJob(done)
	if errors.Is(err, context.DeadlineExceeded) {
		// Still running: the caller follows it with GET …/jobs.
		c.JSON(http.StatusAccepted, job)
		return nil
	}
	if err != nil {
		return err
	}
	if done.Error != "" {
		// The error shape with the job beside it: not Fail's, which
		// carries no job.
		c.AbortWithStatusJSON(http.StatusBadGateway, wire.ErrorReply{Error: wire.ErrorDetail{Code: "bmc_error", Message: done.Error}, Job: &job})
		return nil
	}
	c.JSON(http.StatusOK, job)
	return nil
}

func (s *Server) postPower(c *gin.Context) error {
	var req wire.PowerRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if req.Action != "status" {
		if _, err := power.ParseAction(req.Action); err != nil {
			return Wrap(http.StatusBadRequest, "bad_request", fmt.Sprintf("power action %q: not allowed; allowed: %s (or status)",
				req.Action, joinNames(power.Actions)), err)
		}
	}
	m, err := s.machineRef(c)
	if err != nil {
		return err
	}
	return s.runAndRespond(c, m, store.Job{Kind: store.JobPower, Arg: req.Action, Requester: "api"})
}

func (s *Server) postBootdev(c *gin.Context) error {
	var req wire.BootdevRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if _, err := power.ParseDevice(req.Device); err != nil {
		return Wrap(http.StatusBadRequest, "bad_request", fmt.Sprintf("boot device %q: not allowed; allowed: %s",
			req.Device, joinNames(power.Devices)), err)
	}
	m, err := s.machineRef(c)
	if err != nil {
		return err
	}
	return s.runAndRespond(c, m, store.Job{Kind: store.JobBootDev, Arg: req.Device, Persistent: req.Persistent, UEFI: req.UEFI, Requester: "api"})
}

// joinNames lists allowed values for a message, as power's own errors did.
func joinNames[T ~string](xs []T) string {
	names := make([]string, len(xs))
	for i, x := range xs {
		names[i] = string(x)
	}
	return strings.Join(names, ", ")
}

func (s *Server) getJobs(c *gin.Context) error {
	m, err := s.machineRef(c)
	if err != nil {
		return err
	}
	if err := s.blockingQuery(c, store.TableDeployJobs); err != nil {
		return err
	}
	var jobs []store.Job
	var deploys []store.DeployJob
	var idx uint64
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		jobs, _ = tx.MachineJobs(m.ID, 100)
		idx = tx.TableIndex(store.TableDeployJobs)
		var err error
		deploys, err = tx.MachineDeployJobs(m.ID, 100)
		return err
	}); err != nil {
		return err
	}
	c.JSON(http.StatusOK, wire.JobList{Jobs: nonNil(convert(jobs, wireJob)), Deploy: nonNil(convert(deploys, wireDeployJob)), Index: idx})
	return nil
}

// maxBMCSettings bounds a BMC's settings: the drivers read a handful.
const maxBMCSettings = 32

// checkBMCRequest holds an operator's BMC to the limits an agent's report
// has.
func checkBMCRequest(r wire.BMCRequest) error {
	for _, f := range [][2]string{{"driver", r.Driver}, {"address", r.Address}, {"user", r.User}, {"password", r.Password}} {
		if err := inventory.CheckText(f[0], f[1], false); err != nil {
			return inventoryRefusal(err)
		}
	}
	if strings.Contains(r.Address, "@") {
		// user:password@host would put a credential where every job
		// record, event, answer and log line shows the address.
		return BadRequest("address must not carry a user or password (user@host): give them as user and password")
	}
	if len(r.Settings) > maxBMCSettings {
		return BadRequest("settings: %d entries is more than the %d allowed", len(r.Settings), maxBMCSettings)
	}
	for k, v := range r.Settings {
		if err := inventory.CheckText("settings key", k, false); err != nil {
			return inventoryRefusal(err)
		}
		if err := inventory.CheckText("settings."+store.Clip(k), v, false); err != nil {
			return inventoryRefusal(err)
		}
	}
	return nil
}

// putBMC is PUT /api/v1/machines/:id/bmc: an operator sets the BMC. The
// password is sealed here and never returned.
func (s *Server) putBMC(c *gin.Context) error {
	var req wire.BMCRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if err := checkBMCRequest(req); err != nil {
		return err
	}
	if !s.cfg.Power.Has(req.Driver) {
		return BadRequest("driver %q is not one of %s", store.Clip(req.Driver), strings.Join(s.cfg.Power.Names(), ", "))
	}
	if req.Driver != "manual" && req.Address == "" {
		return BadRequest("address is required for driver %s", req.Driver)
	}
	m, err := s.machineRef(c)
	if err != nil {
		return err
	}
	b := store.BMC{Driver: req.Driver, Address: req.Address, User: req.User, Settings: req.Settings, Source: "operator", Operator: true}
	if req.Password != "" {
		aad := bmcAAD(aadBMCMachine+m.ID, req.Address)
		sealed, err := s.cfg.Key.Seal([]byte(req.Password), []byte(aad))
		if err != nil {
			return err
		}
		b.PasswordSealed, b.PasswordAAD = sealed, aad
	}
	if _, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.BMCSet{Machine: m.ID, BMC: raftfsm.BMCBody(b), Now: time.Now().UTC()}); err != nil {
		return err
	}
	if req.Verify || req.Probe {
		s.cfg.DB.View(func(tx *store.Tx) error { m, _ = tx.Machine(m.ID); return nil })
		return s.runAndRespond(c, m, store.Job{Kind: store.JobProbe, Requester: "api"})
	}
	return s.respondMachine(c, http.StatusOK, m.ID, 0)
}

// deleteBMC is DELETE /api/v1/machines/:id/bmc: the machine forgets its
// BMC, sealed password and certificate pin included.
func (s *Server) deleteBMC(c *gin.Context) error {
	m, err := s.machineRef(c)
	if err != nil {
		return err
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.BMCClear{Machine: m.ID, Now: time.Now().UTC()})
	if err != nil {
		return err
	}
	return s.respondMachine(c, http.StatusOK, m.ID, idx)
}

func (s *Server) getBMCDrivers(c *gin.Context) error {
	c.JSON(http.StatusOK, wire.DriverList{Drivers: convert(s.cfg.Power.Drivers(), wireDriver)})
	return nil
}

// recommissionNow is the ?now=1 path: back to new, then PXE + power cycle
// through the BMC.
func (s *Server) recommissionNow(c *gin.Context, m store.Machine) error {
	if m.BMC == nil || m.BMC.Driver == "" || m.BMC.Driver == "manual" {
		return Errorf(http.StatusConflict, "no_power_control", "machine %s has no BMC with power control: recommission without now and power-cycle it by hand", m.ID)
	}
	if _, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.Recommission{ID: m.ID, Reason: "now: PXE and power cycle through the BMC", Now: time.Now().UTC()}); err != nil {
		return err
	}
	return s.runAndRespond(c, m, store.Job{Kind: store.JobRecommit, Requester: "api"})
}

// queueDetect asks, after commissioning, whether an IPMI BMC speaks Redfish
// with the same account (best effort: a failure only leaves ipmi in place).
func (s *Server) queueDetect(ctx context.Context, id string) {
	if !s.cfg.RedfishDetect {
		return
	}
	if err := s.cfg.Jobs.QueueDetect(ctx, id); err != nil {
		s.log.Debug("redfish detection not queued", "machine", id, "err", err)
	}
}
