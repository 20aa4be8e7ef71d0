package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rollcall/rollcall/dhcp"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// LeaseReplicator turns the DHCP service's writes into replicated commands:
// it is dhcp.Replicator and dhcp.Housekeeper for one node. Apply must return
// only once the local store has the write (cluster.Cluster.Apply does).
type LeaseReplicator struct {
	Node  string
	Apply func(context.Context, raftfsm.Command) error
	Now   func() time.Time
}

var (
	_ dhcp.Replicator  = LeaseReplicator{}
	_ dhcp.Housekeeper = LeaseReplicator{}
)

func (r LeaseReplicator) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return time.Now().UTC()
}

// ClaimBlock claims a block of a dynamic range for this node.
func (r LeaseReplicator) ClaimBlock(ctx context.Context, subnet netip.Prefix, first, last netip.Addr, expires time.Time) error {
	return r.Apply(ctx, &raftfsm.LeaseBlockClaim{Subnet: subnet, First: first, Last: last, Node: r.Node, Expires: expires, Now: r.now()})
}

// RenewBlocks extends this node's blocks.
func (r LeaseReplicator) RenewBlocks(ctx context.Context, firsts []netip.Addr, expires time.Time) error {
	return r.Apply(ctx, &raftfsm.LeaseBlockRenew{Node: r.Node, Blocks: firsts, Expires: expires, Now: r.now()})
}

// ReleaseBlocks gives this node's blocks up, quarantined until then.
func (r LeaseReplicator) ReleaseBlocks(ctx context.Context, firsts []netip.Addr, quarantine time.Time) error {
	return r.ReclaimBlocks(ctx, r.Node, firsts, quarantine)
}

// ReclaimBlocks releases another (dead) node's blocks (leader only).
func (r LeaseReplicator) ReclaimBlocks(ctx context.Context, node string, firsts []netip.Addr, quarantine time.Time) error {
	return r.Apply(ctx, &raftfsm.LeaseBlockRelease{Node: node, Blocks: firsts, Quarantine: quarantine, Now: r.now()})
}

// ExpireLeases removes ended leases in a span (leader only).
func (r LeaseReplicator) ExpireLeases(ctx context.Context, first, last netip.Addr) error {
	return r.Apply(ctx, &raftfsm.LeaseExpire{First: first, Last: last, Now: r.now()})
}

// Batch replicates what the DHCP server did since its last batch.
func (r LeaseReplicator) Batch(ctx context.Context, grants []dhcp.Grant, releases []dhcp.Release, seen []store.Seen) error {
	b := &raftfsm.LeaseBatch{Node: r.Node, Now: r.now(), Seen: raftfsm.SeenBody(seen)}
	for _, g := range grants {
		b.Grants = append(b.Grants, raftfsm.LeaseGrant{IP: g.IP, MAC: g.MAC, ClientID: g.ClientID, Hostname: g.Hostname, Granted: g.Granted, Expires: g.Expires})
	}
	for _, rel := range releases {
		b.Releases = append(b.Releases, raftfsm.LeaseRelease{IP: rel.IP, MAC: rel.MAC, Declined: rel.Declined, Until: rel.Until})
	}
	return r.Apply(ctx, b)
}

// dhcpNetworks lists what this node serves, from the network model: every
// IPv4 subnet of every VLAN whose servers name it, on the named interface or,
// when none is named, on the interface holding an address in the subnet.
//
// A node whose store a consistency check found damaged serves nothing.
func (n *Node) dhcpNetworks(ifaces func() ([]net.Interface, error)) ([]dhcp.Network, []string) {
	if d := n.cluster.Diverged(); d != nil {
		return nil, []string{d.String()}
	}
	var out []dhcp.Network
	var problems []string
	var served []store.DHCPServed
	n.db.View(func(tx *store.Tx) (err error) { served, err = tx.DHCPServedBy(n.opts.Name); return err })
	for _, d := range served {
		v := d.VLAN
		iface := d.Iface
		if iface == "" {
			iface = interfaceIn(d.Subnet.CIDR, ifaces)
		}
		if iface == "" {
			problems = append(problems, fmt.Sprintf("VLAN %s/%d: no interface of this node has an address in %s; name one with -iface", v.Fabric, v.VID, d.Subnet.CIDR))
			continue
		}
		out = append(out, dhcp.Network{Iface: iface, VLAN: fmt.Sprintf("%s/%d", v.Fabric, v.VID), Subnet: d.Subnet.CIDR, Mode: v.DHCP, BootLoader: v.BootLoader})
	}
	return out, problems
}

func interfaceIn(p netip.Prefix, ifaces func() ([]net.Interface, error)) string {
	list, err := ifaces()
	if err != nil {
		return ""
	}
	for _, ifc := range list {
		if addrIn(ifc, p).IsValid() {
			return ifc.Name
		}
	}
	return ""
}

// interfaceAddrIn is the address of the interface named inside p, if it
// has one.
func interfaceAddrIn(iface string, p netip.Prefix) netip.Addr {
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return netip.Addr{}
	}
	return addrIn(*ifc, p)
}

// addrIn is ifc's first address inside p (unset: none).
func addrIn(ifc net.Interface, p netip.Prefix) netip.Addr {
	addrs, _ := ifc.Addrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok && p.Contains(ip.Unmap()) {
				return ip.Unmap()
			}
		}
	}
	return netip.Addr{}
}

