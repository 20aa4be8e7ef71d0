package store

import (
	"regexp"
	"time"
)

// Deploy and release jobs (issue 18): a deployment writes an OS image onto
// a machine's disk, a release wipes it and gives the machine back. A job
// pins everything the agent will do (the exact image version with its
// hashes, the disk by serial or WWN, the addresses claimed, the user-data
// inputs), so what it does does not move when the catalog or the
// inventory does. The agent reports progress; the state machine keeps the
// latest progress and each step's outcome.
//
// Jobs are keyed by ID (j- + 16 hex digits whose first 12 are the
// creation's milliseconds, so keys sort by creation) in deploy_jobs, with
// an index machine + "\x00" + ID in deploy_jobs.by_machine; both buckets
// are made on first write (as tags'), so a store that never deployed holds
// the buckets an older node's does.

var (
	bucketDeployJobs          = []byte("deploy_jobs")
	bucketDeployJobsByMachine = []byte("deploy_jobs.by_machine")
)

// Job kinds and states (the contract with the OS catalog, whose prune
// decodes id, machine, kind, os, os_version and state only).
const (
	JobKindDeploy  = "deploy"
	JobKindRelease = "release"

	JobQueued    = "queued"    // made; the agent has not reported yet
	JobRunning   = "running"   // the agent reported a step
	JobDone      = "done"      // the agent reported done
	JobFailed    = "failed"    // the agent reported failed, or it timed out
	JobCancelled = "cancelled" // an operator cancelled it before it wrote anything
)

// Wipe modes: quick clears signatures and partition tables at both ends of
// the disk; full writes every block.
const (
	WipeQuick = "quick"
	WipeFull  = "full"
)

// Machine states of a deployment. Their moves are in Transitions.
const (
	StateDeploying    = "deploying"
	StateDeployed     = "deployed"
	StateDeployFailed = "deploy-failed"
	StateReleasing    = "releasing"
)

// Bounds of a job, so that a record (and the commands that carry it) stays
// small whatever an operator or an agent sends.
const (
	MaxJobSteps       = 64       // step outcomes kept; the oldest goes first
	MaxJobMessage     = 1024     // a step's message, bytes
	MaxJobAddresses   = 16       // addresses one deployment claims
	MaxSSHKeys        = 32       // keys in a deployment's user-data
	MaxSSHKey         = 16 << 10 // one public key, bytes (an RSA-16384 key is ~2.8 KiB)
	MaxPackages       = 256
	MaxOperatorPart   = 64 << 10 // the operator's own user-data part
	MaxJobsPerMachine = 32       // finished jobs kept per machine; older ones are pruned
	MaxNetworkConfig  = 64 << 10
)

// JobSteps are the steps an agent reports, in the order a deployment or
// release takes them.
var JobSteps = []string{"wipe", "download", "write", "verify", "partitions", "gpt", "root", "seed", "trust", "efi", "wipe-full", "done"}

// JobStepStates are a step's states in a report.
var JobStepStates = []string{"running", "done", "failed"}

