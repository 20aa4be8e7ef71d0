package dhcp

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rollcall/rollcall/lab/bench/dhcp/replica"
	"github.com/rollcall/rollcall/store"
)

// fullLab is a server namespace (interface srv0, 10.213.1.1/24) and a client
// namespace (cli0, no address unless given) on one veth, the server in
// full mode for 10.213.1.0/24 with leases from .100–.199, its network model
// in a replicated store.
type fullLab struct {
	srv, cli *testNS
	c        *replica.Cluster
	dir      string
}

func newFullLab(t *testing.T, cliAddr string, tweak func(*Config)) *fullLab {
	t.Helper()
	l := &fullLab{srv: newNS(t, "srv"), cli: newNS(t, "cli"), dir: t.TempDir()}
	veth(t, l.srv, "srv0", "10.213.1.1/24", l.cli, "cli0", cliAddr)
	l.c = serveFull(t, l.srv, "srv0", netip.MustParsePrefix("10.213.1.0/24"), tweak)
	return l
}

// serveFull serves subnet (gateway and DNS .1, leases from .100–.199) in
// full mode on iface inside ns, the network model in a replicated store,
// and waits for the first lease block.
func serveFull(t *testing.T, ns *testNS, iface string, subnet netip.Prefix, tweak func(*Config)) *replica.Cluster {
	return serveFullDNS(t, ns, iface, subnet, nil, tweak)
}

