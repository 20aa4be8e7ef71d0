package tftp

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pin/tftp/v3/netascii"
)

// The sender is a plain lock-step RFC 1350 loop tuned for the per-packet
// cost that decides throughput on a LAN (each block is a round trip, so
// the latency from ACK in to DATA out is the transfer rate):
//
//   - a connected UDP socket per transfer: Read and Write with no address
//     conversion or allocation, and the kernel drops datagrams from any
//     other peer (RFC 1350's TID check) before they wake us;
//   - while no more transfers run than there are Ps (GOMAXPROCS), the socket
//     is a blocking one read(2) from directly, as tftpd-hpa does: the
//     thread sleeps in recv and the kernel wakes it, saving the EAGAIN read,
//     epoll_wait and goroutine hand-off per block (measured on loopback: a
//     third less CPU per block and about twice the rate at blksize 512).
//     Past that, blocked threads fight over the Ps (the CPU per transfer
//     doubled with 200 at once), so further transfers use Go's netpoller;
//   - the netpoller's read deadline is re-armed only when it has drifted by
//     more than a quarter of the timeout, not once per datagram;
//   - the file is read through a pooled 64 KiB buffer, not one read(2) per
//     block; nothing is allocated per block;
//   - duplicate ACKs are ignored, never answered with a resend (Sorcerer's
//     Apprentice Syndrome, RFC 1123 4.2.3.1): only a timeout retransmits;
//   - block numbers wrap 65535 → 0 as tftp-hpa, atftp, iPXE and UEFI expect,
//     so files past 32 MiB at blksize 512 work;
//   - a transfer's lifetime is one timer that shuts its socket down as Stop
//     does, so it also ends a read that is waiting, with no check per block.

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

type transferError struct {
	reason string // failed* metric label
	err    error
}

func (e *transferError) Error() string { return e.err.Error() }
func (e *transferError) Unwrap() error { return e.err }

// errSizeProbe ends a transfer the client aborted right after our OACK told
// it tsize: UEFI firmware does this before every real download.
var errSizeProbe = errors.New("client aborted after learning the size")

func (s *Server) transfer(ctx context.Context, req Request, name string, src netip.AddrPort, dst netip.Addr, blkCap int, log *slog.Logger) {
	start := time.Now()
	var laddr *net.UDPAddr
	if dst.IsValid() {
		laddr = &net.UDPAddr{IP: dst.AsSlice()}
	}
	var conn packetConn
	var err error
	if s.inFlight.Load() <= int64(s.blockingMax) {
		conn, err = dialBlocking(dst, src, s.cfg.Timeout)
	}
	if conn == nil {
		var c *net.UDPConn
		if c, err = net.DialUDP("udp", laddr, net.UDPAddrFromAddrPort(src)); err == nil {
			conn = &netConn{c: c}
		}
	}
	if err != nil {
		s.refuse(refusedSocket)
		log.Error("tftp transfer socket", "err", err)
		return
	}
	t := &sender{conn: conn, timeout: s.cfg.Timeout, maxTimeout: s.cfg.MaxTimeout, retries: s.cfg.Retries, buf: make([]byte, 4+defaultBlockSize)}
	defer t.close()

	// Before the size is known only the ceiling applies (a slow Resolver).
	octx, cancel := context.WithDeadline(ctx, start.Add(s.cfg.MaxLifetime))
	defer cancel()
	rc, size, reason, err := s.open(octx, name, src)
	if err != nil {
		s.refuse(reason)
		code, msg := errFileNotFound, "file not found"
		switch reason {
		case refusedDenied:
			code, msg = errAccessViolation, "access violation"
		case refusedResolver:
			code, msg = errNotDefined, "cannot read file"
		}
		level := slog.LevelInfo
		if reason != refusedNotFound {
			level = slog.LevelWarn
		}
		s.logSampled(ctx, log, level, reason, "tftp request refused", "err", err)
		t.sendError(code, msg)
		return
	}
	defer rc.Close()

	life := s.cfg.lifetime(size)
	var r io.Reader = rc
	if req.Mode == "netascii" {
		r = netascii.ToReader(r)
		if size >= 0 && size < 1<<62 {
			life = s.cfg.lifetime(2 * size) // at most every byte doubles
		}
		size = -1 // the converted length is unknown until sent
	}
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		readerPool.Put(br)
	}()

	s.metrics.started.Inc()
	stop := context.AfterFunc(ctx, func() { t.halt(haltCanceled) })
	defer stop()
	expire := time.AfterFunc(time.Until(start.Add(life)), func() { t.halt(haltExpired) })
	defer expire.Stop()

	sent, err := t.run(br, req, size, blkCap)
	s.metrics.bytes.Add(float64(sent))
	log = log.With("bytes", sent, "blksize", t.blksize, "duration", time.Since(start).Round(time.Microsecond))
	var te *transferError
	switch {
	case err == nil:
		s.metrics.finished.WithLabelValues("complete").Inc()
		log.Info("tftp transfer complete", "retransmits", t.retransmits)
	case errors.Is(err, errSizeProbe):
		s.metrics.finished.WithLabelValues("size-probe").Inc()
		log.Debug("tftp size probe answered", "tsize", size)
	case errors.As(err, &te):
		s.metrics.failed.WithLabelValues(te.reason).Inc()
		s.logSampled(ctx, log, slog.LevelWarn, te.reason, "tftp transfer failed", "err", err, "retransmits", t.retransmits, "lifetime", life)
	}
}

