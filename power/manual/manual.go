// Package manual is the power driver for machines without a BMC Rollcall
// can reach: every action fails and says there is no power control, so an
// operator knows to press the button.
package manual

import (
	"context"
	"log/slog"

	"github.com/rollcall/rollcall/power"
)

// Name is the registry name.
const Name = "manual"

// Description is the line shown by `rollcall bmc drivers`.
const Description = "no power control; every action says so"

// Driver answers every action with power.ErrNoPowerControl.
type Driver struct{ addr string }

// New is the power.Factory.
func New(t power.Target, _ *slog.Logger) (power.Driver, error) {
	return &Driver{addr: t.Address}, nil
}

func (d *Driver) fail(step string) error {
	return power.Errorf(Name, d.addr, step, power.ErrNoPowerControl)
}

// Status has nothing to ask.
func (d *Driver) Status(context.Context) (power.PowerState, error) {
	return power.StateUnknown, d.fail("read power state")
}

// Power cannot act.
func (d *Driver) Power(_ context.Context, a power.Action) error {
	return d.fail("power " + string(a))
}

// SetBootDevice cannot act.
func (d *Driver) SetBootDevice(_ context.Context, b power.BootDevice) error {
	return d.fail("set boot device " + string(b.Device))
}

// Probe reports nothing reachable; it is not an error to probe a manual
// machine.
func (d *Driver) Probe(context.Context) (power.ProbeResult, error) {
	return power.ProbeResult{Driver: Name, PowerState: power.StateUnknown}, nil
}

// Close does nothing.
func (d *Driver) Close() error { return nil }
