//go:build linux

package initsys

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rollcall/rollcall/agent/sysinit"
	"github.com/rollcall/rollcall/appliance/pki"
)

// Layout of the ISO's initramfs, as buildroot writes it.
const (
	RollcallBin    = "/usr/bin/rollcall"
	CommissionDir  = "/usr/share/rollcall/commissioning" // vmlinuz, initrd.img
	DataDir        = "/data"
	VersionFile    = "/etc/rollcall/version"
	CommissionName = "commissioning"
)

// alwaysModules are loaded whatever the hardware: no device asks for
// them by modalias (ext4 asks for crc32c through modprobe, which this
// init does not provide; efivarfs is a module in Debian's kernel).
var alwaysModules = []string{"crc32c_generic", "efivarfs", "ext4", "vfat", "nls_cp437", "nls_ascii", "isofs"}

// Run is PID 1. It returns only when it cannot go on; the caller then
// waits rather than exit (PID 1 exiting panics the kernel).
func Run(ctx context.Context, log *slog.Logger, out io.Writer) error {
	if err := sysinit.Mount(); err != nil {
		log.Warn("mount", "err", err)
	}
	version := strings.TrimSpace(readFile(VersionFile))
	fmt.Fprintf(out, "\nRollcall %s: starting\n", version)
	if err := sysinit.WaitForEntropy(); err != nil {
		log.Warn("entropy", "err", err)
	}
	modDir := filepath.Join("/lib/modules", sysinit.Release())
	start := time.Now()
	loaded, err := sysinit.LoadByModalias(modDir, alwaysModules, log)
	if err != nil {
		log.Warn("modules", "err", err)
	}
	log.Info("drivers loaded by modalias", "count", len(loaded), "took", time.Since(start).Round(time.Millisecond), "modules", strings.Join(loaded, " "))
	if err := sysinit.MountEFIVars(); err != nil {
		log.Warn("efivarfs", "err", err)
	}
	fmt.Fprintf(out, "Rollcall %s: firmware %s\n", version, firmwareMode())
	if err := sysinit.LinkUp("lo"); err != nil {
		log.Warn("lo up", "err", err)
	}
	nics := sysinit.WaitForNICs(2*time.Second, 15*time.Second)
	log.Info("network interfaces", "names", strings.Join(nics, " "))

	a, unattended, err := FromCmdline(readFile("/proc/cmdline"))
	if err != nil {
		fmt.Fprintf(out, "\nthe unattended answers on the kernel command line are refused:\n%v\nstarting the setup on the console instead\n\n", err)
	}
	if !unattended {
		return interactive(ctx, log)
	}
	addr, err := configure(ctx, a, log)
	if err != nil {
		fmt.Fprintf(out, "\nnetwork setup failed: %v\nstarting the setup on the console instead\n\n", err)
		return interactive(ctx, log)
	}
	return serve(ctx, a, addr, log, out)
}

// configure applies the answers' network settings to the running system
// and returns the address the node listens on.
func configure(ctx context.Context, a Answers, log *slog.Logger) (netip.Addr, error) {
	if err := unix.Sethostname([]byte(a.Name)); err != nil {
		log.Warn("hostname", "err", err)
	}
	os.MkdirAll("/etc/rollcall", 0o755)
	var resolv strings.Builder
	for _, d := range a.DNS {
		fmt.Fprintf(&resolv, "nameserver %s\n", d)
	}
	if err := os.WriteFile("/etc/resolv.conf", []byte(resolv.String()), 0o644); err != nil {
		log.Warn("resolv.conf", "err", err)
	}
	if len(a.NTP) > 0 {
		os.WriteFile("/etc/rollcall/ntp", []byte(strings.Join(a.NTP, "\n")+"\n"), 0o644)
	}
	ifname, err := pickInterface(a.Interface)
	if err != nil {
		return netip.Addr{}, err
	}
	if a.DHCP {
		leases, err := sysinit.Network(ctx, 60*time.Second, log)
		if err != nil {
			return netip.Addr{}, err
		}
		for _, l := range leases {
			if l.Interface == ifname {
				ip, _ := netip.AddrFromSlice(l.IP.To4())
				return ip, nil
			}
		}
		return netip.Addr{}, fmt.Errorf("%s got no DHCP lease (other interfaces did)", ifname)
	}
	if err := sysinit.LinkUp(ifname); err != nil {
		return netip.Addr{}, fmt.Errorf("%s up: %w", ifname, err)
	}
	if err := sysinit.AddAddress(ifname, a.Address); err != nil {
		return netip.Addr{}, err
	}
	if a.Gateway.IsValid() {
		if err := sysinit.AddDefaultRoute(ifname, a.Gateway); err != nil {
			return netip.Addr{}, err
		}
	}
	log.Info("static address", "iface", ifname, "addr", a.Address, "gw", a.Gateway)
	return a.Address.Addr(), nil
}

// pickInterface resolves iface= (a name or a MAC) against the Ethernet
// NICs present; empty picks the first by name.
func pickInterface(want string) (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	var names []string
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 || len(ifc.HardwareAddr) != 6 {
			continue
		}
		if want != "" && (ifc.Name == want || strings.EqualFold(ifc.HardwareAddr.String(), want)) {
			return ifc.Name, nil
		}
		names = append(names, ifc.Name)
	}
	sort.Strings(names)
	if want != "" {
		return "", fmt.Errorf("iface=%s: no such interface (there are: %s)", want, strings.Join(names, ", "))
	}
	if len(names) == 0 {
		return "", errors.New("no Ethernet interface: the ISO carries no driver for this machine's NIC, or none is connected")
	}
	return names[0], nil
}