// open resolves a cleaned name: the allow-list first, then the Resolver.
func (s *Server) open(ctx context.Context, name string, src netip.AddrPort) (io.ReadCloser, int64, string, error) {
	f, size, err := s.roots.open(name)
	switch {
	case err == nil:
		return f, size, "", nil
	case errors.Is(err, errNotFound) && s.cfg.Resolver != nil:
		rc, size, err := s.cfg.Resolver(ctx, name, src)
		switch {
		case err == nil:
			return rc, size, "", nil
		case errors.Is(err, fs.ErrNotExist):
			return nil, 0, refusedNotFound, err
		default:
			return nil, 0, refusedResolver, err
		}
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0, refusedNotFound, err
	default:
		// Escapes its root, is not a regular file, or cannot be opened.
		return nil, 0, refusedDenied, err
	}
}

type sender struct {
	conn        packetConn
	timeout     time.Duration
	maxTimeout  time.Duration // the longest timeout option honoured
	retries     int
	blksize     int
	buf         []byte // the packet in flight, kept for retransmission
	ack         [516]byte
	halted      atomic.Int32 // haltCanceled or haltExpired once the transfer must end
	retransmits int

	mu     sync.Mutex // keeps halt's Shutdown off a closed (maybe reused) fd
	closed bool
}

// Why a transfer was halted from outside its loop.
const (
	haltCanceled int32 = 1 + iota // the server stopped
	haltExpired                   // its lifetime passed
)

// halt ends the transfer from another goroutine: it wakes a blocked Read,
// and the loop then tells the client why.
func (t *sender) halt(why int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed && t.halted.CompareAndSwap(0, why) {
		t.conn.Shutdown()
	}
}

func (t *sender) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.conn.Close()
}

// haltErr tells the client why its transfer was halted and returns the
// error to count.
func (t *sender) haltErr(why int32) error {
	if why == haltExpired {
		t.sendError(errNotDefined, "transfer time limit exceeded")
		return &transferError{failedExpired, errors.New("transfer outlived its lifetime")}
	}
	t.sendError(errNotDefined, "server shutting down")
	return &transferError{failedCanceled, errors.New("server stopped")}
}

// run negotiates options (RFC 2347) and sends the file. It returns the file
// bytes sent.
func (t *sender) run(r io.Reader, req Request, size int64, blkCap int) (int64, error) {
	t.blksize = defaultBlockSize
	oackBlk, oackSize, oackTimeout := 0, int64(-1), time.Duration(0)
	if req.BlockSize > 0 {
		t.blksize = min(req.BlockSize, blkCap)
		oackBlk = t.blksize
	}
	if req.TSize && size >= 0 {
		oackSize = size
	}
	// Past our cap the option is declined, not answered with a smaller
	// value (RFC 2349 says the OACK must echo it; EDK2 checks): a client
	// asking 255 s gets our Timeout and cannot hold a slot for 255 s a try.
	if req.Timeout > 0 && req.Timeout <= t.maxTimeout {
		t.timeout, oackTimeout = req.Timeout, req.Timeout
	}
	if cap(t.buf) < 4+t.blksize {
		t.buf = make([]byte, 4+t.blksize)
	}
	if oackBlk > 0 || oackSize >= 0 || oackTimeout > 0 {
		t.buf = appendOACK(t.buf[:0], oackBlk, oackSize, oackTimeout)
		if err := t.exchange(0); err != nil {
			var pe *peerErr
			if oackSize >= 0 && errors.As(err, &pe) {
				return 0, fmt.Errorf("%w: %w", errSizeProbe, err)
			}
			return 0, err
		}
	}

	var sent int64
	block := uint16(1)
	pkt := t.buf[:4+t.blksize]
	binary.BigEndian.PutUint16(pkt[0:2], opDATA)
	for {
		if why := t.halted.Load(); why != 0 {
			return sent, t.haltErr(why)
		}
		n, err := io.ReadFull(r, pkt[4:])
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			t.sendError(errNotDefined, "cannot read file")
			return sent, &transferError{failedRead, fmt.Errorf("read block %d: %w", block, err)}
		}
		binary.BigEndian.PutUint16(pkt[2:4], block)
		t.buf = pkt[:4+n]
		if err := t.exchange(block); err != nil {
			return sent, err
		}
		sent += int64(n)
		if n < t.blksize {
			return sent, nil
		}
		block++ // wraps to 0 after 65535
	}
}

