package dhcp

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/rollcall/rollcall/dhcp/boot"
	"github.com/rollcall/rollcall/dhcp/full"
	"github.com/rollcall/rollcall/dhcp/lease"
	"github.com/rollcall/rollcall/dhcp/proxy"
	"github.com/rollcall/rollcall/dhcp/wire"
	"github.com/rollcall/rollcall/store"
)

// network is one served subnet with its handler.
type network struct {
	Network
	handler  wire.Handler
	pool     *lease.Pool // full mode
	settings atomic.Pointer[full.Settings]
	// sampleSize is the size of the last answer warnLongOptions measured.
	sampleSize int
}

// iface groups the networks served on one interface: they share its sockets.
type iface struct {
	name     string
	index    int
	addrs    []netip.Addr
	networks []*network
	proxy    bool // some network is in proxy mode: listen on 4011 too
}

type server struct {
	cfg      Config
	log      *slog.Logger
	m        *Metrics
	batcher  *lease.Batcher
	ifaces   map[string]*iface
	order    []*iface
	limit    *limiter
	seen     *seenFilter
	machines *machineCache
	trimLog  xidOnce
	netIdx   atomic.Uint64
}

func newServer(cfg Config, log *slog.Logger) (*server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(cfg.Networks) == 0 {
		nets, err := networksFromStore(cfg.DB, cfg.Node)
		if err != nil {
			return nil, fmt.Errorf("dhcp: read networks: %w", err)
		}
		cfg.Networks = nets
		if err := cfg.validate(); err != nil {
			return nil, err
		}
	}
	s := &server{
		cfg: cfg, log: log, m: cfg.Metrics, ifaces: map[string]*iface{},
		limit:    newLimiter(cfg.RatePerMAC, cfg.RateBurst),
		seen:     newSeenFilter(cfg.SeenEvery),
		machines: newMachineCache(cfg.DB),
	}
	s.m.leases.db.Store(cfg.DB)
	s.m.leases.now.Store(&cfg.Now)
	if cfg.Replicator != nil {
		s.batcher = lease.NewBatcher(cfg.Replicator, log.With("part", "lease-batch"), cfg.BatchInterval, cfg.BatchMax, s.m)
	}
	for _, n := range cfg.Networks {
		ifc := s.ifaces[n.Iface]
		if ifc == nil {
			ifc = &iface{name: n.Iface}
			s.ifaces[n.Iface] = ifc
			s.order = append(s.order, ifc)
		}
		nw := &network{Network: n}
		bootCfg := cfg.Boot
		bootCfg.PXELinux = n.BootLoader == store.BootLoaderPXELinux
		switch n.Mode {
		case store.DHCPFull:
			nw.pool = lease.NewPool(lease.PoolConfig{
				Node: cfg.Node, Subnet: n.Subnet, DB: cfg.DB, Rep: cfg.Replicator, Batcher: s.batcher,
				BlockSize: cfg.BlockSize, BlockTTL: cfg.BlockTTL, LeaseTime: cfg.LeaseTime,
				OfferHold: cfg.OfferHold, DeclineHold: cfg.DeclineHold, Margin: cfg.ClockSkew,
				LowWater: cfg.LowWater, Now: cfg.Now, Stats: s.m,
				Log: log.With("subnet", n.Subnet.String()),
			})
			nw.handler = &full.Handler{
				Settings: func() full.Settings { return *nw.settings.Load() },
				Leases:   nw.pool, Machines: s.machines, Boot: bootCfg,
			}
		case store.DHCPProxy:
			nw.handler = &proxy.Handler{Boot: bootCfg}
			ifc.proxy = true
		}
		ifc.networks = append(ifc.networks, nw)
	}
	s.loadSettings()
	return s, nil
}

// setAddrs records an interface's index and addresses and picks each
// network's answering address; excluded from the dynamic pools.
func (s *server) setAddrs(ifc *iface, index int, addrs []netip.Addr) error {
	ifc.index, ifc.addrs = index, addrs
	for _, n := range ifc.networks {
		if n.Addr.IsValid() {
			continue
		}
		for _, a := range addrs {
			if n.Subnet.Contains(a) {
				n.Addr = a
				break
			}
		}
		if !n.Addr.IsValid() && len(addrs) > 0 {
			n.Addr = addrs[0]
		}
		if !n.Addr.IsValid() {
			return fmt.Errorf("dhcp: interface %s has no IPv4 address to answer %s from", ifc.name, n.Subnet)
		}
	}
	return nil
}

