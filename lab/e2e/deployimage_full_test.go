//go:build e2e && e2e_full

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/lab/deployimage"
	"github.com/rollcall/rollcall/lab/testenv"
)

// `make e2e-full`: a Debian root with the real cloud-init, built by
// mmdebstrap from Debian's packages (lab/deployimage, Options.Debian), gets
// the same NoCloud seed the tiny image does, boots under SeaBIOS and OVMF,
// and cloud-init's own phone_home reaches the test's server with the
// instance id and hostname; the operator's part of the user-data records
// the live hostname, and cloud-init powers the machine off. The qcow2 copy
// is booted under UEFI (what `rollcall os import` is given). Minutes per
// boot under TCG: not part of `make test`.
func TestDeployDebianCloudInit(t *testing.T) {
	needDeployVM(t, fwBIOS, fwUEFI)
	testenv.NeedTool(t, "mmdebstrap", "debugfs", "sgdisk", "mkfs.ext4", "mkfs.vfat", "mmd", "mcopy", "grub-mkimage", "grub-mkstandalone", "qemu-img", "cp")
	img := buildDeployImage(t, deployimage.Options{Debian: true})
	for _, c := range []struct {
		fw     vmFirmware
		format string
	}{{fwBIOS, "raw"}, {fwUEFI, "qcow2"}} {
		t.Run(string(c.fw)+"-"+c.format, func(t *testing.T) { bootDebian(t, img, c.fw, c.format) })
	}
}

func bootDebian(t *testing.T, img *deployimage.Image, fw vmFirmware, format string) {
	var b [4]byte
	rand.Read(b[:])
	sfx := hex.EncodeToString(b[:3])
	dir := t.TempDir()
	target := filepath.Join(dir, "target.raw")
	if err := copyFile(img.Path, target); err != nil {
		t.Fatal(err)
	}
	instanceID := "i-" + sfx + "-debian-" + string(fw)
	hostname := "deb-" + sfx
	fqdn := hostname + ".lab.example"
	mac := fmt.Sprintf("52:54:00:%02x:%02x:%02x", b[0], b[1], b[2])
	ns := newLabNS(t, "rc-ddeb-"+sfx)
	ph := startPhoneHome(t, ns)
	extra := "runcmd:\n  - [sh, -c, 'mkdir -p /var/lib/rollcall && hostname > /var/lib/rollcall/hostname-at-runcmd']\n" +
		"power_state: {mode: poweroff, delay: now, message: rollcall e2e-full done}\n"
	if err := deployimage.WriteFiles(t.Context(), target, nocloudSeed(instanceID, hostname, fqdn, ph.guestURL(), mac, extra)); err != nil {
		t.Fatal(err)
	}
	disk := vmDisk{Path: target, Bus: "virtio", Serial: "RC-TARGET-DEB", Boot: true}
	if format == "qcow2" {
		// The seed goes into the raw copy; the VM boots its qcow2 conversion.
		q := filepath.Join(dir, "target.qcow2")
		if out, err := runCmd("qemu-img", "convert", "-f", "raw", "-O", "qcow2", target, q); err != nil {
			t.Fatalf("qemu-img: %v\n%s", err, out)
		}
		disk = vmDisk{Path: q, Format: "qcow2", Bus: "virtio", Serial: "RC-TARGET-DEB", Boot: true}
	}
	second := blankDisk(t, filepath.Join(dir, "second.raw"), 4<<30)
	decoy := blankDisk(t, filepath.Join(dir, "usb.raw"), 64<<20)
	vm := startDeployVM(t, ns, deployVMOptions{Name: "debian-" + string(fw), Firmware: fw, MAC: mac, MemMiB: 1024, Limit: 12 * time.Minute, Disks: []vmDisk{
		disk,
		{Path: second, Bus: "nvme", Serial: "RC-NVME-BIG"},
		{Path: decoy, Bus: "usb", Serial: "RC-USB-DECOY"},
	}})
	var form url.Values
	select {
	case form = <-ph.got:
	case <-time.After(10 * time.Minute):
		t.Fatalf("no phone-home from cloud-init within 10 min (wrong requests %v)", ph.wrong)
	}
	phoned := vm.ran()
	if err := vm.wait(3 * time.Minute); err != nil {
		t.Fatalf("qemu did not power off (cloud-init's power_state): %v", err)
	}
	t.Logf("debian %s (%s): cloud-init phoned home %v after power-on, powered off after %v", fw, format,
		phoned.Round(time.Second), vm.ran().Round(time.Second))
	for k, want := range map[string]string{"instance_id": instanceID, "hostname": hostname, "fqdn": fqdn} {
		if got := form.Get(k); got != want {
			t.Errorf("phone-home %s = %q, want %q", k, got, want)
		}
	}
	for _, k := range []string{"pub_key_ed25519", "pub_key_ecdsa", "pub_key_rsa"} {
		if !strings.HasPrefix(form.Get(k), "ssh-") && !strings.HasPrefix(form.Get(k), "ecdsa-") {
			t.Errorf("phone-home %s = %q: want the host key sshd made at first boot", k, form.Get(k))
		}
	}
	if format == "raw" {
		ctx := context.Background()
		if h, err := deployimage.ReadFile(ctx, target, "/var/lib/rollcall/hostname-at-runcmd"); err != nil || strings.TrimSpace(string(h)) != hostname {
			t.Errorf("hostname at runcmd = %q, %v; want %q", h, err, hostname)
		}
		if h, err := deployimage.ReadFile(ctx, target, "/etc/hostname"); err != nil || strings.TrimSpace(string(h)) != hostname {
			t.Errorf("/etc/hostname = %q, %v; want %q", h, err, hostname)
		}
	}
}
