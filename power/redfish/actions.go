package redfish

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/rollcall/rollcall/power"
)

// resetAction is a reset target and what it advertises.
type resetAction struct {
	on      string   // "system" or "chassis", for messages
	target  string   // path of the action
	allowed []string // advertised ResetType values
	known   bool     // the BMC advertised a list (AllowableValues or ActionInfo)
}

func (r resetAction) offers(t string) bool { return !r.known || slices.Contains(r.allowed, t) }

// pick returns the first of want the BMC offers. With no advertised list
// only the first (the standard's own value) is used: optional types are
// never assumed.
func (r resetAction) pick(want ...string) (string, bool) {
	if !r.known {
		if len(want) > 0 {
			return want[0], true
		}
		return "", false
	}
	for _, w := range want {
		if slices.Contains(r.allowed, w) {
			return w, true
		}
	}
	return "", false
}

// resetFor finds the reset action: the system's own, else the chassis's
// ("Reset on the chassis: used when the system has no reset of its own").
func (d *Driver) resetFor(c *gofish.APIClient, s systemDoc) (resetAction, error) {
	if s.Actions.Reset != nil && s.Actions.Reset.Target != "" {
		return d.readAction(c, "system", s.Actions.Reset)
	}
	for _, l := range s.Links.Chassis {
		p, err := resolveLink(d.base, l.ID)
		if err != nil {
			return resetAction{}, d.fail("find chassis reset", err)
		}
		var ch chassisDoc
		if _, err := get(c, p, &ch); err != nil {
			return resetAction{}, d.fail("read chassis "+p, err)
		}
		if ch.Actions.Reset != nil && ch.Actions.Reset.Target != "" {
			return d.readAction(c, "chassis", ch.Actions.Reset)
		}
	}
	return resetAction{}, d.fail("find reset action", fmt.Errorf("%w: neither the system nor its chassis has a Reset action", power.ErrUnsupported))
}

// readAction reads the reset types from @Redfish.AllowableValues or, when
// absent, from the action's @Redfish.ActionInfo (OpenBMC publishes only the
// latter; gofish's Reset checks only AllowableValues).
func (d *Driver) readAction(c *gofish.APIClient, on string, a *actionDoc) (resetAction, error) {
	target, err := resolveLink(d.base, a.Target)
	if err != nil {
		return resetAction{}, d.fail("read reset action", err)
	}
	r := resetAction{on: on, target: target}
	if len(a.ResetTypes) > 0 {
		r.allowed, r.known = a.ResetTypes, true
		return r, nil
	}
	if a.ActionInfo != "" {
		p, err := resolveLink(d.base, a.ActionInfo)
		if err != nil {
			return r, d.fail("read reset ActionInfo", err)
		}
		var info schemas.ActionInfo
		if _, err := get(c, p, &info); err != nil {
			return r, d.fail("read reset ActionInfo "+p, err)
		}
		for _, prm := range info.Parameters {
			if prm.Name == "ResetType" && len(prm.AllowableValues) > 0 {
				r.allowed, r.known = prm.AllowableValues, true
			}
		}
	}
	return r, nil
}

// Power carries out a power action with the reset types the BMC offers.
// On and off of a machine already in that state do nothing; cycle and reset
// of a machine that is off power it on.
func (d *Driver) Power(ctx context.Context, a power.Action) error {
	if _, err := power.ParseAction(string(a)); err != nil {
		return d.fail("power", err)
	}
	ctx, cancel := d.withTimeout(ctx)
	defer cancel()
	err := d.do(ctx, func(c *gofish.APIClient) error {
		s, _, err := d.system(c)
		if err != nil {
			return err
		}
		st := mapPowerState(s.PowerState)
		r, err := d.resetFor(c, s)
		if err != nil {
			return err
		}
		unsupported := func(what string) error {
			return d.fail("power "+string(a), fmt.Errorf("%w: no reset type for %s on the %s; the bmc offers %s",
				power.ErrUnsupported, what, r.on, strings.Join(r.allowed, ", ")))
		}
		on := func() error {
			t, ok := r.pick("On", "ForceOn")
			if !ok {
				return unsupported("power on")
			}
			return d.reset(ctx, c, r, t)
		}
		switch a {
		case power.ActionOn:
			if st == power.StateOn {
				return nil
			}
			return on()
		case power.ActionOff:
			if st == power.StateOff {
				return nil
			}
			t, ok := r.pick("ForceOff")
			if !ok {
				return unsupported("power off")
			}
			return d.reset(ctx, c, r, t)
		case power.ActionSoft:
			if st == power.StateOff {
				return nil
			}
			t, ok := r.pick(d.softTypes()...)
			if !ok {
				return unsupported("graceful shutdown")
			}
			return d.reset(ctx, c, r, t)
		case power.ActionCycle, power.ActionReset:
			if st == power.StateOff {
				return on()
			}
			want := []string{"PowerCycle"}
			if a == power.ActionReset {
				want = []string{"ForceRestart", "PowerCycle"}
			}
			want = append(want, d.p.CycleResetTypes...)
			want = append(want, "ForceRestart")
			if r.known {
				if t, ok := r.pick(want...); ok {
					return d.reset(ctx, c, r, t)
				}
			} else if a == power.ActionReset {
				return d.reset(ctx, c, r, "ForceRestart")
			}
			// "Missing power cycle: ForceOff, wait for Off, then On."
			return d.offWaitOn(ctx, c, r)
		}
		return nil
	})
	if err != nil {
		return d.fail("power "+string(a), err)
	}
	return nil
}

