// Package tftp is Rollcall's read-only TFTP server (RFC 1350, with the
// option extension of RFC 2347, blksize of RFC 2348 and timeout/tsize of
// RFC 2349). Every appliance node runs it on the interfaces it serves, in
// place of dnsmasq's TFTP: PXE firmware fetches an iPXE binary from it, and
// everything after that goes over HTTP.
//
// It serves only what an allow-list names (by default the iPXE binaries
// undionly.kpxe, ipxe.efi and snponly.efi from Debian's ipxe package), plus
// whatever an optional Resolver generates. Client names are normalised
// (backslashes, "..", absolute paths) and looked up in the allow-list or
// under an os.Root, so no request can read outside the roots; write requests
// are refused.
//
// The server and transfer loop are our own; pin/tftp (v3.2.0) supplies only
// the netascii converter here, and is the independent client in the tests
// and the stock baseline in lab/bench/tftp. Its server cannot do what this
// one must: it answers every error with code 1 (a write request should get
// 2, a full server 0 with a reason), reports a UEFI size probe as a failed
// transfer, starts a second transfer for a retransmitted RRQ, and sleeps up
// to a second of random backoff before each retransmission. Its sender also
// allocates an address per packet on an unconnected socket and re-arms a
// deadline per datagram. DESIGN.md measured a stock pin/tftp server at 0.75×
// (blksize 1468) and 0.67× (512) of tftpd-hpa; lab/bench/tftp shows this
// loop ahead of tftpd-hpa and using a quarter to a third less CPU than
// stock pin/tftp. See transfer.go for how.
//
// The provisioning network is hostile, so nothing a client asks for holds a
// transfer slot for long: a timeout option past MaxTimeout is declined, one
// source address gets at most MaxPerClient transfers at once, each packet
// is retransmitted at most Retries times, and every transfer ends at its
// lifetime (see Config.MinRate) even while its client keeps ACKing.
package tftp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Config is the TFTP service's configuration. The zero value serves the
// iPXE binaries from /usr/lib/ipxe on every interface, port 69.
type Config struct {
	// Addr is the UDP address to listen on, ":69" when empty and Addrs is empty.
	Addr string
	// Addrs are per-interface listen addresses ("10.0.0.1:69", …); when set,
	// Addr is ignored.
	Addrs []string

	// Roots is the allow-list: served name → file, or name prefix →
	// directory (served through an os.Root; "" or "/" serves a directory at
	// the top). Nil means DefaultRoots(IPXEDir); an empty map serves nothing
	// but what Resolver answers.
	Roots map[string]string
	// IPXEDir is where the default roots look for the iPXE binaries
	// (DefaultIPXEDir when empty). Ignored when Roots is set.
	IPXEDir string
	// Resolver, if set, is asked for names that no root matches.
	Resolver Resolver

	// MaxTransfers bounds concurrent transfers (256 when zero); a request
	// past it gets "server busy: N transfers in progress".
	MaxTransfers int
	// MaxPerClient bounds concurrent transfers from one source address (8
	// when zero; none of its own when not below MaxTransfers), so one
	// machine cannot take every slot: a request past it gets "server busy:
	// N transfers from your address in progress". UEFI holds two for a
	// moment (its size probe, then the download).
	MaxPerClient int
	// Timeout is how long to wait for an ACK before retransmitting (1 s
	// when zero); a client's RFC 2349 timeout option overrides it up to
	// MaxTimeout.
	Timeout time.Duration
	// MaxTimeout is the longest timeout option honoured (3 s, or Timeout
	// if longer, when zero). A longer one is left out of the OACK, since
	// RFC 2349 lets a server only echo or decline it (EDK2 rejects an OACK
	// with another value), and Timeout is used.
	MaxTimeout time.Duration
	// Retries is how many retransmissions of one packet before giving up
	// (5 when zero, at most 10).
	Retries int
	// MinRate and MaxLifetime bound how long one transfer may run whatever
	// its client does: 10 s plus the file's size at MinRate bytes/s (32 KiB/s
	// when zero), never more than MaxLifetime (10 min when zero; also the
	// bound when the size is unknown, and on a Resolver call). A transfer
	// still running then ends with an ERROR.
	MinRate     int
	MaxLifetime time.Duration
	// MaxBlockSize caps the negotiated blksize below the interface MTU's
	// bound (0: the MTU decides, up to 65464).
	MaxBlockSize int
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Addrs) == 0 {
		if c.Addr == "" {
			c.Addr = ":69"
		}
		c.Addrs = []string{c.Addr}
	}
	if c.Roots == nil {
		c.Roots = DefaultRoots(c.IPXEDir)
	}
	if c.MaxTransfers == 0 {
		c.MaxTransfers = 256
	}
	if c.Timeout == 0 {
		c.Timeout = time.Second
	}
	if c.Retries == 0 {
		c.Retries = 5
	}
	if c.MaxPerClient == 0 {
		c.MaxPerClient = 8
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = max(3*time.Second, c.Timeout)
	}
	if c.MinRate == 0 {
		c.MinRate = 32 << 10
	}
	if c.MaxLifetime == 0 {
		c.MaxLifetime = 10 * time.Minute
	}
	switch {
	case c.MaxTransfers < 0:
		return c, fmt.Errorf("tftp config: MaxTransfers %d is negative", c.MaxTransfers)
	case c.MaxPerClient < 0:
		return c, fmt.Errorf("tftp config: MaxPerClient %d is negative", c.MaxPerClient)
	case c.Timeout < 0:
		return c, fmt.Errorf("tftp config: Timeout %s is negative", c.Timeout)
	case c.MaxTimeout < c.Timeout:
		return c, fmt.Errorf("tftp config: MaxTimeout %s is shorter than Timeout %s", c.MaxTimeout, c.Timeout)
	case c.Retries < 0 || c.Retries > maxRetries:
		return c, fmt.Errorf("tftp config: Retries %d is outside 0..%d", c.Retries, maxRetries)
	case c.MinRate < 0:
		return c, fmt.Errorf("tftp config: MinRate %d is negative", c.MinRate)
	case c.MaxLifetime < 0:
		return c, fmt.Errorf("tftp config: MaxLifetime %s is negative", c.MaxLifetime)
	case c.MaxBlockSize != 0 && (c.MaxBlockSize < minBlockSize || c.MaxBlockSize > maxBlockSize):
		return c, fmt.Errorf("tftp config: MaxBlockSize %d is outside %d..%d", c.MaxBlockSize, minBlockSize, maxBlockSize)
	}
	return c, nil
}

