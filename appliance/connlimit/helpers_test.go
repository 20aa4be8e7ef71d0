package connlimit

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"
)

// long keeps a broken test from hanging; no test waits for it to pass.
const long = 10 * time.Second

type testServer struct {
	l    *Listener
	addr string
}

// serve runs h behind ApplyTimeouts and a Listener on a real loopback port.
func serve(t *testing.T, lim Limits, to Timeouts, h http.Handler) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)}
	if err := ApplyTimeouts(srv, to); err != nil {
		t.Fatal(err)
	}
	l, err := NewListener(ln, srv, lim)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return &testServer{l: l, addr: ln.Addr().String()}
}

// healthMux answers /health, and /block once release is closed (entered
// gets a value as each /block request reaches the handler).
func healthMux(entered chan<- struct{}, release <-chan struct{}) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/block", func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	})
	return mux
}

// dial connects from the loopback address from: all of 127.0.0.0/8 is
// local on Linux, so each address plays a different client.
func dial(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: long}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func send(c net.Conn, path string) error {
	c.SetWriteDeadline(time.Now().Add(long))
	_, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: test\r\n\r\n", path)
	return err
}

func recv(c net.Conn) (int, error) {
	c.SetReadDeadline(time.Now().Add(long))
	defer c.SetReadDeadline(time.Time{})
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// get makes one request on a keep-alive connection and leaves it open.
func get(c net.Conn, path string) (int, error) {
	if err := send(c, path); err != nil {
		return 0, err
	}
	return recv(c)
}

// health is a fresh client's GET /health from the address from.
func health(addr, from string) (int, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: long}
	client := &http.Client{Timeout: long, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			return d.DialContext(ctx, network, a)
		},
	}}
	resp, err := client.Get("http://" + addr + "/health")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// openIdle opens n keep-alive connections from one address, one request
// each, waiting each time until the server has them all idle, so that the
// order they went idle is the order they were opened.
func openIdle(t *testing.T, ts *testServer, from string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = dial(t, from, ts.addr)
		if code, err := get(conns[i], "/health"); err != nil || code != http.StatusOK {
			t.Fatalf("connection %d from %s: %d, %v", i, from, code, err)
		}
		waitSettled(t, ts)
	}
	return conns
}

// waitSettled waits until every connection the server holds is idle.
func waitSettled(t *testing.T, ts *testServer) {
	t.Helper()
	waitFor(t, "every connection idle", func() bool { s := ts.l.Stats(); return s.Open == s.Idle })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(long)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", long, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// wantAlive checks, with a second request on each, that exactly the last n
// of conns are still open.
func wantAlive(t *testing.T, conns []net.Conn, n int) {
	t.Helper()
	for i, c := range conns {
		code, err := get(c, "/health")
		alive := err == nil && code == http.StatusOK
		if want := i >= len(conns)-n; alive != want {
			t.Errorf("connection %d of %d: open %v, want %v (%d, %v)", i, len(conns), alive, want, code, err)
		}
	}
}

func receive[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(long):
		t.Fatalf("waited %s for %s", long, what)
		panic("unreachable")
	}
}
