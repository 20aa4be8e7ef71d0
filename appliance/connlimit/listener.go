// Package connlimit owns how many connections an HTTP server on the node
// holds and for how long: a net.Listener that caps connections in total and
// per client address, closing the longest-idle keep-alive connection to make
// room and riding out EMFILE/ENFILE from accept, and the server timeouts and
// per-request deadlines (minimum body rate, write progress) that keep a slow
// or silent client from holding a connection or a handler.
//
// An outside probe found the node's servers without read, header or idle
// timeouts: 20,000 keep-alive connections after one request each exhausted
// the node's file descriptors, and bodies sent at a byte a second held
// handlers as long as the client liked. Every listener (API, boot files,
// HTTPS, node-to-node calls) is meant to be wired as:
//
//	srv := &http.Server{Handler: h, ConnContext: ...}
//	if err := connlimit.ApplyTimeouts(srv, connlimit.Timeouts{}); err != nil { ... }
//	l, err := connlimit.NewListener(ln, srv, connlimit.Limits{})
//	if err != nil { ... }
//	go srv.Serve(l) // or srv.ServeTLS(l, "", "")
package connlimit

import (
	"container/list"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// Defaults for Limits. Four listeners at DefaultMaxConns hold at most 4,096
// descriptors, well under the node's limit of 20,000 with room left for
// bbolt, Raft, TFTP, image files and outbound calls. DefaultMaxConnsPerClient
// is far above what a browser (6), the CLI, a PXE client or a peer's pool
// keeps busy at once, and lets one address take a sixteenth of a listener.
const (
	DefaultMaxConns          = 1024
	DefaultMaxConnsPerClient = 64
	// DefaultNewIdleAfter matches net/http's Server.Shutdown, which treats a
	// connection that has been new for 5 s as idle (golang.org/issue/22682).
	DefaultNewIdleAfter = 5 * time.Second
)

// Limits caps the connections a Listener holds. Zero fields take the
// defaults above.
type Limits struct {
	// MaxConns is the most connections open at once.
	MaxConns int
	// MaxConnsPerClient is the most connections open at once from one
	// client: one IPv4 address, or one IPv6 /64 (what a single host or
	// subscriber is usually given).
	MaxConnsPerClient int
	// NewIdleAfter is how long a connection may sit without a complete first
	// request header before it counts as idle and may be closed to make room:
	// it is either silent or slower than any real client.
	NewIdleAfter time.Duration
}

func (lim Limits) withDefaults() (Limits, error) {
	if lim.MaxConns < 0 || lim.MaxConnsPerClient < 0 || lim.NewIdleAfter < 0 {
		return lim, fmt.Errorf("connlimit: limits %+v: want 0 (the default) or more in every field", lim)
	}
	if lim.MaxConns == 0 {
		lim.MaxConns = DefaultMaxConns
	}
	if lim.MaxConnsPerClient == 0 {
		lim.MaxConnsPerClient = DefaultMaxConnsPerClient
	}
	if lim.NewIdleAfter == 0 {
		lim.NewIdleAfter = DefaultNewIdleAfter
	}
	return lim, nil
}

// Stats counts what a Listener has done.
type Stats struct {
	Open        int    // accepted and neither closed nor hijacked yet
	Idle        int    // of Open, between requests on a keep-alive connection
	Refused     uint64 // accepted and closed at once: a cap was full and nothing was idle
	Evicted     uint64 // idle connections closed to make room
	FDExhausted uint64 // accepts that failed with EMFILE or ENFILE
}

// Listener is a net.Listener that enforces Limits on an http.Server.
//
// It returns the inner listener's connections unwrapped, so ConnContext
// type assertions (*net.TCPConn, raftfsm's call connections) and sendfile
// keep working; it learns each connection's state from the server's
// ConnState hook, which NewListener installs. A hijacked connection stops
// counting: its new owner closes it.
type Listener struct {
	net.Listener
	lim       Limits
	done      chan struct{}
	closeOnce sync.Once

	mu      sync.Mutex
	conns   map[net.Conn]*entry
	clients map[netip.Prefix]*client
	all     queues
	stats   Stats
}

// queues holds the connections that may be closed to make room, each list
// in the order they entered its state, so the front is the longest waiting.
type queues struct {
	fresh list.List // accepted, no request header yet (http.StateNew)
	idle  list.List // between requests (http.StateIdle)
}

type client struct {
	key netip.Prefix
	n   int
	queues
}

type state uint8

const (
	stateNew state = iota
	stateActive
	stateIdle
)

type entry struct {
	conn   net.Conn
	client *client
	state  state
	since  time.Time
	// Where the entry sits in the listener's and its client's queues; nil
	// while active.
	allList, mineList *list.List
	allElem, mineElem *list.Element
}

// NewListener wraps inner and installs the ConnState hook on srv that tells
// the listener which connections are idle; a hook srv already has still
// runs, after it. Set srv.ConnState before this call, never after.
func NewListener(inner net.Listener, srv *http.Server, lim Limits) (*Listener, error) {
	lim, err := lim.withDefaults()
	if err != nil {
		return nil, err
	}
	if inner == nil || srv == nil {
		return nil, errors.New("connlimit: new listener: need a listener and a server")
	}
	l := &Listener{
		Listener: inner,
		lim:      lim,
		done:     make(chan struct{}),
		conns:    make(map[net.Conn]*entry),
		clients:  make(map[netip.Prefix]*client),
	}
	prev := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		l.ConnState(c, s)
		if prev != nil {
			prev(c, s)
		}
	}
	return l, nil
}

