package builtin_test

import (
	"context"
	"errors"
	"go/build"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/power"
	"github.com/rollcall/rollcall/power/builtin"
)

func TestRegistryNames(t *testing.T) {
	r := builtin.NewRegistry()
	want := []string{"ipmi", "redfish", "idrac", "ilo", "xcc", "supermicro", "xfusion", "kaytus", "irmc", "cimc",
		"gigabyte", "asrockrack", "openbmc", "ami", "proxmox", "manual"}
	if diff := cmp.Diff(want, r.Names()); diff != "" {
		t.Fatalf("names (-want +got):\n%s", diff)
	}
	for _, d := range r.Drivers() {
		if d.Description == "" || strings.Contains(d.Description, "\n") {
			t.Errorf("driver %s: description %q is not one line", d.Name, d.Description)
		}
	}
}

func TestUnknownDriverListsAllowed(t *testing.T) {
	_, err := builtin.NewRegistry().New("dell", power.Target{Address: "10.0.0.1"}, nil)
	if !errors.Is(err, power.ErrUnknownDriver) || !strings.Contains(err.Error(), "allowed: ipmi, redfish, idrac") {
		t.Fatalf("err = %v", err)
	}
}

func TestEveryDriverBuilds(t *testing.T) {
	r := builtin.NewRegistry()
	for _, n := range r.Names() {
		tg := power.Target{Address: "192.0.2.10", User: "admin", Password: "x"}
		if n == "proxmox" {
			tg.User = "root@pam!rollcall"
			tg.Settings = map[string]string{"node": "pve1", "vmid": "100"}
		}
		d, err := r.New(n, tg, nil)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		_ = d.Close()
	}
}

func TestManualSaysNoPowerControl(t *testing.T) {
	d, err := builtin.NewRegistry().New("manual", power.Target{Address: "rack 4 slot 12"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, a := range power.Actions {
		if err := d.Power(ctx, a); !errors.Is(err, power.ErrNoPowerControl) || !strings.Contains(err.Error(), "no power control") {
			t.Errorf("Power(%s) = %v", a, err)
		}
	}
	if _, err := d.Status(ctx); !errors.Is(err, power.ErrNoPowerControl) {
		t.Errorf("Status = %v", err)
	}
	if err := d.SetBootDevice(ctx, power.BootDevice{Device: power.DevicePXE}); !errors.Is(err, power.ErrNoPowerControl) {
		t.Errorf("SetBootDevice = %v", err)
	}
}

// Services never import each other: power and its sub-packages import
// neither appliance, raftfsm nor store.
func TestNoForbiddenImports(t *testing.T) {
	for _, pkg := range []string{"power", "power/ipmi", "power/redfish", "power/proxmox", "power/manual", "power/builtin"} {
		p, err := build.Import("github.com/rollcall/rollcall/"+pkg, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range p.Imports {
			for _, bad := range []string{"/appliance", "/raftfsm", "/store", "/dhcp", "/tftp", "/ipam"} {
				if strings.HasPrefix(imp, "github.com/rollcall/rollcall"+bad) {
					t.Errorf("%s imports %s", pkg, imp)
				}
			}
		}
	}
}
