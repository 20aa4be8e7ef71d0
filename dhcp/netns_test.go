package dhcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/rollcall/rollcall/lab/testenv"
)

// Network tests run in namespaces they create, joined by veth pairs, with
// addresses under 10.213.0.0/16 that exist only inside them. They need root
// and the real peers (dhclient, udhcpc, perfdhcp, dnsmasq): without them a
// test skips with the reason, except under CI=true, where that fails
// (lab/testenv).

func need(t testing.TB, tools ...string) {
	t.Helper()
	testenv.NeedNetns(t, "veth pairs, port 67", tools...)
}

func sh(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// testNS is a network namespace that is removed at cleanup.
type testNS struct{ name string }

func newNS(t testing.TB, role string) *testNS {
	t.Helper()
	n := &testNS{name: "rc-" + role + "-" + suffix()}
	sh(t, "ip", "netns", "add", n.name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n.name).Run() })
	sh(t, "ip", "-n", n.name, "link", "set", "lo", "up")
	return n
}

func (n *testNS) ip(t testing.TB, args ...string) string {
	return sh(t, append([]string{"ip", "-n", n.name}, args...)...)
}

// cmd is a command run inside the namespace.
func (n *testNS) cmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.name}, args...)...)
}

// veth joins a and b: interface an in a (with address aa, CIDR form, or
// none when empty), bn in b.
func veth(t testing.TB, a *testNS, an, aa string, b *testNS, bn, ba string) {
	t.Helper()
	tmpA, tmpB := "rcv"+suffix(), "rcv"+suffix()
	sh(t, "ip", "link", "add", tmpA, "type", "veth", "peer", "name", tmpB)
	sh(t, "ip", "link", "set", tmpA, "netns", a.name, "name", an)
	sh(t, "ip", "link", "set", tmpB, "netns", b.name, "name", bn)
	for _, x := range []struct {
		ns         *testNS
		name, addr string
	}{{a, an, aa}, {b, bn, ba}} {
		if x.addr != "" {
			x.ns.ip(t, "addr", "add", x.addr, "dev", x.name)
		}
		x.ns.ip(t, "link", "set", x.name, "up")
	}
}

// inNS runs f on a goroutine whose thread is switched into ns; sockets f
// opens stay in ns. The thread is never returned to the pool, so no other
// goroutine ever runs in ns by accident.
func inNS(t testing.TB, ns *testNS, f func()) {
	t.Helper()
	h, err := netns.GetFromName(ns.name)
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		defer h.Close()
		if err := netns.Set(h); err != nil {
			ready <- err
			return
		}
		ready <- nil
		f()
	}()
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
}

// serveIn starts cfg.Start inside ns and stops it at cleanup.
func serveIn(t testing.TB, ns *testNS, cfg Config, log *slog.Logger) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	inNS(t, ns, func() { done <- cfg.Start(ctx, log) })
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Start did not return after cancel")
		}
	})
	select {
	case err := <-done:
		t.Fatalf("Start returned early: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
}

func eventually(t testing.TB, within time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if f() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", within, what)
}

// startClient runs a DHCP client (args) in ns until the test ends; when the
// test fails, the client's output and its hook's events are logged.
func startClient(t *testing.T, ns *testNS, events string, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cmd := ns.cmd(ctx, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		cancel()
		if t.Failed() {
			t.Logf("%s output:\n%s\nevents:\n%s", args[0], out.String(), strings.Join(readLines(events), "\n"))
		}
	})
	return cmd
}

// startDnsmasq runs dnsmasq as a DHCP server (no DNS) on iface inside ns
// for the range given (dnsmasq's --dhcp-range) until the test ends; its
// log is returned, for failure messages.
func startDnsmasq(t testing.TB, ns *testNS, iface, dhcpRange string) *strings.Builder {
	t.Helper()
	dir := t.TempDir()
	dm := ns.cmd(t.Context(), "dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--port=0", "--user=root",
		"--interface="+iface, "--bind-interfaces", "--dhcp-range="+dhcpRange,
		"--dhcp-leasefile="+filepath.Join(dir, "leases"), "--pid-file="+filepath.Join(dir, "pid"), "--log-dhcp", "--log-facility=-")
	out := &strings.Builder{}
	dm.Stdout, dm.Stderr = out, out
	if err := dm.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dm.Process.Kill(); _ = dm.Wait() })
	return out
}