// DeployJob is one deploy or release job.
type DeployJob struct {
	ID        string `json:"id"`
	Machine   string `json:"machine"`
	Kind      string `json:"kind"` // deploy, release
	OS        string `json:"os,omitempty"`
	OSVersion string `json:"os_version,omitempty"`
	State     string `json:"state"`
	// Image is the pinned version's file: what the agent downloads and
	// what it checks. Empty for a release.
	Image JobImage `json:"image,omitzero"`
	// Disk is the disk written (deploy) or wiped (release), with the rule
	// that chose it.
	Disk     JobDisk `json:"disk,omitzero"`
	Hostname string  `json:"hostname,omitempty"`
	FQDN     string  `json:"fqdn,omitempty"`
	// Addresses were claimed for the machine by DeployStart and are freed
	// when it is released (or the job is cancelled before it wrote).
	Addresses []JobAddress `json:"addresses,omitempty"`
	// NetworkConfig is the cloud-init network-config (version 2) the
	// deployment's plan rendered when the job was made: the claimed
	// addresses on the boot NIC, or DHCP.
	NetworkConfig string `json:"network_config,omitempty"`
	// Boot: the BMC was asked to power-cycle the machine into PXE.
	Boot bool   `json:"boot,omitempty"`
	Wipe string `json:"wipe,omitempty"` // release: quick or full
	// UserData holds the inputs the seed is rendered from (public keys,
	// packages: nothing secret).
	UserData JobUserData `json:"user_data,omitzero"`
	Progress JobProgress `json:"progress,omitzero"`
	Steps    []JobStep   `json:"steps,omitempty"`
	// Cancel is set when an operator cancelled a job that had started
	// writing: the agent's next report is answered cancel=true, and it
	// wipes and fails.
	Cancel bool `json:"cancel,omitempty"`
	// Prior is a release's machine state before it (deployed or
	// deploy-failed), where a release cancelled before it wiped returns.
	Prior      string    `json:"prior,omitempty"`
	Requester  string    `json:"requester,omitempty"`
	Created    time.Time `json:"created"`
	Started    time.Time `json:"started,omitzero"`
	Finished   time.Time `json:"finished,omitzero"`
	LastReport time.Time `json:"last_report,omitzero"`
	Error      string    `json:"error,omitempty"`
	// PhonedHome is when cloud-init's phone_home reached the server after
	// the deployed system's first boot; PhoneHost what it said its name is.
	PhonedHome time.Time `json:"phoned_home,omitzero"`
	PhoneHost  string    `json:"phone_host,omitempty"`
	Index      uint64    `json:"index"`
}

// JobImage is the pinned OS version's compressed file and raw image.
type JobImage struct {
	SHA256     string `json:"sha256"` // of the compressed file: the blob's name
	Size       int64  `json:"size"`
	RawSHA256  string `json:"raw_sha256"`
	RawSize    int64  `json:"raw_size"`
	SectorSize int    `json:"sector_size,omitempty"`
	Family     string `json:"family,omitempty"`
}

// JobDisk is the disk a job writes, identified as the inventory saw it. A
// name (sda) can change between boots; the agent finds the disk by serial
// or WWN first.
type JobDisk struct {
	Name             string `json:"name"`
	Serial           string `json:"serial,omitempty"`
	WWN              string `json:"wwn,omitempty"`
	ByPath           string `json:"by_path,omitempty"`
	Size             int64  `json:"size"`
	LogicalBlockSize int    `json:"logical_block_size,omitempty"`
	// Rule says why this disk: the operator named it, or the smallest
	// that fits.
	Rule string `json:"rule,omitempty"`
}

// JobAddress is one address a deployment claimed.
type JobAddress struct {
	IP        string `json:"ip"`
	Subnet    string `json:"subnet"`
	Interface string `json:"interface,omitempty"`
	MAC       string `json:"mac,omitempty"`
}

// JobUserData is what a deployment's user-data is rendered from.
type JobUserData struct {
	SSHKeys  []string `json:"ssh_keys,omitempty"`
	Packages []string `json:"packages,omitempty"`
	Upgrade  bool     `json:"upgrade,omitempty"`
	// Operator is the operator's own part (-user-data FILE): a
	// #cloud-config document, a #! script or a MIME multipart.
	Operator string `json:"operator,omitempty"`
}

// JobProgress is the agent's latest report.
type JobProgress struct {
	Step    string    `json:"step,omitempty"`
	State   string    `json:"state,omitempty"`
	Bytes   int64     `json:"bytes,omitempty"`
	Total   int64     `json:"total,omitempty"`
	Updated time.Time `json:"updated,omitzero"`
}