const (
	maxRetries    = 10
	lifetimeGrace = 10 * time.Second // the handshake and a few lost packets
)

// lifetime is how long a transfer of size bytes (-1: unknown) may run.
func (c *Config) lifetime(size int64) time.Duration {
	rate := int64(c.MinRate)
	if size < 0 || size/rate >= int64(c.MaxLifetime/time.Second) {
		return c.MaxLifetime
	}
	d := lifetimeGrace + time.Duration(size/rate)*time.Second + time.Duration(size%rate)*time.Second/time.Duration(rate)
	return min(d, c.MaxLifetime)
}

// Server is a running (or startable) TFTP service.
type Server struct {
	cfg     Config
	metrics *Metrics

	ready    chan struct{} // closed once the sockets are bound
	done     chan struct{} // closed when Start returns
	stop     chan struct{} // closed by Stop
	stopOnce sync.Once
	started  atomic.Bool

	mu    sync.Mutex
	addrs []net.Addr

	roots     *roots
	inFlight  atomic.Int64
	activeMu  sync.Mutex
	active    map[netip.AddrPort]struct{} // clients with a transfer running
	rechecks  map[netip.AddrPort]struct{} // of those, the ones with a retransmitted RRQ waiting (at most one each)
	perClient map[netip.Addr]int          // transfers running per source address
	wg        sync.WaitGroup              // transfers
	sampler   logSampler

	blockingMax int // transfers in flight up to which blocking sockets are used (transfer.go)

	mtuMu sync.Mutex
	mtus  map[int]mtuEntry
}

type mtuEntry struct {
	mtu int
	at  time.Time
}

// New validates cfg and returns a server ready to Start.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Server{
		cfg:     cfg,
		metrics: newMetrics(),
		ready:   make(chan struct{}),
		done:    make(chan struct{}),
		stop:    make(chan struct{}),
		active:  make(map[netip.AddrPort]struct{}),
		mtus:    make(map[int]mtuEntry),

		rechecks:  make(map[netip.AddrPort]struct{}),
		perClient: make(map[netip.Addr]int),
		sampler:   logSampler{last: make(map[string]sample)},

		blockingMax: runtime.GOMAXPROCS(0),
	}, nil
}

// Metrics returns the server's Prometheus collectors.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Ready is closed once Start has bound its sockets.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addrs returns the bound listen addresses (useful with port 0) once Ready.
func (s *Server) Addrs() []net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]net.Addr(nil), s.addrs...)
}

