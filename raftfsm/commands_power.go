package raftfsm

import (
	"fmt"
	"strings"
	"time"

	"github.com/rollcall/rollcall/store"
)

// BMC job commands: the queue of power and boot-device commands (see
// store/jobs.go) and the BMC record itself.

// jobRetention is how long finished jobs are kept (their results are also
// events on the machine).
const jobRetention = 7 * 24 * time.Hour

// maxJobAttempts bounds how often a job is started again after its runner
// was lost; a BMC account must never be hammered.
const maxJobAttempts = 3

// JobEnqueue queues a job.
type JobEnqueue struct {
	Job Job       `json:"job"`
	Now time.Time `json:"now"`
}

// JobStart marks a job taken by Node until Until.
type JobStart struct {
	ID    string    `json:"id"`
	Node  string    `json:"node"`
	Until time.Time `json:"until"`
	Now   time.Time `json:"now"`
}

// BMCUpdate is what a job learned about the BMC: a certificate to pin, a
// better driver (Redfish detection). Empty fields change nothing.
type BMCUpdate struct {
	Driver     string `json:"driver,omitempty"`
	CertSHA256 string `json:"cert_sha256,omitempty"`
}

// JobFinish records a job's outcome, with events for the machine.
type JobFinish struct {
	ID     string     `json:"id"`
	Node   string     `json:"node"`
	Result string     `json:"result,omitempty"`
	Error  string     `json:"error,omitempty"`
	BMC    *BMCUpdate `json:"bmc,omitempty"`
	Events []Event    `json:"events,omitempty"`
	Now    time.Time  `json:"now"`
}

// BMCSet sets a machine's BMC record (the password already sealed).
type BMCSet struct {
	Machine string    `json:"machine"`
	BMC     BMC       `json:"bmc"`
	Now     time.Time `json:"now"`
}

// BMCClear forgets a machine's BMC: driver, address, user, settings, the
// certificate pin and the sealed password all go. The machine is then
// powered by hand until a BMC is set again (BMCSet, or the next
// commissioning's in-band report, which an operator's record no longer
// blocks). Jobs already queued fail when they find no BMC.
type BMCClear struct {
	Machine string    `json:"machine"`
	Now     time.Time `json:"now"`
}

func (*JobEnqueue) Type() Type     { return TypeJobEnqueue }
func (*JobStart) Type() Type       { return TypeJobStart }
func (*JobFinish) Type() Type      { return TypeJobFinish }
func (*BMCSet) Type() Type         { return TypeBMCSet }
func (*JobEnqueue) Version() uint8 { return 1 }
func (*JobStart) Version() uint8   { return 1 }
func (*JobFinish) Version() uint8  { return 1 }
func (*BMCSet) Version() uint8     { return 1 }
func (*BMCClear) Type() Type       { return TypeBMCClear }
func (*BMCClear) Version() uint8   { return 1 }

func (c *JobEnqueue) apply(tx *store.Tx) error {
	j := c.Job.record()
	if j.ID == "" || j.Machine == "" {
		return store.Errorf(store.ErrInvalid, "a job needs an ID and a machine")
	}
	m, err := tx.Machine(j.Machine)
	if err != nil {
		return err
	}
	if m.BMC == nil || m.BMC.Driver == "" {
		return store.Errorf(store.ErrInvalid, "machine %s has no BMC on record; set one with rollcall bmc %s -driver … -address …", m.ID, m.ID)
	}
	if _, err := tx.Job(j.ID); err == nil {
		return store.Errorf(store.ErrConflict, "job %s exists", j.ID)
	}
	// Prune finished jobs past retention (deterministic: by the command's time).
	pending, err := tx.MachineJobs(j.Machine, 0)
	if err != nil {
		return err
	}
	for _, old := range pending {
		if old.Done && c.Now.Sub(old.Finished) > jobRetention {
			if err := tx.DeleteJob(old.ID); err != nil {
				return err
			}
		}
	}
	j.Done, j.StartedBy, j.Attempts = false, "", 0
	j.Created = c.Now
	return tx.PutJob(j)
}

