//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/lab/deployimage"
	"github.com/rollcall/rollcall/lab/testenv"
)

// The deploy test image boots from its disk under both firmwares and does
// what a deployed machine's first boot must: the test writes a NoCloud
// seed into a copy of the image the way the deploy agent will (mount-free,
// into the root found by its GPT type), boots it in a VM with a bigger
// second disk and a USB stick as decoys, and waits for the phone-home POST
// at an HTTP server on the VM's namespace's loopback, with the seed's
// instance id and hostname. After the VM powers itself off, the root holds
// the tiny init's marker and the hostname, the decoys are untouched, and
// under UEFI the OVMF variable file (a copy, persistent for a next boot)
// has been written.
func TestDeployImageBoots(t *testing.T) {
	if testing.Short() {
		t.Skip("boots an emulated machine twice (about a minute)")
	}
	needDeployVM(t, fwBIOS, fwUEFI)
	testenv.NeedTool(t, "debugfs", "sgdisk", "mkfs.ext4", "mkfs.vfat", "mmd", "mcopy", "grub-mkimage", "grub-mkstandalone", "cp")
	testenv.NeedFile(t, "GRUB for BIOS (Debian package grub-pc-bin)", "/usr/lib/grub/i386-pc/boot.img")
	testenv.NeedFile(t, "GRUB for UEFI (Debian package grub-efi-amd64-bin)", "/usr/lib/grub/x86_64-efi/linux.mod")
	img := buildDeployImage(t, deployimage.Options{})
	for _, fw := range []vmFirmware{fwBIOS, fwUEFI} {
		t.Run(string(fw), func(t *testing.T) { bootDeployImage(t, img, fw) })
	}
}

// buildDeployImage builds (or finds cached under bin/deploy-image) the
// image, logging how long it took.
func buildDeployImage(t *testing.T, opts deployimage.Options) *deployimage.Image {
	t.Helper()
	var log bytes.Buffer
	opts.Log = &log
	img, err := deployimage.BuildImage(t.Context(), opts)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	how := "built"
	if img.Cached {
		how = "cached"
	}
	t.Logf("deploy image %s (%s in %v)", img.Path, how, img.Took.Round(100*time.Millisecond))
	return img
}

// phoneHomeServer answers POST /phone-home/TOKEN inside the namespace and
// hands each form over.
type phoneHomeServer struct {
	Port  int
	Token string
	got   chan url.Values
	mu    sync.Mutex
	wrong []string // requests that did not match
}

