package ipmi_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/rollcall/rollcall/power"
	"github.com/rollcall/rollcall/power/ipmi"
	"github.com/rollcall/rollcall/power/ipmi/ipmitest"
	"github.com/rollcall/rollcall/power/powertest"
)

func startBMC(t *testing.T, ciphers ...types.CipherSuiteID) *ipmitest.BMC {
	t.Helper()
	b, err := ipmitest.Start("admin", "secret", ciphers...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func newDriver(t *testing.T, addr, pass string, settings map[string]string) power.Driver {
	t.Helper()
	d, err := ipmi.New(power.Target{Address: addr, User: "admin", Password: pass, Settings: settings}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func tctx(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

var selectorOf = map[types.BootDeviceSelector]power.Device{
	types.BootDeviceSelectorForcePXE:       power.DevicePXE,
	types.BootDeviceSelectorForceHardDrive: power.DeviceDisk,
	types.BootDeviceSelectorForceCDROM:     power.DeviceCDROM,
	types.BootDeviceSelectorForceBIOSSetup: power.DeviceBIOS,
	types.BootDeviceSelectorNoOverride:     power.DeviceNone,
}

// go-ipmi's in-process BMC offering only cipher suite 17.
func TestConformanceGoIPMIBMC(t *testing.T) {
	b := startBMC(t, types.CipherSuiteID17)
	d := newDriver(t, b.Address(), "secret", nil)
	powertest.Conformance(t, d, func() (power.Device, bool) {
		f := b.BootFlags()
		if f == nil {
			return "", false
		}
		return selectorOf[f.BootDeviceSelector], true
	})
}

func TestBootFlagsPersistentEFI(t *testing.T) {
	b := startBMC(t, types.CipherSuiteID17)
	d := newDriver(t, b.Address(), "secret", map[string]string{"cipher": "17"})
	tests := map[string]struct {
		in         power.BootDevice
		persistent bool
		efi        bool
		sel        types.BootDeviceSelector
		ipmitool   []string
	}{
		"pxe once legacy": {power.BootDevice{Device: power.DevicePXE}, false, false, types.BootDeviceSelectorForcePXE,
			[]string{"Force PXE", "Options apply to only next boot", "BIOS PC Compatible (legacy) boot"}},
		"disk persistent efi": {power.BootDevice{Device: power.DeviceDisk, Persistent: true, UEFI: true}, true, true, types.BootDeviceSelectorForceHardDrive,
			[]string{"Force Boot from default Hard-Drive", "Options apply to all future boots", "BIOS EFI boot"}},
		"bios persistent": {power.BootDevice{Device: power.DeviceBIOS, Persistent: true}, true, false, types.BootDeviceSelectorForceBIOSSetup,
			[]string{"Force Boot into BIOS Setup", "Options apply to all future boots"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if err := d.SetBootDevice(tctx(t, 10*time.Second), tc.in); err != nil {
				t.Fatal(err)
			}
			f := b.BootFlags()
			if f == nil || f.BootDeviceSelector != tc.sel || f.Persist != tc.persistent || bool(f.BIOSBootType) != tc.efi || !f.BootFlagsValid {
				t.Fatalf("boot flags = %+v", f)
			}
			// ipmitool reads back what we set.
			if _, err := exec.LookPath("ipmitool"); err != nil {
				powertest.Unavailable(t, "ipmitool not installed (apt-get install -y ipmitool)")
			}
			out := ipmitool(t, b.Addr.Port, "17", "chassis", "bootparam", "get", "5")
			for _, want := range tc.ipmitool {
				if !strings.Contains(out, want) {
					t.Errorf("ipmitool bootparam get 5 lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

func ipmitool(t *testing.T, port int, cipher string, args ...string) string {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	full := append([]string{"-I", "lanplus", "-C", cipher, "-H", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "admin", "-P", "secret"}, args...)
	out, err := exec.CommandContext(c, "ipmitool", full...).CombinedOutput()
	if err != nil {
		t.Fatalf("ipmitool %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestCipherFallbackTo3(t *testing.T) {
	b := startBMC(t, types.CipherSuiteID3)
	d := newDriver(t, b.Address(), "secret", nil)
	if _, err := d.Status(tctx(t, 20*time.Second)); err != nil {
		t.Fatalf("default ciphers (17, then 3) against a suite-3 BMC: %v", err)
	}
	if n := b.Received(ipmitest.PayloadRAKP1); n != 1 {
		t.Errorf("RAKP1 messages = %d, want 1 (suite 17 refused at Open Session)", n)
	}
	only17 := newDriver(t, b.Address(), "secret", map[string]string{"cipher": "17"})
	_, err := only17.Status(tctx(t, 20*time.Second))
	if !errors.Is(err, power.ErrUnsupported) {
		t.Fatalf("cipher=17 against a suite-3 BMC: err = %v, want ErrUnsupported", err)
	}
}

func TestWrongPasswordOneLoginOnly(t *testing.T) {
	b := startBMC(t) // offers 3 and 17: a naive client would try both
	d := newDriver(t, b.Address(), "wrong", nil)
	c := tctx(t, 20*time.Second)
	_, err := d.Status(c)
	if !errors.Is(err, power.ErrAuth) {
		t.Fatalf("err = %v, want ErrAuth", err)
	}
	if c.Err() != nil {
		t.Fatal("returned only after the deadline")
	}
	if !strings.Contains(err.Error(), b.Address()) || !strings.Contains(err.Error(), "login") {
		t.Fatalf("error %q does not name the BMC and the step", err)
	}
	if n := b.Received(ipmitest.PayloadRAKP1); n != 1 {
		t.Fatalf("login attempts (RAKP1) = %d, want exactly 1", n)
	}
}

func TestFaults(t *testing.T) {
	tests := map[string]struct {
		peer func(t *testing.T) string
		want error
	}{
		"unreachable": {peer: func(t *testing.T) string {
			pc, _ := net.ListenPacket("udp", "127.0.0.1:0")
			a := pc.LocalAddr().String()
			pc.Close()
			return a
		}, want: power.ErrUnreachable},
		"stalled": {peer: func(t *testing.T) string {
			pc, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pc.Close() })
			go func() { // reads, never answers
				buf := make([]byte, 1024)
				for {
					if _, _, err := pc.ReadFrom(buf); err != nil {
						return
					}
				}
			}()
			return pc.LocalAddr().String()
		}, want: power.ErrUnreachable},
		"garbage": {peer: func(t *testing.T) string {
			pc, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pc.Close() })
			go func() {
				buf := make([]byte, 1024)
				for {
					_, a, err := pc.ReadFrom(buf)
					if err != nil {
						return
					}
					_, _ = pc.WriteTo([]byte("HTTP/1.1 400 garbage\r\n\r\n"), a)
				}
			}()
			return pc.LocalAddr().String()
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			addr := tc.peer(t)
			d := newDriver(t, addr, "secret", map[string]string{"timeout": "200ms", "retransmits": "1"})
			c := tctx(t, 5*time.Second)
			_, err := d.Status(c)
			if err == nil {
				t.Fatal("no error")
			}
			if c.Err() != nil {
				t.Fatalf("returned only after the deadline: %v", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "ipmi bmc") {
				t.Fatalf("error %q does not name the BMC", err)
			}
		})
	}
}

func TestSettingsChecked(t *testing.T) {
	for name, s := range map[string]map[string]string{
		"cipher":    {"cipher": "99"},
		"privilege": {"privilege": "root"},
		"interface": {"interface": "lan"},
		"port":      {"port": "0"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ipmi.New(power.Target{Address: "10.0.0.1", Settings: s}, nil)
			if !errors.Is(err, power.ErrInvalid) || !strings.Contains(err.Error(), "allowed") && !strings.Contains(err.Error(), "want") {
				t.Fatalf("err = %v, want ErrInvalid with the allowed values", err)
			}
		})
	}
}

// OpenIPMI's ipmi_sim, a second independent peer, with cipher suite 3.
func TestIPMISim(t *testing.T) {
	for _, tool := range []string{"ipmi_sim", "ipmitool"} {
		if _, err := exec.LookPath(tool); err != nil {
			powertest.Unavailable(t, tool+" not installed (apt-get install -y openipmi ipmitool)")
		}
	}
	port := freeUDPPort(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "chassis.sh")
	// ipmi_sim runs: script 0x20 get power boot | set power 1 | set boot pxe …
	if err := os.WriteFile(script, []byte(`#!/bin/sh
D=$(dirname "$0")
shift
op=$1; shift
case "$op" in
get) for k in "$@"; do
       case $k in
       power) echo "power:$(cat $D/power 2>/dev/null || echo 0)";;
       boot) echo "boot:$(cat $D/boot 2>/dev/null || echo default)";;
       esac
     done;;
set) while [ $# -gt 1 ]; do
       case $1 in power) echo $2 > $D/power;; boot) echo $2 > $D/boot;; esac
       echo "$1 $2" >> $D/log
       shift 2
     done;;
esac
`), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`name "rollcall"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 %d
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcdef
  endlan
  chassis_control "%s 0x20"
  user 2 true "admin" "secret" admin 10 none md2 md5 straight
`, port, script)
	emu := "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\nmc_enable 0x20\n"
	if err := os.WriteFile(filepath.Join(dir, "lan.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sim.emu"), []byte(emu), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	_ = os.Mkdir(state, 0o755)
	cmd := exec.Command("ipmi_sim", "-n", "-c", filepath.Join(dir, "lan.conf"), "-f", filepath.Join(dir, "sim.emu"), "-s", state)
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		powertest.Unavailable(t, "ipmi_sim does not start: "+err.Error())
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	d := newDriver(t, addr, "secret", map[string]string{"cipher": "3"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := d.Status(tctx(t, 3*time.Second))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ipmi_sim on %s never answered: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	c := tctx(t, 30*time.Second)
	if err := d.Power(c, power.ActionOn); err != nil {
		t.Fatal(err)
	}
	if out := ipmitool(t, port, "3", "chassis", "power", "status"); !strings.Contains(out, "Chassis Power is on") {
		t.Fatalf("ipmitool after on: %s", out)
	}
	if st, err := d.Status(c); err != nil || st != power.StateOn {
		t.Fatalf("Status = %s, %v", st, err)
	}
	for dev, want := range map[power.Device]string{power.DevicePXE: "Force PXE", power.DeviceDisk: "Force Boot from default Hard-Drive", power.DeviceBIOS: "Force Boot into BIOS Setup"} {
		// ipmi_sim drops the persistent and EFI bits (DESIGN, BMC notes): the
		// device is what it keeps.
		if err := d.SetBootDevice(c, power.BootDevice{Device: dev, Persistent: true, UEFI: true}); err != nil {
			t.Fatal(err)
		}
		if out := ipmitool(t, port, "3", "chassis", "bootparam", "get", "5"); !strings.Contains(out, want) {
			t.Fatalf("ipmitool bootparam get 5 after %s lacks %q:\n%s", dev, want, out)
		}
	}
	if err := d.Power(c, power.ActionOff); err != nil {
		t.Fatal(err)
	}
	if out := ipmitool(t, port, "3", "chassis", "power", "status"); !strings.Contains(out, "Chassis Power is off") {
		t.Fatalf("ipmitool after off: %s", out)
	}
	if err := d.Power(c, power.ActionCycle); err != nil { // off: powers on
		t.Fatal(err)
	}
	if out := ipmitool(t, port, "3", "chassis", "power", "status"); !strings.Contains(out, "Chassis Power is on") {
		t.Fatalf("ipmitool after cycle from off: %s", out)
	}
	res, err := d.Probe(c)
	if err != nil || !res.Reachable || res.Firmware == "" {
		t.Fatalf("Probe = %+v, %v", res, err)
	}
	// Wrong password against ipmi_sim: one clear error.
	bad := newDriver(t, addr, "wrong", map[string]string{"cipher": "3"})
	if _, err := bad.Status(c); !errors.Is(err, power.ErrAuth) {
		t.Fatalf("wrong password: err = %v, want ErrAuth", err)
	}
}

func freeUDPPort(t *testing.T) int {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().(*net.UDPAddr).Port
}
