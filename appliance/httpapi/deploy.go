package httpapi

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/boottoken"
	"github.com/rollcall/rollcall/appliance/deploy"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/ipam/layout"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// Deploy and release jobs (issue 18): the operator's routes, the deploy
// agent's (authenticated by its job token, X-Rollcall-Job) and cloud-init's
// phone home (the token in the path).

// Bounds of the agent's routes: a deploying machine is a PXE-booted host
// like any other, so what it sends is bounded in size and rate.
const (
	maxProgressBytes   = 8 << 10
	maxPhoneHomeBytes  = 16 << 10
	jobCallsPerMinute  = 120 // a report every 3 s is 20
	phoneHomePerMinute = 30
	jobLimiterKeys     = 65536
	ctxJob             = "rollcall.job"
)

func (s *Server) deployRoutes() []Route {
	return []Route{
		{"POST", "/api/v1/machines/:id/deploy", AuthAdmin, "deploy an OS: the job, with the disk chosen and the rule that chose it (os, version, disk, hostname, upgrade, packages, user_data, ssh_keys, boot)", wire.DeployRequest{}, s.postDeploy},
		{"POST", "/api/v1/machines/:id/release", AuthAdmin, "wipe the deployed disk (quick or full) and give the machine back: the job", wire.ReleaseRequest{}, s.postRelease},
		{"POST", "/api/v1/machines/:id/jobs/cancel", AuthAdmin, "cancel the machine's deploy or release job (before it writes: at once; after: the agent wipes and fails)", nil, s.postJobCancel},
		{"GET", "/api/v1/jobs/:id", AuthAdmin, "one deploy or release job (?index=&wait= blocks)", nil, s.getDeployJob},
		{"GET", "/api/v1/jobs/self", AuthJob, "the deploy agent's job: image, disk, wipe, cloud-init seed, CA", nil, s.getJobSelf},
		{"POST", "/api/v1/jobs/self/progress", AuthJob, "the deploy agent's progress report; answers cancel (body at most 8 KiB)", wire.ProgressRequest{}, s.postProgress},
		{"POST", "/api/v1/phone-home/:token", AuthNone, "cloud-init's phone_home from a deployed machine (form post; the job token in the path)", nil, s.postPhoneHome},
	}
}

// newDeployJobID is j- and 16 hex digits: the creation's milliseconds,
// then random, so that a machine's jobs sort by creation.
func newDeployJobID(now time.Time) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(now.UnixMilli())<<16)
	rand.Read(b[6:])
	return "j-" + hex.EncodeToString(b[:])
}

func deployErrors(err error) *Error {
	var de *deploy.DiskError
	if errors.As(err, &de) {
		return &Error{Status: http.StatusUnprocessableEntity, Code: "no_disk", Message: de.Msg, cause: err}
	}
	return nil
}

// planNetwork is where a deployment's network is decided: the addresses
// it claims, the network-config and the udev rules the agent writes. The
// machine's layout (its own, else a tag's: raftfsm.PlanFor, the plan
// `rollcall net show` previews), else the default plan (the boot NIC with
// an auto address on the subnet it booted from, DHCP where the model has
// none). A plan that cannot be made refuses the deployment with its reason
// before anything is claimed.
func planNetwork(tx *store.Tx, m store.Machine) (*layout.Plan, error) {
	plan, _, err := raftfsm.PlanFor(tx, m, nil)
	return plan, err
}

