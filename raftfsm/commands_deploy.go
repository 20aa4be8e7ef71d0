package raftfsm

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rollcall/rollcall/ipam"
	"github.com/rollcall/rollcall/store"
)

// Deploy and release jobs (issue 18; records in store/deployjobs.go). The
// proposer decides everything a job pins (the disk by the inventory's
// rules, appliance/deploy; the addresses by IPAM's picks; the image
// version from the catalog) and the state machine checks it against the
// state it is applied to, then writes the job, the machine's state and the
// address claims in one command. Reports from the agent, an operator's
// cancel, the leader's timeout and cloud-init's phone home each move the
// job (and, when it ends, the machine) in one command of their own.
//
// Decisions:
//   - A deploy that fails (a failed step, a timeout, a cancel after it
//     started writing) leaves the machine deploy-failed, its addresses
//     still claimed: the agent stays up for ssh, and a release (which
//     wipes) gives them back. A failed release also ends deploy-failed:
//     the disk is in an unknown state, and only another release or a
//     re-commission takes the machine on.
//   - A release keeps the hostname (the machine's name), as MAAS keeps it;
//     it frees the addresses the deployment claimed.
//   - A job has started writing once the agent reported any step: its
//     first step (wipe) already changes the disk. A cancel before that
//     ends the job at once (cancelled: the machine goes back to ready, or
//     a release's to the state it left); after it, the job is marked and
//     the agent's next report is answered cancel=true (it wipes and
//     fails).

// JobImage is store.JobImage in a DeployStart.
type JobImage struct {
	SHA256     string `json:"sha256"`
	Size       int64  `json:"size"`
	RawSHA256  string `json:"raw_sha256"`
	RawSize    int64  `json:"raw_size"`
	SectorSize int    `json:"sector_size,omitempty"`
	Family     string `json:"family,omitempty"`
}

func jobImageBody(i store.JobImage) JobImage {
	return JobImage{SHA256: i.SHA256, Size: i.Size, RawSHA256: i.RawSHA256, RawSize: i.RawSize, SectorSize: i.SectorSize, Family: i.Family}
}

func (b JobImage) record() store.JobImage {
	return store.JobImage{SHA256: b.SHA256, Size: b.Size, RawSHA256: b.RawSHA256, RawSize: b.RawSize, SectorSize: b.SectorSize, Family: b.Family}
}

// JobDisk is store.JobDisk in a DeployStart.
type JobDisk struct {
	Name             string `json:"name"`
	Serial           string `json:"serial,omitempty"`
	WWN              string `json:"wwn,omitempty"`
	ByPath           string `json:"by_path,omitempty"`
	Size             int64  `json:"size"`
	LogicalBlockSize int    `json:"logical_block_size,omitempty"`
	Rule             string `json:"rule,omitempty"`
}

// JobDiskBody is the body of a job's disk.
func JobDiskBody(d store.JobDisk) JobDisk {
	return JobDisk{Name: d.Name, Serial: d.Serial, WWN: d.WWN, ByPath: d.ByPath, Size: d.Size, LogicalBlockSize: d.LogicalBlockSize, Rule: d.Rule}
}

func (b JobDisk) record() store.JobDisk {
	return store.JobDisk{Name: b.Name, Serial: b.Serial, WWN: b.WWN, ByPath: b.ByPath, Size: b.Size, LogicalBlockSize: b.LogicalBlockSize, Rule: b.Rule}
}

// JobAddress is store.JobAddress in a DeployStart.
type JobAddress struct {
	IP        string `json:"ip"`
	Subnet    string `json:"subnet"`
	Interface string `json:"interface,omitempty"`
	MAC       string `json:"mac,omitempty"`
}

func jobAddressBody(a store.JobAddress) JobAddress {
	return JobAddress{IP: a.IP, Subnet: a.Subnet, Interface: a.Interface, MAC: a.MAC}
}

func (b JobAddress) record() store.JobAddress {
	return store.JobAddress{IP: b.IP, Subnet: b.Subnet, Interface: b.Interface, MAC: b.MAC}
}

// JobUserData is store.JobUserData in a DeployStart.
type JobUserData struct {
	SSHKeys  []string `json:"ssh_keys,omitempty"`
	Packages []string `json:"packages,omitempty"`
	Upgrade  bool     `json:"upgrade,omitempty"`
	Operator string   `json:"operator,omitempty"`
}