func (c *JobStart) apply(tx *store.Tx) error {
	j, err := tx.Job(c.ID)
	if err != nil {
		return err
	}
	if j.Done {
		return store.Errorf(store.ErrConflict, "job %s is already done", j.ID)
	}
	if j.StartedBy != "" && c.Now.Before(j.StartedUntil) {
		return store.Errorf(store.ErrConflict, "job %s is running on %s", j.ID, j.StartedBy)
	}
	if j.Attempts >= maxJobAttempts {
		j.Done, j.Finished = true, c.Now
		j.Error = fmt.Sprintf("gave up after %d attempts: the node running it was lost each time", j.Attempts)
		if err := tx.PutJob(j); err != nil {
			return err
		}
		return tx.AddEvent(store.Event{Machine: j.Machine, Time: c.Now, Kind: "bmc-job", Message: j.Kind + " " + j.Arg + ": " + j.Error})
	}
	j.StartedBy, j.Started, j.StartedUntil = c.Node, c.Now, c.Until
	j.Attempts++
	return tx.PutJob(j)
}

func (c *JobFinish) apply(tx *store.Tx) error {
	j, err := tx.Job(c.ID)
	if err != nil {
		return err
	}
	if j.Done {
		return store.Errorf(store.ErrConflict, "job %s is already done", j.ID)
	}
	if j.StartedBy != c.Node {
		return store.Errorf(store.ErrConflict, "job %s is held by %q, not %s", j.ID, j.StartedBy, c.Node)
	}
	j.Done, j.Finished, j.Result, j.Error = true, c.Now, c.Result, c.Error
	if err := tx.PutJob(j); err != nil {
		return err
	}
	m, err := tx.Machine(j.Machine)
	if err != nil {
		return nil // the machine was deleted meanwhile: keep the job's record only
	}
	events := records(c.Events)
	if u := c.BMC; u != nil && m.BMC != nil {
		changed := false
		// A job pins a certificate only where none is pinned: re-pinning
		// is an operator's decision (BMCSet).
		if u.CertSHA256 != "" && m.BMC.CertSHA256 == "" {
			m.BMC.CertSHA256, changed = u.CertSHA256, true
		}
		if u.Driver != "" && u.Driver != m.BMC.Driver && !m.BMC.Operator {
			events = append(events, store.Event{Kind: "bmc driver", Message: fmt.Sprintf("%s → %s (the BMC speaks Redfish with the same account)", m.BMC.Driver, u.Driver)})
			m.BMC.Driver, changed = u.Driver, true
		}
		if changed {
			m.BMC.UpdatedAt, m.UpdatedAt = c.Now, c.Now
			if err := tx.PutMachine(m); err != nil {
				return err
			}
		}
	}
	for _, e := range events {
		e.Machine, e.Time = j.Machine, c.Now
		if err := tx.AddEvent(e); err != nil {
			return err
		}
	}
	return nil
}

func (c *BMCSet) apply(tx *store.Tx) error {
	m, err := tx.Machine(c.Machine)
	if err != nil {
		return err
	}
	if c.BMC.Driver == "" {
		return store.Errorf(store.ErrInvalid, "a BMC needs a driver")
	}
	b := mergeBMC(m.BMC, c.BMC.record())
	b.UpdatedAt = c.Now
	m.BMC, m.UpdatedAt = &b, c.Now
	if err := tx.PutMachine(m); err != nil {
		return err
	}
	return tx.AddEvent(store.Event{Machine: m.ID, Time: c.Now, Kind: "bmc", Message: fmt.Sprintf("BMC set by an operator: %s %s user %s", b.Driver, b.Address, b.User)})
}

func (c *BMCClear) apply(tx *store.Tx) error {
	m, err := tx.Machine(c.Machine)
	if err != nil {
		return err
	}
	if m.BMC == nil {
		return store.Errorf(store.ErrNotFound, "BMC of machine %s", m.ID) // "…: not found"
	}
	was := strings.TrimSpace(m.BMC.Driver + " " + m.BMC.Address)
	m.BMC, m.UpdatedAt = nil, c.Now
	return putWithEvents(tx, m, c.Now, []store.Event{{Kind: "bmc", Message: "BMC cleared by an operator (was " + was + "); its password is gone"}})
}

func powerCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeJobEnqueue: {"job-enqueue", 1, func() Command { return &JobEnqueue{} }},
		TypeJobStart:   {"job-start", 1, func() Command { return &JobStart{} }},
		TypeJobFinish:  {"job-finish", 1, func() Command { return &JobFinish{} }},
		TypeBMCSet:     {"bmc-set", 1, func() Command { return &BMCSet{} }},
		TypeBMCClear:   {"bmc-clear", 1, func() Command { return &BMCClear{} }},
	}
}
