//go:build e2e && e2e_full

package e2e

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/lab/deployimage"
	"github.com/rollcall/rollcall/lab/testenv"
)

// TestDeployDebianViaRollcall (`make e2e-full`): the Debian image with the
// real cloud-init (lab/deployimage, Options.Debian) deployed through
// Rollcall end to end, as an operator would. Its qcow2 is imported with
// `rollcall os import debian FILE.qcow2 -family debian` (qemu-img convert
// and zstd run in the appliance); a VM is commissioned, then
// `rollcall deploy ID debian -hostname H -user-data FILE -ssh-key FILE
// -watch`: the agent writes the disk and the seed, the VM reboots from
// its disk, Debian's cloud-init reads the seed, trusts the cluster CA
// (ca_certs), phones home to the node's /api/v1/phone-home/<token> and,
// as the operator's part asks, powers the machine off. On the powered-off
// disk (debugfs): /etc/hostname, the key in root's and the default user's
// authorized_keys, the network-config rendered for ifupdown. Then
// `rollcall release` wipes it and the machine is ready.
func TestDeployDebianViaRollcall(t *testing.T) {
	needDeployVM(t, fwBIOS)
	testenv.NeedTool(t, "mmdebstrap", "debugfs", "sgdisk", "mkfs.ext4", "mkfs.vfat", "mmd", "mcopy", "grub-mkimage", "grub-mkstandalone", "qemu-img", "zstd", "cp")
	kernel, initrd := commissioningImage(t)
	img := buildDeployImage(t, deployimage.Options{Debian: true})
	if img.QCOW2 == "" {
		t.Fatalf("the Debian image %s has no qcow2 copy", img.Path)
	}
	// UEFI works the same way (TestVMDeploy covers its boot entry); one
	// firmware keeps this test near a quarter of an hour under TCG.
	for _, fw := range []vmFirmware{fwBIOS} {
		t.Run(string(fw), func(t *testing.T) { deployDebian(t, fw, kernel, initrd, img) })
	}
}

// debianDefaultUser is the default user of Debian's cloud.cfg
// (system_info.default_user), who gets the deployment's SSH keys.
const debianDefaultUser = "debian"

