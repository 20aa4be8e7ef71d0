//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/lab/deployimage/gpt"
	"github.com/rollcall/rollcall/lab/testenv"
)

// deployLab is what the deploy tests (TestVMDeploy, and the Debian one of
// `make e2e-full`) run on: the real `rollcall serve` in a network
// namespace on a bridge (DHCP, TFTP, HTTP, HTTPS) with the commissioning
// image, and the one VM it provisions, booted the network first, then the
// disks marked Boot.
type deployLab struct {
	fw   vmFirmware
	ns   *labNS
	n1   *labNode
	opts deployVMOptions
	uuid string // the VM's SMBIOS UUID (how the test finds its machine)
	id   string // the machine, once commissioned
	vars string // the OVMF variable file every boot of the VM shares
}

// commissioningImage is bin/image's kernel and initrd (`make image`).
func commissioningImage(t *testing.T) (kernel, initrd string) {
	t.Helper()
	testenv.NeedFile(t, "/dev/net/tun (tap devices)", "/dev/net/tun")
	testenv.NeedFile(t, "QEMU's e1000 iPXE ROM (Debian package ipxe-qemu)", "/usr/lib/ipxe/qemu/pxe-e1000.rom", "/usr/share/qemu/pxe-e1000.rom")
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	kernel, initrd = filepath.Join(root, "bin", "image", "vmlinuz"), filepath.Join(root, "bin", "image", "initrd.img")
	for _, f := range []string{kernel, initrd} {
		if _, err := os.Stat(f); err != nil {
			testenv.Skip(t, "needs the commissioning image: run `make image` (%v)", err)
		}
	}
	return kernel, initrd
}

// newDeployLab starts the node (its data in dir) with a provisioning
// subnet and the commissioning image; the VM gets disks and memMiB.
func newDeployLab(t *testing.T, fw vmFirmware, dir, kernel, initrd string, memMiB int, disks []vmDisk) *deployLab {
	return newLab(t, fw, dir, kernel, initrd, memMiB, disks, "")
}

