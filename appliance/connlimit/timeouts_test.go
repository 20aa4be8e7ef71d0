package connlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var errNeverDone = errors.New("gave up waiting")

// The header and idle timeouts close a connection whose client is silent or
// trickles its request header, on its first request and between requests.
func TestHeaderAndIdleTimeouts(t *testing.T) {
	tests := map[string]struct{ warm, trickle bool }{
		"silent new connection":                  {},
		"slow first request header":              {trickle: true},
		"idle keep-alive connection":             {warm: true},
		"slow header on a keep-alive connection": {warm: true, trickle: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ts := serve(t, Limits{}, Timeouts{ReadHeader: 200 * time.Millisecond, Idle: 200 * time.Millisecond}, healthMux(nil, nil))
			c := dial(t, "127.0.0.1", ts.addr)
			if tc.warm {
				if code, err := get(c, "/health"); err != nil || code != http.StatusOK {
					t.Fatalf("first request: %d, %v", code, err)
				}
			}
			closed := make(chan error, 1)
			go func() {
				c.SetReadDeadline(time.Now().Add(long))
				_, err := io.Copy(io.Discard, c)
				closed <- err
			}()
			var err error
			if tc.trickle {
				err = trickle(c, "GET /health HTTP/1.1\r\nHost: test\r\nX-Slow: ", "a", closed)
			} else {
				err = <-closed
			}
			if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, errNeverDone) {
				t.Fatalf("server still held the connection after %s", long)
			}
		})
	}
}

// trickle writes head, then piece every 50 ms, until done reports (its
// error is returned) or for long (errNeverDone).
func trickle(c net.Conn, head, piece string, done <-chan error) error {
	io.WriteString(c, head)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(long)
	for {
		select {
		case err := <-done:
			return err
		case <-giveUp:
			return errNeverDone
		case <-tick.C:
			io.WriteString(c, piece) // fails once the server has closed; done follows
		}
	}
}

// A body sent a byte at a time fails with ErrSlowBody, chunked or not.
func TestSlowBodyCut(t *testing.T) {
	tests := map[string]struct{ header, piece string }{
		"content-length": {"Content-Length: 100000\r\n", "x"},
		"chunked":        {"Transfer-Encoding: chunked\r\n", "1\r\nx\r\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := make(chan error, 1)
			ts := serve(t, Limits{}, Timeouts{BodyMinBytes: 1 << 10, BodyInterval: 300 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, err := io.Copy(io.Discard, r.Body)
				got <- err
			}))
			c := dial(t, "127.0.0.1", ts.addr)
			err := trickle(c, "POST /upload HTTP/1.1\r\nHost: test\r\n"+tc.header+"\r\n", tc.piece, got)
			if !errors.Is(err, ErrSlowBody) {
				t.Fatalf("body read: %v, want ErrSlowBody", err)
			}
		})
	}
}

// A large body at full speed, and one paced over several intervals, both
// arrive whole: the rate is checked, not the total time.
func TestSteadyBodyNotCut(t *testing.T) {
	tests := map[string]struct {
		pieces, size int
		pause        time.Duration
	}{
		"32 MiB at full speed":           {pieces: 1, size: 32 << 20},
		"paced across several intervals": {pieces: 12, size: 64 << 10, pause: 150 * time.Millisecond},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			type result struct {
				n   int64
				err error
			}
			got := make(chan result, 1)
			ts := serve(t, Limits{}, Timeouts{BodyMinBytes: 1 << 10, BodyInterval: time.Second}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n, err := io.Copy(io.Discard, r.Body)
				got <- result{n, err}
			}))
			pr, pw := io.Pipe()
			go func() {
				piece := make([]byte, tc.size)
				for range tc.pieces {
					if _, err := pw.Write(piece); err != nil {
						return
					}
					time.Sleep(tc.pause)
				}
				pw.Close()
			}()
			req, _ := http.NewRequest(http.MethodPut, "http://"+ts.addr+"/images/x", pr)
			req.ContentLength = int64(tc.pieces * tc.size)
			resp, err := (&http.Client{Timeout: long}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if r := receive(t, "the handler", got); r.err != nil || r.n != req.ContentLength || resp.StatusCode != http.StatusOK {
				t.Fatalf("handler read %d bytes, %v; status %d; want %d bytes", r.n, r.err, resp.StatusCode, req.ContentLength)
			}
		})
	}
}

// downloads are the two ways a handler sends a large response: plain
// writes, and ServeContent of a file (sendfile through ReadFrom). Each
// returns the handler's write error where it can see it.
func downloads(t *testing.T, size int64) map[string]func(http.ResponseWriter, *http.Request) error {
	path := filepath.Join(t.TempDir(), "image")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil { // sparse: no disk, no time
		t.Fatal(err)
	}
	f.Close()
	return map[string]func(http.ResponseWriter, *http.Request) error{
		"writes": func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Length", fmt.Sprint(size))
			buf := make([]byte, 32<<10)
			for sent := int64(0); sent < size; sent += int64(len(buf)) {
				if _, err := w.Write(buf); err != nil {
					return err
				}
			}
			return nil
		},
		"sendfile": func(w http.ResponseWriter, r *http.Request) error {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			http.ServeContent(w, r, "", time.Time{}, f)
			return nil
		},
	}
}

