package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// One TCP port carries two protocols, told apart by TLS ALPN:
// Raft's own framing, and HTTP/1.1 for node-to-node calls (forwarded writes,
// status, join). Raft requires a client certificate from the cluster CA; the
// call protocol admits a certificate-less client only for joining (enforced
// per route in rpc.go).
const (
	alpnRaft = "rollcall-raft/1"
	alpnRPC  = "rollcall-rpc/1"
)

// PeerCheck decides whether a verified client certificate may speak Raft or
// call other nodes (for instance: not a removed node, not a revoked
// serial). It gets the CN and the verified leaf certificate. Raft
// connections already open are checked again every peerRecheckEvery, so a
// revocation closes them too.
type PeerCheck func(cn string, leaf *x509.Certificate) error

// peerRecheckEvery is how often open Raft connections are checked again.
const peerRecheckEvery = 5 * time.Second

// mux accepts TLS connections and hands each to the listener of its
// protocol.
type mux struct {
	ln      net.Listener
	tls     *tls.Config
	check   PeerCheck
	verify  func(tls.ConnectionState) (string, bool)
	log     *slog.Logger
	raft    *chanListener
	rpc     *chanListener
	closeMu sync.Once
	closed  atomic.Bool

	// Handshakes in progress, in all and per source address: anyone who
	// reaches the cluster port can open connections before it proves
	// anything, and each holds a descriptor for up to handshakeTimeout.
	hsMu      sync.Mutex
	hsTotal   int
	hsPerAddr map[netip.Addr]int

	// refusedLogged is when a refused certificate was last logged at warn
	// level (unix nanoseconds): one a second at most, the rest at debug.
	refusedLogged atomic.Int64

	// Raft connections accepted, with the peer each was admitted as.
	liveMu sync.Mutex
	live   map[*trackedConn]struct{}
}

// trackedConn is an accepted Raft connection; it leaves mux.live when
// closed.
type trackedConn struct {
	*tls.Conn
	m    *mux
	cn   string
	leaf *x509.Certificate
	once sync.Once
}

func (t *trackedConn) Close() error {
	t.once.Do(func() {
		t.m.liveMu.Lock()
		delete(t.m.live, t)
		t.m.liveMu.Unlock()
	})
	return t.Conn.Close()
}

// recheck closes every open Raft connection whose peer check now fails.
func (m *mux) recheck() {
	m.liveMu.Lock()
	conns := make([]*trackedConn, 0, len(m.live))
	for c := range m.live {
		conns = append(conns, c)
	}
	m.liveMu.Unlock()
	for _, c := range conns {
		if err := m.check(c.cn, c.leaf); err != nil {
			m.log.Warn("cluster port: open raft connection closed: its peer is no longer admitted", "remote", c.RemoteAddr(), "peer", c.cn, "err", err)
			c.Close()
		}
	}
}

func (m *mux) recheckLoop() {
	t := time.NewTicker(peerRecheckEvery)
	defer t.Stop()
	for range t.C {
		if m.closed.Load() {
			return
		}
		m.recheck()
	}
}

// Bounds on unauthenticated handshakes on the cluster port: a cluster has a
// handful of peers, each opening a few connections at a time.
const (
	handshakeTimeout   = 5 * time.Second
	maxHandshakes      = 1024
	maxHandshakesPerIP = 16
	acceptBackoffMax   = time.Second
	acceptBackoffMin   = 5 * time.Millisecond
)

func newMux(ln net.Listener, cfg *tls.Config, verify func(tls.ConnectionState) (string, bool), check PeerCheck, log *slog.Logger) *mux {
	srv := cfg.Clone()
	srv.NextProtos = []string{alpnRaft, alpnRPC}
	if get := srv.GetConfigForClient; get != nil {
		// A config that picks its settings per handshake (pki.PeerCert:
		// the roots held at that moment) still speaks our protocols.
		srv.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := get(h)
			if c != nil {
				c = c.Clone()
				c.NextProtos = srv.NextProtos
			}
			return c, err
		}
	}
	m := &mux{
		ln: ln, tls: srv, check: check, verify: verify, log: log,
		raft: newChanListener(ln.Addr()),
		rpc:  newChanListener(ln.Addr()),

		hsPerAddr: map[netip.Addr]int{},
		live:      map[*trackedConn]struct{}{},
	}
	go m.serve()
	go m.recheckLoop()
	return m
}

// serve accepts until the listener is closed. Any other Accept error (out
// of descriptors, say) is waited out: returning would close Raft's stream
// layer for good.
func (m *mux) serve() {
	backoff := acceptBackoffMin
	for {
		c, err := m.ln.Accept()
		if err != nil {
			if m.closed.Load() || errors.Is(err, net.ErrClosed) {
				m.raft.close()
				m.rpc.close()
				return
			}
			m.log.Warn("cluster port: accept failed; retrying", "err", err, "in", backoff)
			time.Sleep(backoff)
			backoff = min(2*backoff, acceptBackoffMax)
			continue
		}
		backoff = acceptBackoffMin
		if !m.startHandshake(c) {
			m.log.Debug("cluster port: too many handshakes in progress; connection closed", "remote", c.RemoteAddr())
			c.Close()
			continue
		}
		go m.route(c)
	}
}

func remoteAddr(c net.Conn) netip.Addr {
	ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	return ap.Addr().Unmap()
}

