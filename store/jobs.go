package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// BMC jobs: power and boot-device commands queued through Raft. A job names
// the node that should run it (the one that reaches the BMC's network), or
// none, meaning the leader. A node marks a job started before it talks to
// the BMC and records the result after; a job started by a node that then
// died is started again elsewhere once its lease (StartedUntil) runs out, so
// a command survives the loss of the node that queued or ran it.

var bucketJobs = []byte("jobs") // job ID → Job; IDs sort by creation

// TableJobs names the job table for blocking queries.
const TableJobs = "jobs"

// Job kinds.
const (
	JobPower    = "power"        // Arg: on, off, soft, cycle, reset, status
	JobBootDev  = "bootdev"      // Arg: pxe, disk, cdrom, bios, none; Persistent, UEFI
	JobRecommit = "recommission" // boot device PXE, then power cycle
	JobProbe    = "probe"        // reachability, vendor, Redfish availability
	JobDetect   = "detect"       // after commissioning: switch an IPMI BMC to its Redfish driver
)

// Job is one queued BMC command and, once done, its result.
type Job struct {
	ID           string    `json:"id"`
	Machine      string    `json:"machine"`
	Kind         string    `json:"kind"`
	Arg          string    `json:"arg,omitempty"`
	Persistent   bool      `json:"persistent,omitempty"`
	UEFI         bool      `json:"uefi,omitempty"`
	Runner       string    `json:"runner,omitempty"` // node to run it; "" = the leader
	Created      time.Time `json:"created"`
	Requester    string    `json:"requester,omitempty"`
	StartedBy    string    `json:"started_by,omitempty"`
	Started      time.Time `json:"started,omitzero"`
	StartedUntil time.Time `json:"started_until,omitzero"`
	Attempts     int       `json:"attempts,omitempty"`
	Done         bool      `json:"done"`
	Finished     time.Time `json:"finished,omitzero"`
	Result       string    `json:"result,omitempty"` // e.g. the power state
	Error        string    `json:"error,omitempty"`
	Index        uint64    `json:"index"`
}

// Job returns one job.
func (t *Tx) Job(id string) (Job, error) {
	var j Job
	if err := t.getJSON(bucketJobs, id, &j); err != nil {
		return j, lookupError(err, "job %q", id)
	}
	return j, nil
}

// PutJob writes a job.
func (t *Tx) PutJob(j Job) error {
	j.Index = t.Index
	if err := t.putJSON(bucketJobs, j.ID, j); err != nil {
		return err
	}
	if err := t.logChange("jobs", j.ID, OpPut); err != nil {
		return err
	}
	return t.touch(TableJobs)
}

// DeleteJob removes a job record.
func (t *Tx) DeleteJob(id string) error {
	if err := t.del(bucketJobs, id); err != nil {
		return err
	}
	if err := t.logChange("jobs", id, OpDelete); err != nil {
		return err
	}
	return t.touch(TableJobs)
}

// PendingJobs lists jobs not done, oldest first.
func (t *Tx) PendingJobs() ([]Job, error) {
	var out []Job
	c := t.tx.Bucket(bucketJobs).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var j Job
		if err := json.Unmarshal(v, &j); err != nil {
			return nil, fmt.Errorf("decode job %s: %w", k, err)
		}
		if !j.Done {
			out = append(out, j)
		}
	}
	return out, nil
}

// MachineJobs lists a machine's jobs, newest first, at most limit.
func (t *Tx) MachineJobs(machine string, limit int) ([]Job, error) {
	var out []Job
	c := t.tx.Bucket(bucketJobs).Cursor()
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		var j Job
		if err := json.Unmarshal(v, &j); err != nil {
			return nil, err
		}
		if j.Machine == machine {
			out = append(out, j)
			if limit > 0 && len(out) >= limit {
				break
			}
		}
	}
	return out, nil
}
