package connlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"time"
)

// Defaults for Timeouts.
const (
	// DefaultReadHeader bounds the TLS handshake and the request line and
	// headers, which a real client sends in one round trip.
	DefaultReadHeader = 10 * time.Second
	// DefaultIdle is how long a keep-alive connection may wait for its next
	// request; shorter than Go's client (90 s), so the server closes first
	// and the client retries on a new connection as it is built to.
	DefaultIdle = 60 * time.Second
	// DefaultMaxHeaderBytes: the API's headers are a token and a few
	// fields; net/http's default of 1 MiB is 16 times what any of them needs.
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultBodyMinBytes per DefaultBodyInterval is about 100 B/s: far
	// below any real uploader, and a byte-a-second body is cut in 10 s.
	DefaultBodyMinBytes = 1 << 10
	DefaultBodyInterval = 10 * time.Second
	// DefaultWrite is how long one write of up to writePiece bytes may wait
	// for the client to make room: a reader that stalls is cut, a slow but
	// steady one (down to about 8 KiB/s) is not.
	DefaultWrite = 30 * time.Second
)

// writePiece is the most a single write deadline covers; longer writes and
// sendfile copies are split, each piece with a fresh deadline, so that a
// download of any size is never cut while it moves.
const writePiece = 256 << 10

// ErrSlowBody is returned by a request body read (wrapped around the
// deadline error) when the client sent less than BodyMinBytes in a
// BodyInterval. A handler may answer 408.
var ErrSlowBody = errors.New("connlimit: request body arrived too slowly")

// Timeouts bounds how long a client may take over each part of an exchange.
// Zero fields take the defaults above.
type Timeouts struct {
	ReadHeader     time.Duration // http.Server.ReadHeaderTimeout
	Idle           time.Duration // http.Server.IdleTimeout
	MaxHeaderBytes int           // http.Server.MaxHeaderBytes
	// A request body must deliver BodyMinBytes within each BodyInterval the
	// handler spends waiting for it, or the read fails with ErrSlowBody.
	BodyMinBytes int64
	BodyInterval time.Duration
	// Write is how long each write of the response (in pieces of at most
	// 256 KiB) may block on the client.
	Write time.Duration
}

func (t Timeouts) withDefaults() (Timeouts, error) {
	if t.ReadHeader < 0 || t.Idle < 0 || t.MaxHeaderBytes < 0 || t.BodyMinBytes < 0 || t.BodyInterval < 0 || t.Write < 0 {
		return t, fmt.Errorf("connlimit: timeouts %+v: want 0 (the default) or more in every field", t)
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&t.ReadHeader, DefaultReadHeader)
	def(&t.Idle, DefaultIdle)
	def(&t.BodyInterval, DefaultBodyInterval)
	def(&t.Write, DefaultWrite)
	if t.MaxHeaderBytes == 0 {
		t.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if t.BodyMinBytes == 0 {
		t.BodyMinBytes = DefaultBodyMinBytes
	}
	return t, nil
}

// ApplyTimeouts sets srv's header and idle timeouts and header size, and
// wraps srv.Handler (http.DefaultServeMux when nil) in Deadlines: call it
// once srv.Handler is set, before Serve.
//
// It leaves ReadTimeout and WriteTimeout alone, and they should stay zero:
// each is one deadline for a whole request or response, and would cut an
// image upload or download of hundreds of MB. Deadlines bounds both
// directions by progress instead.
func ApplyTimeouts(srv *http.Server, t Timeouts) error {
	t, err := t.withDefaults()
	if err != nil {
		return err
	}
	srv.ReadHeaderTimeout = t.ReadHeader
	srv.IdleTimeout = t.Idle
	srv.MaxHeaderBytes = t.MaxHeaderBytes
	h := srv.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	srv.Handler = deadlines(h, t)
	return nil
}

// Deadlines wraps h so that a request body must arrive at BodyMinBytes per
// BodyInterval and each write of the response must finish within Write,
// using the connection's deadlines through http.ResponseController, for
// HTTP/1 and HTTP/2 alike. It must be the outermost handler, given the
// server's own ResponseWriter. The ResponseWriter h sees still offers
// Flush, Hijack, ReadFrom (so sendfile stays) and Unwrap.
func Deadlines(h http.Handler, t Timeouts) (http.Handler, error) {
	t, err := t.withDefaults()
	if err != nil {
		return nil, err
	}
	return deadlines(h, t), nil
}

func deadlines(h http.Handler, t Timeouts) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		var body *rateReader
		if r.Body != nil && r.Body != http.NoBody {
			body = &rateReader{ReadCloser: r.Body, rc: rc, min: t.BodyMinBytes, interval: t.BodyInterval, left: t.BodyInterval}
			r.Body = body
		}
		dw := &deadlineWriter{ResponseWriter: w, rc: rc, d: t.Write}
		if r.ProtoMajor == 1 {
			defer func() {
				if dw.hijacked {
					return
				}
				// After we return, net/http flushes the response and reads
				// up to 256 KiB of unread body to reuse the connection; a
				// client that is slow at either loses the connection.
				now := time.Now()
				_ = rc.SetWriteDeadline(now.Add(t.Write))
				if body != nil && !body.eof {
					_ = rc.SetReadDeadline(now.Add(t.BodyInterval))
				}
			}()
		}
		h.ServeHTTP(dw, r)
	})
}