// Accept returns the next connection that fits the limits. Connections that
// do not fit are accepted and closed here, so the kernel backlog drains and
// Accept never blocks on a full cap. EMFILE and ENFILE are ridden out: the
// longest-idle connection is closed to free a descriptor and Accept retries
// after a short backoff, instead of returning an error that would make a
// server spin or stop.
func (l *Listener) Accept() (net.Conn, error) {
	var backoff time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE) {
				return nil, err
			}
			l.mu.Lock()
			l.stats.FDExhausted++
			victim := l.evictLocked(&l.all, time.Now())
			l.mu.Unlock()
			if victim != nil {
				victim.Close()
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), 200*time.Millisecond)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-l.done: // the next Accept returns the inner listener's closed error
			}
			t.Stop()
			continue
		}
		backoff = 0
		if l.admit(c) {
			return c, nil
		}
	}
}

// Close closes the inner listener, ending a backoff in Accept. Connections
// already accepted are the server's to close (http.Server.Shutdown).
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// admit records c, first closing the oldest idle connection of its client
// (when the client is at its cap) or of anyone (when the listener is). It
// closes c and reports false when the cap is full and nothing is idle.
func (l *Listener) admit(c net.Conn) bool {
	now := time.Now()
	key := clientKey(c.RemoteAddr())
	l.mu.Lock()
	cl := l.clients[key]
	var victim net.Conn
	full := false
	switch {
	case cl != nil && cl.n >= l.lim.MaxConnsPerClient:
		// A client at its cap makes room among its own connections only,
		// so a flood from one address never closes anyone else's.
		full = true
		victim = l.evictLocked(&cl.queues, now)
	case len(l.conns) >= l.lim.MaxConns:
		full = true
		victim = l.evictLocked(&l.all, now)
	}
	if full && victim == nil {
		l.stats.Refused++
		l.mu.Unlock()
		c.Close()
		return false
	}
	if cl == nil {
		cl = &client{key: key}
		l.clients[key] = cl
	}
	cl.n++
	e := &entry{conn: c, client: cl}
	l.conns[c] = e
	l.moveLocked(e, stateNew, now)
	l.mu.Unlock()
	if victim != nil {
		victim.Close()
	}
	return true
}

// ConnState is the http.Server.ConnState hook NewListener installs.
func (l *Listener) ConnState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.lookupLocked(c)
	if e == nil {
		return // evicted already, or not ours
	}
	switch s {
	case http.StateNew:
		// Queued as new when accepted.
	case http.StateActive:
		l.moveLocked(e, stateActive, time.Now())
	case http.StateIdle:
		l.moveLocked(e, stateIdle, time.Now())
	case http.StateHijacked, http.StateClosed:
		l.dropLocked(e)
	}
}

// lookupLocked finds the entry for c, which is the accepted connection or,
// behind ServeTLS, a *tls.Conn around it.
func (l *Listener) lookupLocked(c net.Conn) *entry {
	for c != nil {
		if e, ok := l.conns[c]; ok {
			return e
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// evictLocked forgets and returns the connection in q that has waited
// longest, idle or new for at least NewIdleAfter, for the caller to close
// once the lock is released; nil when there is none.
func (l *Listener) evictLocked(q *queues, now time.Time) net.Conn {
	var best *entry
	if f := q.idle.Front(); f != nil {
		best = f.Value.(*entry)
	}
	if f := q.fresh.Front(); f != nil {
		e := f.Value.(*entry)
		if now.Sub(e.since) >= l.lim.NewIdleAfter && (best == nil || e.since.Before(best.since)) {
			best = e
		}
	}
	if best == nil {
		return nil
	}
	l.dropLocked(best)
	l.stats.Evicted++
	return best.conn
}

func (l *Listener) moveLocked(e *entry, s state, now time.Time) {
	if e.allList != nil {
		e.allList.Remove(e.allElem)
		e.mineList.Remove(e.mineElem)
		e.allList, e.mineList = nil, nil
	}
	e.state, e.since = s, now
	switch s {
	case stateNew:
		e.allList, e.mineList = &l.all.fresh, &e.client.fresh
	case stateIdle:
		e.allList, e.mineList = &l.all.idle, &e.client.idle
	default:
		return
	}
	e.allElem = e.allList.PushBack(e)
	e.mineElem = e.mineList.PushBack(e)
}

func (l *Listener) dropLocked(e *entry) {
	l.moveLocked(e, stateActive, time.Time{}) // out of the queues
	delete(l.conns, e.conn)
	e.client.n--
	if e.client.n == 0 {
		delete(l.clients, e.client.key)
	}
}

// Stats returns the listener's counters.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Open = len(l.conns)
	s.Idle = l.all.idle.Len()
	return s
}

// clientKey is the address a per-client cap applies to: an IPv4 address
// (IPv4-mapped IPv6 included), or the /64 of an IPv6 address. Addresses that
// are not IP (a Unix socket) share the zero prefix.
func clientKey(a net.Addr) netip.Prefix {
	var ip netip.Addr
	switch a := a.(type) {
	case nil:
	case *net.TCPAddr:
		ip = a.AddrPort().Addr()
	default:
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			ip = ap.Addr()
		}
	}
	ip = ip.Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}
