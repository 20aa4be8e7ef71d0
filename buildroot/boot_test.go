//go:build e2e_iso

package buildroot

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/rollcall/rollcall/lab/testenv"
)

// The unattended answers the boot test puts on the ISO's default entry:
// QEMU's user network (10.0.2.0/24, gateway 10.0.2.2, DNS 10.0.2.3).
const testAnswers = "rollcall.setup=name=rc1,addr=10.0.2.15/24,gw=10.0.2.2,dns=10.0.2.3"

// TestBootISO boots the ISO under TCG, once under SeaBIOS from a CD and
// once under OVMF with Secure Boot on from a USB stick: the unattended
// answers set the static address, the node creates a cluster, the API
// answers through a port forwarded inside a network namespace the test
// owns (QEMU's user network with restrict=on: nothing leaves it), and the
// serial console shows the web UI's address and the CA fingerprint, which
// must be the CA the API serves. The commissioning image must have been
// imported and the iPXE binaries must be served.
func TestBootISO(t *testing.T) {
	testenv.NeedNetns(t, "QEMU inside a namespace of its own", "qemu-system-x86_64")
	needBuildTools(t)
	root := moduleRoot(t)
	comm := filepath.Join(root, "bin", "image")
	testenv.NeedFile(t, "the commissioning image (make image)", filepath.Join(comm, "initrd.img"))
	iso := filepath.Join(t.TempDir(), "rollcall.iso")
	r, err := Build(Config{Out: iso, Source: root, Cache: filepath.Join(root, "bin", "iso", "debs"), Commissioning: comm,
		Append: testAnswers, Timeout: 0, Epoch: 1700000000, Version: "boot-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ISO %.1f MB built in %s", float64(r.Size)/1e6, r.Took.Round(time.Second))
	commInitrd, _ := os.Stat(filepath.Join(comm, "initrd.img"))
	undi, _ := os.Stat("/usr/lib/ipxe/undionly.kpxe")

	for _, c := range []struct {
		name, firmware string
		args           []string
	}{
		{"seabios-cdrom", "firmware bios", []string{"-machine", "pc", "-cdrom", iso}},
		{"ovmf-secureboot-usb", "firmware uefi, secure boot on", uefiArgs(t, iso)},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := newNS(t)
			port := 18080
			args := append([]string{"netns", "exec", ns, "qemu-system-x86_64", "-accel", "tcg", "-m", "2048", "-smp", "2",
				"-display", "none", "-no-reboot", "-monitor", "none",
				"-netdev", fmt.Sprintf("user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:%d-10.0.2.15:8080", port),
				"-device", "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56"}, c.args...)
			serial := filepath.Join(t.TempDir(), "serial.log")
			args = append(args, "-serial", "file:"+serial)
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			start := time.Now()
			qemu := exec.CommandContext(ctx, "ip", args...)
			qemu.Stdout, qemu.Stderr = os.Stderr, os.Stderr
			if err := qemu.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				qemu.Process.Kill()
				qemu.Wait()
				if t.Failed() {
					b, _ := os.ReadFile(serial)
					t.Logf("serial console:\n%s", b)
				}
			}()

			web, fp := waitBanner(t, ctx, serial)
			up := time.Since(start)
			if b, _ := os.ReadFile(serial); !strings.Contains(string(b), "Rollcall boot-test: "+c.firmware) {
				t.Errorf("the console does not say %q", c.firmware)
			}
			client := nsClient(ns)
			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			var health struct {
				OK     bool   `json:"ok"`
				Node   string `json:"node"`
				Leader string `json:"leader"`
			}
			getJSON(t, client, base+"/api/v1/health", &health)
			apiAt := time.Since(start)
			if !health.OK || health.Node != "rc1" || health.Leader != "rc1" {
				t.Errorf("health: %+v", health)
			}
			if web != "http://10.0.2.15:8080/" {
				t.Errorf("the console shows web UI %q", web)
			}
			caPEM := get(t, client, base+"/ca.pem")
			blk, _ := pem.Decode(caPEM)
			if blk == nil {
				t.Fatalf("/ca.pem: %q", caPEM)
			}
			cert, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(cert.Raw); hex.EncodeToString(sum[:]) != fp {
				t.Errorf("the console shows CA fingerprint %s, the API serves a CA with %x", fp, sum)
			}
			if n := headSize(t, client, base+"/images/commissioning/initrd"); n != commInitrd.Size() {
				t.Errorf("the commissioning initrd is served with %d bytes, the ISO carries %d", n, commInitrd.Size())
			}
			if n := headSize(t, client, base+"/boot/undionly.kpxe"); n != undi.Size() {
				t.Errorf("undionly.kpxe is served with %d bytes, Debian's is %d", n, undi.Size())
			}
			t.Logf("%s: banner on the console %s after QEMU started, API answered at %s",
				c.name, up.Round(100*time.Millisecond), apiAt.Round(100*time.Millisecond))
		})
	}
}