func (s *server) excludeOwn() {
	var own []netip.Addr
	for _, ifc := range s.order {
		own = append(own, ifc.addrs...)
		for _, n := range ifc.networks {
			own = append(own, n.Addr)
		}
	}
	for _, ifc := range s.order {
		for _, n := range ifc.networks {
			if n.pool != nil {
				n.pool.SetExclude(own)
			}
		}
	}
}

// loadSettings reads each subnet's options from the store.
func (s *server) loadSettings() {
	_ = s.cfg.DB.View(func(tx *store.Tx) error {
		for _, ifc := range s.order {
			for _, n := range ifc.networks {
				st := full.Settings{Subnet: n.Subnet, LeaseTime: s.cfg.LeaseTime}
				if sub, err := tx.Subnet(n.Subnet); err == nil {
					st.Router, st.DNS, st.Domain = sub.Gateway, sub.DNS, sub.Domain
					if v, err := tx.VLAN(sub.Fabric, sub.VID); err == nil {
						st.MTU = v.MTU
					}
				}
				n.settings.Store(&st)
				s.warnLongOptions(n, st)
			}
		}
		return nil
	})
}

// background runs everything but the sockets until ctx ends.
func (s *server) background(ctx context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	goRun := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	var pools []*lease.Pool
	for _, ifc := range s.order {
		for _, n := range ifc.networks {
			if n.pool != nil {
				pools = append(pools, n.pool)
			}
		}
	}
	if s.batcher != nil {
		goRun(func() { s.batcher.Run(ctx) })
	}
	if len(pools) > 0 {
		goRun(func() {
			if s.cfg.Handoff.take() {
				s.adopt(ctx, pools)
			} else {
				s.recover(ctx)
			}
			for _, p := range pools {
				goRun(func() { p.SetReady(); p.Run(ctx) })
			}
		})
	}
	if s.cfg.Housekeeper != nil {
		goRun(func() { s.housekeep(ctx) })
	}
	goRun(func() { s.watchSettings(ctx) })
	return &wg
}

// handOff, once the sockets are closed (no grant can follow), sends what
// the batcher holds; if everything went, the next service in this process
// may take the blocks over (Handoff).
func (s *server) handOff() {
	clean := s.batcher != nil
	if clean {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		clean = s.batcher.Flush(fctx) == nil && s.batcher.Pending() == 0
		cancel()
	}
	s.cfg.Handoff.set(clean)
}

// adopt takes over the blocks the previous service in this process held
// (it stopped cleanly: see Handoff): each pool loads its own with their
// leases; blocks of subnets no longer served go back without quarantine.
func (s *server) adopt(ctx context.Context, pools []*lease.Pool) {
	now := s.cfg.Now()
	kept := map[netip.Addr]bool{}
	for _, p := range pools {
		for _, first := range p.Adopt(now) {
			kept[first] = true
		}
	}
	var rest []netip.Addr
	_ = s.cfg.DB.View(func(tx *store.Tx) error {
		blocks, err := tx.LeaseBlocks(netip.Prefix{})
		for _, b := range blocks {
			if b.Node == s.cfg.Node && !kept[b.First] {
				rest = append(rest, b.First)
			}
		}
		return err
	})
	if len(rest) > 0 {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		if err := s.cfg.Replicator.ReleaseBlocks(cctx, rest, now); err != nil {
			s.log.Warn("lease blocks of subnets no longer served not released; they expire", "blocks", len(rest), "err", err)
		}
		cancel()
	}
	s.log.Info("took over the lease blocks of the previous DHCP service", "blocks", len(kept), "released", len(rest))
}