type peerErr struct {
	code uint16
	msg  string
}

func (e *peerErr) Error() string { return fmt.Sprintf("client sent error %d: %q", e.code, e.msg) }

// exchange sends t.buf and waits for the ACK of block, retransmitting on
// timeout only.
func (t *sender) exchange(block uint16) error {
	for attempt := 0; ; attempt++ {
		if _, err := t.conn.Write(t.buf); err != nil {
			return t.sockErr(block, err)
		}
		deadline := time.Now().Add(t.timeout)
		if err := t.conn.Arm(deadline, t.timeout, attempt > 0); err != nil {
			return &transferError{failedSend, err}
		}
		for {
			n, err := t.conn.Read(t.ack[:])
			if err != nil {
				if errors.Is(err, errTimeout) {
					break
				}
				return t.sockErr(block, err)
			}
			if t.halted.Load() != 0 {
				break
			}
			if n >= 4 {
				switch binary.BigEndian.Uint16(t.ack[0:2]) {
				case opACK:
					if binary.BigEndian.Uint16(t.ack[2:4]) == block {
						return nil
					}
					// A duplicate or stale ACK: keep waiting, never resend.
				case opERROR:
					code, msg := peerError(t.ack[:n])
					return &transferError{failedPeer, &peerErr{code, msg}}
				}
			}
			// Ignored packets must not hold the retransmission off.
			if time.Now().After(deadline) {
				break
			}
		}
		if why := t.halted.Load(); why != 0 {
			return t.haltErr(why)
		}
		if attempt >= t.retries {
			t.sendError(errNotDefined, "timeout")
			return &transferError{failedTimeout, fmt.Errorf("no ACK for block %d after %d retransmissions", block, attempt)}
		}
		t.retransmits++
	}
}

// sockErr classifies a socket error: ECONNREFUSED on a connected UDP socket
// is the client's ICMP port unreachable, i.e. it went away.
func (t *sender) sockErr(block uint16, err error) error {
	if why := t.halted.Load(); why != 0 {
		return t.haltErr(why)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return &transferError{failedPeer, fmt.Errorf("block %d: client port unreachable", block)}
	}
	return &transferError{failedSend, fmt.Errorf("block %d: %w", block, err)}
}

func (t *sender) sendError(code uint16, msg string) {
	_, _ = t.conn.Write(appendError(t.ack[:0], code, msg))
}

var errTimeout = errors.New("timeout")

// packetConn is a transfer's connected socket.
type packetConn interface {
	Write([]byte) (int, error)
	// Read returns errTimeout once the armed timeout passes.
	Read([]byte) (int, error)
	// Arm sets the timeout for the reads after a send.
	Arm(deadline time.Time, timeout time.Duration, force bool) error
	// Shutdown wakes a blocked Read (which then reports an error or 0).
	Shutdown()
	Close() error
}

type netConn struct {
	c        *net.UDPConn
	deadline time.Time
	// mu and shut keep Shutdown's past deadline from being re-armed by a
	// concurrent Arm (which would leave the read waiting a full timeout).
	mu   sync.Mutex
	shut bool
}

func (c *netConn) Write(b []byte) (int, error) { return c.c.Write(b) }

func (c *netConn) Read(b []byte) (int, error) {
	n, err := c.c.Read(b)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = errTimeout
	}
	return n, err
}

// Arm re-arms the deadline only when it has drifted by more than a quarter
// of the timeout: a runtime timer update per datagram is measurable.
func (c *netConn) Arm(deadline time.Time, timeout time.Duration, force bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shut {
		return nil
	}
	if force || deadline.Sub(c.deadline) > timeout/4 {
		c.deadline = deadline
		return c.c.SetReadDeadline(deadline)
	}
	return nil
}

func (c *netConn) Shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shut = true
	_ = c.c.SetReadDeadline(time.Unix(1, 0))
}
func (c *netConn) Close() error { return c.c.Close() }