func jobUserDataBody(u store.JobUserData) JobUserData {
	return JobUserData{SSHKeys: u.SSHKeys, Packages: u.Packages, Upgrade: u.Upgrade, Operator: u.Operator}
}

func (b JobUserData) record() store.JobUserData {
	return store.JobUserData{SSHKeys: b.SSHKeys, Packages: b.Packages, Upgrade: b.Upgrade, Operator: b.Operator}
}

// DeployJob is what a proposer decides of a store.DeployJob; the state
// machine stamps the rest (state, times, progress).
type DeployJob struct {
	ID            string       `json:"id"`
	Machine       string       `json:"machine"`
	Kind          string       `json:"kind"`
	OS            string       `json:"os,omitempty"`
	OSVersion     string       `json:"os_version,omitempty"`
	Image         JobImage     `json:"image,omitzero"`
	Disk          JobDisk      `json:"disk,omitzero"`
	Hostname      string       `json:"hostname,omitempty"`
	FQDN          string       `json:"fqdn,omitempty"`
	Addresses     []JobAddress `json:"addresses,omitempty"`
	NetworkConfig string       `json:"network_config,omitempty"`
	Boot          bool         `json:"boot,omitempty"`
	Wipe          string       `json:"wipe,omitempty"`
	UserData      JobUserData  `json:"user_data,omitzero"`
	Requester     string       `json:"requester,omitempty"`
}

// DeployJobBody is the body of a job as a proposer decided it.
func DeployJobBody(j store.DeployJob) DeployJob {
	return DeployJob{
		ID: j.ID, Machine: j.Machine, Kind: j.Kind, OS: j.OS, OSVersion: j.OSVersion,
		Image: jobImageBody(j.Image), Disk: JobDiskBody(j.Disk), Hostname: j.Hostname, FQDN: j.FQDN,
		Addresses: convertAll(j.Addresses, jobAddressBody), NetworkConfig: j.NetworkConfig, Boot: j.Boot, Wipe: j.Wipe,
		UserData: jobUserDataBody(j.UserData), Requester: j.Requester,
	}
}

func (b DeployJob) record() store.DeployJob {
	return store.DeployJob{
		ID: b.ID, Machine: b.Machine, Kind: b.Kind, OS: b.OS, OSVersion: b.OSVersion,
		Image: b.Image.record(), Disk: b.Disk.record(), Hostname: b.Hostname, FQDN: b.FQDN,
		Addresses: records(b.Addresses), NetworkConfig: b.NetworkConfig, Boot: b.Boot, Wipe: b.Wipe,
		UserData: b.UserData.record(), Requester: b.Requester,
	}
}

// DeployStart makes a deploy job: the job, the machine's move to
// deploying, its new name (the job's hostname, when it is a name) and the
// address claims, in one command.
type DeployStart struct {
	Job DeployJob `json:"job"`
	Now time.Time `json:"now"`
}

// ReleaseStart makes a release job for a deployed (or failed) machine: it
// wipes the disk the deployment wrote, with its addresses freed once it
// is done. The disk, hostname and addresses come from the machine's
// deployment, read by the state machine.
type ReleaseStart struct {
	ID        string    `json:"id"`
	Machine   string    `json:"machine"`
	Wipe      string    `json:"wipe"`
	Boot      bool      `json:"boot,omitempty"`
	Requester string    `json:"requester,omitempty"`
	Now       time.Time `json:"now"`
}

// JobReport is one progress report of the agent (POST
// /api/v1/jobs/self/progress).
type JobReport struct {
	Job     string    `json:"job"`
	Step    string    `json:"step"`
	State   string    `json:"state"`
	Bytes   int64     `json:"bytes,omitempty"`
	Total   int64     `json:"total,omitempty"`
	Message string    `json:"message,omitempty"`
	Now     time.Time `json:"now"`
}

// JobCancel is an operator's cancel.
type JobCancel struct {
	Job       string    `json:"job"`
	Requester string    `json:"requester,omitempty"`
	Now       time.Time `json:"now"`
}

// JobTimeout fails a job whose agent has not reported for too long; the
// leader proposes it. Basis is the job's last report (its creation when
// none came) as the leader saw it: a report applied in between makes the
// timeout void.
type JobTimeout struct {
	Job   string        `json:"job"`
	Basis time.Time     `json:"basis"`
	After time.Duration `json:"after"`
	Now   time.Time     `json:"now"`
}

