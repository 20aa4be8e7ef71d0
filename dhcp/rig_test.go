package dhcp

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/rollcall/rollcall/dhcp/wire"
	"github.com/rollcall/rollcall/lab/bench/dhcp/replica"
	"github.com/rollcall/rollcall/store"
)

// The rig runs servers in-process against a replicated store (package
// replica: stores fed one Raft-like log), feeding packets to their packet
// path without sockets. Network tests with real clients live in
// net_test.go.

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now().Truncate(time.Second)} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func testLog(t testing.TB) *slog.Logger {
	if v := os.Getenv("DHCP_TEST_LOG"); v != "" {
		var l slog.Level
		_ = l.UnmarshalText([]byte(v))
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

var (
	testSubnet = netip.MustParsePrefix("10.213.0.0/16")
	testGW     = netip.MustParseAddr("10.213.0.1")
)

// node is one appliance node's DHCP server in the rig.
type node struct {
	srv    *server
	cancel context.CancelFunc
	wg     *sync.WaitGroup
	addr   netip.Addr
	rep    *replica.Node
}

type rig struct {
	t     testing.TB
	c     *replica.Cluster
	clock *clock
	nodes []*node
	log   *slog.Logger // nil: testLog
}

type rigOpts struct {
	nodes     int
	mode      string
	first     string // dynamic range
	last      string
	tweak     func(*Config)
	realClock bool
	loader    string       // the VLAN's boot loader
	dns       []netip.Addr // the subnet's DNS servers; default 10.213.0.2
	mtu       int          // the VLAN's; default 1500
	log       *slog.Logger // the servers' logger; default testLog
}

func newRig(t testing.TB, o rigOpts) *rig {
	t.Helper()
	if o.nodes == 0 {
		o.nodes = 1
	}
	if o.mode == "" {
		o.mode = store.DHCPFull
	}
	if o.first == "" {
		o.first, o.last = "10.213.1.0", "10.213.1.255"
	}
	if o.mtu == 0 {
		o.mtu = 1500
	}
	if o.dns == nil {
		o.dns = []netip.Addr{netip.MustParseAddr("10.213.0.2")}
	}
	r := &rig{t: t, clock: newClock(), log: o.log}
	now := r.clock.Now
	if o.realClock {
		now = time.Now
	}
	c, err := replica.New(t.TempDir(), o.nodes, now)
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	t.Cleanup(c.Close)
	var servers []store.VLANServer
	for i := range o.nodes {
		servers = append(servers, store.VLANServer{Node: c.Name(i), Iface: "eth0"})
	}
	ctx := context.Background()
	err = c.Network(ctx, store.VLAN{Fabric: "f1", VID: 0, MTU: o.mtu, DHCP: o.mode, Servers: servers, BootLoader: o.loader},
		store.Subnet{CIDR: testSubnet, Fabric: "f1", VID: 0, Purpose: "provisioning", Gateway: testGW,
			DNS: o.dns, Domain: "lab.example"},
		store.Range{Subnet: testSubnet, Kind: store.RangeDynamic, First: netip.MustParseAddr(o.first), Last: netip.MustParseAddr(o.last)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range o.nodes {
		cfg := Config{
			Node: c.Name(i), DB: c.DB(i), Replicator: c.Node(i), Housekeeper: c.Node(i),
			IsLeader: func() bool { return i == 0 },
			Now:      now, BlockSize: 32, RatePerMAC: 1e6, RateBurst: 1e6,
		}
		if o.tweak != nil {
			o.tweak(&cfg)
		}
		r.start(i, cfg)
	}
	t.Cleanup(func() {
		for _, n := range r.nodes {
			if n != nil {
				n.cancel()
				n.wg.Wait()
			}
		}
	})
	return r
}

// start (re)starts node i's server, as from a process start.
func (r *rig) start(i int, cfg Config) {
	r.t.Helper()
	log := r.log
	if log == nil {
		log = testLog(r.t)
	}
	s, err := newServer(cfg, log.With("node", cfg.Node))
	if err != nil {
		r.t.Fatal(err)
	}
	addr := netip.AddrFrom4([4]byte{10, 213, 0, byte(10 + i)})
	for _, ifc := range s.order {
		if err := s.setAddrs(ifc, 1, []netip.Addr{addr}); err != nil {
			r.t.Fatal(err)
		}
	}
	s.excludeOwn()
	ctx, cancel := context.WithCancel(context.Background())
	wg := s.background(ctx)
	n := &node{srv: s, cancel: cancel, wg: wg, addr: addr}
	if rep, ok := cfg.Replicator.(*replica.Node); ok {
		n.rep = rep
	}
	for len(r.nodes) <= i {
		r.nodes = append(r.nodes, nil)
	}
	r.nodes[i] = n
}

// stop stops node i; with crash its pending batch is lost first.
func (r *rig) stop(i int, crash bool) {
	n := r.nodes[i]
	if crash && n.srv.batcher != nil {
		n.srv.batcher.Discard()
	}
	n.cancel()
	n.wg.Wait()
	if !crash {
		n.srv.handOff() // as Start does once its sockets are closed
	}
}

// freeAtLeast waits until node i has k free addresses.
func (r *rig) freeAtLeast(i, k int) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, f := r.pool(i).Snapshot(); f >= k {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.t.Fatalf("node %d never got %d free addresses", i, k)
}

// ready waits until node i has free addresses to offer.
func (r *rig) ready(i int) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ok := r.nodes[i].srv.order[0].networks[0].pool != nil
		for _, ifc := range r.nodes[i].srv.order {
			for _, n := range ifc.networks {
				if n.pool != nil {
					if _, free := n.pool.Snapshot(); free == 0 {
						ok = false
					}
				}
			}
		}
		if ok {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.t.Fatalf("node %d never got a lease block", i)
}

func (r *rig) pool(i int) interface {
	Snapshot() (int, int)
	Lease(string) (netip.Addr, time.Time, bool)
	Maintain(context.Context)
} {
	return r.nodes[i].srv.order[0].networks[0].pool
}

// flush sends node i's pending batch now.
func (r *rig) flush(i int) error {
	b := r.nodes[i].srv.batcher
	if b == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return b.Flush(ctx)
}

// send feeds a packet to node i as if it arrived on eth0 port 67 from src
// (broadcast when dst is invalid) and returns the decoded reply, if any.
func (r *rig) send(i int, p *dhcpv4.DHCPv4, src netip.AddrPort, dst netip.Addr) (*dhcpv4.DHCPv4, netip.AddrPort, error) {
	return r.sendPort(i, p, src, dst, wire.ServerPort)
}

func (r *rig) sendPort(i int, p *dhcpv4.DHCPv4, src netip.AddrPort, dst netip.Addr, port int) (*dhcpv4.DHCPv4, netip.AddrPort, error) {
	rep, err := r.process(i, p, src, dst, port)
	if rep.data == nil {
		return nil, netip.AddrPort{}, err
	}
	out, perr := dhcpv4.FromBytes(rep.data)
	if perr != nil {
		r.t.Fatalf("server sent an unparseable reply: %v", perr)
	}
	return out, rep.to, err
}

// process runs a packet through node i's server as if it arrived on eth0
// (broadcast when dst is invalid) and returns the raw reply.
func (r *rig) process(i int, p *dhcpv4.DHCPv4, src netip.AddrPort, dst netip.Addr, port int) (reply, error) {
	n := r.nodes[i]
	if !dst.IsValid() {
		dst = broadcastAddr
	}
	return n.srv.process(context.Background(), packet{ifc: n.srv.order[0], port: port, src: src, dst: dst, data: p.ToBytes()})
}

var clientSrc = netip.AddrPortFrom(netip.IPv4Unspecified(), 68)

func macOf(i int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x13, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
}

func xidOf(i int) dhcpv4.TransactionID {
	var x dhcpv4.TransactionID
	binary.BigEndian.PutUint32(x[:], uint32(i)*2654435761)
	return x
}

func discover(mac net.HardwareAddr, xid dhcpv4.TransactionID, opts ...dhcpv4.Option) *dhcpv4.DHCPv4 {
	p := &dhcpv4.DHCPv4{
		OpCode: dhcpv4.OpcodeBootRequest, HWType: 1, TransactionID: xid, ClientHWAddr: mac,
		ClientIPAddr: net.IPv4zero, YourIPAddr: net.IPv4zero, ServerIPAddr: net.IPv4zero, GatewayIPAddr: net.IPv4zero,
		Options: dhcpv4.Options{},
	}
	p.Options.Update(dhcpv4.OptMessageType(dhcpv4.MessageTypeDiscover))
	p.Options.Update(dhcpv4.OptParameterRequestList(dhcpv4.OptionSubnetMask, dhcpv4.OptionRouter, dhcpv4.OptionDomainNameServer))
	for _, o := range opts {
		p.Options.Update(o)
	}
	return p
}

func requestFor(offer *dhcpv4.DHCPv4, xid dhcpv4.TransactionID, opts ...dhcpv4.Option) *dhcpv4.DHCPv4 {
	p := discover(offer.ClientHWAddr, xid, opts...)
	p.Options.Update(dhcpv4.OptMessageType(dhcpv4.MessageTypeRequest))
	p.Options.Update(dhcpv4.OptRequestedIPAddress(offer.YourIPAddr))
	p.Options.Update(dhcpv4.OptServerIdentifier(offer.ServerIdentifier()))
	return p
}

func renewal(ip net.IP, mac net.HardwareAddr, xid dhcpv4.TransactionID) *dhcpv4.DHCPv4 {
	p := discover(mac, xid)
	p.Options.Update(dhcpv4.OptMessageType(dhcpv4.MessageTypeRequest))
	p.ClientIPAddr = ip
	return p
}

func withType(p *dhcpv4.DHCPv4, t dhcpv4.MessageType) *dhcpv4.DHCPv4 {
	p.Options.Update(dhcpv4.OptMessageType(t))
	return p
}

// dora runs a full exchange of client i against node n.
func (r *rig) dora(n, i int, opts ...dhcpv4.Option) (*dhcpv4.DHCPv4, error) {
	offer, _, err := r.send(n, discover(macOf(i), xidOf(i), opts...), clientSrc, netip.Addr{})
	if offer == nil {
		return nil, err
	}
	ack, _, err := r.send(n, requestFor(offer, xidOf(i), opts...), clientSrc, netip.Addr{})
	return ack, err
}

// storeLease reads a lease from node i's store.
func (r *rig) storeLease(i int, ip netip.Addr) (store.Lease, error) {
	var l store.Lease
	err := r.c.DB(i).View(func(tx *store.Tx) error {
		var err error
		l, err = tx.Lease(ip)
		return err
	})
	return l, err
}