// Start binds the listen addresses and serves until ctx is done or Stop is
// called; then it aborts the transfers in progress (telling their clients),
// waits for them and returns nil. A bind or configuration error is returned
// at once.
func (s *Server) Start(ctx context.Context, logger *slog.Logger) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("tftp: server already started")
	}
	defer close(s.done)
	logger = logger.With("service", "tftp")
	rs, err := openRoots(s.cfg.Roots, logger)
	if err != nil {
		return err
	}
	defer rs.close()
	s.roots = rs

	var ls []*listener
	closeAll := func() {
		for _, l := range ls {
			l.conn.Close()
		}
	}
	for _, a := range s.cfg.Addrs {
		l, err := listen(a)
		if err != nil {
			closeAll()
			return fmt.Errorf("tftp listen %s: %w", a, err)
		}
		ls = append(ls, l)
	}
	s.mu.Lock()
	for _, l := range ls {
		s.addrs = append(s.addrs, l.conn.LocalAddr())
	}
	s.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lwg sync.WaitGroup
	for _, l := range ls {
		logger.Info("tftp listening", "addr", l.conn.LocalAddr().String())
		lwg.Add(1)
		go func() {
			defer lwg.Done()
			s.serve(ctx, l, logger)
		}()
	}
	close(s.ready)

	select {
	case <-ctx.Done():
	case <-s.stop:
	}
	cancel()
	closeAll()
	lwg.Wait()
	s.wg.Wait()
	logger.Info("tftp stopped")
	return nil
}

// Stop ends a running Start and waits for it to return. It is safe to call
// more than once, and before or without Start.
func (s *Server) Stop() {
	s.stopOnce.Do(func() { close(s.stop) })
	if s.started.Load() {
		<-s.done
	}
}

// listener is one listening socket. It reads the destination address and
// interface of each request (IP_PKTINFO) so the transfer socket answers
// from the address the client asked, and blksize can respect the MTU.
type listener struct {
	conn *net.UDPConn
	p4   *ipv4.PacketConn
	p6   *ipv6.PacketConn
}

func listen(addr string) (*listener, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	c, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	l := &listener{conn: c}
	if ua.IP != nil && ua.IP.To4() != nil {
		p := ipv4.NewPacketConn(c)
		if p.SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true) == nil {
			l.p4 = p
		}
	} else {
		p := ipv6.NewPacketConn(c)
		if p.SetControlMessage(ipv6.FlagDst|ipv6.FlagInterface, true) == nil {
			l.p6 = p
		}
	}
	return l, nil
}

func (l *listener) read(b []byte) (n int, src netip.AddrPort, dst netip.Addr, ifIndex int, err error) {
	var from net.Addr
	switch {
	case l.p4 != nil:
		var cm *ipv4.ControlMessage
		n, cm, from, err = l.p4.ReadFrom(b)
		if cm != nil {
			dst, _ = netip.AddrFromSlice(cm.Dst)
			ifIndex = cm.IfIndex
		}
	case l.p6 != nil:
		var cm *ipv6.ControlMessage
		n, cm, from, err = l.p6.ReadFrom(b)
		if cm != nil {
			dst, _ = netip.AddrFromSlice(cm.Dst)
			ifIndex = cm.IfIndex
		}
	default:
		var ap netip.AddrPort
		n, ap, err = l.conn.ReadFromUDPAddrPort(b)
		from = net.UDPAddrFromAddrPort(ap)
	}
	if ua, ok := from.(*net.UDPAddr); ok {
		src = ua.AddrPort()
		src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
	}
	dst = dst.Unmap()
	if dst.IsMulticast() || dst.IsUnspecified() || dst == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		dst = netip.Addr{} // never answer from a broadcast address
	}
	return n, src, dst, ifIndex, err
}

// reply answers a refused request from the listening socket (no transfer
// socket is spent on it), from the address the client sent to.
func (l *listener) reply(b []byte, to netip.AddrPort, from netip.Addr) {
	switch {
	case l.p4 != nil && from.Is4():
		_, _ = l.p4.WriteTo(b, &ipv4.ControlMessage{Src: from.AsSlice()}, net.UDPAddrFromAddrPort(to))
	case l.p6 != nil && from.IsValid():
		src := from.AsSlice()
		if from.Is4() {
			src = net.IP(src).To16()
		}
		_, _ = l.p6.WriteTo(b, &ipv6.ControlMessage{Src: src}, net.UDPAddrFromAddrPort(to))
	default:
		_, _ = l.conn.WriteToUDPAddrPort(b, to)
	}
}