// PhoneHome records cloud-init's phone_home from a deployed machine.
type PhoneHome struct {
	Job      string    `json:"job"`
	Hostname string    `json:"hostname,omitempty"`
	Now      time.Time `json:"now"`
}

func (*DeployStart) Type() Type      { return TypeDeployStart }
func (*ReleaseStart) Type() Type     { return TypeReleaseStart }
func (*JobReport) Type() Type        { return TypeJobReport }
func (*JobCancel) Type() Type        { return TypeJobCancel }
func (*JobTimeout) Type() Type       { return TypeJobTimeout }
func (*PhoneHome) Type() Type        { return TypePhoneHome }
func (*DeployStart) Version() uint8  { return 1 }
func (*ReleaseStart) Version() uint8 { return 1 }
func (*JobReport) Version() uint8    { return 1 }
func (*JobCancel) Version() uint8    { return 1 }
func (*JobTimeout) Version() uint8   { return 1 }
func (*PhoneHome) Version() uint8    { return 1 }

func deployCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeDeployStart:  {"deploy-start", 1, func() Command { return &DeployStart{} }},
		TypeReleaseStart: {"release-start", 1, func() Command { return &ReleaseStart{} }},
		TypeJobReport:    {"job-report", 1, func() Command { return &JobReport{} }},
		TypeJobCancel:    {"job-cancel", 1, func() Command { return &JobCancel{} }},
		TypeJobTimeout:   {"job-timeout", 1, func() Command { return &JobTimeout{} }},
		TypePhoneHome:    {"phone-home", 1, func() Command { return &PhoneHome{} }},
	}
}

var (
	sha256Pattern  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	packagePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+_:~=*-]{0,127}$`)
	diskPattern    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$`)
)

// maxFQDN is DNS's limit on a name (RFC 1035 §2.3.4).
const maxFQDN = 253

// CheckDeployJob checks what a proposer decided of a deploy job, bounds
// and forms only: the proposer runs it before proposing and DeployStart
// again when it applies.
func CheckDeployJob(j store.DeployJob) error {
	switch {
	case !store.ValidDeployJobID(j.ID):
		return store.Errorf(store.ErrInvalid, "job id %q must be j- and 16 hex digits", store.Clip(j.ID))
	case !store.ValidMachineID(j.Machine):
		return store.Errorf(store.ErrInvalid, "machine id %q", store.Clip(j.Machine))
	case j.Kind != store.JobKindDeploy:
		return store.Errorf(store.ErrInvalid, "a deploy job's kind is deploy, not %q", store.Clip(j.Kind))
	case j.OS == "" || j.OSVersion == "":
		return store.Errorf(store.ErrInvalid, "a deploy job names an OS and its version")
	case !sha256Pattern.MatchString(j.Image.SHA256) || !sha256Pattern.MatchString(j.Image.RawSHA256):
		return store.Errorf(store.ErrInvalid, "the image's hashes must be SHA-256 in lowercase hex")
	case j.Image.Size <= 0 || j.Image.RawSize <= 0:
		return store.Errorf(store.ErrInvalid, "the image's sizes must be positive")
	case !diskPattern.MatchString(j.Disk.Name):
		return store.Errorf(store.ErrInvalid, "disk name %q is not a block device name", store.Clip(j.Disk.Name))
	case j.Disk.Size < j.Image.RawSize:
		return store.Errorf(store.ErrInvalid, "disk %s (%d bytes) is smaller than %s %s (%d bytes raw)", j.Disk.Name, j.Disk.Size, j.OS, j.OSVersion, j.Image.RawSize)
	case j.Wipe != "" && j.Wipe != store.WipeQuick:
		return store.Errorf(store.ErrInvalid, "a deployment wipes quick before it writes, not %q", store.Clip(j.Wipe))
	}
	if err := CheckSectors(j.Disk, j.Image); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"disk serial", j.Disk.Serial}, {"disk wwn", j.Disk.WWN}, {"disk by-path", j.Disk.ByPath}, {"disk rule", j.Disk.Rule}, {"requester", j.Requester}} {
		if len(f.v) > 256 || !printable(f.v) {
			return store.Errorf(store.ErrInvalid, "%s must be printable text of at most 256 bytes", f.name)
		}
	}
	if err := checkHostname(j.Hostname, j.FQDN); err != nil {
		return err
	}
	if len(j.Addresses) > store.MaxJobAddresses {
		return store.Errorf(store.ErrInvalid, "%d addresses is more than the %d a deployment claims", len(j.Addresses), store.MaxJobAddresses)
	}
	for _, a := range j.Addresses {
		if _, err := jobAddress(a, j.Machine, time.Time{}); err != nil {
			return err
		}
	}
	if len(j.NetworkConfig) > store.MaxNetworkConfig || !utf8.ValidString(j.NetworkConfig) {
		return store.Errorf(store.ErrInvalid, "network-config must be UTF-8 text of at most %d KiB", store.MaxNetworkConfig>>10)
	}
	return CheckUserData(j.UserData)
}