// newLab is newDeployLab with more of rollcall.json (conf: its fields
// after commission_append, as `"key": value, …`).
func newLab(t *testing.T, fw vmFirmware, dir, kernel, initrd string, memMiB int, disks []vmDisk, conf string) *deployLab {
	var b [5]byte
	rand.Read(b[:])
	sfx := hex.EncodeToString(b[:3])
	ns := newLabNS(t, "rc-dep-"+sfx)
	br, tap := "rcb"+sfx, "rct"+sfx
	octet := 20 + int(b[3])%200
	cidr := fmt.Sprintf("10.217.%d.0/24", octet)
	link := fmt.Sprintf("10.217.%d.1", octet)
	ns.ip(t, "link", "add", br, "type", "bridge")
	ns.ip(t, "tuntap", "add", "dev", tap, "mode", "tap")
	ns.ip(t, "link", "set", tap, "master", br)
	ns.ip(t, "link", "set", tap, "up")
	ns.ip(t, "addr", "add", link+"/24", "dev", br)
	ns.ip(t, "link", "set", br, "up")

	data := filepath.Join(dir, "n1")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if conf != "" {
		conf = ", " + conf
	}
	if err := os.WriteFile(filepath.Join(data, "rollcall.json"), []byte(`{"commission_append": "console=ttyS0"`+conf+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	n1 := startLabNode(t, ns, "n1", data, link+":8080", "-https", link+":8443", "-tftp", link+":69", "-raft", "127.0.0.1:8300")
	n1.cli(t, "fabric", "add", "lab")
	n1.cli(t, "vlan", "add", "-dhcp", "-node", "n1", "-iface", br, "lab", "0")
	n1.cli(t, "subnet", "add", "-fabric", "lab", "-vid", "0", "-purpose", "provisioning", "-gateway", link, cidr)
	n1.cli(t, "range", "add", cidr, "dynamic", fmt.Sprintf("10.217.%d.10", octet), fmt.Sprintf("10.217.%d.199", octet))
	n1.cli(t, "image", "import", "-kernel", kernel, "-initrd", initrd, "commissioning")

	mac := fmt.Sprintf("52:54:00:%02x:%02x:%02x", b[0], b[1], b[4]&0xfe)
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	uuid := h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	return &deployLab{fw: fw, ns: ns, n1: n1, uuid: uuid, opts: deployVMOptions{Firmware: fw, Tap: tap, MAC: mac, NetBoot: true, MemMiB: memMiB,
		Serial: "RC-DEPLOY-" + strings.ToUpper(string(fw)), UUID: uuid, Disks: disks}}
}

func (l *deployLab) machine() (vmDeployMachine, error) {
	var m vmDeployMachine
	_, err := l.n1.call(l.n1.token, http.MethodGet, "/api/v1/machines/"+l.id, nil, &m)
	return m, err
}

// boot runs the VM until it powers off (or reboots, without reboot),
// failing the test when it does not within limit.
func (l *deployLab) boot(t *testing.T, name string, reboot bool, limit time.Duration) *deployVM {
	o := l.opts
	o.Name, o.Reboot, o.Limit, o.Vars = string(l.fw)+"-"+name, reboot, limit, l.vars
	vm := startDeployVM(t, l.ns, o)
	if l.vars == "" {
		l.vars = vm.Vars
	}
	return vm
}

// commission boots the VM unknown: it is commissioned (ready) and the
// agent powers it off. The inventory has every disk on its bus (the disk
// choice sees the USB decoy and must pass it over).
func (l *deployLab) commission(t *testing.T) {
	began := time.Now()
	vm := l.boot(t, "commission", false, 6*time.Minute)
	waitUntil(t, 6*time.Minute, "the VM commissioned (ready)", func() bool {
		var list struct {
			Machines []vmDeployMachine `json:"machines"`
		}
		if _, err := l.n1.call(l.n1.token, http.MethodGet, "/api/v1/machines", nil, &list); err == nil {
			for _, m := range list.Machines {
				if strings.EqualFold(m.SystemUUID, l.uuid) {
					l.id = m.ID
					return m.State == "ready"
				}
			}
		}
		return vm.done
	})
	m, _ := l.machine()
	if m.State != "ready" {
		t.Fatalf("machine %q is %q after commissioning, want ready (qemu: %v)", l.id, m.State, vm.err)
	}
	if err := vm.wait(2 * time.Minute); err != nil {
		t.Fatalf("the commissioned VM did not power off: %v", err)
	}
	got := map[string]string{}
	for _, d := range m.Inventory.Disks {
		got[d.Serial] = d.Transport
	}
	for _, d := range l.opts.Disks {
		if got[d.Serial] != d.Bus {
			t.Errorf("inventory disks %+v: want %s on %s", m.Inventory.Disks, d.Serial, d.Bus)
		}
	}
	t.Logf("%s: machine %s ready, VM off %v after power-on", l.fw, l.id, time.Since(began).Round(100*time.Millisecond))
}

// deployRun is one deploy through the CLI.
type deployRun struct {
	vm             *deployVM // the VM, booted the network first: the agent, then its disk
	at, deployedAt time.Time // the command, the machine deployed
	out            string    // `rollcall deploy … -watch`
}

// deploy runs `rollcall deploy ID args… -watch`, powers the VM on (there
// is no BMC here: the commissioning test covers the BMC) and waits until
// the machine is deployed; the VM goes on booting its disk (vmLimit is its
// watchdog from power-on).
func (l *deployLab) deploy(t *testing.T, vmLimit time.Duration, args ...string) deployRun {
	cli := runCLIAsync(l.n1, append(append([]string{"deploy", l.id}, args...), "-watch")...)
	r := deployRun{at: time.Now()}
	waitUntil(t, 30*time.Second, "a deploy job", func() bool {
		_, ok := latestJob(l.n1, l.id, "deploy")
		return ok
	})
	r.vm = l.boot(t, "deploy", true, vmLimit)
	waitUntil(t, vmLimit, "machine "+l.id+" deployed", func() bool {
		m, err := l.machine()
		if err == nil && m.State == "deployed" {
			r.deployedAt = time.Now()
			return true
		}
		if err == nil && (m.State == "deploy-failed" || m.State == "ready") {
			j, _ := latestJob(l.n1, l.id, "deploy")
			t.Fatalf("machine %s is %s: job %s %s: %s", l.id, m.State, j.ID, j.State, j.Error)
		}
		return false
	})
	out, err := cli.wait(time.Minute)
	if err != nil {
		t.Errorf("rollcall deploy -watch: %v\n%s", err, out)
	}
	r.out = out
	t.Logf("rollcall deploy %s %s -watch:\n%s", l.id, strings.Join(args, " "), out)
	return r
}

// waitPhonedHome waits until the machine's deployment shows the phone-home
// (or the VM ended without it) and returns when it was seen.
func (l *deployLab) waitPhonedHome(t *testing.T, vm *deployVM, limit time.Duration) time.Time {
	phoned := func() bool {
		m, err := l.machine()
		return err == nil && m.Deployment != nil && !m.Deployment.PhonedHome.IsZero()
	}
	waitUntil(t, limit, "machine "+l.id+" phoned home", func() bool {
		return phoned() || vm.wait(0) != context.DeadlineExceeded
	})
	if !phoned() {
		t.Fatalf("the deployed VM ended (%v) without phoning home", vm.err)
	}
	return time.Now()
}

// release runs `rollcall release ID -watch` and boots the VM: the agent
// wipes the target disk (no GPT at either end) and reboots (which ends
// QEMU); the machine is ready.
func (l *deployLab) release(t *testing.T, target string) {
	cli := runCLIAsync(l.n1, "release", l.id, "-watch")
	waitUntil(t, 30*time.Second, "a release job", func() bool {
		_, ok := latestJob(l.n1, l.id, "release")
		return ok
	})
	at := time.Now()
	vm := l.boot(t, "release", false, 6*time.Minute)
	waitUntil(t, 6*time.Minute, "machine "+l.id+" ready after release", func() bool {
		m, err := l.machine()
		return err == nil && m.State == "ready"
	})
	readyAfter := time.Since(at)
	out, err := cli.wait(time.Minute)
	if err != nil {
		t.Errorf("rollcall release -watch: %v\n%s", err, out)
	}
	if err := vm.wait(2 * time.Minute); err != nil {
		t.Errorf("the released VM did not reboot (end QEMU): %v", err)
	}
	if rel, _ := latestJob(l.n1, l.id, "release"); rel.State != "done" {
		t.Errorf("release job %+v, want done", rel)
	}
	if _, err := gpt.Read(openFile(t, target), 512); !errors.Is(err, gpt.ErrNoTable) {
		t.Errorf("after release the target still has a partition table (read: %v)", err)
	}
	if hasBackupGPTAtEnd(t, target) {
		t.Error("after release the target still has a backup GPT header in its last sector")
	}
	t.Logf("%s: release → ready %v", l.fw, readyAfter.Round(100*time.Millisecond))
}
