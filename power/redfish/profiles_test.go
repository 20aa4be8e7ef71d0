package redfish_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/power"
	"github.com/rollcall/rollcall/power/redfish"
	"github.com/rollcall/rollcall/power/redfish/redfishtest"
)

func patches(s *redfishtest.Server) []redfishtest.Request {
	var out []redfishtest.Request
	for _, r := range s.Requests() {
		if r.Method == http.MethodPatch {
			out = append(out, r)
		}
	}
	return out
}

// One scenario per vendor profile, each behaving as that vendor's documents
// (cited in the profile's file) describe.
func TestVendorProfiles(t *testing.T) {
	tests := map[string]struct {
		profile redfish.Profile
		cfg     redfishtest.Config
		run     func(t *testing.T, d *redfish.Driver) error
		check   func(t *testing.T, s *redfishtest.Server, err error)
	}{
		// iDRAC 10: boot settings at …/Settings (@Redfish.Settings), mode never
		// sent (a mode change starts a BIOS job), If-Match honoured.
		"idrac": {
			profile: redfish.IDRAC,
			cfg: redfishtest.Config{SystemID: "System.Embedded.1", SettingsSuffix: "Settings", SettingsAnnotation: true,
				RequireIfMatch: true, BootMode: "UEFI", PowerState: "Off"},
			run: func(t *testing.T, d *redfish.Driver) error {
				if err := d.SetBootDevice(ctx(t), power.BootDevice{Device: power.DevicePXE, UEFI: true}); err != nil {
					return err
				}
				return d.Power(ctx(t), power.ActionCycle)
			},
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				ps := patches(s)
				if len(ps) != 1 || ps[0].Path != "/redfish/v1/Systems/System.Embedded.1/Settings" || ps[0].IfMatch == "" {
					t.Fatalf("patches = %+v, want one to .../Settings with If-Match", ps)
				}
				if strings.Contains(ps[0].Body, "BootSourceOverrideMode") {
					t.Errorf("boot mode sent to an iDRAC: %s", ps[0].Body)
				}
				if target, _, _ := s.Boot(); target != "Pxe" || s.PowerState() != "On" {
					t.Errorf("after power on: target %s, power %s", target, s.PowerState())
				}
			},
		},
		// iLO: 400 UnableToModifyDuringSystemPOST while in POST (retried); no
		// PowerCycle, so a cycle is ForceRestart.
		"ilo": {
			profile: redfish.ILO,
			cfg: redfishtest.Config{SystemID: "1", BusyPatches: 2, BusyStatus: http.StatusBadRequest,
				BusyBody:   `{"error":{"code":"iLO.0.10.ExtendedInfo","message":"See @Message.ExtendedInfo","@Message.ExtendedInfo":[{"MessageId":"iLO.2.14.UnableToModifyDuringSystemPOST"}]}}`,
				ResetTypes: []string{"On", "ForceOff", "GracefulShutdown", "ForceRestart", "Nmi", "PushPowerButton", "GracefulRestart"}},
			run: func(t *testing.T, d *redfish.Driver) error {
				if err := d.SetBootDevice(ctx(t), power.BootDevice{Device: power.DevicePXE}); err != nil {
					return err
				}
				return d.Power(ctx(t), power.ActionCycle)
			},
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if n := len(patches(s)); n != 3 {
					t.Errorf("PATCHes = %d, want 3 (two refused during POST)", n)
				}
				if diff := cmp.Diff([]string{"ForceRestart"}, s.Resets()); diff != "" {
					t.Errorf("resets (-want +got):\n%s", diff)
				}
			},
		},
		// XCC: Once only; a persistent override is refused before sending.
		"xcc": {
			profile: redfish.XCC,
			cfg:     redfishtest.Config{SystemID: "1", OnceOnly: true},
			run: func(t *testing.T, d *redfish.Driver) error {
				if err := d.SetBootDevice(ctx(t), power.BootDevice{Device: power.DevicePXE, Persistent: true}); !errors.Is(err, power.ErrUnsupported) {
					t.Errorf("persistent override: err = %v, want ErrUnsupported", err)
				}
				return d.SetBootDevice(ctx(t), power.BootDevice{Device: power.DevicePXE})
			},
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				ps := patches(s)
				if len(ps) != 1 || !strings.Contains(ps[0].Body, `"Once"`) {
					t.Fatalf("patches = %+v, want one Once", ps)
				}
			},
		},
		// Supermicro: 503 while busy; the current mode always sent.
		"supermicro": {
			profile: redfish.Supermicro,
			cfg:     redfishtest.Config{SystemID: "1", BusyPatches: 2, BootMode: "UEFI"},
			run: func(t *testing.T, d *redfish.Driver) error {
				return d.SetBootDevice(ctx(t), power.BootDevice{Device: power.DevicePXE})
			},
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				ps := patches(s)
				if len(ps) != 3 || !strings.Contains(ps[2].Body, `"BootSourceOverrideMode":"UEFI"`) {
					t.Fatalf("patches = %+v, want 3 with mode UEFI", ps)
				}
			},
		},
		// xFusion: session only (basic refused), If-Match on every PATCH,
		// ForcePowerCycle.
		"xfusion": {
			profile: redfish.XFusion,
			cfg: redfishtest.Config{SystemID: "1", NoBasicAuth: true, RequireIfMatch: true,
				ResetTypes: []string{"On", "ForceOff", "GracefulShutdown", "ForceRestart", "Nmi", "ForcePowerCycle"}},
			run: func(t *testing.T, d *redfish.Driver) error {
				if err := d.SetBootDevice(ctx(t), power.BootDevice{Device: power.DeviceDisk}); err != nil {
					return err
				}
				return d.Power(ctx(t), power.ActionCycle)
			},
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range patches(s) {
					if p.IfMatch == "" {
						t.Errorf("PATCH without If-Match: %+v", p)
					}
				}
				if diff := cmp.Diff([]string{"ForcePowerCycle"}, s.Resets()); diff != "" {
					t.Errorf("resets (-want +got):\n%s", diff)
				}
			},
		},
		// KAYTUS: reset only on the chassis; a PATCH that applied answers 400.
		"kaytus": {
			profile: redfish.Kaytus,
			cfg:     redfishtest.Config{SystemID: "1", NoSystemReset: true, Answer400AfterPatch: true},
			run: func(t *testing.T, d *redfish.Driver) error {
				if err := d.SetBootDevice(ctx(t), power.BootDevice{Device: power.DevicePXE}); err != nil {
					return err
				}
				return d.Power(ctx(t), power.ActionOff)
			},
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if target, _, _ := s.Boot(); target != "Pxe" || s.PowerState() != "Off" {
					t.Errorf("target %s power %s", target, s.PowerState())
				}
			},
		},
		// iRMC: Systems/0, ETag only in the body and required, clear with
		// Target None, soft off by the power button.
		"irmc": {
			profile: redfish.IRMC,
			cfg: redfishtest.Config{SystemID: "0", ETagInBodyOnly: true, RequireIfMatch: true,
				ResetTypes: []string{"On", "ForceOff", "ForceRestart", "PushPowerButton", "Nmi", "PowerCycle"}},
			run: func(t *testing.T, d *redfish.Driver) error {
				if err := d.SetBootDevice(ctx(t), power.BootDevice{Device: power.DeviceNone}); err != nil {
					return err
				}
				return d.Power(ctx(t), power.ActionSoft)
			},
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				ps := patches(s)
				if len(ps) != 1 || ps[0].IfMatch == "" || ps[0].Body != `{"Boot":{"BootSourceOverrideTarget":"None"}}` {
					t.Fatalf("patches = %+v, want one Target None with If-Match from the body", ps)
				}
				if diff := cmp.Diff([]string{"PushPowerButton"}, s.Resets()); diff != "" {
					t.Errorf("resets (-want +got):\n%s", diff)
				}
			},
		},
		// CIMC: Systems/<serial> found through the collection; a refused
		// boot mode is dropped.
		"cimc": {
			profile: redfish.CIMC,
			cfg:     redfishtest.Config{SystemID: "WZP21330AB1", RejectBootMode: true, BootMode: "UEFI"},
			run: func(t *testing.T, d *redfish.Driver) error {
				return d.SetBootDevice(ctx(t), power.BootDevice{Device: power.DevicePXE})
			},
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				ps := patches(s)
				if len(ps) != 2 || ps[0].Path != "/redfish/v1/Systems/WZP21330AB1" || strings.Contains(ps[1].Body, "BootSourceOverrideMode") {
					t.Fatalf("patches = %+v, want with mode then without", ps)
				}
			},
		},
		// GIGABYTE: Systems/Self, If-Match required, short reset list.
		"gigabyte": {
			profile: redfish.Gigabyte,
			cfg: redfishtest.Config{SystemID: "Self", RequireIfMatch: true,
				ResetTypes: []string{"On", "ForceOff", "ForceRestart"}},
			run: func(t *testing.T, d *redfish.Driver) error {
				if err := d.SetBootDevice(ctx(t), power.BootDevice{Device: power.DevicePXE}); err != nil {
					return err
				}
				if err := d.Power(ctx(t), power.ActionSoft); !errors.Is(err, power.ErrUnsupported) {
					t.Errorf("soft: err = %v, want ErrUnsupported", err)
				}
				return d.Power(ctx(t), power.ActionCycle)
			},
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]string{"ForceRestart"}, s.Resets()); diff != "" {
					t.Errorf("resets (-want +got):\n%s", diff)
				}
			},
		},
		// ASRock Rack: boot settings in Systems/Self/SD (no annotation).
		"asrockrack": {
			profile: redfish.ASRockRack,
			cfg:     redfishtest.Config{SystemID: "Self", SettingsSuffix: "SD", PowerState: "Off", BootMode: "Legacy"},
			run: func(t *testing.T, d *redfish.Driver) error {
				if err := d.SetBootDevice(ctx(t), power.BootDevice{Device: power.DevicePXE}); err != nil {
					return err
				}
				return d.Power(ctx(t), power.ActionOn)
			},
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				ps := patches(s)
				if len(ps) != 1 || ps[0].Path != "/redfish/v1/Systems/Self/SD" || !strings.Contains(ps[0].Body, `"Legacy"`) {
					t.Fatalf("patches = %+v, want one to Self/SD with the current mode", ps)
				}
				if target, _, _ := s.Boot(); target != "Pxe" {
					t.Errorf("pending not applied at boot: %s", target)
				}
			},
		},
		// OpenBMC: Systems/system, reset types only in ActionInfo, PowerCycle.
		"openbmc": {
			profile: redfish.OpenBMC,
			cfg: redfishtest.Config{SystemID: "system", ActionInfoOnly: true,
				ResetTypes: []string{"On", "ForceOff", "ForceOn", "ForceRestart", "GracefulRestart", "GracefulShutdown", "PowerCycle", "Nmi"}},
			run: func(t *testing.T, d *redfish.Driver) error { return d.Power(ctx(t), power.ActionCycle) },
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]string{"PowerCycle"}, s.Resets()); diff != "" {
					t.Errorf("resets (-want +got):\n%s", diff)
				}
			},
		},
		// AMI MegaRAC: Systems/Self, If-Match required, current mode always.
		"ami": {
			profile: redfish.AMI,
			cfg:     redfishtest.Config{SystemID: "Self", RequireIfMatch: true, BootMode: "UEFI"},
			run: func(t *testing.T, d *redfish.Driver) error {
				return d.SetBootDevice(ctx(t), power.BootDevice{Device: power.DeviceCDROM})
			},
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				ps := patches(s)
				if len(ps) != 1 || ps[0].IfMatch == "" || !strings.Contains(ps[0].Body, `"UEFI"`) {
					t.Fatalf("patches = %+v", ps)
				}
			},
		},
	}
	var names []string
	for _, p := range redfish.Profiles() {
		if p.Name != redfish.Standard.Name {
			names = append(names, p.Name)
		}
	}
	for _, n := range names {
		if _, ok := tests[n]; !ok {
			t.Errorf("profile %s has no scenario", n)
		}
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if len(tc.profile.Sources) == 0 {
				t.Errorf("profile %s cites no source", tc.profile.Name)
			}
			s := fake(t, tc.cfg)
			d := driver(t, s, tc.profile, nil)
			err := tc.run(t, d)
			tc.check(t, s, err)
			if !slices.Contains(names, tc.profile.Name) {
				t.Errorf("profile %s not in Profiles()", tc.profile.Name)
			}
		})
	}
}