// rateReader fails a body that delivers less than min bytes within interval
// of waiting. Only time spent inside Read counts: a handler that pauses
// between reads (to write a file, to compute) does not use up the client's
// allowance.
type rateReader struct {
	io.ReadCloser
	rc       *http.ResponseController
	min      int64
	interval time.Duration
	got      int64         // bytes since the window opened
	left     time.Duration // waiting the window still allows
	eof      bool
}

func (b *rateReader) Read(p []byte) (int, error) {
	start := time.Now()
	_ = b.rc.SetReadDeadline(start.Add(b.left))
	n, err := b.ReadCloser.Read(p)
	b.left -= time.Since(start)
	b.got += int64(n)
	if b.got >= b.min {
		b.got, b.left = 0, b.interval
	}
	switch {
	case err == io.EOF:
		b.eof = true
		// At EOF net/http starts a background read of the connection; a
		// deadline left behind would cancel the request's context while
		// the handler is still working.
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = fmt.Errorf("%w: %w", ErrSlowBody, err)
	}
	return n, err
}

// deadlineWriter gives every write, flush and sendfile piece its own write
// deadline. net/http clears the write deadline after each request, so one
// left behind never reaches the next request on the connection.
type deadlineWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	d        time.Duration
	hijacked bool
}

func (w *deadlineWriter) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

// WriteHeader can write to the connection: a 1xx response is sent at once.
func (w *deadlineWriter) WriteHeader(code int) {
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	var n int
	for len(p) > 0 {
		k := min(len(p), writePiece)
		w.extend()
		m, err := w.ResponseWriter.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// ReadFrom keeps net/http's sendfile path (ServeContent of an *os.File)
// while giving each piece a deadline. net only recognises one
// *io.LimitedReader around a file, so a limited source is re-limited per
// piece rather than wrapped again.
func (w *deadlineWriter) ReadFrom(src io.Reader) (int64, error) {
	rf, ok := w.ResponseWriter.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{w}, src) // struct hides ReadFrom: no recursion
	}
	r, left := src, int64(math.MaxInt64)
	outer, _ := src.(*io.LimitedReader)
	if outer != nil {
		r, left = outer.R, outer.N
	}
	var total int64
	for left > 0 {
		piece := min(left, writePiece)
		w.extend()
		n, err := rf.ReadFrom(&io.LimitedReader{R: r, N: piece})
		total += n
		left -= n
		if outer != nil {
			outer.N = left
		}
		if err != nil || n < piece {
			return total, err // n < piece: src is exhausted
		}
	}
	return total, nil
}

// Flush is here because gin's writer asserts http.Flusher on what it wraps.
func (w *deadlineWriter) Flush() { _ = w.FlushError() }

func (w *deadlineWriter) FlushError() error {
	w.extend()
	return w.rc.Flush()
}

// Hijack hands over the connection with the deadlines this package set
// cleared: they are the new owner's to choose.
func (w *deadlineWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := w.rc.Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.hijacked = true
	_ = c.SetDeadline(time.Time{})
	return c, brw, nil
}

// CloseNotify is here because gin's writer asserts http.CloseNotifier on
// what it wraps, and panics without it.
func (w *deadlineWriter) CloseNotify() <-chan bool {
	//lint:ignore SA1019 kept for gin, which type-asserts it.
	if cn, ok := w.ResponseWriter.(http.CloseNotifier); ok {
		return cn.CloseNotify()
	}
	return nil
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