// recover gives up the blocks held before this start, retrying until the
// cluster answers; until then only known machines are served.
func (s *server) recover(ctx context.Context) {
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		n, err := lease.Recover(cctx, s.cfg.Replicator, s.cfg.DB, s.cfg.Node, s.cfg.LeaseTime, s.cfg.ClockSkew, s.cfg.Now())
		cancel()
		if err == nil {
			if n > 0 {
				s.log.Info("gave up the lease blocks held before this start, quarantined", "blocks", n)
			}
			return
		}
		if attempt%10 == 0 {
			s.log.Warn("cannot reach the cluster to recover lease blocks; serving known machines only", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (s *server) housekeep(ctx context.Context) {
	t := time.NewTicker(s.cfg.Housekeeping)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.cfg.IsLeader() {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		exp, rec, err := lease.Housekeep(cctx, s.cfg.Housekeeper, s.cfg.DB, s.cfg.ClockSkew, s.cfg.Now())
		cancel()
		if err != nil {
			s.log.Warn("lease housekeeping", "err", err)
		} else if exp+rec > 0 {
			s.log.Info("lease housekeeping", "expired_leases", exp, "reclaimed_blocks", rec)
		}
	}
}

func (s *server) watchSettings(ctx context.Context) {
	var last uint64
	s.cfg.DB.Follow(ctx, []string{store.TableNetwork}, 0, nil, func(context.Context) error {
		var idx uint64
		_ = s.cfg.DB.View(func(tx *store.Tx) error { idx = tx.TableIndex(store.TableNetwork); return nil })
		if idx != last {
			last = idx
			s.loadSettings()
		}
		return nil
	})
}

// packet is one received datagram and where it came from.
type packet struct {
	ifc  *iface
	port int
	src  netip.AddrPort
	dst  netip.Addr // destination address it was sent to
	data []byte
	out  []byte // scratch space for the reply (the reader's; nil: a new one)
}

// reply is what to send back, and where.
type reply struct {
	data  []byte
	to    netip.AddrPort
	local netip.Addr
	typ   dhcpv4.MessageType
	hw    net.HardwareAddr // unicast to a client without an address: its MAC, for the ARP table
}

var broadcastAddr = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// process runs one datagram through parsing, limits and the handler. It
// never panics on input: a malformed packet is a counted drop.
func (s *server) process(ctx context.Context, pk packet) (r reply, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = wire.Dropf(wire.ReasonMalformed)
			s.log.Error("dhcp: panic on a packet (dropped)", "panic", fmt.Sprint(v), "len", len(pk.data))
		}
		if err != nil {
			s.m.drops.WithLabelValues(wire.DropReason(err)).Inc()
		}
	}()
	if len(pk.data) < 240 || len(pk.data) > 4096 {
		s.m.in(255).Inc()
		return r, wire.Dropf(wire.ReasonMalformed)
	}
	p, perr := dhcpv4.FromBytes(pk.data)
	if perr != nil {
		s.m.in(255).Inc()
		return r, wire.Dropf(wire.ReasonMalformed)
	}
	mt := wire.MessageType(p)
	s.m.in(mt).Inc()
	if p.OpCode != dhcpv4.OpcodeBootRequest {
		return r, wire.Dropf(wire.ReasonNotRequest)
	}
	if err := wire.CheckHW(p); err != nil {
		s.debugDrop(ctx, pk, p, err)
		return r, err
	}
	now := s.cfg.Now()
	mac := p.ClientHWAddr.String()
	if !s.limit.allow(mac, now) {
		return r, wire.Dropf(wire.ReasonRateLimited)
	}
	if code, err := wire.CheckOptions(p); err != nil {
		s.debugDrop(ctx, pk, p, err, "option", code, "len", len(p.Options[code]))
		return r, err
	}
	if string(p.Options.Get(dhcpv4.OptionClassIdentifier)) == ProbeClass {
		// A doctor's probe for foreign servers (Probe): not ours to answer.
		return r, wire.Dropf(wire.ReasonIgnored)
	}
	giaddr := wire.Addr(p.GatewayIPAddr)
	link := giaddr // the address whose subnet the client is on
	if sel := wire.LinkSelection(p); sel.IsValid() && pk.port != wire.PXEPort {
		link = sel
	}
	nw := s.pick(pk.ifc, link, pk.port)
	if nw == nil {
		if link.IsValid() {
			return r, wire.Dropf(wire.ReasonOtherSubnet)
		}
		return r, wire.Dropf(wire.ReasonNoHandler)
	}
	local := nw.Addr
	if pk.dst.IsValid() && pk.dst != broadcastAddr && pk.dst.Is4() && !pk.dst.IsMulticast() && s.isLocal(pk.ifc, pk.dst) {
		local = pk.dst
	}
	req := &wire.Request{
		Pkt: p, MAC: mac, Iface: pk.ifc.name, Port: pk.port, Src: pk.src, Local: local,
		Now: now, Base: s.log, Relayed: giaddr.IsValid(),
	}
	s.sight(req, nw)
	resp, herr := nw.handler.Handle(ctx, req)
	if herr != nil {
		err = herr
	}
	if resp == nil {
		return r, err
	}
	out := wire.AppendPacket(pk.out[:0], resp)
	// Most replies are far below any limit: the length of what was
	// written decides, and only a long one is measured and trimmed.
	if limit := wire.MaxMessageSize(p, nw.mtu()); len(out) > limit && wire.ClientSize(resp) > limit {
		s.fit(req, resp, limit)
		out = wire.AppendPacket(pk.out[:0], resp)
	}
	r = reply{data: out, local: local, typ: wire.MessageType(resp), to: route(pk, p, resp)}
	if r.to.Addr() == broadcastAddr && unicastable(pk, p, resp, nw) {
		r.to = netip.AddrPortFrom(wire.Addr(resp.YourIPAddr), wire.ClientPort)
		r.hw = p.ClientHWAddr
	}
	return r, err
}

// debugDrop logs a request refused before any handler saw it.
func (s *server) debugDrop(ctx context.Context, pk packet, p *dhcpv4.DHCPv4, err error, args ...any) {
	if !s.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	s.log.Debug("dhcp: request dropped", append([]any{"reason", wire.DropReason(err),
		"mac", p.ClientHWAddr.String(), "htype", p.HWType, "xid", hex.EncodeToString(p.TransactionID[:]), "iface", pk.ifc.name}, args...)...)
}

// unicastable says whether a reply that route sends as broadcast can go
// to the client's MAC and new address instead (RFC 2131 §4.1: broadcast
// flag clear, no ciaddr, not relayed): an OFFER or ACK with an address in
// the subnet of this link, which this node has an address in.
func unicastable(pk packet, req, resp *dhcpv4.DHCPv4, nw *network) bool {
	t := wire.MessageType(resp)
	yi := wire.Addr(resp.YourIPAddr)
	return pk.port == wire.ServerPort && !req.IsBroadcast() &&
		!wire.Addr(req.GatewayIPAddr).IsValid() && !wire.Addr(req.ClientIPAddr).IsValid() &&
		(t == dhcpv4.MessageTypeOffer || t == dhcpv4.MessageTypeAck) &&
		yi.IsValid() && nw.Subnet.Contains(yi) && nw.Addr.IsValid() && nw.Subnet.Contains(nw.Addr)
}

// route picks a reply's destination (RFC 2131 §4.1, and PXE's port 4011).
func route(pk packet, req, resp *dhcpv4.DHCPv4) netip.AddrPort {
	switch {
	case pk.port == wire.PXEPort:
		return pk.src
	case wire.Addr(req.GatewayIPAddr).IsValid():
		return netip.AddrPortFrom(wire.Addr(req.GatewayIPAddr), wire.ServerPort)
	case wire.MessageType(resp) == dhcpv4.MessageTypeNak:
		return netip.AddrPortFrom(broadcastAddr, wire.ClientPort)
	case wire.Addr(req.ClientIPAddr).IsValid():
		return netip.AddrPortFrom(wire.Addr(req.ClientIPAddr), wire.ClientPort)
	default:
		// A client without an address: broadcast always reaches it; when
		// it did not ask for broadcast, process makes this a unicast to
		// its MAC where it can (unicastable).
		return netip.AddrPortFrom(broadcastAddr, wire.ClientPort)
	}
}

func (s *server) isLocal(ifc *iface, a netip.Addr) bool {
	for _, x := range ifc.addrs {
		if x == a {
			return true
		}
	}
	for _, n := range ifc.networks {
		if n.Addr == a {
			return true
		}
	}
	return false
}

// pick selects the network a request belongs to: the one holding link
// (giaddr when relayed, or the subnet or link selection the request
// carries), else the interface's own (proxy on 4011).
func (s *server) pick(ifc *iface, link netip.Addr, port int) *network {
	for _, n := range ifc.networks {
		switch {
		case port == wire.PXEPort:
			if n.Mode == store.DHCPProxy {
				return n
			}
		case link.IsValid():
			if n.Subnet.Contains(link) {
				return n
			}
		case n.Addr.IsValid() && n.Subnet.Contains(n.Addr):
			return n
		}
	}
	if !link.IsValid() && port != wire.PXEPort && len(ifc.networks) > 0 {
		return ifc.networks[0]
	}
	return nil
}

// sight queues a sighting of the MAC, at most once per SeenEvery unless
// what it says changed.
func (s *server) sight(req *wire.Request, nw *network) {
	if s.batcher == nil {
		return
	}
	c := boot.Classify(req.Pkt)
	arch := c.Arch
	if arch < 0 {
		arch = 0
	}
	if !s.seen.due(seenKey{req.Iface, arch, c.UserClass}, req.MAC, req.Now) {
		return
	}
	s.batcher.Seen(store.Seen{MAC: req.MAC, Node: s.cfg.Node, Interface: req.Iface, VLAN: nw.VLAN, Arch: arch, UserClass: c.UserClass, Last: req.Now})
}

func typeName(t dhcpv4.MessageType) string {
	switch t {
	case dhcpv4.MessageTypeDiscover:
		return "discover"
	case dhcpv4.MessageTypeOffer:
		return "offer"
	case dhcpv4.MessageTypeRequest:
		return "request"
	case dhcpv4.MessageTypeDecline:
		return "decline"
	case dhcpv4.MessageTypeAck:
		return "ack"
	case dhcpv4.MessageTypeNak:
		return "nak"
	case dhcpv4.MessageTypeRelease:
		return "release"
	case dhcpv4.MessageTypeInform:
		return "inform"
	case 0:
		return "none"
	}
	return "other"
}

// limiter is a token bucket per MAC.
type limiter struct {
	mu    sync.Mutex
	rate  float64
	burst float64
	m     map[string]*bucket
	swept time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

// maxLimited bounds the MACs the limiter tracks between sweeps.
const maxLimited = 100000

func newLimiter(rate float64, burst int) *limiter {
	return &limiter{rate: rate, burst: float64(burst), m: map[string]*bucket{}}
}

func (l *limiter) allow(mac string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > time.Minute {
		for k, b := range l.m {
			if now.Sub(b.last) > time.Minute {
				delete(l.m, k)
			}
		}
		l.swept = now
	}
	b := l.m[mac]
	if b == nil {
		if len(l.m) >= maxLimited {
			// A flood of made-up MACs: start over rather than grow
			// without bound until the next sweep.
			l.m = map[string]*bucket{}
		}
		b = &bucket{tokens: l.burst, last: now}
		l.m[mac] = b
	}
	b.tokens += now.Sub(b.last).Seconds() * l.rate
	if b.tokens > l.burst {
		b.tokens = l.burst
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// seenFilter remembers when each MAC's sighting was last queued.
type seenFilter struct {
	mu    sync.Mutex
	every time.Duration
	last  map[string]seenAt
}

type seenKey struct {
	iface string
	arch  int
	uc    string
}

type seenAt struct {
	key seenKey
	at  time.Time
}

func newSeenFilter(every time.Duration) *seenFilter {
	return &seenFilter{every: every, last: map[string]seenAt{}}
}

func (f *seenFilter) due(key seenKey, mac string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.last[mac]; ok && old.key == key && now.Sub(old.at) < f.every {
		return false
	}
	if len(f.last) > 200000 {
		f.last = map[string]seenAt{}
	}
	f.last[mac] = seenAt{key, now}
	return true
}