// uefiArgs boots OVMF with Secure Boot enforced (Microsoft's keys
// enrolled, which sign Debian's shim) from the ISO written to a USB
// stick.
func uefiArgs(t *testing.T, iso string) []string {
	code := testenv.NeedFile(t, "OVMF with Secure Boot (Debian's ovmf)", "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd")
	vars := testenv.NeedFile(t, "OVMF's variables with Microsoft's keys", "/usr/share/OVMF/OVMF_VARS_4M.ms.fd")
	b, err := os.ReadFile(vars)
	if err != nil {
		t.Fatal(err)
	}
	myVars := filepath.Join(t.TempDir(), "vars.fd")
	if err := os.WriteFile(myVars, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"-machine", "q35,smm=on", "-global", "driver=cfi.pflash01,property=secure,value=on",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + code,
		"-drive", "if=pflash,format=raw,unit=1,file=" + myVars,
		"-device", "qemu-xhci", "-drive", "if=none,id=stick,format=raw,readonly=on,file=" + iso,
		"-device", "usb-storage,drive=stick,bootindex=0"}
}

var (
	webRE = regexp.MustCompile(`web UI:\s+(\S+)`)
	fpRE  = regexp.MustCompile(`CA fingerprint: sha256:([0-9a-f]{64})`)
)

// waitBanner follows the serial console until the init shows the node is
// up, and returns the web UI address and CA fingerprint it shows.
func waitBanner(t *testing.T, ctx context.Context, serial string) (web, fp string) {
	t.Helper()
	for ctx.Err() == nil {
		b, _ := os.ReadFile(serial)
		s := string(b)
		if strings.Contains(s, "Kernel panic") {
			t.Fatal("kernel panic on the console")
		}
		if i := strings.Index(s, "is up"); i >= 0 {
			w, f := webRE.FindStringSubmatch(s[i:]), fpRE.FindStringSubmatch(s[i:])
			if w != nil && f != nil {
				return w[1], f[1]
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatal("the console never showed the node up")
	return "", ""
}

func newNS(t *testing.T) string {
	t.Helper()
	name := "rciso" + strconv.Itoa(os.Getpid()) + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v\n%s", err, out)
	}
	return name
}

// nsClient dials from inside the namespace: each connection's socket is
// made on a thread switched into it (and that thread is never reused).
func nsClient(ns string) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		type res struct {
			c   net.Conn
			err error
		}
		ch := make(chan res, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			h, err := netns.GetFromName(ns)
			if err == nil {
				err = netns.Set(h)
				h.Close()
			}
			if err != nil {
				ch <- res{nil, err}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			ch <- res{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

func get(t *testing.T, c *http.Client, url string) []byte {
	t.Helper()
	var last error
	for range 20 {
		resp, err := c.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return b
			}
			err = fmt.Errorf("%s: %s", resp.Status, b)
		}
		last = err
		time.Sleep(time.Second)
	}
	t.Fatalf("GET %s: %v", url, last)
	return nil
}

func getJSON(t *testing.T, c *http.Client, url string, v any) {
	t.Helper()
	if err := json.Unmarshal(get(t, c, url), v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func headSize(t *testing.T, c *http.Client, url string) int64 {
	t.Helper()
	resp, err := c.Head(url)
	if err != nil {
		t.Fatalf("HEAD %s: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD %s: %s", url, resp.Status)
	}
	return resp.ContentLength
}
