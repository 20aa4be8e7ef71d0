package redfish_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/power"
	"github.com/rollcall/rollcall/power/powertest"
	"github.com/rollcall/rollcall/power/redfish"
	"github.com/rollcall/rollcall/power/redfish/redfishtest"
)

var fast = redfish.Options{BusyTimeout: 10 * time.Second, PollInterval: 5 * time.Millisecond, OffTimeout: 10 * time.Second, RequestTimeout: time.Second}

func mockup(t *testing.T, name string) string {
	t.Helper()
	dir, err := redfishtest.MockupDir(name)
	if err != nil {
		powertest.Unavailable(t, err.Error())
	}
	return dir
}

func fake(t *testing.T, cfg redfishtest.Config) *redfishtest.Server {
	t.Helper()
	if cfg.Mockup == "" {
		cfg.Mockup = mockup(t, "public-rackmount1")
	}
	s, err := redfishtest.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func driver(t *testing.T, s *redfishtest.Server, p redfish.Profile, settings map[string]string) *redfish.Driver {
	t.Helper()
	d, err := redfish.New(power.Target{Address: s.URL(), User: "admin", Password: "secret", Settings: settings}, p, fast, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestConformanceAgainstMockup(t *testing.T) {
	s := fake(t, redfishtest.Config{PowerState: "Off"})
	d := driver(t, s, redfish.Standard, nil)
	powertest.Conformance(t, d, func() (power.Device, bool) {
		target, _, _ := s.Boot()
		return map[string]power.Device{"Pxe": power.DevicePXE, "Hdd": power.DeviceDisk}[target], true
	})
	// The mockup offers no PowerCycle: cycle of a running machine was
	// ForceRestart, and every reset type sent was one it advertises.
	for _, r := range s.Resets() {
		if !slices.Contains([]string{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "Nmi", "ForceOn", "PushPowerButton"}, r) {
			t.Errorf("sent reset type %s the mockup does not advertise", r)
		}
	}
	if n := s.SessionsCreated(); n != 1 {
		t.Errorf("sessions created = %d, want 1 (login once, reuse)", n)
	}
}

func TestBootOverrideIsOnePatch(t *testing.T) {
	s := fake(t, redfishtest.Config{BootMode: "UEFI"})
	d := driver(t, s, redfish.Standard, nil)
	if err := d.SetBootDevice(ctx(t), power.BootDevice{Device: power.DevicePXE, Persistent: true}); err != nil {
		t.Fatal(err)
	}
	var patches []redfishtest.Request
	for _, r := range s.Requests() {
		if r.Method == http.MethodPatch {
			patches = append(patches, r)
		}
	}
	if len(patches) != 1 {
		t.Fatalf("PATCHes = %d, want 1", len(patches))
	}
	for _, f := range []string{`"BootSourceOverrideTarget":"Pxe"`, `"BootSourceOverrideEnabled":"Continuous"`, `"BootSourceOverrideMode":"UEFI"`} {
		if !strings.Contains(patches[0].Body, f) {
			t.Errorf("PATCH body %s lacks %s", patches[0].Body, f)
		}
	}
	if patches[0].IfMatch == "" {
		t.Error("PATCH sent without If-Match although the system had an ETag")
	}
	target, enabled, _ := s.Boot()
	if target != "Pxe" || enabled != "Continuous" {
		t.Errorf("boot = %s/%s", target, enabled)
	}
}

func TestRules(t *testing.T) {
	tests := map[string]struct {
		cfg     redfishtest.Config
		profile redfish.Profile
		run     func(t *testing.T, d *redfish.Driver) error
		check   func(t *testing.T, s *redfishtest.Server, err error)
	}{
		"reset types from ActionInfo only": {
			cfg: redfishtest.Config{ActionInfoOnly: true, ResetTypes: []string{"On", "ForceOff", "PowerCycle"}},
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
		"reset type not offered is a clear error": {
			cfg: redfishtest.Config{ResetTypes: []string{"On", "ForceOff", "ForceRestart"}},
			run: func(t *testing.T, d *redfish.Driver) error { return d.Power(ctx(t), power.ActionSoft) },
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if !errors.Is(err, power.ErrUnsupported) || !strings.Contains(err.Error(), "On, ForceOff, ForceRestart") {
					t.Fatalf("err = %v, want ErrUnsupported listing the offered types", err)
				}
				if len(s.Resets()) != 0 {
					t.Errorf("sent %v", s.Resets())
				}
			},
		},
		"power cycle missing: off, wait for Off, on": {
			cfg: redfishtest.Config{ResetTypes: []string{"On", "ForceOff"}, OffAfterReads: 3},
			run: func(t *testing.T, d *redfish.Driver) error { return d.Power(ctx(t), power.ActionCycle) },
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]string{"ForceOff", "On"}, s.Resets()); diff != "" {
					t.Errorf("resets (-want +got):\n%s", diff)
				}
				if s.PowerState() != "On" {
					t.Errorf("power = %s", s.PowerState())
				}
			},
		},
		"chassis reset when the system has none": {
			cfg: redfishtest.Config{NoSystemReset: true},
			run: func(t *testing.T, d *redfish.Driver) error { return d.Power(ctx(t), power.ActionOff) },
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(s.Requests(), func(r redfishtest.Request) bool {
					return r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/Actions/Chassis.Reset")
				}) {
					t.Error("no POST to the chassis reset")
				}
				if s.PowerState() != "Off" {
					t.Errorf("power = %s", s.PowerState())
				}
			},
		},
		"202 followed to the task monitor": {
			cfg: redfishtest.Config{TaskPolls: 3},
			run: func(t *testing.T, d *redfish.Driver) error { return d.Power(ctx(t), power.ActionOff) },
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				polls := 0
				for _, r := range s.Requests() {
					if strings.Contains(r.Path, "/TaskMonitors/") {
						polls++
					}
				}
				if polls != 4 || s.PowerState() != "Off" {
					t.Errorf("monitor polls = %d (want 4), power = %s", polls, s.PowerState())
				}
			},
		},
		"503 busy retried": {
			cfg: redfishtest.Config{BusyActions: 3},
			run: func(t *testing.T, d *redfish.Driver) error { return d.Power(ctx(t), power.ActionOff) },
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil || s.PowerState() != "Off" {
					t.Fatalf("err = %v, power = %s", err, s.PowerState())
				}
			},
		},
		"409 in progress after a power change retried": {
			cfg: redfishtest.Config{ConflictAfterReset: 2},
			run: func(t *testing.T, d *redfish.Driver) error {
				if err := d.Power(ctx(t), power.ActionOff); err != nil {
					return err
				}
				return d.Power(ctx(t), power.ActionOn)
			},
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil || s.PowerState() != "On" {
					t.Fatalf("err = %v, power = %s", err, s.PowerState())
				}
			},
		},
		"428 fetches the ETag first": {
			cfg: redfishtest.Config{RequireIfMatch: true, ETagInBodyOnly: true},
			run: func(t *testing.T, d *redfish.Driver) error {
				return d.SetBootDevice(ctx(t), power.BootDevice{Device: power.DeviceDisk})
			},
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if target, _, _ := s.Boot(); target != "Hdd" {
					t.Errorf("target = %s", target)
				}
			},
		},
		"412 on a weak ETag retried with the strong form": {
			cfg: redfishtest.Config{StrongETagOnly: true},
			run: func(t *testing.T, d *redfish.Driver) error {
				return d.SetBootDevice(ctx(t), power.BootDevice{Device: power.DeviceCDROM})
			},
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				var tags []string
				for _, r := range s.Requests() {
					if r.Method == http.MethodPatch {
						tags = append(tags, r.IfMatch)
					}
				}
				if len(tags) != 2 || !strings.HasPrefix(tags[0], "W/") || strings.HasPrefix(tags[1], "W/") {
					t.Errorf("If-Match sequence = %q, want weak then strong", tags)
				}
			},
		},
		"pending settings resource gets the PATCH": {
			cfg: redfishtest.Config{SettingsSuffix: "Settings", SettingsAnnotation: true, PowerState: "Off"},
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
				if !slices.ContainsFunc(s.Requests(), func(r redfishtest.Request) bool {
					return r.Method == http.MethodPatch && r.Path == s.SystemPath()+"/Settings"
				}) {
					t.Error("no PATCH to the settings resource")
				}
				if target, enabled, _ := s.Boot(); target != "Pxe" || enabled != "Once" {
					t.Errorf("after boot: %s/%s", target, enabled)
				}
			},
		},
		"basic auth when the root has no Links.Sessions": {
			cfg: redfishtest.Config{NoSessions: true},
			run: func(t *testing.T, d *redfish.Driver) error { _, err := d.Status(ctx(t)); return err },
			check: func(t *testing.T, s *redfishtest.Server, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if s.SessionsCreated() != 0 {
					t.Error("session created although the root links none")
				}
				if !slices.ContainsFunc(s.Requests(), func(r redfishtest.Request) bool { return r.Authorization }) {
					t.Error("no basic Authorization sent")
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := fake(t, tc.cfg)
			p := tc.profile
			if p.Name == "" {
				p = redfish.Standard
			}
			d := driver(t, s, p, nil)
			err := tc.run(t, d)
			tc.check(t, s, err)
		})
	}
}