// DetectRedfish picks the vendor driver from what the BMC says.
func TestDetectRedfish(t *testing.T) {
	tests := map[string]redfishtest.Config{
		"idrac":      {RootVendor: "Dell", RootOem: "Dell", ManagerManufacturer: "Dell Inc."},
		"ilo":        {RootVendor: "HPE", RootOem: "Hpe"},
		"xcc":        {RootVendor: "Lenovo", RootOem: "Lenovo"},
		"supermicro": {RootVendor: "Supermicro", RootOem: "Supermicro"},
		"xfusion":    {RootOem: "xFusion", ManagerManufacturer: "xFusion"},
		"kaytus":     {ManagerManufacturer: "KAYTUS"},
		"irmc":       {RootOem: "ts_fujitsu", ManagerManufacturer: "FUJITSU"},
		"cimc":       {RootOem: "Cisco", ManagerManufacturer: "Cisco Systems Inc."},
		"gigabyte":   {RootVendor: "AMI", RootOem: "Ami", ManagerManufacturer: "GIGABYTE"},
		"asrockrack": {RootVendor: "AMI", RootOem: "Ami", ManagerManufacturer: "ASRockRack"},
		"openbmc":    {RootVendor: "OpenBMC", ManagerManufacturer: "OpenBMC"},
		"ami":        {RootVendor: "AMI", RootOem: "Ami"},
		"redfish":    {},
	}
	for want, cfg := range tests {
		t.Run(want, func(t *testing.T) {
			s := fake(t, cfg)
			got, err := redfish.DetectRedfishWith(ctx(t), power.Target{Address: s.URL(), User: "admin", Password: "secret"}, fast, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("detected %q, want %q", got, want)
			}
		})
	}
	t.Run("no redfish", func(t *testing.T) {
		s := fake(t, redfishtest.Config{Garbage: true})
		_, err := redfish.DetectRedfishWith(ctx(t), power.Target{Address: s.URL(), User: "admin", Password: "secret"}, fast, nil)
		if !errors.Is(err, power.ErrNoRedfish) {
			t.Fatalf("err = %v, want ErrNoRedfish", err)
		}
	})
}