// serveFullDNS is serveFull with the subnet's DNS servers given (nil: .1).
func serveFullDNS(t *testing.T, ns *testNS, iface string, subnet netip.Prefix, dns []netip.Addr, tweak func(*Config)) *replica.Cluster {
	t.Helper()
	c, err := replica.New(t.TempDir(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	host := func(n byte) netip.Addr { a := subnet.Addr().As4(); a[3] = n; return netip.AddrFrom4(a) }
	if dns == nil {
		dns = []netip.Addr{host(1)}
	}
	err = c.Network(context.Background(),
		store.VLAN{Fabric: "lab", VID: 0, MTU: 1500, DHCP: store.DHCPFull, Servers: []store.VLANServer{{Node: "n1", Iface: iface}}},
		store.Subnet{CIDR: subnet, Fabric: "lab", Purpose: "provisioning", Gateway: host(1),
			DNS: dns, Domain: "lab.example"},
		store.Range{Subnet: subnet, Kind: store.RangeDynamic, First: host(100), Last: host(199)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Node: "n1", DB: c.DB(0), Replicator: c.Node(0), Housekeeper: c.Node(0), IsLeader: func() bool { return true }, BlockSize: 32}
	if tweak != nil {
		tweak(&cfg)
	}
	serveIn(t, ns, cfg, testLog(t))
	eventually(t, 10*time.Second, "a lease block claimed", func() bool {
		n := 0
		_ = c.DB(0).View(func(tx *store.Tx) error {
			bs, _ := tx.LeaseBlocks(netip.Prefix{})
			n = len(bs)
			return nil
		})
		return n > 0
	})
	time.Sleep(100 * time.Millisecond) // the pool loads the block after the claim returns
	return c
}

func (l *fullLab) lease(mac string) (store.Lease, bool) {
	var out store.Lease
	ok := false
	_ = l.c.DB(0).View(func(tx *store.Tx) error {
		ls, _ := tx.LeasesByMAC(mac)
		for _, x := range ls {
			if !x.Declined {
				out, ok = x, true
			}
		}
		return nil
	})
	return out, ok
}

func (l *fullLab) cliMAC(t *testing.T) string {
	out := l.cli.ip(t, "-o", "link", "show", "cli0")
	m := regexp.MustCompile(`link/ether ([0-9a-f:]{17})`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no MAC in %q", out)
	}
	return m[1]
}

// script writes a client hook that logs what it was given and configures
// the address inside the client namespace.
func script(t *testing.T, dir, body string) (path, log string) {
	log = filepath.Join(dir, "events")
	path = filepath.Join(dir, "hook")
	body = strings.ReplaceAll(body, "LOG", log)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, log
}

func readLines(path string) []string {
	b, _ := os.ReadFile(path)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func hasLine(path, prefix string) (string, bool) {
	for _, l := range readLines(path) {
		if strings.HasPrefix(l, prefix) {
			return l, true
		}
	}
	return "", false
}

// TestDhclient: ISC dhclient gets a working configuration, renews at T1
// (unicast, so the ACK goes to ciaddr), and releases.
func TestDhclient(t *testing.T) {
	need(t, "dhclient")
	l := newFullLab(t, "", func(c *Config) { c.LeaseTime, c.BlockTTL = 8*time.Second, time.Minute })
	hook, events := script(t, l.dir, `echo "$reason ip=$new_ip_address mask=$new_subnet_mask router=$new_routers dns=$new_domain_name_servers domain=$new_domain_name mtu=$new_interface_mtu lease=$new_dhcp_lease_time" >> LOG
case $reason in BOUND|RENEW|REBIND|REBOOT) ip addr replace $new_ip_address/$new_subnet_mask dev $interface ;; esac
`)
	conf := filepath.Join(l.dir, "dhclient.conf")
	os.WriteFile(conf, []byte("request subnet-mask, broadcast-address, routers, domain-name, domain-name-servers, interface-mtu;\n"), 0o644)
	args := []string{"dhclient", "-4", "-d", "-v", "-cf", conf, "-sf", hook, "-lf", filepath.Join(l.dir, "leases"), "-pf", filepath.Join(l.dir, "pid")}
	startClient(t, l.cli, events, append(args, "cli0")...)

	eventually(t, 20*time.Second, "dhclient BOUND", func() bool { _, ok := hasLine(events, "BOUND"); return ok })
	bound, _ := hasLine(events, "BOUND")
	for _, want := range []string{"mask=255.255.255.0", "router=10.213.1.1", "dns=10.213.1.1", "domain=lab.example", "mtu=1500"} {
		if !strings.Contains(bound, want) {
			t.Errorf("dhclient BOUND without %s: %s", want, bound)
		}
	}
	ip := regexp.MustCompile(`ip=(\S+)`).FindStringSubmatch(bound)[1]
	if !strings.HasPrefix(ip, "10.213.1.1") || len(ip) != len("10.213.1.100") {
		t.Fatalf("dhclient got %s, outside .100–.199", ip)
	}
	mac := l.cliMAC(t)
	var first store.Lease
	eventually(t, 5*time.Second, "the lease replicated", func() bool {
		var ok bool
		first, ok = l.lease(mac)
		return ok && first.IP.String() == ip
	})

	eventually(t, 20*time.Second, "dhclient RENEW at T1", func() bool { _, ok := hasLine(events, "RENEW"); return ok })
	if renew, _ := hasLine(events, "RENEW"); !strings.Contains(renew, "ip="+ip) {
		t.Errorf("renewed to another address: %s", renew)
	}
	eventually(t, 5*time.Second, "the renewal replicated", func() bool {
		l2, ok := l.lease(mac)
		return ok && l2.Expires.After(first.Expires)
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rel := l.cli.cmd(ctx, append(append([]string{}, args[:1]...), append([]string{"-r"}, append(args[2:], "cli0")...)...)...)
	if b, err := rel.CombinedOutput(); err != nil {
		t.Fatalf("dhclient -r: %v\n%s", err, b)
	}
	eventually(t, 5*time.Second, "the release replicated", func() bool { _, ok := l.lease(mac); return !ok })
}

// TestUdhcpc: busybox udhcpc gets a configuration, renews on SIGUSR1 and
// releases on SIGUSR2.
func TestUdhcpc(t *testing.T) {
	need(t, "udhcpc")
	l := newFullLab(t, "", nil)
	hook, events := script(t, l.dir, `echo "$1 ip=$ip subnet=$subnet router=$router dns=$dns domain=$domain mtu=$mtu lease=$lease serverid=$serverid" >> LOG
case $1 in bound|renew) ip addr replace $ip/$subnet dev $interface ;; deconfig) ip addr flush dev $interface ;; esac
`)
	cmd := startClient(t, l.cli, events, "udhcpc", "-f", "-i", "cli0", "-s", hook, "-t", "5", "-T", "1", "-A", "1", "-O", "mtu", "-O", "domain")
	eventually(t, 20*time.Second, "udhcpc bound", func() bool { _, ok := hasLine(events, "bound"); return ok })
	bound, _ := hasLine(events, "bound")
	for _, want := range []string{"subnet=255.255.255.0", "router=10.213.1.1", "dns=10.213.1.1", "domain=lab.example", "mtu=1500", "lease=3600", "serverid=10.213.1.1"} {
		if !strings.Contains(bound, want) {
			t.Errorf("udhcpc bound without %s: %s", want, bound)
		}
	}
	ip := regexp.MustCompile(`ip=(\S+)`).FindStringSubmatch(bound)[1]
	l.udhcpcRenewRelease(t, cmd, events, netip.MustParseAddr(ip))
}

// TestUdhcpcManyDNS: on a subnet with 100 DNS servers the full OFFER is
// past the 576 bytes udhcpc takes (it says so in option 57, and silently
// drops a longer reply). It still binds: the DNS option is dropped from
// its replies, the rest kept, and the drop counted.
func TestUdhcpcManyDNS(t *testing.T) {
	need(t, "udhcpc")
	l := &fullLab{srv: newNS(t, "srv"), cli: newNS(t, "cli"), dir: t.TempDir()}
	veth(t, l.srv, "srv0", "10.213.1.1/24", l.cli, "cli0", "")
	m := NewMetrics()
	l.c = serveFullDNS(t, l.srv, "srv0", netip.MustParsePrefix("10.213.1.0/24"), manyDNS(100), func(c *Config) { c.Metrics = m })
	hook, events := script(t, l.dir, `echo "$1 ip=$ip subnet=$subnet router=$router dns=$dns domain=$domain lease=$lease serverid=$serverid" >> LOG
case $1 in bound|renew) ip addr replace $ip/$subnet dev $interface ;; deconfig) ip addr flush dev $interface ;; esac
`)
	startClient(t, l.cli, events, "udhcpc", "-f", "-i", "cli0", "-s", hook, "-t", "5", "-T", "1", "-A", "1", "-O", "domain")
	eventually(t, 20*time.Second, "udhcpc bound", func() bool { _, ok := hasLine(events, "bound"); return ok })
	bound, _ := hasLine(events, "bound")
	for _, want := range []string{"subnet=255.255.255.0", "router=10.213.1.1", "domain=lab.example", "lease=3600", "serverid=10.213.1.1"} {
		if !strings.Contains(bound, want) {
			t.Errorf("udhcpc bound without %s: %s", want, bound)
		}
	}
	ip := regexp.MustCompile(`ip=(\S+)`).FindStringSubmatch(bound)[1]
	eventually(t, 5*time.Second, "the lease replicated", func() bool {
		x, ok := l.lease(l.cliMAC(t))
		return ok && x.IP.String() == ip
	})
	if m.OptionDrops(6) < 2 || m.Trimmed() < 2 {
		t.Errorf("option 6 dropped %v times from %v trimmed replies, want the OFFER's and the ACK's", m.OptionDrops(6), m.Trimmed())
	}
}

// udhcpcRenewRelease checks that the bound udhcpc's lease of ip reached
// the store, then has it renew (SIGUSR1: the expiry moves on) and release
// (SIGUSR2: the lease goes).
func (l *fullLab) udhcpcRenewRelease(t *testing.T, cmd *exec.Cmd, events string, ip netip.Addr) {
	t.Helper()
	mac := l.cliMAC(t)
	var first store.Lease
	eventually(t, 5*time.Second, "the lease replicated", func() bool {
		var ok bool
		first, ok = l.lease(mac)
		return ok && first.IP == ip
	})
	time.Sleep(1100 * time.Millisecond) // so the renewal's expiry is later
	// udhcpc runs under "ip netns exec"; signal the udhcpc process itself.
	pid := findChild(t, cmd.Process.Pid, "udhcpc")
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "udhcpc renew", func() bool { _, ok := hasLine(events, "renew"); return ok })
	eventually(t, 5*time.Second, "the renewal replicated", func() bool {
		x, ok := l.lease(mac)
		return ok && x.Expires.After(first.Expires)
	})
	if err := syscall.Kill(pid, syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the release replicated", func() bool { _, ok := l.lease(mac); return !ok })
}

// findChild returns the pid of the process named name that is pid or a
// descendant of it ("ip netns exec" execs it in place, normally).
func findChild(t *testing.T, pid int, name string) int {
	b, _ := os.ReadFile(filepath.Join("/proc", itoa(pid), "comm"))
	if strings.TrimSpace(string(b)) == name {
		return pid
	}
	out, _ := exec.Command("pgrep", "-P", itoa(pid)).Output()
	for _, f := range strings.Fields(string(out)) {
		var c int
		for _, ch := range f {
			c = c*10 + int(ch-'0')
		}
		if p := findChild(t, c, name); p != 0 {
			return p
		}
	}
	if pid == 0 {
		t.Fatal("not found")
	}
	return 0
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(i)) }

func fmtInt(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// TestRelayedPerfdhcp: perfdhcp acts as a relay (giaddr = its address),
// the server answers giaddr:67, and every 4-way exchange completes; its
// leases are replicated.
func TestRelayedPerfdhcp(t *testing.T) {
	need(t, "perfdhcp")
	l := newFullLab(t, "10.213.1.2/24", nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := l.cli.cmd(ctx, "perfdhcp", "-4", "-l", "cli0", "-r", "50", "-R", "60", "-n", "60", "-u", "-W", "500000", "10.213.1.1").CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("perfdhcp: %v\n%s", err, out)
	}
	st := parsePerfdhcp(string(out))
	if st.sentDO == 0 || st.recvDO != st.sentDO || st.recvRA != st.sentRA || st.sentRA == 0 {
		t.Fatalf("perfdhcp exchanges incomplete: %+v\n%s", st, out)
	}
	eventually(t, 5*time.Second, "perfdhcp's leases replicated", func() bool {
		n := 0
		_ = l.c.DB(0).View(func(tx *store.Tx) error {
			return tx.Leases(netip.MustParseAddr("10.213.1.0"), netip.MustParseAddr("10.213.1.255"), func(store.Lease) bool { n++; return true })
		})
		return n >= st.recvRA
	})
}

type perfStats struct {
	sentDO, recvDO, sentRA, recvRA int
	dropsDO, dropsRA               int
	rate                           float64
}

// parsePerfdhcp reads perfdhcp's summary ("***Rate statistics***" and the
// per-exchange "sent packets"/"received packets"/"drops" lines).
func parsePerfdhcp(s string) perfStats {
	var st perfStats
	section := 0
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.Contains(line, "DISCOVER-OFFER"):
			section = 1
		case strings.Contains(line, "REQUEST-ACK"):
			section = 2
		case strings.HasPrefix(line, "Rate:"):
			f := strings.Fields(line)
			if len(f) > 1 {
				st.rate = atof(f[1])
			}
		}
		get := func(key string) (int, bool) {
			if !strings.HasPrefix(line, key) {
				return 0, false
			}
			f := strings.Fields(strings.TrimPrefix(line, key))
			if len(f) == 0 {
				return 0, false
			}
			return int(atof(f[0])), true
		}
		for key, dst := range map[string][2]*int{
			"sent packets:":     {&st.sentDO, &st.sentRA},
			"received packets:": {&st.recvDO, &st.recvRA},
			"drops:":            {&st.dropsDO, &st.dropsRA},
		} {
			if v, ok := get(key); ok && section > 0 {
				*dst[section-1] = v
			}
		}
	}
	return st
}

func atof(s string) float64 {
	var v, frac float64
	div := 0.0
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			if div > 0 {
				frac += float64(c-'0') / div
				div *= 10
			} else {
				v = v*10 + float64(c-'0')
			}
		case c == '.':
			div = 10
		default:
			return v + frac
		}
	}
	return v + frac
}