func (d *Driver) softTypes() []string {
	if len(d.p.SoftResetTypes) > 0 {
		return d.p.SoftResetTypes
	}
	return []string{"GracefulShutdown"}
}

func (d *Driver) offWaitOn(ctx context.Context, c *gofish.APIClient, r resetAction) error {
	if !r.offers("ForceOff") {
		return d.fail("power cycle", fmt.Errorf("%w: no PowerCycle, ForceRestart or ForceOff; the bmc offers %s", power.ErrUnsupported, strings.Join(r.allowed, ", ")))
	}
	onType, ok := r.pick("On", "ForceOn")
	if !ok {
		return d.fail("power cycle", fmt.Errorf("%w: no On after ForceOff; the bmc offers %s", power.ErrUnsupported, strings.Join(r.allowed, ", ")))
	}
	if err := d.reset(ctx, c, r, "ForceOff"); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, d.opt.OffTimeout)
	defer cancel()
	for {
		s, _, err := d.system(c.WithContext(wctx))
		if err == nil && mapPowerState(s.PowerState) == power.StateOff && s.PowerState == string(schemas.OffPowerState) {
			break
		}
		if err := d.opt.Sleep(wctx, d.opt.PollInterval); err != nil {
			return d.fail("power cycle (wait for Off)", fmt.Errorf("%w: still not Off after ForceOff", power.ErrUnreachable))
		}
	}
	return d.reset(ctx, c, r, onType)
}

// reset posts the Reset action and follows a 202 to its task monitor.
func (d *Driver) reset(ctx context.Context, c *gofish.APIClient, r resetAction, t string) error {
	step := fmt.Sprintf("reset %s (%s)", t, r.on)
	d.log.Info("redfish reset", "type", t, "on", r.on, "target", r.target)
	resp, err := c.Post(r.target, map[string]string{"ResetType": t})
	if err != nil {
		return d.fail(step, err)
	}
	return d.follow(ctx, c, step, resp)
}

// follow handles an action or PATCH answer: 200/204 are done; 202 is
// followed to its task monitor (Location, else the Task in the body) until
// the task ends (DSP0266 §7.11 asynchronous operations).
func (d *Driver) follow(ctx context.Context, c *gofish.APIClient, step string, resp *http.Response) error {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	monitor := resp.Header.Get("Location")
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if monitor == "" {
		var t struct {
			ID string `json:"@odata.id"`
		}
		_ = json.Unmarshal(body, &t)
		monitor = t.ID
	}
	if monitor == "" {
		return nil // accepted with nothing to watch
	}
	p, err := resolveLink(d.base, monitor)
	if err != nil {
		return d.fail(step+" (task monitor)", err)
	}
	wait := retryAfter(resp.Header.Get("Retry-After"))
	seen := false
	for {
		if wait < 0 {
			wait = d.opt.PollInterval
		}
		if err := d.opt.Sleep(ctx, wait); err != nil {
			return d.fail(step+" (task "+p+")", fmt.Errorf("%w: task not finished before the deadline", power.ErrUnreachable))
		}
		r, err := c.Get(p)
		if err != nil {
			if statusOf(err) == http.StatusNotFound && seen {
				return nil // monitors may vanish once the task is done
			}
			return d.fail(step+" (task "+p+")", err)
		}
		seen = true
		wait = retryAfter(r.Header.Get("Retry-After"))
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body.Close()
		if r.StatusCode == http.StatusAccepted {
			continue
		}
		var task struct {
			TaskState  string            `json:"TaskState"`
			TaskStatus string            `json:"TaskStatus"`
			Messages   []schemas.Message `json:"Messages"`
		}
		if json.Unmarshal(b, &task) != nil || task.TaskState == "" {
			return nil // the operation's own answer: done
		}
		switch schemas.TaskState(task.TaskState) {
		case schemas.CompletedTaskState:
			if task.TaskStatus == "" || task.TaskStatus == "OK" || task.TaskStatus == "Warning" {
				return nil
			}
			return d.fail(step+" (task "+p+")", fmt.Errorf("task completed with status %s: %s", task.TaskStatus, messages(task.Messages)))
		case schemas.ExceptionTaskState, schemas.KilledTaskState, schemas.CancelledTaskState, schemas.InterruptedTaskState:
			return d.fail(step+" (task "+p+")", fmt.Errorf("task %s: %s", task.TaskState, messages(task.Messages)))
		}
	}
}

func messages(ms []schemas.Message) string {
	var out []string
	for _, m := range ms {
		out = append(out, strings.TrimSpace(m.MessageID+" "+m.Message))
	}
	if len(out) == 0 {
		return "no message"
	}
	return strings.Join(out, "; ")
}