func (s *Server) serve(ctx context.Context, l *listener, logger *slog.Logger) {
	buf := make([]byte, maxRequestLen+1)
	reply := make([]byte, 0, 128)
	for {
		n, src, dst, ifIndex, err := l.read(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			logger.Warn("tftp read failed", "err", err)
			time.Sleep(10 * time.Millisecond) // never spin on a persistent error
			continue
		}
		if !src.IsValid() {
			continue
		}
		s.handle(ctx, l, inbound{buf[:n], src, dst, ifIndex}, reply, logger, false)
	}
}

// inbound is a datagram on a listening socket.
type inbound struct {
	b       []byte
	src     netip.AddrPort
	dst     netip.Addr // the address the client sent to, when known
	ifIndex int
}

// dupRecheck is how long a request from a client whose transfer is still
// running waits before it is judged a retransmission.
const dupRecheck = 50 * time.Millisecond

// handle checks one request in the listener goroutine and refuses it there
// when it can (malformed, write, bad name, busy, duplicate); otherwise it
// starts a transfer goroutine, which owns the client from then on.
func (s *Server) handle(ctx context.Context, l *listener, in inbound, reply []byte, logger *slog.Logger, recheck bool) {
	b, src, dst := in.b, in.src, in.dst
	log := logger.With("remote", src.String())
	req, err := parseRequest(b)
	if err != nil {
		if len(b) >= 2 && b[0] == 0 && b[1] >= byte(opDATA) && b[1] <= byte(opOACK) {
			// A stray packet of some transfer: no reply, or two servers
			// could ping-pong errors forever.
			s.refuse(refusedUnexpected)
			log.Debug("tftp packet for no transfer ignored", "opcode", b[1])
			return
		}
		s.refuse(refusedMalformed)
		s.logSampled(ctx, log, slog.LevelInfo, refusedMalformed, "tftp request refused", "err", err)
		l.reply(appendError(reply, errIllegalOperation, err.Error()), src, dst)
		return
	}
	log = log.With("file", printable([]byte(req.Name)))
	if req.Write {
		s.refuse(refusedWrite)
		s.logSampled(ctx, log, slog.LevelWarn, refusedWrite, "tftp write request refused")
		l.reply(appendError(reply, errAccessViolation, "access violation: this server is read-only"), src, dst)
		return
	}
	name, err := cleanName(req.Name)
	if err != nil {
		s.refuse(refusedBadName)
		s.logSampled(ctx, log, slog.LevelWarn, refusedBadName, "tftp request refused", "err", err)
		l.reply(appendError(reply, errAccessViolation, "access violation: bad file name"), src, dst)
		return
	}
	// A retransmitted RRQ for a transfer already running is not a second
	// transfer (tftpd-hpa would start one, and the client then answers it
	// with "unknown transfer ID"). But UEFI firmware sends its real RRQ
	// from the same port right after aborting the size probe, possibly
	// before that transfer has read the abort: look again a little later,
	// and drop the request only if the transfer is still running then.
	// One look per client at a time, so a flood of RRQs from a running
	// transfer's port queues neither timers nor copies.
	s.activeMu.Lock()
	if recheck {
		delete(s.rechecks, src)
	}
	if _, dup := s.active[src]; dup {
		_, pending := s.rechecks[src]
		if !recheck && !pending {
			s.rechecks[src] = struct{}{}
			s.activeMu.Unlock()
			in.b = append([]byte(nil), b...)
			s.wg.Add(1) // before Start's Wait: we run in the listener goroutine
			time.AfterFunc(dupRecheck, func() {
				defer s.wg.Done()
				if ctx.Err() == nil {
					s.handle(ctx, l, in, make([]byte, 0, 128), logger, true)
				}
			})
			return
		}
		s.activeMu.Unlock()
		s.refuse(refusedDuplicate)
		log.Debug("tftp retransmitted request ignored: transfer already running")
		return
	}
	// Checked before the global bound so a flood from one address is
	// counted as such; a bound no tighter than the global one is that one.
	if n := s.perClient[src.Addr()]; n >= s.cfg.MaxPerClient && s.cfg.MaxPerClient < s.cfg.MaxTransfers {
		s.activeMu.Unlock()
		s.refuse(refusedPerClient)
		s.logSampled(ctx, log, slog.LevelWarn, refusedPerClient, "tftp request refused", "limit", s.cfg.MaxPerClient)
		l.reply(appendError(reply, errNotDefined, fmt.Sprintf("server busy: %d transfers from your address in progress", n)), src, dst)
		return
	}
	s.active[src] = struct{}{}
	s.perClient[src.Addr()]++
	s.activeMu.Unlock()
	if n := s.inFlight.Add(1); n > int64(s.cfg.MaxTransfers) {
		s.inFlight.Add(-1)
		s.release(src)
		s.refuse(refusedBusy)
		s.logSampled(ctx, log, slog.LevelWarn, refusedBusy, "tftp request refused", "limit", s.cfg.MaxTransfers)
		l.reply(appendError(reply, errNotDefined, fmt.Sprintf("server busy: %d transfers in progress", n-1)), src, dst)
		return
	}
	s.metrics.inFlight.Inc()
	blkCap := s.blockSizeCap(in.ifIndex, src.Addr().Is6())
	s.wg.Add(1)
	go func() {
		defer func() {
			s.release(src)
			s.inFlight.Add(-1)
			s.metrics.inFlight.Dec()
			s.wg.Done()
		}()
		s.transfer(ctx, req, name, src, dst, blkCap, log.With("name", name))
	}()
}