// CheckSectors refuses an image whose sector size is not the disk's: a
// 512-byte image on a 4Kn disk has no valid partition table there.
// Unknown sizes (0) are 512.
func CheckSectors(d store.JobDisk, im store.JobImage) error {
	disk, image := cmpOr(d.LogicalBlockSize, 512), cmpOr(im.SectorSize, 512)
	if disk != image {
		return store.Errorf(store.ErrInvalid, "disk %s has %d-byte logical blocks and the image %d-byte sectors: its partition table would not be valid there (choose another disk, or an image made for %d-byte sectors)", d.Name, disk, image, disk)
	}
	return nil
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// CheckUserData bounds a deployment's user-data inputs.
func CheckUserData(u store.JobUserData) error {
	if len(u.SSHKeys) > store.MaxSSHKeys {
		return store.Errorf(store.ErrInvalid, "%d SSH keys is more than the %d allowed", len(u.SSHKeys), store.MaxSSHKeys)
	}
	for i, k := range u.SSHKeys {
		if len(k) > store.MaxSSHKey || !printable(k) || !strings.HasPrefix(k, "ssh-") && !strings.HasPrefix(k, "ecdsa-") && !strings.HasPrefix(k, "sk-") {
			return store.Errorf(store.ErrInvalid, "SSH key %d must be one OpenSSH public key line (ssh-ed25519 AAAA…, ecdsa-…, sk-…) of at most %d KiB", i+1, store.MaxSSHKey>>10)
		}
	}
	if len(u.Packages) > store.MaxPackages {
		return store.Errorf(store.ErrInvalid, "%d packages is more than the %d allowed", len(u.Packages), store.MaxPackages)
	}
	for _, p := range u.Packages {
		if !packagePattern.MatchString(p) {
			return store.Errorf(store.ErrInvalid, "package %q is not a package name (letters, digits, . + _ : ~ = * -)", store.Clip(p))
		}
	}
	if len(u.Operator) > store.MaxOperatorPart || !utf8.ValidString(u.Operator) || strings.ContainsRune(u.Operator, 0) {
		return store.Errorf(store.ErrInvalid, "the operator's user-data must be UTF-8 text of at most %d KiB", store.MaxOperatorPart>>10)
	}
	return nil
}

var hostnamePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func checkHostname(host, fqdn string) error {
	if !hostnamePattern.MatchString(host) {
		return store.Errorf(store.ErrInvalid, "hostname %q must be a DNS label: lowercase letters, digits and '-', 1 to 63 characters", store.Clip(host))
	}
	if fqdn == "" {
		return nil
	}
	if len(fqdn) > maxFQDN || fqdn != host && !strings.HasPrefix(fqdn, host+".") {
		return store.Errorf(store.ErrInvalid, "fqdn %q must be the hostname, or the hostname and a domain, at most %d characters", store.Clip(fqdn), maxFQDN)
	}
	for _, l := range strings.Split(fqdn, ".") {
		if !hostnamePattern.MatchString(l) {
			return store.Errorf(store.ErrInvalid, "fqdn %q: label %q is not a DNS label", store.Clip(fqdn), store.Clip(l))
		}
	}
	return nil
}

// printable reports whether s is UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// jobAddress turns a job's address into the claim IPAM records.
func jobAddress(a store.JobAddress, machine string, now time.Time) (store.Address, error) {
	ip, err := netip.ParseAddr(a.IP)
	if err != nil {
		return store.Address{}, store.Errorf(store.ErrInvalid, "address %q is not an IP address", store.Clip(a.IP))
	}
	sub, err := netip.ParsePrefix(a.Subnet)
	if err != nil {
		return store.Address{}, store.Errorf(store.ErrInvalid, "subnet %q is not a prefix", store.Clip(a.Subnet))
	}
	if a.MAC != "" {
		if n, err := store.NormalizeMAC(a.MAC); err != nil || n != a.MAC {
			return store.Address{}, store.Errorf(store.ErrInvalid, "mac %q is not in normal form", store.Clip(a.MAC))
		}
	}
	if a.Interface != "" {
		if err := ipam.CheckIface(a.Interface); err != nil {
			return store.Address{}, err
		}
	}
	return store.Address{IP: ip, Subnet: sub, How: store.HowAuto, Machine: machine, Interface: a.Interface, Created: now}, nil
}

// pruneJobs drops a machine's oldest ended jobs past MaxJobsPerMachine,
// keeping its current deployment (the phone-home and release read it).
func pruneJobs(tx *store.Tx, machine string) error {
	jobs, err := tx.MachineDeployJobs(machine, 0) // newest first
	if err != nil {
		return err
	}
	current := ""
	for _, j := range jobs {
		if j.Kind == store.JobKindDeploy {
			current = j.ID
			break
		}
	}
	kept := 0
	for _, j := range jobs {
		kept++
		if kept < store.MaxJobsPerMachine || j.Active() || j.ID == current {
			continue
		}
		if err := tx.DeleteDeployJob(j); err != nil {
			return err
		}
	}
	return nil
}

func (c *DeployStart) apply(tx *store.Tx) error {
	j := c.Job.record()
	if err := CheckDeployJob(j); err != nil {
		return err
	}
	if _, err := tx.DeployJob(j.ID); err == nil {
		return store.Errorf(store.ErrConflict, "job %s exists", j.ID)
	}
	m, err := tx.Machine(j.Machine)
	if err != nil {
		return err
	}
	if m.State != store.StateReady {
		return store.Errorf(store.ErrTransition, "machine %s is %s: only a ready machine deploys (release a deployed one first)", m.ID, m.State)
	}
	if active, ok, err := tx.ActiveDeployJob(m.ID); err != nil {
		return err
	} else if ok {
		return store.Errorf(store.ErrConflict, "machine %s has job %s %s", m.ID, active.ID, active.State)
	}
	im, err := tx.OSImage(j.OS)
	if err != nil {
		return err
	}
	v, ok := im.Version(j.OSVersion)
	if !ok {
		return store.Errorf(store.ErrNotFound, "OS %s has no version %q", j.OS, store.Clip(j.OSVersion))
	}
	if v.File.SHA256 != j.Image.SHA256 || v.RawSHA256 != j.Image.RawSHA256 || v.RawSize != j.Image.RawSize || v.File.Size != j.Image.Size {
		return store.Errorf(store.ErrConflict, "OS %s %s is not the image the job pins (it changed while the job was made): deploy again", j.OS, j.OSVersion)
	}
	rename := store.ValidName(j.Hostname) == nil && j.Hostname != m.Name
	if rename {
		for _, id := range tx.MachineIDsByName(j.Hostname) {
			if id != m.ID {
				return store.Errorf(store.ErrConflict, "hostname %s is the name of machine %s", j.Hostname, id)
			}
		}
	}
	claims := make([]store.Address, 0, len(j.Addresses))
	for _, a := range j.Addresses {
		addr, err := jobAddress(a, m.ID, c.Now)
		if err != nil {
			return err
		}
		claims = append(claims, addr)
	}
	// ClaimAll checks every claim before it writes the first; everything
	// after it has been checked above, so nothing is left half-written.
	if err := ipam.ClaimAll(tx, claims); err != nil {
		return err
	}
	if err := pruneJobs(tx, m.ID); err != nil {
		return err
	}
	j.State, j.Created = store.JobQueued, c.Now
	if err := tx.PutDeployJob(j); err != nil {
		return err
	}
	msg := fmt.Sprintf("ready → deploying: %s %s onto %s (%s), job %s", j.OS, j.OSVersion, j.Disk.Name, j.Disk.Rule, j.ID)
	if rename {
		m.Name = j.Hostname
	}
	m.State, m.UpdatedAt = store.StateDeploying, c.Now
	return putWithEvents(tx, m, c.Now, []store.Event{{Kind: "deploy", Message: msg}})
}

func (c *ReleaseStart) apply(tx *store.Tx) error {
	if !store.ValidDeployJobID(c.ID) {
		return store.Errorf(store.ErrInvalid, "job id %q must be j- and 16 hex digits", store.Clip(c.ID))
	}
	if c.Wipe != store.WipeQuick && c.Wipe != store.WipeFull {
		return store.Errorf(store.ErrInvalid, "wipe %q is not one of quick, full", store.Clip(c.Wipe))
	}
	if len(c.Requester) > 256 || !printable(c.Requester) {
		return store.Errorf(store.ErrInvalid, "requester must be printable text of at most 256 bytes")
	}
	if _, err := tx.DeployJob(c.ID); err == nil {
		return store.Errorf(store.ErrConflict, "job %s exists", c.ID)
	}
	m, err := tx.Machine(c.Machine)
	if err != nil {
		return err
	}
	if m.State != store.StateDeployed && m.State != store.StateDeployFailed {
		return store.Errorf(store.ErrTransition, "machine %s is %s: only a deployed or deploy-failed machine is released", m.ID, m.State)
	}
	if active, ok, err := tx.ActiveDeployJob(m.ID); err != nil {
		return err
	} else if ok {
		return store.Errorf(store.ErrConflict, "machine %s has job %s %s", m.ID, active.ID, active.State)
	}
	d, ok, err := tx.CurrentDeployment(m.ID)
	if err != nil {
		return err
	}
	if !ok {
		return store.Errorf(store.ErrConflict, "machine %s has no deployment to release", m.ID)
	}
	if err := pruneJobs(tx, m.ID); err != nil {
		return err
	}
	j := store.DeployJob{
		ID: c.ID, Machine: m.ID, Kind: store.JobKindRelease, State: store.JobQueued,
		Disk: d.Disk, Hostname: d.Hostname, FQDN: d.FQDN, Addresses: d.Addresses,
		Boot: c.Boot, Wipe: c.Wipe, Prior: m.State, Requester: c.Requester, Created: c.Now,
	}
	if err := tx.PutDeployJob(j); err != nil {
		return err
	}
	msg := fmt.Sprintf("%s → releasing: %s wipe of %s, job %s", m.State, c.Wipe, d.Disk.Name, c.ID)
	m.State, m.UpdatedAt = store.StateReleasing, c.Now
	return putWithEvents(tx, m, c.Now, []store.Event{{Kind: "release", Message: msg}})
}

// CheckReport bounds an agent's report; the API runs it before proposing.
func CheckReport(c *JobReport) error {
	switch {
	case !slices.Contains(store.JobSteps, c.Step):
		return store.Errorf(store.ErrInvalid, "step %q is not one of %s", store.Clip(c.Step), strings.Join(store.JobSteps, ", "))
	case !slices.Contains(store.JobStepStates, c.State):
		return store.Errorf(store.ErrInvalid, "state %q is not one of %s", store.Clip(c.State), strings.Join(store.JobStepStates, ", "))
	case c.Bytes < 0 || c.Total < 0:
		return store.Errorf(store.ErrInvalid, "bytes and total must not be negative")
	case len(c.Message) > store.MaxJobMessage || !utf8.ValidString(c.Message) || strings.ContainsRune(c.Message, 0):
		return store.Errorf(store.ErrInvalid, "message must be UTF-8 text of at most %d bytes", store.MaxJobMessage)
	case c.Step == "done" && c.State == "running":
		return store.Errorf(store.ErrInvalid, "step done is reported done or failed, not running")
	}
	return nil
}

func (c *JobReport) apply(tx *store.Tx) error {
	if err := CheckReport(c); err != nil {
		return err
	}
	j, err := tx.DeployJob(c.Job)
	if err != nil {
		return err
	}
	if !j.Active() {
		return store.Errorf(store.ErrConflict, "job %s is %s: it takes no more reports", j.ID, j.State)
	}
	m, err := tx.Machine(j.Machine)
	if err != nil {
		return err
	}
	var events []store.Event
	if j.State == store.JobQueued {
		j.State, j.Started = store.JobRunning, c.Now
		events = append(events, store.Event{Kind: j.Kind, Message: fmt.Sprintf("job %s: the agent started (%s)", j.ID, c.Step)})
	}
	j.Progress = store.JobProgress{Step: c.Step, State: c.State, Bytes: c.Bytes, Total: c.Total, Updated: c.Now}
	j.LastReport = c.Now
	step := store.JobStep{Step: c.Step, State: c.State, Message: c.Message, At: c.Now}
	if last := j.LastStep(); last.Step == c.Step && last.State == "running" {
		j.Steps[len(j.Steps)-1] = step // the step goes on, or ends
	} else {
		j.Steps = append(j.Steps, step)
		if len(j.Steps) > store.MaxJobSteps {
			j.Steps = slices.Delete(j.Steps, 0, len(j.Steps)-store.MaxJobSteps)
		}
	}
	switch {
	case c.State == "failed":
		j.State, j.Finished = store.JobFailed, c.Now
		j.Error = fmt.Sprintf("step %s failed", c.Step)
		if c.Message != "" {
			j.Error += ": " + c.Message
		}
		if j.Cancel {
			j.Error = "cancelled by an operator; " + j.Error
		}
		events = append(events, store.Event{Kind: j.Kind, Message: fmt.Sprintf("%s → %s: job %s: %s", m.State, store.StateDeployFailed, j.ID, j.Error)})
		m.State = store.StateDeployFailed
	case c.Step == "done":
		j.State, j.Finished = store.JobDone, c.Now
		if j.Kind == store.JobKindDeploy {
			events = append(events, store.Event{Kind: "deploy", Message: fmt.Sprintf("deploying → deployed: %s %s written to %s, job %s", j.OS, j.OSVersion, j.Disk.Name, j.ID)})
			m.State = store.StateDeployed
		} else {
			if err := freeAddresses(tx, j); err != nil {
				return err
			}
			events = append(events, store.Event{Kind: "release", Message: fmt.Sprintf("releasing → ready: %s wiped (%s), %d addresses freed, job %s", j.Disk.Name, j.Wipe, len(j.Addresses), j.ID)})
			m.State = store.StateReady
		}
	}
	if err := tx.PutDeployJob(j); err != nil {
		return err
	}
	if len(events) == 0 {
		return nil
	}
	m.UpdatedAt = c.Now
	return putWithEvents(tx, m, c.Now, events)
}

// freeAddresses releases the addresses a job's deployment claimed that
// the machine still holds (an operator may have freed one by hand).
func freeAddresses(tx *store.Tx, j store.DeployJob) error {
	for _, a := range j.Addresses {
		ip, err := netip.ParseAddr(a.IP)
		if err != nil {
			continue // checked when claimed: cannot happen
		}
		rec, err := tx.Address(ip)
		if err != nil || rec.Machine != j.Machine {
			continue
		}
		if err := ipam.Release(tx, ip); err != nil {
			return err
		}
	}
	return nil
}

func (c *JobCancel) apply(tx *store.Tx) error {
	j, err := tx.DeployJob(c.Job)
	if err != nil {
		return err
	}
	if !j.Active() {
		return store.Errorf(store.ErrConflict, "job %s is %s already", j.ID, j.State)
	}
	m, err := tx.Machine(j.Machine)
	if err != nil {
		return err
	}
	who := ""
	if c.Requester != "" {
		who = " by " + store.Clip(c.Requester)
	}
	if j.State == store.JobRunning {
		if j.Cancel {
			return store.Errorf(store.ErrConflict, "job %s is being cancelled already: the agent wipes the disk and fails at its next report", j.ID)
		}
		j.Cancel = true
		if err := tx.PutDeployJob(j); err != nil {
			return err
		}
		return tx.AddEvent(store.Event{Machine: m.ID, Time: c.Now, Kind: j.Kind, Message: fmt.Sprintf("job %s: cancel asked%s after it started writing (%s): the agent wipes the disk and fails", j.ID, who, j.LastStep().Step)})
	}
	j.State, j.Finished, j.Error = store.JobCancelled, c.Now, "cancelled"+who+" before it started"
	from := m.State
	if j.Kind == store.JobKindDeploy {
		if err := freeAddresses(tx, j); err != nil {
			return err
		}
		m.State = store.StateReady
	} else {
		m.State = cmpOrString(j.Prior, store.StateDeployed)
	}
	if err := tx.PutDeployJob(j); err != nil {
		return err
	}
	m.UpdatedAt = c.Now
	return putWithEvents(tx, m, c.Now, []store.Event{{Kind: j.Kind, Message: fmt.Sprintf("%s → %s: job %s cancelled%s before the agent started", from, m.State, j.ID, who)}})
}

func cmpOrString(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// TimeoutBasis is the time a job's timeout counts from: its last report,
// or its creation when none came.
func TimeoutBasis(j store.DeployJob) time.Time {
	if !j.LastReport.IsZero() {
		return j.LastReport
	}
	return j.Created
}

// DueTimeouts lists the timeouts the leader proposes at now: a running
// job without a report for running, a queued one (its machine never
// booted the agent) after queued.
func DueTimeouts(tx *store.Tx, now time.Time, running, queued time.Duration) ([]*JobTimeout, error) {
	jobs, err := tx.ActiveDeployJobs()
	if err != nil {
		return nil, err
	}
	var out []*JobTimeout
	for _, j := range jobs {
		after := running
		if j.State == store.JobQueued {
			after = queued
		}
		if basis := TimeoutBasis(j); now.Sub(basis) >= after {
			out = append(out, &JobTimeout{Job: j.ID, Basis: basis, After: after, Now: now})
		}
	}
	return out, nil
}

func (c *JobTimeout) apply(tx *store.Tx) error {
	j, err := tx.DeployJob(c.Job)
	if err != nil {
		return err
	}
	if !j.Active() {
		return store.Errorf(store.ErrConflict, "job %s is %s already", j.ID, j.State)
	}
	if !TimeoutBasis(j).Equal(c.Basis) {
		return store.Errorf(store.ErrConflict, "job %s reported since the timeout was decided", j.ID)
	}
	m, err := tx.Machine(j.Machine)
	if err != nil {
		return err
	}
	if last := j.LastStep(); last.Step != "" {
		j.Error = fmt.Sprintf("timed out: no report for %s; last step %s (%s)", c.After, last.Step, last.State)
	} else {
		j.Error = fmt.Sprintf("timed out: the machine did not start the deploy agent within %s (did it PXE-boot?)", c.After)
	}
	j.State, j.Finished = store.JobFailed, c.Now
	if err := tx.PutDeployJob(j); err != nil {
		return err
	}
	from := m.State
	m.State, m.UpdatedAt = store.StateDeployFailed, c.Now
	return putWithEvents(tx, m, c.Now, []store.Event{{Kind: j.Kind, Message: fmt.Sprintf("%s → %s: job %s %s", from, m.State, j.ID, j.Error)}})
}

// CheckPhoneHome says whether a phone home for job is valid now: the job
// is the machine's current deployment, done, and the machine is still
// deployed (a release ends the token). The API runs it before proposing,
// so that a wrong or stale token takes no Raft entry.
func CheckPhoneHome(tx *store.Tx, job string) (store.DeployJob, error) {
	j, err := tx.DeployJob(job)
	if err != nil {
		return j, err
	}
	cur, ok, err := tx.CurrentDeployment(j.Machine)
	if err != nil {
		return j, err
	}
	m, err := tx.Machine(j.Machine)
	if err != nil {
		return j, err
	}
	if !ok || cur.ID != j.ID || j.State != store.JobDone || m.State != store.StateDeployed {
		return j, store.Errorf(store.ErrNotFound, "deployment for this token")
	}
	return j, nil
}

func (c *PhoneHome) apply(tx *store.Tx) error {
	j, err := CheckPhoneHome(tx, c.Job)
	if err != nil {
		return err
	}
	if len(c.Hostname) > maxFQDN || !printable(c.Hostname) {
		return store.Errorf(store.ErrInvalid, "hostname must be printable text of at most %d bytes", maxFQDN)
	}
	first := j.PhonedHome.IsZero()
	j.PhonedHome, j.PhoneHost = c.Now, c.Hostname
	if err := tx.PutDeployJob(j); err != nil {
		return err
	}
	msg := "phoned home again"
	if first {
		msg = "phoned home: the deployed system booted"
	}
	if c.Hostname != "" {
		msg += " as " + c.Hostname
	}
	return tx.AddEvent(store.Event{Machine: j.Machine, Time: c.Now, Kind: "deploy", Message: msg})
}