// dialSmall connects with a small receive buffer, so the kernel cannot
// absorb a response the client does not read.
func dialSmall(t *testing.T, addr string) net.Conn {
	c := dial(t, "127.0.0.1", addr)
	if err := c.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	return c
}

// A client that stops reading a download is cut by the write deadline.
func TestStalledDownloadCut(t *testing.T) {
	const size = 64 << 20
	for name, download := range downloads(t, size) {
		t.Run(name, func(t *testing.T) {
			done := make(chan error, 1)
			ts := serve(t, Limits{}, Timeouts{Write: 200 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				done <- download(w, r)
			}))
			c := dialSmall(t, ts.addr)
			if err := send(c, "/image"); err != nil {
				t.Fatal(err)
			}
			// 64 MiB does not fit in the socket buffers: the handler can only
			// have finished by failing a write.
			err := receive(t, "the handler to give up on a client that reads nothing", done)
			if name == "writes" && !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("handler's write: %v, want a deadline error", err)
			}
			c.SetReadDeadline(time.Now().Add(long))
			if n, _ := io.Copy(io.Discard, c); n >= size {
				t.Errorf("client read %d bytes, the whole response", n)
			}
		})
	}
}

// A download read steadily but slowly, for longer than Write in total,
// arrives whole.
func TestSteadyDownloadNotCut(t *testing.T) {
	const size, step = 40 << 20, 1 << 20
	for name, download := range downloads(t, size) {
		t.Run(name, func(t *testing.T) {
			done := make(chan error, 1)
			ts := serve(t, Limits{}, Timeouts{Write: time.Second}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				done <- download(w, r)
			}))
			c := dialSmall(t, ts.addr)
			if err := send(c, "/image"); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(4 * long))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			start, buf, n := time.Now(), make([]byte, step), int64(0)
			for {
				k, err := io.ReadFull(resp.Body, buf)
				n += int64(k)
				if err != nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := receive(t, "the handler", done); err != nil || n != size {
				t.Fatalf("read %d of %d bytes; handler: %v", n, size, err)
			}
			t.Logf("%d MiB in %s, write deadline %s", size>>20, time.Since(start).Round(time.Millisecond), time.Second)
		})
	}
}

// A hijacker gets the connection without the deadlines Deadlines set, and
// the writer still offers what gin and ServeContent look for.
func TestResponseWriterInterfaces(t *testing.T) {
	ts := serve(t, Limits{}, Timeouts{Write: 100 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var missing []string
		if _, ok := w.(http.Flusher); !ok {
			missing = append(missing, "Flusher")
		}
		if _, ok := w.(io.ReaderFrom); !ok {
			missing = append(missing, "ReaderFrom")
		}
		//lint:ignore SA1019 gin asserts it
		if _, ok := w.(http.CloseNotifier); !ok {
			missing = append(missing, "CloseNotifier")
		}
		if _, ok := w.(interface{ Unwrap() http.ResponseWriter }); !ok {
			missing = append(missing, "Unwrap")
		}
		fmt.Fprintf(w, "missing %v\n", missing)
		http.NewResponseController(w).Flush() // sets a write deadline
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		time.Sleep(300 * time.Millisecond) // past the write deadline
		brw.WriteString("hijacked\n")
		brw.Flush()
	}))
	c := dial(t, "127.0.0.1", ts.addr)
	if err := send(c, "/"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(long))
	out, _ := io.ReadAll(c)
	if !bytes.Contains(out, []byte("missing []\n")) || !bytes.HasSuffix(out, []byte("hijacked\n")) {
		t.Errorf("response %q: want no interface missing, then the hijacker's write", out)
	}
}

// Behind ServeTLS with HTTP/2, the listener sees connection states through
// the *tls.Conn and the body rate holds per stream.
func TestTLSAndHTTP2(t *testing.T) {
	got := make(chan error, 1)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			_, err := io.Copy(io.Discard, r.Body)
			got <- err
		}
	}))
	ts.EnableHTTP2 = true
	if err := ApplyTimeouts(ts.Config, Timeouts{BodyMinBytes: 1 << 10, BodyInterval: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	l, err := NewListener(ts.Listener, ts.Config, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	ts.Listener = l
	ts.StartTLS()
	defer ts.Close()
	client := ts.Client()
	client.Timeout = long

	resp, err := client.Get(ts.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
	}
	waitFor(t, "the TLS connection idle", func() bool { s := l.Stats(); return s.Open == 1 && s.Idle == 1 })

	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		for {
			if _, err := pw.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	go func() {
		if resp, err := client.Post(ts.URL+"/upload", "text/plain", pr); err == nil {
			resp.Body.Close()
		}
	}()
	if err := receive(t, "the handler's read to fail", got); !errors.Is(err, ErrSlowBody) {
		t.Fatalf("body read over HTTP/2: %v, want ErrSlowBody", err)
	}
	if s := l.Stats(); s.Open != 1 {
		t.Errorf("%d connections open, want the one HTTP/2 connection", s.Open)
	}
}
