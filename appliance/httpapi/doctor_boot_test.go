package httpapi

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/lab/testenv"
)

// The doctor's boot-files check against real servers: tftpd-hpa holding
// one of the two loaders, an HTTP server holding the other. Each missing
// loader is named with the protocol that lacks it; a VLAN whose TFTP
// address nobody answers on says so; a VLAN served whole passes.
func TestDoctorBootFiles(t *testing.T) {
	tftpd := testenv.NeedTool(t, "in.tftpd")[0]
	dir := t.TempDir()
	// tftpd-hpa chroots here and serves as nobody.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ipxe.efi"), []byte(strings.Repeat("efi!", 300)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "undionly.kpxe"), []byte("kpxe"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A free UDP port for tftpd-hpa, and one where nothing listens.
	port := func() uint16 {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return uint16(c.LocalAddr().(*net.UDPAddr).Port)
	}
	lo := netip.MustParseAddr("127.0.0.1")
	tftp, silent := netip.AddrPortFrom(lo, port()), netip.AddrPortFrom(lo, port())
	cmd := exec.Command(tftpd, "--foreground", "--address", tftp.String(), "--secure", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	web := func(files ...string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for _, f := range files {
				if r.Method == http.MethodHead && r.URL.Path == "/boot/"+f {
					return
				}
			}
			http.NotFound(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	files := []string{"undionly.kpxe", "ipxe.efi"}
	served := []ServedNetwork{
		{VLAN: "VLAN lab/1", TFTP: tftp, Files: files, HTTP: web("undionly.kpxe", "ipxe.efi")},
		{VLAN: "VLAN lab/2", TFTP: tftp, Files: append(files, "snponly.efi"), HTTP: web("undionly.kpxe", "ipxe.efi", "snponly.efi")},
		{VLAN: "VLAN lab/3", TFTP: tftp, Files: files, HTTP: web("undionly.kpxe")},
		{VLAN: "VLAN lab/4", TFTP: silent, Files: files[:1], HTTP: web("undionly.kpxe")},
	}
	served = append(served, ServedNetwork{VLAN: "VLAN lab/5", Files: files}) // no address: not asked
	s := &Server{}
	var d *doctor
	// tftpd-hpa may still be starting: the whole check is asked again.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		d = &doctor{}
		s.doctorBoot(context.Background(), d, served)
		if len(d.checks) == 4 && d.checks[0].Status == wire.DoctorOK || time.Now().After(deadline) {
			break
		}
	}
	want := []struct{ status, text string }{
		{wire.DoctorOK, "VLAN lab/1: undionly.kpxe, ipxe.efi served over TFTP at " + tftp.String()},
		{wire.DoctorFail, "TFTP " + tftp.String() + " snponly.efi: refused"},
		{wire.DoctorFail, "/boot/ipxe.efi: 404 Not Found"},
		{wire.DoctorFail, "TFTP " + silent.String() + " undionly.kpxe: no answer"},
	}
	if len(d.checks) != len(want) {
		t.Fatalf("%d checks, want %d: %+v", len(d.checks), len(want), d.checks)
	}
	for i, w := range want {
		c := d.checks[i]
		if c.Name != "boot files" || c.Status != w.status || !strings.Contains(c.Message, w.text) || (c.Status == wire.DoctorFail && c.Fix == "") {
			t.Errorf("check %d: %+v, want %s with %q", i, c, w.status, w.text)
		}
	}
	if strings.Contains(d.checks[1].Message, "ipxe.efi") {
		t.Errorf("VLAN lab/2 names a loader that is served: %s", d.checks[1].Message)
	}
}
