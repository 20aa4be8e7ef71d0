package connlimit

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// The outside probe's attack, scaled down: far more keep-alive connections
// than the cap, each left idle after one request. A fresh client is served
// after every one of them, and the oldest idle connections are the ones
// closed.
func TestHealthThroughKeepAliveFlood(t *testing.T) {
	const maxConns, flood = 64, 200
	ts := serve(t, Limits{MaxConns: maxConns, MaxConnsPerClient: 1000}, Timeouts{}, healthMux(nil, nil))
	conns := make([]net.Conn, flood)
	for i := range conns {
		conns[i] = dial(t, "127.0.0.1", ts.addr)
		if code, err := get(conns[i], "/health"); err != nil || code != http.StatusOK {
			t.Fatalf("keep-alive connection %d: %d, %v", i, code, err)
		}
		if code, err := health(ts.addr, "127.0.0.1"); err != nil || code != http.StatusOK {
			t.Fatalf("health after %d keep-alive connections: %d, %v", i+1, code, err)
		}
		waitSettled(t, ts)
		if s := ts.l.Stats(); s.Open > maxConns {
			t.Fatalf("after %d connections: %d open, cap %d", i+1, s.Open, maxConns)
		}
	}
	// Each health check, once the cap is full, takes the place of the oldest
	// idle connection and then closes: the newest maxConns-1 remain.
	wantAlive(t, conns, maxConns-1)
	waitSettled(t, ts)
	want := Stats{Open: maxConns - 1, Idle: maxConns - 1, Evicted: flood - (maxConns - 1)}
	if diff := cmp.Diff(want, ts.l.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

func TestPerClientCap(t *testing.T) {
	const perClient = 4
	entered, release := make(chan struct{}, perClient), make(chan struct{})
	ts := serve(t, Limits{MaxConnsPerClient: perClient}, Timeouts{}, healthMux(entered, release))
	t.Cleanup(func() { close(release) })

	b := openIdle(t, ts, "127.0.0.3", perClient)
	a := openIdle(t, ts, "127.0.0.2", 10)
	t.Run("a client over its cap loses its own oldest idle connections", func(t *testing.T) {
		wantAlive(t, a, perClient)
	})
	t.Run("other clients keep theirs", func(t *testing.T) {
		wantAlive(t, b, perClient)
	})
	t.Run("a client with none idle is refused, others are not", func(t *testing.T) {
		for range perClient {
			if err := send(dial(t, "127.0.0.4", ts.addr), "/block"); err != nil {
				t.Fatal(err)
			}
		}
		for range perClient {
			receive(t, "a /block request in its handler", entered)
		}
		if code, err := health(ts.addr, "127.0.0.4"); err == nil {
			t.Errorf("fifth connection from a client with %d busy ones: %d, want refused", perClient, code)
		}
		if code, err := health(ts.addr, "127.0.0.5"); err != nil || code != http.StatusOK {
			t.Errorf("another client: %d, %v", code, err)
		}
	})
	s := ts.l.Stats()
	if s.Refused != 1 || s.Evicted != 10-perClient {
		t.Errorf("refused %d, evicted %d; want 1, %d", s.Refused, s.Evicted, 10-perClient)
	}
}

// With the total cap full of busy connections a new one is refused; once
// they are idle, the oldest makes room.
func TestTotalCap(t *testing.T) {
	const maxConns = 4
	entered, release := make(chan struct{}, maxConns), make(chan struct{})
	ts := serve(t, Limits{MaxConns: maxConns}, Timeouts{}, healthMux(entered, release))
	busy := make([]net.Conn, maxConns)
	for i := range busy {
		busy[i] = dial(t, fmt.Sprintf("127.0.0.%d", 10+i), ts.addr)
		if err := send(busy[i], "/block"); err != nil {
			t.Fatal(err)
		}
		receive(t, "a /block request in its handler", entered)
	}
	if code, err := health(ts.addr, "127.0.0.20"); err == nil {
		t.Fatalf("health with the cap full of busy connections: %d, want refused", code)
	}
	close(release)
	for i, c := range busy {
		if code, err := recv(c); err != nil || code != http.StatusOK {
			t.Fatalf("busy connection %d: %d, %v", i, code, err)
		}
	}
	waitSettled(t, ts)
	if code, err := health(ts.addr, "127.0.0.20"); err != nil || code != http.StatusOK {
		t.Fatalf("health with the cap full of idle connections: %d, %v", code, err)
	}
	// The handlers finished in no set order, so which one went first is
	// unknown; that the oldest idle one goes is TestPerClientCap's.
	alive := 0
	for _, c := range busy {
		if code, err := get(c, "/health"); err == nil && code == http.StatusOK {
			alive++
		}
	}
	if alive != maxConns-1 {
		t.Errorf("%d of the %d connections open, want %d", alive, maxConns, maxConns-1)
	}
	if s := ts.l.Stats(); s.Refused != 1 || s.Evicted != 1 {
		t.Errorf("refused %d, evicted %d; want 1, 1", s.Refused, s.Evicted)
	}
}

// Connections that never send a request count as idle once they are older
// than NewIdleAfter, and not before.
func TestSilentConnections(t *testing.T) {
	tests := map[string]struct {
		newIdleAfter, wait time.Duration
		wantServed         bool
	}{
		"younger than NewIdleAfter are kept": {newIdleAfter: time.Hour},
		"older than NewIdleAfter make room":  {newIdleAfter: 50 * time.Millisecond, wait: 200 * time.Millisecond, wantServed: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			const maxConns = 4
			ts := serve(t, Limits{MaxConns: maxConns, NewIdleAfter: tc.newIdleAfter}, Timeouts{ReadHeader: time.Hour}, healthMux(nil, nil))
			for range maxConns {
				dial(t, "127.0.0.1", ts.addr)
			}
			waitFor(t, "the silent connections accepted", func() bool { return ts.l.Stats().Open == maxConns })
			time.Sleep(tc.wait)
			code, err := health(ts.addr, "127.0.0.2")
			if served := err == nil && code == http.StatusOK; served != tc.wantServed {
				t.Errorf("health: %d, %v; want served %v", code, err, tc.wantServed)
			}
		})
	}
}

func TestClientKey(t *testing.T) {
	tests := map[string]struct {
		addr net.Addr
		want string
	}{
		"ipv4":                     {&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 80}, "192.0.2.7/32"},
		"ipv4-mapped ipv6":         {&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 80}, "192.0.2.7/32"},
		"ipv6":                     {&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::1"), Port: 80}, "2001:db8:1:2::/64"},
		"ipv6 elsewhere in the 64": {&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:ffff:ffff:ffff:ffff"), Port: 80}, "2001:db8:1:2::/64"},
		"ipv6 with a zone":         {&net.TCPAddr{IP: net.ParseIP("fe80::1"), Zone: "eth0", Port: 80}, "fe80::/64"},
		"other address types":      {&net.UDPAddr{IP: net.ParseIP("192.0.2.8"), Port: 80}, "192.0.2.8/32"},
		"not ip":                   {&net.UnixAddr{Name: "@", Net: "unix"}, "invalid Prefix"},
		"none":                     {nil, "invalid Prefix"},
	}
	for name, tc := range tests {
		if got := clientKey(tc.addr).String(); got != tc.want {
			t.Errorf("%s: clientKey(%v) = %s, want %s", name, tc.addr, got, tc.want)
		}
	}
}

func TestNegativeSettingsRejected(t *testing.T) {
	srv := &http.Server{}
	for name, lim := range map[string]Limits{
		"MaxConns":          {MaxConns: -1},
		"MaxConnsPerClient": {MaxConnsPerClient: -1},
		"NewIdleAfter":      {NewIdleAfter: -time.Second},
	} {
		if _, err := NewListener(&net.TCPListener{}, srv, lim); err == nil {
			t.Errorf("NewListener with negative %s: no error", name)
		}
	}
	for name, to := range map[string]Timeouts{
		"ReadHeader":     {ReadHeader: -1},
		"Idle":           {Idle: -1},
		"MaxHeaderBytes": {MaxHeaderBytes: -1},
		"BodyMinBytes":   {BodyMinBytes: -1},
		"BodyInterval":   {BodyInterval: -1},
		"Write":          {Write: -1},
	} {
		if err := ApplyTimeouts(srv, to); err == nil {
			t.Errorf("ApplyTimeouts with negative %s: no error", name)
		}
	}
}

func TestCollector(t *testing.T) {
	ts := serve(t, Limits{}, Timeouts{}, healthMux(nil, nil))
	openIdle(t, ts, "127.0.0.1", 1)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(ts.l.Collector("api"))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if l := m.GetLabel(); len(l) != 1 || l[0].GetName() != "listener" || l[0].GetValue() != "api" {
				t.Errorf("%s labels %v, want listener=api", f.GetName(), l)
			}
			got[f.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"rollcall_http_conns_open":               1,
		"rollcall_http_conns_idle":               1,
		"rollcall_http_conns_refused_total":      0,
		"rollcall_http_conns_evicted_total":      0,
		"rollcall_http_conns_fd_exhausted_total": 0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}