func (s *Server) postDeploy(c *gin.Context) error {
	var req wire.DeployRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if req.OS == "" {
		return BadRequest("os is required: a name of the OS catalog (rollcall os list)")
	}
	if err := deploy.CheckOperator(req.UserData); err != nil {
		return Wrap(http.StatusBadRequest, "bad_request", "user_data: "+err.Error(), err)
	}
	now := time.Now().UTC()
	var job store.DeployJob
	var m store.Machine
	err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		if m, err = tx.MachineByRef(c.Param("id")); err != nil {
			return err
		}
		if m.State != store.StateReady {
			return Errorf(http.StatusConflict, "not_ready", "machine %s is %s: only a ready machine deploys (release or re-commission it first)", m.ID, m.State)
		}
		if req.Boot && (m.BMC == nil || m.BMC.Driver == "" || m.BMC.Driver == "manual") {
			return Errorf(http.StatusConflict, "no_power_control", "machine %s has no BMC with power control: deploy without boot and power-cycle it by hand", m.ID)
		}
		im, err := tx.OSImage(req.OS)
		if err != nil {
			return err
		}
		v, ok := im.Version(req.Version)
		if !ok {
			if req.Version == "" {
				return Errorf(http.StatusConflict, "no_version", "OS %s has no current version: import or sync one", im.Name)
			}
			return Errorf(http.StatusNotFound, "not_found", "OS %s has no version %q", im.Name, store.Clip(req.Version))
		}
		raw, err := tx.Inventory(m.ID)
		if err != nil {
			return Errorf(http.StatusConflict, "no_inventory", "machine %s has no inventory: re-commission it", m.ID)
		}
		var rep inventory.Report
		if err := jsonUnmarshal(raw, &rep); err != nil {
			return err
		}
		disk, err := deploy.ChooseDisk(rep.Disks, req.Disk, v.RawSize, v.SectorSize)
		if err != nil {
			return err
		}
		host := req.Hostname
		if host == "" {
			host = m.Name
		}
		if host == "" {
			host = m.ID
		}
		plan, err := planNetwork(tx, m)
		if err != nil {
			return err
		}
		job = store.DeployJob{
			ID: newDeployJobID(now), Machine: m.ID, Kind: store.JobKindDeploy, OS: im.Name, OSVersion: v.Version,
			Image: store.JobImage{SHA256: v.File.SHA256, Size: v.File.Size, RawSHA256: v.RawSHA256, RawSize: v.RawSize, SectorSize: v.SectorSize, Family: im.Family},
			Disk:  disk, Hostname: host, FQDN: host, Boot: req.Boot, Wipe: store.WipeQuick,
			NetworkConfig: string(plan.NetworkConfig()),
			UdevRules:     string(plan.UdevRules()),
			UserData:      store.JobUserData{SSHKeys: req.SSHKeys, Packages: req.Packages, Upgrade: req.Upgrade, Operator: req.UserData},
			Requester:     "api",
		}
		macOf := map[string]string{}
		for _, it := range plan.Interfaces {
			macOf[it.Name] = it.MAC
		}
		for _, a := range plan.Claims() {
			job.Addresses = append(job.Addresses, store.JobAddress{IP: a.IP.String(), Subnet: a.Subnet.String(), Interface: a.Interface, MAC: macOf[a.Interface]})
			if sub, err := tx.Subnet(a.Subnet); err == nil && sub.Domain != "" && job.FQDN == host {
				job.FQDN = host + "." + sub.Domain
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := raftfsm.CheckDeployJob(job); err != nil {
		return err
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.DeployStart{Job: raftfsm.DeployJobBody(job), Now: now})
	if err != nil {
		return err
	}
	s.log.Info("deploy job made", "machine", m.ID, "job", job.ID, "os", job.OS, "version", job.OSVersion, "disk", job.Disk.Name, "index", idx)
	return s.respondJob(c, job.ID, idx, m, req.Boot)
}

func (s *Server) postRelease(c *gin.Context) error {
	var req wire.ReleaseRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if req.Wipe == "" {
		req.Wipe = store.WipeQuick
	}
	if req.Wipe != store.WipeQuick && req.Wipe != store.WipeFull {
		return BadRequest("wipe %q is not one of quick, full", store.Clip(req.Wipe))
	}
	m, err := s.machineRef(c)
	if err != nil {
		return err
	}
	if req.Boot && (m.BMC == nil || m.BMC.Driver == "" || m.BMC.Driver == "manual") {
		return Errorf(http.StatusConflict, "no_power_control", "machine %s has no BMC with power control: release without boot and power-cycle it by hand", m.ID)
	}
	now := time.Now().UTC()
	id := newDeployJobID(now)
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.ReleaseStart{ID: id, Machine: m.ID, Wipe: req.Wipe, Boot: req.Boot, Requester: "api", Now: now})
	if err != nil {
		return err
	}
	return s.respondJob(c, id, idx, m, req.Boot)
}

// respondJob answers with the job just made, after queueing the BMC's PXE
// power cycle when boot was asked.
func (s *Server) respondJob(c *gin.Context, id string, idx uint64, m store.Machine, boot bool) error {
	powerJob := ""
	if boot {
		pj, err := s.cfg.Jobs.Enqueue(c.Request.Context(), m, store.Job{Kind: store.JobRecommit, Requester: "deploy " + id})
		if err != nil {
			// The job stands: the machine deploys at its next PXE boot.
			s.log.Warn("power cycle not queued", "machine", m.ID, "job", id, "err", err)
		}
		powerJob = pj
	}
	var j store.DeployJob
	if err := s.cfg.DB.View(func(tx *store.Tx) (err error) { j, err = tx.DeployJob(id); return err }); err != nil {
		return err
	}
	w := wireDeployJob(j)
	w.PowerJob = powerJob
	setIndex(c, idx)
	c.JSON(http.StatusCreated, w)
	return nil
}

func (s *Server) postJobCancel(c *gin.Context) error {
	m, err := s.machineRef(c)
	if err != nil {
		return err
	}
	var j store.DeployJob
	var ok bool
	if err := s.cfg.DB.View(func(tx *store.Tx) (err error) { j, ok, err = tx.ActiveDeployJob(m.ID); return err }); err != nil {
		return err
	}
	if !ok {
		return Errorf(http.StatusConflict, "no_job", "machine %s has no queued or running deploy or release job", m.ID)
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.JobCancel{Job: j.ID, Requester: "api", Now: time.Now().UTC()})
	if err != nil {
		return err
	}
	if err := s.cfg.DB.View(func(tx *store.Tx) (err error) { j, err = tx.DeployJob(j.ID); return err }); err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(http.StatusOK, wireDeployJob(j))
	return nil
}

func (s *Server) getDeployJob(c *gin.Context) error {
	id := c.Param("id")
	if !store.ValidDeployJobID(id) {
		return Errorf(http.StatusNotFound, "not_found", "job %q: not found", store.Clip(id))
	}
	if err := s.blockingQuery(c, store.TableDeployJobs); err != nil {
		return err
	}
	var j store.DeployJob
	if err := s.cfg.DB.View(func(tx *store.Tx) (err error) { j, err = tx.DeployJob(id); return err }); err != nil {
		return err
	}
	setIndex(c, j.Index)
	c.JSON(http.StatusOK, wireDeployJob(j))
	return nil
}

// requireJob admits the deploy agent: X-Rollcall-Job is the token of a
// queued or running job. A boot token beside it (the boot script hands
// both) must be for a MAC of the job's machine.
func (s *Server) requireJob(c *gin.Context) error {
	tok := c.GetHeader("X-Rollcall-Job")
	if tok == "" {
		return unauthorized("job token required (X-Rollcall-Job)")
	}
	id, err := boottoken.ParseJob(s.cfg.Key, tok)
	if err != nil {
		return Wrap(http.StatusUnauthorized, "unauthorized", "wrong job token", err)
	}
	if !s.jobLimiter.allow(id, time.Now()) {
		return Errorf(http.StatusTooManyRequests, "rate_limited", "at most %d calls a minute for one job; retry later", jobCallsPerMinute)
	}
	var j store.DeployJob
	var m store.Machine
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		if j, err = tx.DeployJob(id); err != nil {
			return err
		}
		m, err = tx.Machine(j.Machine)
		return err
	}); err != nil {
		return Wrap(http.StatusUnauthorized, "unauthorized", "wrong job token", err)
	}
	if !j.Active() {
		return Errorf(http.StatusUnauthorized, "job_ended", "job %s is %s: its token is no longer valid", j.ID, j.State)
	}
	if bt := c.GetHeader("X-Rollcall-Token"); bt != "" {
		mac, err := boottoken.Parse(s.cfg.Key, bt, time.Now())
		if err != nil || !contains(m.MACs, mac) {
			return Errorf(http.StatusForbidden, "forbidden", "the boot token is not for a MAC of the job's machine %s", m.ID)
		}
	}
	c.Set(ctxJob, j.ID)
	c.Next()
	return nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func (s *Server) getJobSelf(c *gin.Context) error {
	id := c.GetString(ctxJob)
	var out wire.JobSelf
	err := s.cfg.DB.View(func(tx *store.Tx) error {
		j, err := tx.DeployJob(id)
		if err != nil {
			return err
		}
		out = wire.JobSelf{
			ID: j.ID, Machine: j.Machine, Kind: j.Kind, Wipe: j.Wipe, CAPEM: string(s.caBundle()), Cancel: j.Cancel,
			Disk: wire.SelfDisk{Serial: j.Disk.Serial, WWN: j.Disk.WWN, Name: j.Disk.Name, Size: j.Disk.Size},
		}
		if j.Kind != store.JobKindDeploy {
			return nil
		}
		out.Wipe = store.WipeQuick
		out.EFILabel = "rollcall " + j.OS
		out.SELinuxRelabel = j.Image.Family == store.FamilyRHEL
		out.Image = &wire.SelfImage{
			URL: "/os/blobs/" + j.Image.SHA256, SHA256: j.Image.SHA256, Size: j.Image.Size,
			RawSHA256: j.Image.RawSHA256, RawSize: j.Image.RawSize, Format: "raw+zstd", SectorSize: max(j.Image.SectorSize, 512),
		}
		m, err := tx.Machine(j.Machine)
		if err != nil {
			return err
		}
		tags := map[string]store.Tag{}
		list, err := tx.Tags()
		if err != nil {
			return err
		}
		for _, t := range list {
			tags[t.Name] = t
		}
		tok, err := boottoken.MintJob(s.cfg.Key, j.ID)
		if err != nil {
			return err
		}
		ud, err := deploy.UserData(deploy.Seed{
			JobID: j.ID, Hostname: j.Hostname, FQDN: j.FQDN, PhoneHome: serverBase(c) + "/api/v1/phone-home/" + url.PathEscape(tok),
			CAPEM: string(s.caBundle()), UserData: j.UserData, Tags: deploy.TagFragments(m, tags),
		})
		if err != nil {
			// A tag's fragment refused by the seed (store.CheckTag lets
			// only #cloud-config and #! in): the job cannot be served.
			return Wrap(http.StatusConflict, "bad_user_data", "the job's user-data cannot be rendered: "+err.Error(), err)
		}
		out.Seed = &wire.SelfSeed{MetaData: deploy.MetaData(j.ID, j.Hostname), UserData: ud, NetworkConfig: j.NetworkConfig, UdevRules: j.UdevRules}
		if j.UdevRules != "" {
			out.Seed.UdevRulesPath = layout.UdevRulesPath
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, out)
	return nil
}

// serverBase is how the caller reached this node (scheme and host): the
// installed system phones home the same way.
func serverBase(c *gin.Context) string {
	scheme := "http"
	if c.Request.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + c.Request.Host
}

func (s *Server) postProgress(c *gin.Context) error {
	var req wire.ProgressRequest
	if err := decodeBody(c, maxProgressBytes, &req); err != nil {
		return err
	}
	cmd := &raftfsm.JobReport{Job: c.GetString(ctxJob), Step: req.Step, State: req.State, Bytes: req.Bytes, Total: req.Total, Message: req.Message, Now: time.Now().UTC()}
	if err := raftfsm.CheckReport(cmd); err != nil {
		return err
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), cmd)
	if err != nil {
		return err
	}
	var j store.DeployJob
	if err := s.cfg.DB.View(func(tx *store.Tx) (err error) { j, err = tx.DeployJob(cmd.Job); return err }); err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(http.StatusOK, wire.ProgressReply{Cancel: j.Cancel && j.Active()})
	return nil
}

// postPhoneHome is cloud-init's phone_home: a form post to
// /api/v1/phone-home/<job token>. A token that is not this cluster's, or
// whose deployment is not the machine's current one (released, or
// deployed again since), is a 404 and takes no Raft entry.
func (s *Server) postPhoneHome(c *gin.Context) error {
	notFound := Errorf(http.StatusNotFound, "not_found", "no deployment for this token")
	if !s.phoneLimiter.allow(clientIP(c.Request.RemoteAddr), time.Now()) {
		return Errorf(http.StatusTooManyRequests, "rate_limited", "at most %d phone-home calls a minute from one address", phoneHomePerMinute)
	}
	id, err := boottoken.ParseJob(s.cfg.Key, c.Param("token"))
	if err != nil {
		return notFound
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxPhoneHomeBytes)
	if err := c.Request.ParseForm(); err != nil {
		return Errorf(http.StatusRequestEntityTooLarge, "too_large", "phone-home body is larger than %d KiB or not a form", maxPhoneHomeBytes>>10)
	}
	if err := s.cfg.DB.View(func(tx *store.Tx) error { _, err := raftfsm.CheckPhoneHome(tx, id); return err }); err != nil {
		return notFound
	}
	host := strings.TrimSpace(c.Request.PostForm.Get("fqdn"))
	if host == "" {
		host = strings.TrimSpace(c.Request.PostForm.Get("hostname"))
	}
	host = printableClip(host, 253)
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.PhoneHome{Job: id, Hostname: host, Now: time.Now().UTC()})
	if err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(http.StatusOK, map[string]string{"job": id})
	return nil
}