func TestSessionReusedAcrossCalls(t *testing.T) {
	s := fake(t, redfishtest.Config{})
	d := driver(t, s, redfish.Standard, nil)
	for range 5 {
		if _, err := d.Status(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.SessionsCreated(); n != 1 {
		t.Fatalf("sessions = %d, want 1", n)
	}
	for _, r := range s.Requests() {
		if r.Authorization {
			t.Fatalf("basic credentials sent on %s %s with a session", r.Method, r.Path)
		}
	}
}

func TestUnsafeLinksNotFollowed(t *testing.T) {
	for name, sys := range map[string]string{
		"other host":      "https://203.0.113.9/redfish/v1/Systems/1",
		"outside redfish": "/admin/v1/Systems/1",
		"dot segments":    "/redfish/v1/../../etc/passwd",
	} {
		t.Run(name, func(t *testing.T) {
			s := fake(t, redfishtest.Config{})
			_, err := redfish.New(power.Target{Address: s.URL(), User: "admin", Password: "secret", Settings: map[string]string{"system": sys}}, redfish.Standard, fast, nil)
			if err == nil {
				// A system path from settings is checked at New; a link from
				// the BMC is checked when followed. Both must refuse.
				t.Fatal("New accepted an unsafe system path")
			}
			if !errors.Is(err, power.ErrUnsafeLink) {
				t.Fatalf("err = %v, want ErrUnsafeLink", err)
			}
		})
	}
}

func TestUnsafeLinkFromBMCNotFollowed(t *testing.T) {
	for name, link := range map[string]string{
		"other host":      "https://203.0.113.9/redfish/v1/Systems/1",
		"outside redfish": "/cgi-bin/login.cgi",
		"dot segments":    "/redfish/v1/Systems/../../../etc/shadow",
	} {
		t.Run(name, func(t *testing.T) {
			s := fake(t, redfishtest.Config{SystemLink: link})
			d := driver(t, s, redfish.Standard, nil)
			_, err := d.Status(ctx(t))
			if !errors.Is(err, power.ErrUnsafeLink) {
				t.Fatalf("err = %v, want ErrUnsafeLink", err)
			}
			for _, r := range s.Requests() {
				if !strings.HasPrefix(r.Path, "/redfish/") || strings.Contains(r.Path, "..") {
					t.Errorf("followed %s %s", r.Method, r.Path)
				}
			}
		})
	}
}

func TestCertificatePinning(t *testing.T) {
	s := fake(t, redfishtest.Config{})
	pin, err := power.FetchCertificate(ctx(t), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	if got := len(s.Requests()); got != 0 {
		t.Fatalf("reading the certificate sent %d HTTP requests", got)
	}
	// Pinned and matching: works.
	d, err := redfish.New(power.Target{Address: s.URL(), User: "admin", Password: "secret", PinnedCertSHA256: strings.ToUpper(pin)}, redfish.Standard, fast, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Status(ctx(t)); err != nil {
		t.Fatal(err)
	}
	d.Close()

	// The BMC now shows another certificate: no credentials may reach it.
	if err := s.SwapCertificate(); err != nil {
		t.Fatal(err)
	}
	before := len(s.Requests())
	d2, err := redfish.New(power.Target{Address: s.URL(), User: "admin", Password: "secret", PinnedCertSHA256: pin}, redfish.Standard, fast, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	_, err = d2.Status(ctx(t))
	var changed power.ErrCertificateChanged
	if !errors.As(err, &changed) {
		t.Fatalf("err = %v, want ErrCertificateChanged", err)
	}
	newPin, _ := power.FetchCertificate(ctx(t), s.URL())
	if changed.Old != pin || changed.New != newPin || pin == newPin {
		t.Fatalf("changed = %+v, want old %s new %s", changed, pin, newPin)
	}
	after := s.Requests()[before:]
	if len(after) != 0 {
		t.Fatalf("the swapped BMC received %d requests: %+v", len(after), after)
	}
	if !strings.Contains(err.Error(), s.URL()) {
		t.Errorf("error %q does not name the BMC", err)
	}
}

func TestCertificateReadAndPinnedWhenUnpinned(t *testing.T) {
	s := fake(t, redfishtest.Config{})
	want, err := power.FetchCertificate(ctx(t), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	d := driver(t, s, redfish.Standard, nil)
	res, err := d.Probe(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.CertSHA256 != want {
		t.Fatalf("probe pin = %q, want %q", res.CertSHA256, want)
	}
	// The driver keeps the pin it read: after a swap (and a new
	// connection) nothing more reaches the BMC.
	if err := s.SwapCertificate(); err != nil {
		t.Fatal(err)
	}
	_ = d.Close()
	before := len(s.Requests())
	_, err = d.Status(ctx(t))
	var changed power.ErrCertificateChanged
	if !errors.As(err, &changed) || changed.Old != want {
		t.Fatalf("err = %v, want ErrCertificateChanged from %s", err, want)
	}
	if n := len(s.Requests()) - before; n != 0 {
		t.Fatalf("%d requests reached the swapped BMC", n)
	}
}

func TestFaults(t *testing.T) {
	deadline := 3 * time.Second
	tests := map[string]struct {
		cfg    redfishtest.Config
		addr   func(s *redfishtest.Server) string
		pass   string
		want   error
		wantIn string
	}{
		"unreachable": {
			addr: func(*redfishtest.Server) string {
				l, _ := net.Listen("tcp", "127.0.0.1:0")
				a := l.Addr().String()
				l.Close()
				return "https://" + a
			},
			want: power.ErrUnreachable, wantIn: "read certificate",
		},
		"wrong credentials": {pass: "wrong", want: power.ErrAuth, wantIn: "login"},
		"garbage":           {cfg: redfishtest.Config{Garbage: true}, want: power.ErrNoRedfish, wantIn: "service root"},
		"stalled":           {cfg: redfishtest.Config{Stall: true}, want: power.ErrUnreachable, wantIn: "service root"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := fake(t, tc.cfg)
			addr := s.URL()
			if tc.addr != nil {
				addr = tc.addr(s)
			}
			pass := "secret"
			if tc.pass != "" {
				pass = tc.pass
			}
			d, err := redfish.New(power.Target{Address: addr, User: "admin", Password: pass}, redfish.Standard, fast, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			c, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			_, err = d.Status(c)
			if err == nil {
				t.Fatal("no error")
			}
			if c.Err() != nil {
				t.Fatalf("returned only after the deadline: %v", err)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), tc.wantIn) {
				t.Fatalf("err %q does not name the BMC %s and the step %q", err, addr, tc.wantIn)
			}
			if name == "wrong credentials" && s.SessionsCreated() != 0 {
				t.Fatal("session created with a wrong password")
			}
			if name == "wrong credentials" {
				logins := 0
				for _, r := range s.Requests() {
					if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/Sessions") {
						logins++
					}
				}
				if logins != 1 {
					t.Fatalf("login attempts = %d, want exactly 1", logins)
				}
			}
		})
	}
}

func TestStalledBMCWithinDeadline(t *testing.T) {
	// The stall case above gives up at ctx's deadline: a stalled BMC costs
	// the caller's deadline, not more.
	s := fake(t, redfishtest.Config{Stall: true})
	d := driver(t, s, redfish.Standard, nil)
	c, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := d.Status(c); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("no error from a stalled BMC")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Status did not return after its context ended")
	}
}