// envInt reads a tuning knob from the environment (like GOMAXPROCS): 0
// when unset or not a number, which leaves the service's default.
func envInt(name string) int {
	v, _ := strconv.Atoi(os.Getenv(name))
	return v
}

// dhcpAddrCheck is how often the DHCP service compares the addresses of
// the interfaces it serves with those it started with.
var dhcpAddrCheck = 10 * time.Second

// interfaceAddrs lists the IPv4 addresses of the interfaces nets use, one
// string to compare.
func interfaceAddrs(nets []dhcp.Network) string {
	var b strings.Builder
	for _, nw := range nets {
		ifc, err := net.InterfaceByName(nw.Iface)
		if err != nil {
			fmt.Fprintf(&b, "%s:missing;", nw.Iface)
			continue
		}
		addrs, _ := ifc.Addrs()
		fmt.Fprintf(&b, "%s:", nw.Iface)
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				fmt.Fprintf(&b, "%s,", ipn)
			}
		}
		b.WriteByte(';')
	}
	return b.String()
}

// runDHCP serves DHCP on the networks this node serves, restarting the
// service when they or the interfaces' addresses change; where it serves,
// it serves TFTP too (on those interfaces' addresses, port 69) unless -tftp
// names an address or is off. A service that fails (port 67 taken, say)
// ends the part with the reason, and the supervisor starts it again.
func (n *Node) runDHCP(ctx context.Context, log *slog.Logger) error {
	var cancel context.CancelFunc
	var running []dhcp.Network
	var runningAddrs string
	var lastProblems []string
	done := make(chan struct{})
	close(done)
	var failed chan error
	wake := make(chan struct{}, 1) // a service of this part ended
	stop := func() {
		if cancel != nil {
			cancel()
			<-done
			cancel = nil
		}
	}
	defer stop()
	_, port, _ := net.SplitHostPort(n.HTTPAddr())
	httpPort, _ := strconv.Atoi(port)
	return n.db.Follow(ctx, []string{store.TableNetwork}, dhcpAddrCheck, wake, func(ctx context.Context) error {
		select {
		case err := <-failed:
			return err
		default:
		}
		nets, problems := n.dhcpNetworks(net.Interfaces)
		if !slices.Equal(problems, lastProblems) { // said once, not every check
			for _, p := range problems {
				log.Warn("dhcp: cannot serve", "reason", p)
			}
			lastProblems = problems
		}
		addrs := interfaceAddrs(nets)
		if !slices.Equal(nets, running) || addrs != runningAddrs {
			if cancel != nil && slices.Equal(nets, running) {
				log.Info("dhcp: interface addresses changed; restarting", "was", runningAddrs, "now", addrs)
			}
			stop()
			running, runningAddrs = nets, addrs
			if len(nets) > 0 {
				sctx, cancelThis := context.WithCancel(ctx)
				cancel = cancelThis
				failed = make(chan error, 2) // this incarnation's
				var wg sync.WaitGroup
				if n.opts.TFTPAddr == "" {
					taddrs := tftpAddrs(nets)
					_, errc, err := n.startTFTP(sctx, taddrs)
					if err != nil {
						cancel()
						cancel = nil
						return err
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := <-errc; sctx.Err() == nil {
							failed <- public("TFTP stopped on "+strings.Join(taddrs, ", "), err)
							notifyOnce(wake)
						}
					}()
				}
				rep := LeaseReplicator{Node: n.opts.Name, Apply: func(ctx context.Context, c raftfsm.Command) error {
					_, err := n.cluster.Apply(ctx, c)
					return err
				}}
				cfg := dhcp.Config{
					Node: n.opts.Name, DB: n.db, Replicator: rep, Housekeeper: rep, IsLeader: n.cluster.IsLeader,
					Networks: nets, Metrics: n.dhcpMetrics, Handoff: n.dhcpHandoff, Workers: envInt("ROLLCALL_DHCP_WORKERS"), WorkersAhead: backgroundNice > 0,
					Boot: dhcp.BootConfig{HTTPPort: httpPort, HTTPPrefix: "/boot/", ScriptPath: "/boot/ipxe"},
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := cfg.Start(sctx, n.log.With("component", "dhcp"))
					if sctx.Err() == nil {
						failed <- public("DHCP stopped on "+addrs, err)
						notifyOnce(wake)
					}
				}()
				done = make(chan struct{})
				go func() { wg.Wait(); close(done) }()
				log.Info("dhcp serving", "networks", len(nets))
			}
		}
		return nil
	})
}

// notifyOnce wakes whoever waits on ch, if no wake-up is pending.
func notifyOnce(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// tftpAddrs are the TFTP listen addresses for what DHCP serves: port 69
// on each served interface's IPv4 addresses.
func tftpAddrs(nets []dhcp.Network) []string {
	seen := map[string]bool{}
	var out []string
	for _, nw := range nets {
		ifi, err := net.InterfaceByName(nw.Iface)
		if err != nil {
			continue
		}
		as, _ := ifi.Addrs()
		for _, a := range as {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				if hp := net.JoinHostPort(ipn.IP.String(), "69"); !seen[hp] {
					seen[hp] = true
					out = append(out, hp)
				}
			}
		}
	}
	return out
}