func startPhoneHome(t *testing.T, ns *labNS) *phoneHomeServer {
	t.Helper()
	l, err := ns.listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var tok [12]byte
	rand.Read(tok[:])
	s := &phoneHomeServer{Port: l.Addr().(*net.TCPAddr).Port, Token: hex.EncodeToString(tok[:]), got: make(chan url.Values, 4)}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if r.Method != http.MethodPost || r.URL.Path != "/phone-home/"+s.Token || r.ParseForm() != nil {
			s.mu.Lock()
			s.wrong = append(s.wrong, r.Method+" "+r.URL.Path)
			s.mu.Unlock()
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		s.got <- r.PostForm
		w.WriteHeader(http.StatusOK)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return s
}

// guestURL is the server as the VM sees it through user-mode networking.
func (s *phoneHomeServer) guestURL() string {
	return fmt.Sprintf("http://10.0.2.2:%d/phone-home/%s", s.Port, s.Token)
}

// nocloudSeed is the seed the deploy agent writes: meta-data, a multipart
// user-data (the server's part with the hostname and phone_home, then the
// operator's, extra), network-config (DHCP on the NIC with that MAC, named
// eth0), and the datasource list.
func nocloudSeed(instanceID, hostname, fqdn, phoneHome, mac, extra string) map[string][]byte {
	merge := "Merge-Type: list(append)+dict(no_replace,recurse_list)+str()\n"
	userData := "Content-Type: multipart/mixed; boundary=\"RC-SEED\"\nMIME-Version: 1.0\n\n" +
		"--RC-SEED\nContent-Type: text/cloud-config; charset=\"utf-8\"\n" + merge + "\n" +
		"#cloud-config\nhostname: " + hostname + "\nfqdn: " + fqdn + "\nprefer_fqdn_over_hostname: false\n" +
		"phone_home:\n  url: " + phoneHome + "\n  post: all\n  tries: 20\n" +
		"\n--RC-SEED\nContent-Type: text/cloud-config; charset=\"utf-8\"\n" + merge + "\n" +
		"#cloud-config\n" + extra +
		"\n--RC-SEED--\n"
	return map[string][]byte{
		deployimage.SeedDir + "/meta-data":                  []byte("instance-id: " + instanceID + "\nlocal-hostname: " + fqdn + "\n"),
		deployimage.SeedDir + "/user-data":                  []byte(userData),
		deployimage.SeedDir + "/network-config":             []byte("version: 1\nconfig:\n  - type: physical\n    name: eth0\n    mac_address: \"" + mac + "\"\n    subnets: [{type: dhcp}]\n"),
		"/etc/cloud/cloud.cfg.d/99-rollcall-datasource.cfg": []byte("datasource_list: [NoCloud, None]\n"),
	}
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func bootDeployImage(t *testing.T, img *deployimage.Image, fw vmFirmware) {
	var b [4]byte
	rand.Read(b[:])
	sfx := hex.EncodeToString(b[:3])
	dir := t.TempDir()
	target := filepath.Join(dir, "target.raw")
	if err := copyFile(img.Path, target); err != nil {
		t.Fatal(err)
	}
	instanceID := "i-" + sfx + "-" + string(fw)
	mac := fmt.Sprintf("52:54:00:%02x:%02x:%02x", b[0], b[1], b[2])
	hostname := "tiny-" + sfx
	fqdn := hostname + ".lab.example"
	ns := newLabNS(t, "rc-dimg-"+sfx)
	ph := startPhoneHome(t, ns)
	if err := deployimage.WriteFiles(t.Context(), target, nocloudSeed(instanceID, hostname, fqdn, ph.guestURL(), mac, "")); err != nil {
		t.Fatal(err)
	}
	second := blankDisk(t, filepath.Join(dir, "second.raw"), 2<<30)
	decoy := filepath.Join(dir, "usb.raw")
	decoyData := bytes.Repeat([]byte("rollcall usb decoy\n"), 1<<16)
	if err := os.WriteFile(decoy, decoyData, 0o644); err != nil {
		t.Fatal(err)
	}
	decoySum := fileSum(t, decoy)

	vm := startDeployVM(t, ns, deployVMOptions{Name: string(fw), Firmware: fw, MAC: mac, Limit: 3 * time.Minute, Disks: []vmDisk{
		{Path: target, Bus: "virtio", Serial: "RC-TARGET-1", Boot: true},
		{Path: second, Bus: "nvme", Serial: "RC-NVME-BIG"},
		{Path: decoy, Bus: "usb", Serial: "RC-USB-DECOY"},
	}})
	var form url.Values
	select {
	case form = <-ph.got:
	case <-time.After(150 * time.Second):
		t.Fatalf("no phone-home within 150 s (VM ran %v; wrong requests %v)", vm.ran().Round(time.Second), ph.wrong)
	}
	phoned := vm.ran()
	if err := vm.wait(60 * time.Second); err != nil {
		t.Fatalf("qemu did not power off cleanly: %v", err)
	}
	t.Logf("%s: phoned home %v after power-on, powered off after %v", fw, phoned.Round(100*time.Millisecond), vm.ran().Round(100*time.Millisecond))

	// The form is cloud-init's: hostname and fqdn from the datasource
	// (local-hostname), a host key made at first boot, N/A for the rest.
	for k, want := range map[string]string{"instance_id": instanceID, "hostname": hostname, "fqdn": fqdn,
		"pub_key_rsa": "N/A", "pub_key_dsa": "N/A", "pub_key_ecdsa": "N/A"} {
		if got := form.Get(k); got != want {
			t.Errorf("phone-home %s = %q, want %q", k, got, want)
		}
	}
	if k := form.Get("pub_key_ed25519"); !strings.HasPrefix(k, "ssh-ed25519 AAAA") {
		t.Errorf("phone-home pub_key_ed25519 = %q", k)
	}
	ctx := context.Background()
	marker, err := deployimage.ReadFile(ctx, target, deployimage.MarkerPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"booted from disk\n", "firmware: " + string(fw) + "\n", "instance-id: " + instanceID + "\n",
		"hostname: " + hostname + "\n", "fqdn: " + fqdn + "\n", "phone-home: 200 OK\n"} {
		if !strings.Contains(string(marker), want) {
			t.Errorf("marker %s lacks %q:\n%s", deployimage.MarkerPath, want, marker)
		}
	}
	if strings.Contains(string(marker), "error:") {
		t.Errorf("marker reports an error:\n%s", marker)
	}
	if h, err := deployimage.ReadFile(ctx, target, "/etc/hostname"); err != nil || string(h) != hostname+"\n" {
		t.Errorf("/etc/hostname = %q, %v; want %q", h, err, hostname)
	}
	if got := fileSum(t, decoy); got != decoySum {
		t.Error("the USB decoy was written to")
	}
	if st, err := os.Stat(second); err != nil || st.Size() != 2<<30 {
		t.Errorf("second disk: %v, %v", st, err)
	} else {
		f, _ := os.Open(second)
		head := make([]byte, 1<<20)
		f.ReadAt(head, 0)
		f.Close()
		if !bytes.Equal(head, make([]byte, len(head))) {
			t.Error("the second disk was written to")
		}
	}
	if fw == fwUEFI {
		if fileSum(t, vm.Vars) == fileSum(t, ovmfVars) {
			t.Errorf("OVMF did not write its variable file %s", vm.Vars)
		}
	}
	if !strings.Contains(vm.Console(), `msg="phoned home"`) {
		t.Error("the console does not say the tiny init phoned home")
	}
}