// JobStep is one step's outcome (or its start, while it runs).
type JobStep struct {
	Step    string    `json:"step"`
	State   string    `json:"state"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
}

// Active reports whether the job still runs: queued or running.
func (j DeployJob) Active() bool { return j.State == JobQueued || j.State == JobRunning }

// LastStep is the latest step the agent reported, "" before any.
func (j DeployJob) LastStep() JobStep {
	if len(j.Steps) == 0 {
		return JobStep{}
	}
	return j.Steps[len(j.Steps)-1]
}

var deployJobIDPattern = regexp.MustCompile(`^j-[0-9a-f]{16}$`)

// ValidDeployJobID reports whether s has the form j- + 16 lowercase hex
// digits.
func ValidDeployJobID(s string) bool { return deployJobIDPattern.MatchString(s) }

// DeployJob returns one job.
func (t *Tx) DeployJob(id string) (DeployJob, error) {
	return getNamed[DeployJob](t, bucketDeployJobs, "job", id)
}

// PutDeployJob writes a job and its machine index entry.
func (t *Tx) PutDeployJob(j DeployJob) error {
	if !ValidDeployJobID(j.ID) || !ValidMachineID(j.Machine) {
		return Errorf(ErrInvalid, "job %q of machine %q", Clip(j.ID), Clip(j.Machine))
	}
	if err := t.ensureBuckets(bucketDeployJobsByMachine); err != nil {
		return err
	}
	j.Index = t.Index
	if err := t.tx.Bucket(bucketDeployJobsByMachine).Put(ikey(j.Machine, j.ID), nil); err != nil {
		return err
	}
	return t.putNamed(bucketDeployJobs, TableDeployJobs, j.ID, j)
}

// DeleteDeployJob removes a job and its index entry.
func (t *Tx) DeleteDeployJob(j DeployJob) error {
	if err := t.deleteNamed(bucketDeployJobs, TableDeployJobs, "job", j.ID); err != nil {
		return err
	}
	return t.tx.Bucket(bucketDeployJobsByMachine).Delete(ikey(j.Machine, j.ID))
}

// MachineDeployJobs lists a machine's jobs, newest first, at most limit
// (0: all), through the machine index.
func (t *Tx) MachineDeployJobs(machine string, limit int) ([]DeployJob, error) {
	ids := t.lookup(bucketDeployJobsByMachine, machine)
	var out []DeployJob
	for i := len(ids) - 1; i >= 0; i-- {
		j, err := t.DeployJob(ids[i])
		if err != nil {
			return nil, err
		}
		out = append(out, j)
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	return out, nil
}

// ActiveDeployJob is the machine's queued or running job, if any (there is
// at most one: DeployStart and ReleaseStart refuse a second).
func (t *Tx) ActiveDeployJob(machine string) (DeployJob, bool, error) {
	jobs, err := t.MachineDeployJobs(machine, 0)
	if err != nil {
		return DeployJob{}, false, err
	}
	for _, j := range jobs {
		if j.Active() {
			return j, true, nil
		}
	}
	return DeployJob{}, false, nil
}

// CurrentDeployment is the machine's latest deploy job (any state),
// false when it never had one.
func (t *Tx) CurrentDeployment(machine string) (DeployJob, bool, error) {
	jobs, err := t.MachineDeployJobs(machine, 0)
	if err != nil {
		return DeployJob{}, false, err
	}
	for _, j := range jobs {
		if j.Kind == JobKindDeploy {
			return j, true, nil
		}
	}
	return DeployJob{}, false, nil
}

// ActiveDeployJobs lists every queued or running job, oldest first (the
// leader's timeout sweep).
func (t *Tx) ActiveDeployJobs() ([]DeployJob, error) {
	if t.tx.Bucket(bucketDeployJobs) == nil {
		return nil, nil
	}
	var out []DeployJob
	err := forEachJSON(t, bucketDeployJobs, "", func(_ string, j *DeployJob) error {
		if j.Active() {
			out = append(out, *j)
		}
		return nil
	})
	return out, err
}