// release forgets a transfer of src that ended or was refused.
func (s *Server) release(src netip.AddrPort) {
	s.activeMu.Lock()
	defer s.activeMu.Unlock()
	delete(s.active, src)
	if a := src.Addr(); s.perClient[a] <= 1 {
		delete(s.perClient, a)
	} else {
		s.perClient[a]--
	}
}

func (s *Server) refuse(reason string) { s.metrics.refused.WithLabelValues(reason).Inc() }

// logSampler keeps a flood of refusals or failures from becoming a flood
// of log lines: one line a second per reason, carrying how many were left
// out since (the metrics count every one).
type logSampler struct {
	mu   sync.Mutex
	last map[string]sample // keyed by the refused*/failed* constants only
}

type sample struct {
	at      time.Time
	dropped int
}

func (l *logSampler) allow(reason string, now time.Time) (ok bool, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.last[reason]
	if !e.at.IsZero() && now.Sub(e.at) < time.Second {
		e.dropped++
		l.last[reason] = e
		return false, 0
	}
	l.last[reason] = sample{at: now}
	return true, e.dropped
}

func (s *Server) logSampled(ctx context.Context, log *slog.Logger, level slog.Level, reason, msg string, args ...any) {
	if !log.Enabled(ctx, level) {
		return
	}
	ok, dropped := s.sampler.allow(reason, time.Now())
	if !ok {
		return
	}
	args = append(args, "reason", reason)
	if dropped > 0 {
		args = append(args, "suppressed", dropped)
	}
	log.Log(ctx, level, msg, args...)
}

// blockSizeCap is the largest blksize that fits one datagram on the
// interface a request came in on (RFC 2348 leaves this to the server; PXE
// ROMs cannot reassemble IP fragments), and never more than MaxBlockSize.
func (s *Server) blockSizeCap(ifIndex int, v6 bool) int {
	limit := 1468 // Ethernet when the interface is unknown
	if mtu := s.mtu(ifIndex); mtu > 0 {
		overhead := 20 + 8 + 4 // IPv4, UDP, TFTP DATA header
		if v6 {
			overhead = 40 + 8 + 4
		}
		limit = mtu - overhead
	}
	if s.cfg.MaxBlockSize > 0 && s.cfg.MaxBlockSize < limit {
		limit = s.cfg.MaxBlockSize
	}
	return max(min(limit, maxBlockSize), defaultBlockSize)
}

// mtu looks an interface's MTU up, cached for a minute: net.InterfaceByIndex
// dumps every link over netlink, too dear for each request.
func (s *Server) mtu(ifIndex int) int {
	if ifIndex <= 0 {
		return 0
	}
	s.mtuMu.Lock()
	e, ok := s.mtus[ifIndex]
	s.mtuMu.Unlock()
	if ok && time.Since(e.at) < time.Minute {
		return e.mtu
	}
	ifi, err := net.InterfaceByIndex(ifIndex)
	if err != nil {
		return 0
	}
	s.mtuMu.Lock()
	s.mtus[ifIndex] = mtuEntry{mtu: ifi.MTU, at: time.Now()}
	s.mtuMu.Unlock()
	return ifi.MTU
}
