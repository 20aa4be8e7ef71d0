//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/lab/testenv"
)

// A virtual machine nobody registered becomes a ready, inventoried machine
// with a BMC account: the real `rollcall serve` runs inside a network
// namespace the test creates, serving DHCP, TFTP, HTTP and HTTPS on a bridge
// (its address is on the bridge itself); the network and the commissioning
// image (bin/image, `make image`) are described with the CLI. A QEMU VM
// (software emulation) with a set SMBIOS UUID and serial, two NICs on that
// bridge (an e1000 with QEMU's iPXE ROM that boots, and a virtio-net), a
// virtio disk and an NVMe disk, and an in-band BMC, PXE-boots the
// commissioning image; the agent inventories it, creates a BMC account
// in-band, reports over HTTPS and powers off.
//
// The BMC is OpenIPMI's ipmi_sim attached through QEMU's ipmi-bmc-extern
// (its VM codec on a TCP socket) behind an isa-ipmi-kcs interface: QEMU's
// internal ipmi-bmc-sim answers "invalid command" to Get Channel Info and
// Get User Access, which the agent needs. ipmi_sim also serves IPMI over LAN
// on the namespace's loopback, where ipmitool reads its user list
// afterwards.
func TestVMCommissioning(t *testing.T) { testVM(t, false) }

// The same on a three-node cluster, through a follower: n1 (the leader,
// which bootstrapped the cluster) and n3 serve only on the namespace's
// loopback; n2, which joined with a join code, serves DHCP, TFTP, HTTP and
// HTTPS on the bridge, so that the boot files come from its copy of the
// image (imported through n1) and the agent's writes go through it to the
// leader. The record is read from all three.
func TestVMCommissioningCluster(t *testing.T) { testVM(t, true) }