func (m *mux) startHandshake(c net.Conn) bool {
	a := remoteAddr(c)
	m.hsMu.Lock()
	defer m.hsMu.Unlock()
	if m.hsTotal >= maxHandshakes || m.hsPerAddr[a] >= maxHandshakesPerIP {
		return false
	}
	m.hsTotal++
	m.hsPerAddr[a]++
	return true
}

func (m *mux) endHandshake(c net.Conn) {
	a := remoteAddr(c)
	m.hsMu.Lock()
	defer m.hsMu.Unlock()
	m.hsTotal--
	if m.hsPerAddr[a]--; m.hsPerAddr[a] <= 0 {
		delete(m.hsPerAddr, a)
	}
}

func (m *mux) route(c net.Conn) {
	tc := tls.Server(c, m.tls)
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	err := tc.HandshakeContext(ctx)
	m.endHandshake(c)
	if err != nil {
		m.logHandshake(c.RemoteAddr(), err)
		c.Close()
		return
	}
	cs := tc.ConnectionState()
	switch cs.NegotiatedProtocol {
	case alpnRaft:
		cn, ok := m.verify(cs)
		if !ok {
			m.log.Warn("cluster port: raft connection without a cluster certificate refused", "remote", c.RemoteAddr())
			c.Close()
			return
		}
		leaf := cs.VerifiedChains[0][0]
		if err := m.check(cn, leaf); err != nil {
			m.log.Warn("cluster port: raft connection refused", "remote", c.RemoteAddr(), "peer", cn, "err", err)
			c.Close()
			return
		}
		t := &trackedConn{Conn: tc, m: m, cn: cn, leaf: leaf}
		m.liveMu.Lock()
		m.live[t] = struct{}{}
		m.liveMu.Unlock()
		m.raft.push(t)
	case alpnRPC:
		// net/http hands a *tls.Conn with a non-HTTP ALPN to TLSNextProto
		// and closes it otherwise; wrapped, it is served as HTTP/1.1 and the
		// TLS state travels in the request context (see peerState).
		m.rpc.push(&callConn{Conn: tc, state: cs})
	default:
		c.Close()
	}
}

func (m *mux) Close() error {
	var err error
	m.closeMu.Do(func() { m.closed.Store(true); err = m.ln.Close() })
	return err
}

// callConn is an accepted node-call connection and its TLS state.
type callConn struct {
	net.Conn
	state tls.ConnectionState
}

type peerStateKey struct{}

// connContext puts a call connection's TLS state into its requests' context.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if cc, ok := c.(*callConn); ok {
		return context.WithValue(ctx, peerStateKey{}, &cc.state)
	}
	return ctx
}

// peerState is the TLS state of the connection a node call arrived on.
func peerState(r *http.Request) *tls.ConnectionState {
	cs, _ := r.Context().Value(peerStateKey{}).(*tls.ConnectionState)
	return cs
}

// chanListener is a net.Listener fed by the mux.
type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) close() { l.once.Do(func() { close(l.done) }) }

func (l *chanListener) Close() error { l.close(); return nil }

func (l *chanListener) Addr() net.Addr { return l.addr }

// streamLayer is Raft's view of the mux: it accepts Raft connections and
// dials other nodes with the Raft ALPN.
type streamLayer struct {
	*chanListener
	advertise net.Addr
	client    *tls.Config
}

func (s *streamLayer) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.chanListener.Addr()
}

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	cfg := s.client.Clone()
	cfg.NextProtos = []string{alpnRaft}
	d := &net.Dialer{Timeout: timeout}
	c, err := tls.DialWithDialer(d, "tcp", string(address), cfg)
	if err != nil {
		return nil, err
	}
	if c.ConnectionState().NegotiatedProtocol != alpnRaft {
		c.Close()
		return nil, errors.New("peer does not speak rollcall raft")
	}
	return c, nil
}

// DialCalls opens a node-call connection to another node's cluster port.
// A joining node uses it with a pinned-CA configuration and no certificate.
func DialCalls(ctx context.Context, client *tls.Config, addr string) (net.Conn, error) {
	cfg := client.Clone()
	cfg.NextProtos = []string{alpnRPC}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if c.(*tls.Conn).ConnectionState().NegotiatedProtocol != alpnRPC {
		c.Close()
		return nil, errors.New("peer does not speak rollcall rpc")
	}
	return c, nil
}

type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }

// refusedCert reports whether a handshake failed on a certificate the peer
// presented: refused by pki.PeerCert's checks ("peer tls: …") or by the
// verifier (another CA's).
func refusedCert(err error) bool {
	s := err.Error()
	return strings.Contains(s, "peer tls:") || strings.Contains(s, "failed to verify certificate")
}

// logHandshake logs a failed handshake. A certificate that was presented
// and refused (another CA's, a revoked or non-node one: pki.PeerCert's
// "peer tls:" errors) is worth an operator's attention and is a warning,
// at most one a second so a hostile peer cannot flood the log; anything
// else (a scanner, a dropped connection) stays at debug level.
func (m *mux) logHandshake(remote net.Addr, err error) {
	now := time.Now().UnixNano()
	if last := m.refusedLogged.Load(); refusedCert(err) && now-last >= int64(time.Second) && m.refusedLogged.CompareAndSwap(last, now) {
		m.log.Warn("cluster port: certificate refused", "remote", remote, "err", err)
		return
	}
	m.log.Debug("cluster port: handshake failed", "remote", remote, "err", err)
}
