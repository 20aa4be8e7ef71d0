package wire

import "time"

// DeployRequest is POST /api/v1/machines/{id}/deploy.
type DeployRequest struct {
	OS      string `json:"os"`
	Version string `json:"version,omitempty"` // "" is the OS's current
	// Disk is a name (sda, /dev/sda), a serial, a WWN or a by-path name;
	// "" lets the rule choose (the smallest non-removable, writable disk
	// that fits).
	Disk     string   `json:"disk,omitempty"`
	Hostname string   `json:"hostname,omitempty"` // "" keeps the machine's name
	Upgrade  bool     `json:"upgrade,omitempty"`  // cloud-init's package_upgrade
	Packages []string `json:"packages,omitempty"`
	// UserData is the operator's own part: #cloud-config, #! or a MIME
	// multipart document.
	UserData string   `json:"user_data,omitempty"`
	SSHKeys  []string `json:"ssh_keys,omitempty"` // OpenSSH public key lines
	// Boot power-cycles the machine into PXE through its BMC; without it,
	// the machine deploys at its next network boot.
	Boot bool `json:"boot,omitempty"`
}

// ReleaseRequest is POST /api/v1/machines/{id}/release.
type ReleaseRequest struct {
	Wipe string `json:"wipe,omitempty"` // quick (default) or full
	Boot bool   `json:"boot,omitempty"`
}

// DeployJob is a deploy or release job.
type DeployJob struct {
	ID        string `json:"id"`
	Machine   string `json:"machine"`
	Kind      string `json:"kind"`
	OS        string `json:"os,omitempty"`
	OSVersion string `json:"os_version,omitempty"`
	State     string `json:"state"`
	// Image is the pinned version's file (deploy jobs).
	Image     *JobImage    `json:"image,omitempty"`
	Disk      JobDisk      `json:"disk,omitzero"`
	Hostname  string       `json:"hostname,omitempty"`
	FQDN      string       `json:"fqdn,omitempty"`
	Addresses []JobAddress `json:"addresses,omitempty"`
	Boot      bool         `json:"boot,omitempty"`
	Wipe      string       `json:"wipe,omitempty"`
	Packages  []string     `json:"packages,omitempty"`
	SSHKeys   int          `json:"ssh_keys,omitempty"` // how many keys the user-data carries
	Upgrade   bool         `json:"upgrade,omitempty"`
	Progress  JobProgress  `json:"progress,omitzero"`
	Steps     []JobStep    `json:"steps,omitempty"`
	// Cancel: an operator cancelled it after it started writing; the agent
	// wipes the disk and fails.
	Cancel     bool      `json:"cancel,omitempty"`
	Requester  string    `json:"requester,omitempty"`
	Created    time.Time `json:"created"`
	Started    time.Time `json:"started,omitzero"`
	Finished   time.Time `json:"finished,omitzero"`
	LastReport time.Time `json:"last_report,omitzero"`
	Error      string    `json:"error,omitempty"`
	PhonedHome time.Time `json:"phoned_home,omitzero"`
	PhoneHost  string    `json:"phone_host,omitempty"`
	Index      uint64    `json:"index"`
	// PowerJob is the BMC job that power-cycles the machine (boot).
	PowerJob string `json:"power_job,omitempty"`
}

// JobImage is a job's pinned image file.
type JobImage struct {
	SHA256     string `json:"sha256"`
	Size       int64  `json:"size"`
	RawSHA256  string `json:"raw_sha256"`
	RawSize    int64  `json:"raw_size"`
	SectorSize int    `json:"sector_size,omitempty"`
}

// JobDisk is the disk a job writes, and why it was chosen.
type JobDisk struct {
	Name             string `json:"name"`
	Serial           string `json:"serial,omitempty"`
	WWN              string `json:"wwn,omitempty"`
	ByPath           string `json:"by_path,omitempty"`
	Size             int64  `json:"size"`
	LogicalBlockSize int    `json:"logical_block_size,omitempty"`
	Rule             string `json:"rule,omitempty"`
}

// JobAddress is an address a deployment claimed.
type JobAddress struct {
	IP        string `json:"ip"`
	Subnet    string `json:"subnet"`
	Interface string `json:"interface,omitempty"`
}

// JobProgress is the agent's latest report.
type JobProgress struct {
	Step    string    `json:"step,omitempty"`
	State   string    `json:"state,omitempty"`
	Bytes   int64     `json:"bytes,omitempty"`
	Total   int64     `json:"total,omitempty"`
	Updated time.Time `json:"updated,omitzero"`
}

// JobStep is one step's outcome.
type JobStep struct {
	Step    string    `json:"step"`
	State   string    `json:"state"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
}

// DeployJobList is a machine's deploy and release jobs, newest first.
type DeployJobList struct {
	Index uint64      `json:"index"` // the jobs table's change index (?index= blocks on it)
	Jobs  []DeployJob `json:"jobs"`
}

// Deployment is what a machine's record shows of its current deployment.
type Deployment struct {
	Job        string    `json:"job"`
	OS         string    `json:"os"`
	Version    string    `json:"version"`
	State      string    `json:"state"` // the job's
	Disk       string    `json:"disk,omitempty"`
	PhonedHome time.Time `json:"phoned_home,omitzero"`
}

// JobSelf is GET /api/v1/jobs/self: what the deploy agent does (the
// contract of issue 18).
type JobSelf struct {
	ID             string     `json:"id"`
	Machine        string     `json:"machine"`
	Kind           string     `json:"kind"`
	Image          *SelfImage `json:"image,omitempty"`
	Disk           SelfDisk   `json:"disk"`
	Wipe           string     `json:"wipe"`
	Seed           *SelfSeed  `json:"seed,omitempty"`
	CAPEM          string     `json:"ca_pem,omitempty"`
	EFILabel       string     `json:"efi_label,omitempty"`
	SELinuxRelabel bool       `json:"selinux_relabel"`
	Cancel         bool       `json:"cancel,omitempty"`
}

// SelfImage is where the agent downloads the image and what it checks.
type SelfImage struct {
	URL        string `json:"url"`
	SHA256     string `json:"sha256"`
	Size       int64  `json:"size"`
	RawSHA256  string `json:"raw_sha256"`
	RawSize    int64  `json:"raw_size"`
	Format     string `json:"format"`
	SectorSize int    `json:"sector_size"`
}

// SelfDisk is how the agent finds the disk: serial or WWN first.
type SelfDisk struct {
	Serial string `json:"serial,omitempty"`
	WWN    string `json:"wwn,omitempty"`
	Name   string `json:"name"`
	Size   int64  `json:"size"`
}

// SelfSeed is the NoCloud seed the agent writes.
type SelfSeed struct {
	MetaData      string `json:"meta-data"`
	UserData      string `json:"user-data"`
	NetworkConfig string `json:"network-config,omitempty"`
}

// ProgressRequest is POST /api/v1/jobs/self/progress.
type ProgressRequest struct {
	Step    string `json:"step"`
	State   string `json:"state"`
	Bytes   int64  `json:"bytes,omitempty"`
	Total   int64  `json:"total,omitempty"`
	Message string `json:"message,omitempty"`
}

// ProgressReply answers a report: cancel tells the agent to wipe and fail.
type ProgressReply struct {
	Cancel bool `json:"cancel"`
}
