//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// dhcpProbe is a DHCP client kept running through a rolling upgrade: busybox
// udhcpc in a namespace of its own, behind a veth pair whose root end a
// node serves, doing a whole DORA every half second (one MAC throughout).
type dhcpProbe struct {
	mu     sync.Mutex
	ok     int
	failed int
	addrs  map[string]int // address bound → times
	start  time.Time
	trail  []string       // each attempt: seconds since start, and the address or "-"
	marks  map[string]int // a named moment → how many leases by then
	stop   chan struct{}
	done   chan struct{}
}

// startDHCPLab makes the namespace and the veth pair (the root end,
// rcv0 at 10.77.0.1/16, is what the serving node answers on) and returns
// the client's namespace.
func startDHCPLab(t *testing.T) *labNS {
	t.Helper()
	ns := newLabNS(t, "rcv-client")
	t.Cleanup(func() { runQuiet("ip", "link", "del", "rcv0") })
	mustRun(t, "ip", "link", "add", "rcv0", "type", "veth", "peer", "name", "rcv1")
	mustRun(t, "ip", "link", "set", "rcv1", "netns", ns.name)
	mustRun(t, "ip", "addr", "add", "10.77.0.1/16", "dev", "rcv0")
	mustRun(t, "ip", "link", "set", "rcv0", "up")
	ns.ip(t, "link", "set", "rcv1", "address", "02:00:00:77:00:01")
	ns.ip(t, "link", "set", "rcv1", "up")
	return ns
}

// dhcpOnce runs one DORA and returns the address bound ("" when none).
func dhcpOnce(ns *labNS, hook string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	out, _ := ns.command(ctx, "udhcpc", "-f", "-q", "-n", "-i", "rcv1", "-s", hook, "-t", "3", "-T", "1", "-A", "1").CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if ip, ok := strings.CutPrefix(strings.TrimSpace(l), "hook bound "); ok {
			return ip
		}
	}
	return ""
}

func startDHCPProbe(t *testing.T, ns *labNS) *dhcpProbe {
	t.Helper()
	hook := filepath.Join(t.TempDir(), "hook")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\n[ \"$1\" = bound ] && echo \"hook bound $ip\"\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "the first DHCP lease", func() bool { return dhcpOnce(ns, hook) != "" })
	p := &dhcpProbe{addrs: map[string]int{}, marks: map[string]int{}, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			ip := dhcpOnce(ns, hook)
			p.mu.Lock()
			p.trail = append(p.trail, fmt.Sprintf("%.0fs %s", time.Since(p.start).Seconds(), map[bool]string{true: ip, false: "-"}[ip != ""]))
			if ip != "" {
				p.ok++
				p.addrs[ip]++
			} else {
				p.failed++
			}
			p.mu.Unlock()
			time.Sleep(500 * time.Millisecond)
		}
	}()
	return p
}

// mark notes how many leases the client had by a named moment.
func (p *dhcpProbe) mark(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marks[name] = p.ok
}

// finish stops the client and checks what it saw: leases before the last
// node moved and after, whichever build answered, all from the range. The
// address may change when the serving node restarts: a new process
// quarantines the lease blocks its predecessor held (it cannot know what
// that one granted last) and leases from a fresh block, so the range is
// large enough to have fresh blocks.
// It reports whether all held (errors are the test's).
func (p *dhcpProbe) finish(t *testing.T) bool {
	t.Helper()
	close(p.stop)
	<-p.done
	t.Logf("DHCP attempts: %s", strings.Join(p.trail, ", "))
	// Leases before the roll's end and after it: whichever build
	// answered, and across the serving node's own restarts.
	if p.marks["rolled"] == 0 || p.ok == p.marks["rolled"] {
		t.Errorf("the DHCP client got %d leases before the last node moved and %d after (%d attempts failed)", p.marks["rolled"], p.ok-p.marks["rolled"], p.failed)
		return false
	}
	for ip := range p.addrs {
		a, err := netip.ParseAddr(ip)
		if err != nil || !netip.MustParsePrefix("10.77.0.0/20").Contains(a) {
			t.Errorf("the DHCP client got %s, outside its range", ip)
			return false
		}
	}
	t.Logf("DHCP during the roll: %d leases, all %v, %d attempts failed (the serving node restarting)", p.ok, p.addrs, p.failed)
	return true
}

// grepLog is the lines of log that mention sub (case-insensitive), the last
// 40 of them.
func grepLog(log, sub string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(strings.ToLower(l), sub) {
			out = append(out, l)
		}
	}
	if len(out) > 40 {
		out = out[len(out)-40:]
	}
	return strings.Join(out, "\n")
}

// serveDHCP has the node named serving answer DHCP on rcv0.
func serveDHCP(t *testing.T, data, serving string) {
	t.Helper()
	for _, args := range [][]string{
		{"fabric", "add", "lab"},
		{"vlan", "add", "-dhcp", "-node", serving, "-iface", "rcv0", "lab", "0"},
		{"subnet", "add", "-fabric", "lab", "-vid", "0", "-purpose", "provisioning", "-gateway", "10.77.0.1", "10.77.0.0/16"},
		{"range", "add", "10.77.0.0/16", "dynamic", "10.77.0.10", "10.77.15.250"},
	} {
		if out, err := cli(t, data, args...); err != nil {
			t.Fatalf("rollcall %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func runQuiet(name string, args ...string) { _ = exec.Command(name, args...).Run() }
