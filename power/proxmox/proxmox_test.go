package proxmox_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/power"
	"github.com/rollcall/rollcall/power/powertest"
	"github.com/rollcall/rollcall/power/proxmox"
)

// fakePVE is a hand-written FAKE of the few Proxmox VE API endpoints the
// driver uses (no Proxmox VE can run here): one VM, tasks that finish on
// the second poll, token auth.
type fakePVE struct {
	mu      sync.Mutex
	running bool
	boot    string
	polls   map[string]int
	calls   []string
	auth    []string
}

func (f *fakePVE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	if r.Header.Get("Authorization") != "PVEAPIToken=rollcall@pve!power=s3cret" {
		http.Error(w, "authentication failure", http.StatusUnauthorized)
		return
	}
	data := func(v any) { _ = json.NewEncoder(w).Encode(map[string]any{"data": v}) }
	const vm = "/api2/json/nodes/pve1/qemu/101"
	switch p := r.URL.Path; {
	case p == "/api2/json/version":
		data(map[string]any{"version": "8.2.4"})
	case p == vm+"/status/current":
		st := "stopped"
		if f.running {
			st = "running"
		}
		data(map[string]any{"status": st, "vmid": 101})
	case strings.HasPrefix(p, vm+"/status/") && r.Method == http.MethodPost:
		switch p[len(vm+"/status/"):] {
		case "start", "reset":
			f.running = true
		case "stop", "shutdown":
			f.running = false
		}
		upid := "UPID:pve1:0001:" + p[len(vm+"/status/"):]
		f.polls[upid] = 0
		data(upid)
	case strings.HasPrefix(p, "/api2/json/nodes/pve1/tasks/"):
		upid := strings.TrimSuffix(strings.TrimPrefix(p, "/api2/json/nodes/pve1/tasks/"), "/status")
		f.polls[upid]++
		if f.polls[upid] < 2 {
			data(map[string]any{"status": "running"})
			return
		}
		data(map[string]any{"status": "stopped", "exitstatus": "OK"})
	case p == vm+"/config" && r.Method == http.MethodGet:
		data(map[string]any{"boot": f.boot, "scsi0": "local-lvm:vm-101-disk-0,size=32G", "ide2": "local:iso/debian.iso,media=cdrom", "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0"})
	case p == vm+"/config" && r.Method == http.MethodPut:
		_ = r.ParseForm()
		f.boot = r.PostForm.Get("boot")
		data(nil)
	default:
		http.NotFound(w, r)
	}
}

func TestProxmox(t *testing.T) {
	f := &fakePVE{boot: "order=scsi0;ide2;net0", polls: map[string]int{}}
	srv := httptest.NewUnstartedServer(f)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the certificate read closes after the handshake
	srv.StartTLS()
	defer srv.Close()
	target := power.Target{Address: srv.URL, User: "rollcall@pve!power", Password: "s3cret",
		Settings: map[string]string{"node": "pve1", "vmid": "101"}}
	d, err := proxmox.New(target, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	powertest.Conformance(t, d, func() (power.Device, bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case strings.HasPrefix(f.boot, "order=net0"):
			return power.DevicePXE, true
		case strings.HasPrefix(f.boot, "order=scsi0"):
			return power.DeviceDisk, true
		}
		return "", true
	})
	f.mu.Lock()
	boot := f.boot
	f.mu.Unlock()
	if boot != "order=scsi0;net0;ide2" { // disk first, then the order pxe left
		t.Errorf("boot after disk = %q", boot)
	}
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.SetBootDevice(c, power.BootDevice{Device: power.DeviceBIOS}); !errors.Is(err, power.ErrUnsupported) {
		t.Errorf("bios: err = %v, want ErrUnsupported", err)
	}

	// Wrong secret: ErrAuth naming the host and step.
	bad := target
	bad.Password = "nope"
	db, _ := proxmox.New(bad, nil)
	_, err = db.Status(c)
	if !errors.Is(err, power.ErrAuth) || !strings.Contains(err.Error(), srv.URL) {
		t.Fatalf("err = %v", err)
	}

	// A pinned certificate that does not match: nothing is sent.
	before := len(f.calls)
	pinned := target
	pinned.PinnedCertSHA256 = strings.Repeat("ab", 32)
	dp, _ := proxmox.New(pinned, nil)
	_, err = dp.Status(c)
	var changed power.ErrCertificateChanged
	if !errors.As(err, &changed) {
		t.Fatalf("err = %v, want ErrCertificateChanged", err)
	}
	f.mu.Lock()
	after := len(f.calls)
	f.mu.Unlock()
	if after != before {
		t.Fatalf("%d requests (with the token) reached a BMC with another certificate", after-before)
	}
}

func TestProxmoxSettings(t *testing.T) {
	for name, s := range map[string]map[string]string{
		"no node":   {"vmid": "101"},
		"bad vmid":  {"node": "pve1", "vmid": "x"},
		"bad token": {"node": "pve1", "vmid": "101", "token_id": "root"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := proxmox.New(power.Target{Address: "10.0.0.5", User: "root@pam!t", Settings: s}, nil)
			if !errors.Is(err, power.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}