func deployDebian(t *testing.T, fw vmFirmware, kernel, initrd string, img *deployimage.Image) {
	began := time.Now()
	dir := t.TempDir()
	target := blankDisk(t, filepath.Join(dir, "target.raw"), 3<<30)
	second := blankDisk(t, filepath.Join(dir, "second.raw"), 4<<30)
	decoy := filepath.Join(dir, "usb.raw")
	if err := os.WriteFile(decoy, bytes.Repeat([]byte("rollcall usb decoy\n"), (64<<20)/19), 0o644); err != nil {
		t.Fatal(err)
	}
	decoySum := fileSum(t, decoy)
	lab := newDeployLab(t, fw, dir, kernel, initrd, 1024, []vmDisk{
		{Path: target, Bus: "virtio", Serial: "RC-TARGET-DEB", Boot: true},
		{Path: second, Bus: "nvme", Serial: "RC-NVME-BIG"},
		{Path: decoy, Bus: "usb", Serial: "RC-USB-DECOY"},
	})
	n1 := lab.n1
	importAt := time.Now()
	out := n1.cli(t, "os", "import", "debian", img.QCOW2, "-family", "debian")
	t.Logf("os import debian (qcow2: convert, compress) took %v: %s", time.Since(importAt).Round(100*time.Millisecond), out)
	lab.commission(t)

	var b [3]byte
	rand.Read(b[:])
	host := "deb-" + hex.EncodeToString(b[:])
	key := sshEd25519Key(t, "e2e@rollcall")
	keyFile, udFile := filepath.Join(dir, "key.pub"), filepath.Join(dir, "user-data")
	// The operator's part: record the live hostname at runcmd, then stop
	// the machine after cloud-init's final stage (phone_home runs in it,
	// before power_state_change).
	ud := "#cloud-config\nruncmd:\n  - [sh, -c, 'mkdir -p /var/lib/rollcall && hostname > /var/lib/rollcall/hostname-at-runcmd']\n" +
		"power_state: {mode: poweroff, delay: now, message: rollcall e2e-full done}\n"
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(udFile, []byte(ud), 0o644); err != nil {
		t.Fatal(err)
	}

	run := lab.deploy(t, 20*time.Minute, "debian", "-hostname", host, "-user-data", udFile, "-ssh-key", keyFile)
	phonedAt := lab.waitPhonedHome(t, run.vm, 15*time.Minute)
	if err := run.vm.wait(3 * time.Minute); err != nil {
		t.Fatalf("qemu did not power off (cloud-init's power_state): %v", err)
	}
	offAt := time.Now()
	console := run.vm.Console()
	if n := strings.Count(console, "Linux version "); n != 2 {
		t.Errorf("the deploy VM booted Linux %d times, want 2 (the agent, then Debian from its disk)", n)
	}
	// cloud-init's final_message goes to /dev/console (ttyS0) when its
	// final stage ends, just before power_state_change.
	if !regexp.MustCompile(`Cloud-init v\. \S+ finished at`).MatchString(console) {
		t.Errorf("the console does not show cloud-init's final message:\n%s", tailString(console, 4096))
	}

	job, _ := latestJob(n1, lab.id, "deploy")
	m, err := lab.machine()
	if err != nil {
		t.Fatal(err)
	}
	if m.State != "deployed" || m.Deployment == nil || m.Deployment.OS != "debian" || m.Deployment.Job != job.ID || m.Deployment.PhonedHome.IsZero() {
		t.Errorf("machine %s: state %s, deployment %+v; want deployed with debian, job %s, phoned home", lab.id, m.State, m.Deployment, job.ID)
	}
	if job.State != "done" || job.Disk.Serial != "RC-TARGET-DEB" || job.Image == nil {
		t.Fatalf("deploy job %+v: want done on the disk with serial RC-TARGET-DEB", job)
	}
	// cloud-init posts its fqdn (the job's, here the hostname: the subnet
	// has no domain) and hostname; the node keeps what it was told.
	if job.PhoneHost != host {
		t.Errorf("the job's phone-home host is %q, want %q (what cloud-init posted)", job.PhoneHost, host)
	}
	writing := checkJobSteps(t, fw, job)
	if st, err := os.Stat(img.Path); err != nil {
		t.Fatal(err)
	} else if sum := rangeSum(t, img.Path, 0, st.Size()); job.Image.RawSHA256 != sum {
		t.Errorf("the job's raw_sha256 %s is not the raw image's %s (qemu-img convert of the qcow2 changed it)", job.Image.RawSHA256, sum)
	}
	checkTargetLayout(t, img.Path, target)
	checkSeed(t, target, lab.id, job.ID)

	ctx := t.Context()
	read := func(name string) string {
		b, err := deployimage.ReadFile(ctx, target, name)
		if err != nil {
			t.Errorf("%s on the target: %v", name, err)
		}
		return string(b)
	}
	userData := read(deployimage.SeedDir + "/user-data")
	scheme := "plain HTTP"
	if strings.Contains(userData, "url: \"https://") {
		scheme = "HTTPS"
		if !strings.Contains(userData, "ca_certs:") {
			t.Error("the user-data phones home over HTTPS but carries no ca_certs")
		}
	}
	if got := strings.TrimSpace(read("/etc/hostname")); got != host {
		t.Errorf("/etc/hostname = %q, want %q", got, host)
	}
	if got := strings.TrimSpace(read("/var/lib/rollcall/hostname-at-runcmd")); got != host {
		t.Errorf("the hostname at the operator's runcmd = %q, want %q", got, host)
	}
	for _, f := range []string{"/root/.ssh/authorized_keys", "/home/" + debianDefaultUser + "/.ssh/authorized_keys"} {
		// root's line may carry cloud-init's no-login prefix when
		// disable_root is true; the deployment sets it false.
		if got := read(f); !containsLine(got, key) {
			t.Errorf("%s lacks the deployment's key %q:\n%s", f, key, got)
		}
	}
	// The seed's network-config, rendered by cloud-init for ifupdown.
	netcfg := read(deployimage.SeedDir + "/network-config")
	eni := read("/etc/network/interfaces.d/50-cloud-init")
	names := ethernetNames(netcfg)
	if len(names) == 0 {
		t.Errorf("the seed's network-config names no ethernet:\n%s", netcfg)
	}
	for _, n := range names {
		if !strings.Contains(eni, "iface "+n+" ") {
			t.Errorf("cloud-init's ifupdown config has no iface %s (network-config not applied):\n--- network-config\n%s\n--- 50-cloud-init\n%s", n, netcfg, eni)
		}
	}
	// A static address the plan gave (DHCP has none) is ifupdown's: the
	// items of addresses lists ("- "), not a route's to: "0.0.0.0/0".
	for _, a := range regexp.MustCompile(`- "([0-9.]+)/[0-9]+"`).FindAllStringSubmatch(netcfg, -1) {
		if !strings.Contains(eni, "address "+a[1]) {
			t.Errorf("cloud-init's ifupdown config lacks the address %s of the network-config:\n%s", a[1], eni)
		}
	}
	checkUntouched(t, decoy, decoySum, second)

	total := run.deployedAt.Sub(run.at)
	t.Logf("BENCHMARK debian %s (TCG): deploy → deployed %v (writing %v), phoned home %v after deploy (%v after deployed), powered off %v after deploy; phone_home over %s",
		fw, total.Round(100*time.Millisecond), writing.Round(100*time.Millisecond), phonedAt.Sub(run.at).Round(100*time.Millisecond),
		phonedAt.Sub(run.deployedAt).Round(100*time.Millisecond), offAt.Sub(run.at).Round(100*time.Millisecond), scheme)

	lab.release(t, target)
	checkUntouched(t, decoy, decoySum, second)
	t.Logf("debian %s: the whole run took %v", fw, time.Since(began).Round(time.Second))
}

// sshEd25519Key is a fresh OpenSSH ed25519 public key line.
func sshEd25519Key(t *testing.T, comment string) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var blob []byte
	for _, f := range [][]byte{[]byte("ssh-ed25519"), pub} {
		blob = append(blob, byte(len(f)>>24), byte(len(f)>>16), byte(len(f)>>8), byte(len(f)))
		blob = append(blob, f...)
	}
	return "ssh-ed25519 " + base64.StdEncoding.EncodeToString(blob) + " " + comment
}

func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == line || strings.HasSuffix(strings.TrimSpace(l), " "+line) {
			return true
		}
	}
	return false
}

// ethernetNames are the keys under a version 2 network-config's
// ethernets (the renderer's output names them).
func ethernetNames(cfg string) []string {
	var names []string
	in := false
	for _, l := range strings.Split(cfg, "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		switch {
		case indent == 0:
			in = strings.TrimSpace(l) == "ethernets:"
		case in && indent == 2 && strings.HasSuffix(strings.TrimSpace(l), ":"):
			names = append(names, strings.Trim(strings.TrimSuffix(strings.TrimSpace(l), ":"), `"`))
		}
	}
	return names
}
