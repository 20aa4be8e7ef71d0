package dhcp

import (
	"context"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestUdhcpcThroughRelay: a real client two hops away. busybox udhcpc in
// one namespace, dnsmasq as a plain DHCP relay (--dhcp-relay) in a routing
// namespace between, our server in a third that serves only the relayed
// subnet. The client is bound from that subnet through the relay (giaddr),
// renews by unicast routed through it, and releases.
func TestUdhcpcThroughRelay(t *testing.T) {
	need(t, "udhcpc", "dnsmasq")
	srv, rel, cli := newNS(t, "srv"), newNS(t, "rel"), newNS(t, "cli")
	veth(t, srv, "srv0", "10.213.4.1/24", rel, "rel1", "10.213.4.2/24")
	veth(t, rel, "rel0", "10.213.5.1/24", cli, "cli0", "")
	srv.ip(t, "route", "add", "10.213.5.0/24", "via", "10.213.4.2")
	sh(t, "ip", "netns", "exec", rel.name, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	relay := rel.cmd(ctx, "dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--port=0", "--user=root",
		"--interface=rel0", "--interface=rel1", "--dhcp-relay=10.213.5.1,10.213.4.1",
		"--pid-file="+filepath.Join(dir, "pid"), "--log-dhcp", "--log-facility=-")
	var relayOut strings.Builder
	relay.Stdout, relay.Stderr = &relayOut, &relayOut
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relay.Process.Kill(); _ = relay.Wait() })

	c := serveFull(t, srv, "srv0", netip.MustParsePrefix("10.213.5.0/24"), nil)
	l := &fullLab{srv: srv, cli: cli, c: c, dir: dir}
	hook, events := script(t, dir, `echo "$1 ip=$ip router=$router serverid=$serverid" >> LOG
case $1 in bound|renew) ip addr replace $ip/$subnet dev $interface; ip route replace default via $router ;; deconfig) ip addr flush dev $interface ;; esac
`)
	cmd := cli.cmd(ctx, "udhcpc", "-f", "-i", "cli0", "-s", hook, "-t", "5", "-T", "1", "-A", "1")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	defer func() {
		if t.Failed() {
			t.Logf("udhcpc:\n%s\ndnsmasq relay:\n%s", out.String(), relayOut.String())
		}
	}()
	eventually(t, 20*time.Second, "udhcpc bound through the relay", func() bool { _, ok := hasLine(events, "bound"); return ok })
	bound, _ := hasLine(events, "bound")
	for _, want := range []string{"router=10.213.5.1", "serverid=10.213.4.1"} {
		if !strings.Contains(bound, want) {
			t.Errorf("udhcpc bound without %s: %s", want, bound)
		}
	}
	ip := netip.MustParseAddr(regexp.MustCompile(`ip=(\S+)`).FindStringSubmatch(bound)[1])
	if !netip.MustParsePrefix("10.213.5.0/24").Contains(ip) {
		t.Fatalf("bound to %s, not from the relayed subnet", ip)
	}
	l.udhcpcRenewRelease(t, cmd, events, ip)
}
