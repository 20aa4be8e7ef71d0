package wire

import "time"

// PowerRequest is POST /api/v1/machines/{id}/power.
type PowerRequest struct {
	Action string `json:"action"` // on, off, soft, cycle, reset or status
}

// BootdevRequest is POST /api/v1/machines/{id}/bootdev.
type BootdevRequest struct {
	Device     string `json:"device"` // pxe, disk, cdrom, bios or none
	Persistent bool   `json:"persistent"`
	UEFI       bool   `json:"uefi"`
}

// BMCRequest is PUT /api/v1/machines/{id}/bmc: an operator sets the BMC.
// The password is sealed on the node and never answered.
type BMCRequest struct {
	Driver   string            `json:"driver"` // one of GET /api/v1/bmc/drivers
	Address  string            `json:"address"`
	User     string            `json:"user"`
	Password string            `json:"password"`
	Settings map[string]string `json:"settings"` // the driver's, at most 32
	// Verify and Probe (the same) run a probe job once it is set, and
	// answer with the job instead of the machine.
	Verify bool `json:"verify"`
	Probe  bool `json:"probe"`
}

// Job is one queued BMC command and, once done, its result. The power,
// bootdev and recommission ?now=1 calls answer with it (202 while it still
// runs).
type Job struct {
	ID           string    `json:"id"`
	Machine      string    `json:"machine"`
	Kind         string    `json:"kind"` // power, bootdev, recommission, probe, detect
	Arg          string    `json:"arg,omitempty"`
	Persistent   bool      `json:"persistent,omitempty"`
	UEFI         bool      `json:"uefi,omitempty"`
	Runner       string    `json:"runner,omitempty"` // the node to run it; "" = the leader
	Created      time.Time `json:"created"`
	Requester    string    `json:"requester,omitempty"`
	StartedBy    string    `json:"started_by,omitempty"`
	Started      time.Time `json:"started,omitzero"`
	StartedUntil time.Time `json:"started_until,omitzero"` // the runner's lease on it
	Attempts     int       `json:"attempts,omitempty"`
	Done         bool      `json:"done"`
	Finished     time.Time `json:"finished,omitzero"`
	Result       string    `json:"result,omitempty"` // e.g. the power state
	Error        string    `json:"error,omitempty"`
	Index        uint64    `json:"index"`
}

// JobList is GET /api/v1/machines/{id}/jobs, newest first.
type JobList struct {
	Jobs []Job `json:"jobs"`
	// Deploy are the machine's deploy and release jobs, newest first.
	Deploy []DeployJob `json:"deploy"`
	Index  uint64      `json:"index"` // the deploy jobs' change index (?index= blocks on it)
}

// Driver is a BMC driver the appliance knows. Its JSON names are capitalised
// as they have always been (the record had no tags).
type Driver struct {
	Name        string `json:"Name"`
	Description string `json:"Description"`
}

// DriverList is GET /api/v1/bmc/drivers.
type DriverList struct {
	Drivers []Driver `json:"drivers"`
}

// ErrorReply is every failed call's answer. Job is set only on a 502 from a
// BMC job, which answers with the job that failed.
type ErrorReply struct {
	Error ErrorDetail `json:"error"`
	Job   *Job        `json:"job,omitempty"`
}

// ErrorDetail is what a client may know of an error.
type ErrorDetail struct {
	Code    string `json:"code"`    // stable, for programs: not_found, conflict, unauthorized, …
	Message string `json:"message"` // for people
}