// printableClip keeps the printable runes of s, at most n bytes.
func printableClip(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			continue
		}
		if b.Len()+len(string(r)) > n {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

func wireDeployJob(j store.DeployJob) wire.DeployJob {
	w := wire.DeployJob{
		ID: j.ID, Machine: j.Machine, Kind: j.Kind, OS: j.OS, OSVersion: j.OSVersion, State: j.State,
		Disk:     wire.JobDisk{Name: j.Disk.Name, Serial: j.Disk.Serial, WWN: j.Disk.WWN, ByPath: j.Disk.ByPath, Size: j.Disk.Size, LogicalBlockSize: j.Disk.LogicalBlockSize, Rule: j.Disk.Rule},
		Hostname: j.Hostname, FQDN: j.FQDN, Boot: j.Boot, Wipe: j.Wipe,
		Packages: j.UserData.Packages, SSHKeys: len(j.UserData.SSHKeys), Upgrade: j.UserData.Upgrade,
		Progress: wire.JobProgress{Step: j.Progress.Step, State: j.Progress.State, Bytes: j.Progress.Bytes, Total: j.Progress.Total, Updated: j.Progress.Updated},
		Cancel:   j.Cancel, Requester: j.Requester, Created: j.Created, Started: j.Started, Finished: j.Finished,
		LastReport: j.LastReport, Error: j.Error, PhonedHome: j.PhonedHome, PhoneHost: j.PhoneHost, Index: j.Index,
	}
	if j.Image.SHA256 != "" {
		w.Image = &wire.JobImage{SHA256: j.Image.SHA256, Size: j.Image.Size, RawSHA256: j.Image.RawSHA256, RawSize: j.Image.RawSize, SectorSize: j.Image.SectorSize}
	}
	for _, a := range j.Addresses {
		w.Addresses = append(w.Addresses, wire.JobAddress{IP: a.IP, Subnet: a.Subnet, Interface: a.Interface})
	}
	for _, st := range j.Steps {
		w.Steps = append(w.Steps, wire.JobStep{Step: st.Step, State: st.State, Message: st.Message, At: st.At})
	}
	return w
}

// deploymentOf is what a machine's record shows of its deployment.
func deploymentOf(tx *store.Tx, m store.Machine) *wire.Deployment {
	switch m.State {
	case store.StateDeploying, store.StateDeployed, store.StateDeployFailed, store.StateReleasing:
	default:
		return nil
	}
	d, ok, err := tx.CurrentDeployment(m.ID)
	if err != nil || !ok {
		return nil
	}
	return &wire.Deployment{Job: d.ID, OS: d.OS, Version: d.OSVersion, State: d.State, Disk: d.Disk.Name, PhonedHome: d.PhonedHome}
}

// clientIP is the host part of a remote address.
func clientIP(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	return host
}

func jsonUnmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode inventory: %w", err)
	}
	return nil
}
