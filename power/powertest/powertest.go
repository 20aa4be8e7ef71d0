// Package powertest holds what the power drivers' tests share: the
// conformance suite every power.Driver runs against a real (or simulated)
// peer, and the rule for tests whose peer cannot run here.
package powertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rollcall/rollcall/lab/testenv"
	"github.com/rollcall/rollcall/power"
)

// Unavailable skips a test whose peer (a tool, root, a shared file) is
// missing, saying why; under CI=true it fails instead, so CI never passes by
// skipping (lab/testenv).
func Unavailable(t testing.TB, reason string) {
	t.Helper()
	testenv.Skip(t, "%s", reason)
}

// Conformance runs the behaviour every driver must have against a peer
// whose machine starts powered off. boot, when not nil, reads back the
// peer's boot device after SetBootDevice.
func Conformance(t *testing.T, d power.Driver, boot func() (power.Device, bool)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	expect := func(want power.PowerState) {
		t.Helper()
		got, err := d.Status(ctx)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if got != want {
			t.Fatalf("Status = %s, want %s", got, want)
		}
	}
	expect(power.StateOff)
	steps := []struct {
		a    power.Action
		want power.PowerState
	}{
		{power.ActionOn, power.StateOn},
		{power.ActionOn, power.StateOn}, // idempotent
		{power.ActionReset, power.StateOn},
		{power.ActionOff, power.StateOff},
		{power.ActionCycle, power.StateOn}, // a machine that is off is powered on
		{power.ActionCycle, power.StateOn},
		{power.ActionOff, power.StateOff},
	}
	for _, s := range steps {
		if err := d.Power(ctx, s.a); err != nil {
			t.Fatalf("Power(%s): %v", s.a, err)
		}
		expect(s.want)
	}
	if err := d.Power(ctx, power.Action("explode")); !errors.Is(err, power.ErrInvalid) {
		t.Fatalf("Power(explode) = %v, want ErrInvalid", err)
	}
	if err := d.SetBootDevice(ctx, power.BootDevice{Device: "floppy"}); !errors.Is(err, power.ErrInvalid) {
		t.Fatalf("SetBootDevice(floppy) = %v, want ErrInvalid", err)
	}
	for _, dev := range []power.Device{power.DevicePXE, power.DeviceDisk} {
		if err := d.SetBootDevice(ctx, power.BootDevice{Device: dev, UEFI: true}); err != nil {
			t.Fatalf("SetBootDevice(%s): %v", dev, err)
		}
		if boot != nil {
			if got, ok := boot(); ok && got != dev {
				t.Fatalf("boot device after SetBootDevice(%s) = %s", dev, got)
			}
		}
	}
	res, err := d.Probe(ctx)
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if !res.Reachable || res.Driver == "" {
		t.Fatalf("Probe = %+v, want reachable with a driver name", res)
	}
}