// serve runs `rollcall serve` and keeps it running; on a new cluster's
// first start it imports the commissioning image; whenever the API comes
// up it shows where to reach it.
func serve(ctx context.Context, a Answers, ip netip.Addr, log *slog.Logger, out io.Writer) error {
	if err := os.MkdirAll(DataDir, 0o750); err != nil {
		return err
	}
	httpAddr := net.JoinHostPort(ip.String(), "8080")
	args := []string{"serve", "-data", DataDir, "-name", a.Name, "-http", httpAddr, "-raft", net.JoinHostPort(ip.String(), "8300")}
	if a.Cluster == "join" {
		args = append(args, "-join", a.Join)
	}
	for attempt := 1; ; attempt++ {
		logf, err := os.OpenFile(filepath.Join(DataDir, "rollcall.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, RollcallBin, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/root"}
		if err := cmd.Start(); err != nil {
			logf.Close()
			return fmt.Errorf("start rollcall: %w", err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		go func() {
			if err := waitHealthy(ctx, "http://"+httpAddr+"/api/v1/health", 5*time.Minute, done); err != nil {
				fmt.Fprintf(out, "rollcall: the API did not come up: %v (see %s/rollcall.log)\n", err, DataDir)
				return
			}
			if a.Cluster == "new" {
				if err := importCommissioning(ctx, log); err != nil {
					fmt.Fprintf(out, "rollcall: importing the commissioning image failed: %v\n", err)
				}
			}
			banner(out, a.Name, "http://"+httpAddr+"/")
		}()
		err = <-done
		logf.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(out, "rollcall serve ended (%v); the last lines of %s/rollcall.log:\n%s\nrestarting in 5 s (attempt %d)\n",
			err, DataDir, tail(filepath.Join(DataDir, "rollcall.log"), 10), attempt+1)
		time.Sleep(5 * time.Second)
	}
}

func waitHealthy(ctx context.Context, url string, timeout time.Duration, exited <-chan error) error {
	deadline := time.Now().Add(timeout)
	c := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		if len(exited) > 0 {
			return errors.New("rollcall serve exited")
		}
	}
	return fmt.Errorf("no answer from %s in %s", url, timeout)
}

// importCommissioning imports the commissioning image the ISO carries,
// once per data directory.
func importCommissioning(ctx context.Context, log *slog.Logger) error {
	marker := filepath.Join(DataDir, ".commissioning-imported")
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	kernel, initrd := filepath.Join(CommissionDir, "vmlinuz"), filepath.Join(CommissionDir, "initrd.img")
	if _, err := os.Stat(kernel); err != nil {
		log.Warn("this ISO carries no commissioning image", "dir", CommissionDir)
		return nil
	}
	cmd := exec.CommandContext(ctx, RollcallBin, "image", "import", "-data", DataDir, CommissionName, "-kernel", kernel, "-initrd", initrd)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/root"}
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(b)))
	}
	log.Info("commissioning image imported", "output", strings.TrimSpace(string(b)))
	return os.WriteFile(marker, nil, 0o640)
}

// banner shows on the consoles how to reach the node.
func banner(out io.Writer, name, webURL string) {
	fp := "(no CA yet)"
	if b, err := os.ReadFile(filepath.Join(DataDir, "tls", "ca.pem")); err == nil {
		if blk, _ := pem.Decode(b); blk != nil {
			if cert, err := x509.ParseCertificate(blk.Bytes); err == nil {
				fp = pki.FingerprintHex(cert)
			}
		}
	}
	msg := fmt.Sprintf("\n================================================================\n"+
		"Rollcall node %s is up\n  web UI:         %s\n  CA fingerprint: sha256:%s\n  admin token:    %s/admin.token\n"+
		"================================================================\n", name, webURL, fp, DataDir)
	fmt.Fprint(out, msg)
	if f, err := os.OpenFile("/dev/tty1", os.O_WRONLY|unix.O_NOCTTY, 0); err == nil {
		fmt.Fprint(f, strings.ReplaceAll(msg, "\n", "\r\n"))
		f.Close()
	}
}

// interactive runs `rollcall setup` on the console until it succeeds:
// links up and DHCP tried first, so the setup's list of interfaces shows
// their addresses.
func interactive(ctx context.Context, log *slog.Logger) error {
	if _, err := sysinit.Network(ctx, 20*time.Second, log); err != nil {
		log.Info("no DHCP lease before the setup", "err", err)
	}
	for {
		cmd := exec.CommandContext(ctx, RollcallBin, "setup", "-data", DataDir)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/root", "TERM=linux"}
		err := cmd.Run()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Warn("rollcall setup ended; starting it again", "err", err)
		time.Sleep(2 * time.Second)
	}
}

// firmwareMode says how the machine booted: "bios", or "uefi" with
// Secure Boot on or off (the SecureBoot variable: 4 bytes of attributes,
// then the value).
func firmwareMode() string {
	if _, err := os.Stat("/sys/firmware/efi"); err != nil {
		return "bios"
	}
	b, err := os.ReadFile("/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c")
	switch {
	case err != nil:
		return fmt.Sprintf("uefi, secure boot unknown (%v)", err)
	case len(b) < 5:
		return fmt.Sprintf("uefi, secure boot unknown (%d bytes)", len(b))
	case b[4] == 1:
		return "uefi, secure boot on"
	}
	return "uefi, secure boot off"
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func tail(path string, n int) string {
	lines := strings.Split(strings.TrimRight(readFile(path), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