func testVM(t *testing.T, cluster bool) {
	if testing.Short() {
		t.Skip("boots an emulated machine (a few minutes)")
	}
	testenv.NeedNetns(t, "bridges, taps", "qemu-system-x86_64", "ipmi_sim", "ipmitool")
	testenv.NeedFile(t, "/dev/net/tun (tap devices)", "/dev/net/tun")
	testenv.NeedFile(t, "QEMU's e1000 iPXE ROM (Debian package ipxe-qemu)", "/usr/lib/ipxe/qemu/pxe-e1000.rom", "/usr/share/qemu/pxe-e1000.rom")
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	kernel, initrd := filepath.Join(root, "bin", "image", "vmlinuz"), filepath.Join(root, "bin", "image", "initrd.img")
	for _, f := range []string{kernel, initrd} {
		if _, err := os.Stat(f); err != nil {
			testenv.Skip(t, "needs the commissioning image: run `make image` (%v)", err)
		}
	}

	// The lab: namespace NS, bridge BR with the node's address, two taps.
	var b [5]byte
	rand.Read(b[:])
	sfx := hex.EncodeToString(b[:3])
	ns := newLabNS(t, "rc-vm-"+sfx)
	br, tap0, tap1 := "rcb"+sfx, "rct0"+sfx, "rct1"+sfx
	octet := 20 + int(b[3])%200
	cidr := fmt.Sprintf("10.216.%d.0/24", octet)
	link := fmt.Sprintf("10.216.%d.1", octet)
	ns.ip(t, "link", "add", br, "type", "bridge")
	for _, tap := range []string{tap0, tap1} {
		ns.ip(t, "tuntap", "add", "dev", tap, "mode", "tap")
		ns.ip(t, "link", "set", tap, "master", br)
		ns.ip(t, "link", "set", tap, "up")
	}
	ns.ip(t, "addr", "add", link+"/24", "dev", br)
	ns.ip(t, "link", "set", br, "up")

	// The nodes, their kernel command line with console=ttyS0 so that the
	// agent's log reaches the VM's console. serving is the node on the
	// bridge; n1 is the one the test configures and polls.
	dir := t.TempDir()
	dataDir := func(name string) string {
		t.Helper()
		data := filepath.Join(dir, name)
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "rollcall.json"), []byte(`{"commission_append": "console=ttyS0"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		return data
	}
	onLink := []string{"-https", link + ":8443", "-tftp", link + ":69"}
	var n1, serving *labNode
	var nodes []*labNode
	if !cluster {
		n1 = startLabNode(t, ns, "n1", dataDir("n1"), link+":8080", append(onLink, "-raft", "127.0.0.1:8300")...)
		serving, nodes = n1, []*labNode{n1}
	} else {
		n1 = startLabNode(t, ns, "n1", dataDir("n1"), "127.0.0.1:8080", "-raft", "127.0.0.1:8300")
		code := n1.cli(t, "cluster", "join-code", "-ttl", "10m")
		n2 := startLabNode(t, ns, "n2", dataDir("n2"), link+":8080", append(onLink, "-raft", "127.0.0.1:8302", "-join", code)...)
		code = n1.cli(t, "cluster", "join-code", "-ttl", "10m")
		n3 := startLabNode(t, ns, "n3", dataDir("n3"), "127.0.0.1:8082", "-raft", "127.0.0.1:8303", "-join", code)
		serving, nodes = n2, []*labNode{n1, n2, n3}
	}
	n1.cli(t, "fabric", "add", "lab")
	n1.cli(t, "vlan", "add", "-dhcp", "-node", serving.name, "-iface", br, "lab", "0")
	n1.cli(t, "subnet", "add", "-fabric", "lab", "-vid", "0", "-purpose", "provisioning", "-gateway", link, cidr)
	n1.cli(t, "range", "add", cidr, "dynamic", fmt.Sprintf("10.216.%d.10", octet), fmt.Sprintf("10.216.%d.199", octet))
	n1.cli(t, "image", "import", "-kernel", kernel, "-initrd", initrd, "commissioning")
	if cluster {
		// The follower has fetched the image from n1 and serves it.
		waitUntil(t, 60*time.Second, serving.name+" serving the imported kernel", func() bool {
			code, _ := serving.call("", http.MethodGet, "/images/commissioning/kernel", nil, nil)
			return code == http.StatusOK
		})
		if l := leaderOfLab(t, nodes); l == serving.name {
			t.Fatalf("%s, the node on the bridge, is the leader; want a follower", l)
		} else {
			t.Logf("leader %s; %s (a follower) serves the bridge", l, serving.name)
		}
	}

	// The BMC: ipmi_sim in the namespace, the VM's KCS interface on a TCP
	// socket (QEMU connects and reconnects), IPMI over LAN on UDP, both on
	// the namespace's loopback.
	const kcsPort, lanPort = 9002, 9623
	simDir := t.TempDir()
	conf := fmt.Sprintf(`name "rollcall-e2e"
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
  serial kcs 127.0.0.1 %d codec VM
  user 1 true "" "" user 10 none md2 md5 straight
  user 2 true "admin" "secret" admin 10 none md2 md5 straight
`, lanPort, kcsPort)
	emu := "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\nmc_enable 0x20\n"
	for name, body := range map[string]string{"lan.conf": conf, "sim.emu": emu} {
		if err := os.WriteFile(filepath.Join(simDir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(simDir, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	sim := ns.command(context.Background(), "ipmi_sim", "-n", "-c", filepath.Join(simDir, "lan.conf"), "-f", filepath.Join(simDir, "sim.emu"), "-s", filepath.Join(simDir, "state"))
	sim.Dir = simDir
	simLog := &lockedBuffer{}
	sim.Stdout, sim.Stderr = simLog, simLog
	if err := sim.Start(); err != nil {
		testenv.Skip(t, "ipmi_sim does not start: %v", err)
	}
	simDone := make(chan error, 1)
	go func() { simDone <- sim.Wait() }()
	t.Cleanup(func() {
		sim.Process.Kill()
		<-simDone
		if t.Failed() {
			t.Logf("ipmi_sim output:\n%s", tailString(simLog.String(), 4096))
		}
	})
	ipmitool := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		full := append([]string{"-I", "lanplus", "-H", "127.0.0.1", "-p", fmt.Sprint(lanPort), "-U", "admin", "-P", "secret", "-C", "3"}, args...)
		out, err := ns.command(ctx, "ipmitool", full...).CombinedOutput()
		return string(out), err
	}
	waitUntil(t, 15*time.Second, "ipmi_sim answering over LAN", func() bool {
		_, err := ipmitool("mc", "info")
		return err == nil
	})

	// The VM.
	vmDir := t.TempDir()
	vda, nvme := filepath.Join(vmDir, "vda.raw"), filepath.Join(vmDir, "nvme.raw")
	for _, f := range []string{vda, nvme} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(f, 1<<30); err != nil {
			t.Fatal(err)
		}
	}
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	uuid := h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	const serial = "RC-E2E-0001"
	mac0 := fmt.Sprintf("52:54:00:%02x:%02x:%02x", b[0], b[1], b[4]&0xfe)
	mac1 := fmt.Sprintf("52:54:00:%02x:%02x:%02x", b[0], b[1], b[4]|0x01)
	args := []string{"-nographic", "-no-reboot", "-accel", "tcg", "-m", "1024", "-smp", "2",
		"-smbios", "type=1,manufacturer=Rollcall,product=E2E VM,serial=" + serial + ",uuid=" + uuid,
		"-netdev", "tap,id=n0,ifname=" + tap0 + ",script=no,downscript=no",
		"-device", "e1000,netdev=n0,mac=" + mac0 + ",bootindex=1",
		"-netdev", "tap,id=n1,ifname=" + tap1 + ",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n1,mac=" + mac1 + ",romfile=",
		"-drive", "file=" + vda + ",if=virtio,format=raw",
		"-drive", "file=" + nvme + ",if=none,id=nv0,format=raw",
		"-device", "nvme,drive=nv0,serial=RCNVME0001",
		"-chardev", fmt.Sprintf("socket,id=ipmi0,host=127.0.0.1,port=%d,reconnect=10", kcsPort),
		"-device", "ipmi-bmc-extern,chardev=ipmi0,id=bmc0",
		"-device", "isa-ipmi-kcs,bmc=bmc0",
	}
	// The watchdog: 6 minutes for the whole VM run, then qemu is killed.
	const vmLimit = 6 * time.Minute
	vctx, cancel := context.WithTimeout(t.Context(), vmLimit)
	defer cancel()
	qemu := ns.command(vctx, "qemu-system-x86_64", args...)
	console := &lockedBuffer{}
	qemu.Stdout, qemu.Stderr = console, console
	qemu.WaitDelay = 5 * time.Second
	began := time.Now()
	if err := qemu.Start(); err != nil {
		t.Fatalf("qemu: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- qemu.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	defer func() {
		if t.Failed() || os.Getenv("VM_DEBUG") != "" {
			t.Logf("VM console (last 12 KiB):\n%s", tailString(console.String(), 12<<10))
		}
	}()

	// Wait for the machine to be ready (from the API), then for the VM to
	// power itself off.
	var id string
	var readyAfter, offAfter time.Duration
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var qemuErr error
	qemuDone := false
	for readyAfter == 0 || !qemuDone {
		select {
		case qemuErr = <-exited:
			qemuDone = true
			offAfter = time.Since(began)
			exited <- qemuErr
		case <-vctx.Done():
			t.Fatalf("watchdog: the VM ran for %v (ready after %v, machine %q)", vmLimit, readyAfter, id)
		case <-tick.C:
		}
		if readyAfter == 0 {
			var list struct {
				Machines []struct {
					ID         string `json:"id"`
					State      string `json:"state"`
					SystemUUID string `json:"system_uuid"`
				} `json:"machines"`
			}
			if _, err := n1.call(n1.token, http.MethodGet, "/api/v1/machines", nil, &list); err == nil {
				for _, m := range list.Machines {
					if strings.EqualFold(m.SystemUUID, uuid) {
						id = m.ID
						if m.State == "ready" {
							readyAfter = time.Since(began)
						}
					}
				}
			}
		}
		if qemuDone && readyAfter == 0 {
			// One last look happened above; the VM is gone.
			t.Fatalf("qemu exited (%v) after %v and machine %q is not ready", qemuErr, offAfter.Round(time.Second), id)
		}
	}
	if qemuErr != nil {
		t.Errorf("qemu exited with %v (want a clean power-off)", qemuErr)
	}
	t.Logf("software-emulated: machine %s ready %v after VM power-on; VM powered off after %v",
		id, readyAfter.Round(100*time.Millisecond), offAfter.Round(100*time.Millisecond))
	var agentLog []string
	for _, line := range strings.Split(console.String(), "\n") {
		if strings.Contains(line, " agent=") {
			agentLog = append(agentLog, strings.TrimSpace(line))
		}
	}
	t.Logf("the agent's log:\n%s", strings.Join(agentLog, "\n"))
	if cluster {
		if l := leaderOfLab(t, nodes); l == serving.name {
			t.Errorf("%s became the leader during the run", l)
		}
	}

	// The record.
	var m struct {
		State      string `json:"state"`
		SystemUUID string `json:"system_uuid"`
		Serial     string `json:"serial"`
		BMC        *struct {
			Driver      string            `json:"driver"`
			Address     string            `json:"address"`
			User        string            `json:"user"`
			Source      string            `json:"source"`
			HasPassword bool              `json:"has_password"`
			Settings    map[string]string `json:"settings"`
			Errors      []string          `json:"errors"`
		} `json:"bmc"`
		Inventory struct {
			Disks []struct{ Name, Serial string }
			NICs  []struct{ Name, MAC string } `json:"nics"`
		} `json:"inventory"`
	}
	for _, n := range nodes[1:] {
		// Every node has the record (read-your-writes: n1 saw it ready).
		var r struct{ State string }
		waitUntil(t, 10*time.Second, n.name+" has machine "+id+" ready", func() bool {
			_, err := n.call(n.token, http.MethodGet, "/api/v1/machines/"+id, nil, &r)
			return err == nil && r.State == "ready"
		})
	}
	if _, err := n1.call(n1.token, http.MethodGet, "/api/v1/machines/"+id, nil, &m); err != nil {
		t.Fatalf("GET machine %s: %v", id, err)
	}
	if m.State != "ready" || !strings.EqualFold(m.SystemUUID, uuid) || m.Serial != serial {
		t.Errorf("machine: state %q uuid %q serial %q, want ready %s %s", m.State, m.SystemUUID, m.Serial, uuid, serial)
	}
	var disks []string
	for _, d := range m.Inventory.Disks {
		disks = append(disks, d.Name)
	}
	slices.Sort(disks)
	if !slices.Equal(disks, []string{"nvme0n1", "vda"}) {
		t.Errorf("disks %v, want [nvme0n1 vda]", disks)
	}
	var macs []string
	for _, nic := range m.Inventory.NICs {
		macs = append(macs, strings.ToLower(nic.MAC))
	}
	slices.Sort(macs)
	if want := []string{mac0, mac1}; !slices.Equal(macs, want) {
		t.Errorf("NIC MACs %v, want %v", macs, want)
	}
	if m.BMC == nil {
		t.Fatal("no BMC on the machine record")
	}
	t.Logf("BMC record: %+v", *m.BMC)
	if m.BMC.Driver != "ipmi" || m.BMC.Source != "in-band" || m.BMC.User != "commissioner" || !m.BMC.HasPassword || m.BMC.Settings["channel"] != "1" {
		t.Errorf("BMC %+v, want an in-band ipmi account commissioner on channel 1 with a password", *m.BMC)
	}
	// ipmi_sim does not implement Set User Payload Access (IPMI v2.0
	// §24.6; it answers 0xC1 "invalid command" over LAN too, with SOL
	// configured): the agent reports that refusal and nothing else.
	for _, e := range m.BMC.Errors {
		if !strings.HasPrefix(e, "enable SOL payload") || !strings.Contains(e, "0xc1") {
			t.Errorf("BMC error %q (only ipmi_sim's refusal of Set User Payload Access is expected)", e)
		}
	}

	// The account is in the BMC itself: ipmi_sim's user list, over LAN.
	out, err := ipmitool("user", "list", "1")
	if err != nil {
		t.Fatalf("ipmitool user list: %v\n%s", err, out)
	}
	found := false
	var named []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && (f[0] == "ID" || f[1] != "true") {
			named = append(named, line)
		}
		if f := strings.Fields(line); len(f) >= 2 && f[1] == "commissioner" {
			found = true
			if !strings.Contains(line, "ADMINISTRATOR") {
				t.Errorf("commissioner is not an administrator on channel 1: %q", line)
			}
		}
	}
	if !found {
		t.Errorf("no commissioner in ipmi_sim's user list:\n%s", out)
	}
	t.Logf("ipmi_sim's named users on channel 1:\n%s", strings.Join(named, "\n"))
}

func waitUntil(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
