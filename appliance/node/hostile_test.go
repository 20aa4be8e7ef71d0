package node_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/nodetest"
)

// TestHostileClients is the probe's finding 3 on a real node: keep-alive
// floods from many addresses, headers and bodies sent a byte at a time. The
// node's health must be answered throughout, and the connections it keeps
// open stay under its cap (connlimit), the longest-idle ones closed first.
func TestHostileClients(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1,300 connections")
	}
	n := nodetest.Start(t)

	agent := n.Agent
	addr := n.HTTPAddr()
	_, port, _ := net.SplitHostPort(addr)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var held []net.Conn
	var heldMu sync.Mutex
	hold := func(c net.Conn) { heldMu.Lock(); held = append(held, c); heldMu.Unlock() }
	defer func() {
		close(stop)
		wg.Wait()
		for _, c := range held {
			c.Close()
		}
	}()

	// Health, asked on a fresh connection every 50 ms, from an address of
	// its own, must never fail or take more than 5 s.
	var asked, failed atomic.Int64
	var firstFail atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 9, 9)}}).DialContext}}
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			asked.Add(1)
			resp, err := c.Get("http://" + addr + "/api/v1/health")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			if err != nil {
				failed.Add(1)
				firstFail.CompareAndSwap(nil, err.Error())
			}
		}
	}()

	// 1,200 keep-alive connections from 24 addresses, each after one GET.
	dialFrom := func(a int) (net.Conn, error) {
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(a))}}
		return d.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
	}
	for i := range 1200 {
		c, err := dialFrom(1 + i%24)
		if err != nil {
			t.Fatalf("flood connection %d: %v", i, err)
		}
		hold(c)
		fmt.Fprintf(c, "GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil && i < 1000 {
			// The node may already have closed an old idle one to make
			// room; an error on a fresh one under the cap is a failure.
			t.Fatalf("flood connection %d: %v", i, err)
		}
	}
	// Slow headers and slow bodies: a byte every 200 ms.
	trickle := func(a int, head, body string) {
		defer wg.Done()
		c, err := dialFrom(a)
		if err != nil {
			return
		}
		defer c.Close()
		msg := head + body
		for i := 0; i < len(msg); i++ {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if _, err := c.Write([]byte{msg[i]}); err != nil {
				return // cut by the node: what it should do
			}
		}
	}
	for i := range 30 {
		wg.Add(1)
		go trickle(100+i, "GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: "+strings.Repeat("s", 200)+"\r\n\r\n", "")
	}
	body := `{"serial": "SLOW` + strings.Repeat("0", 500) + `"}`
	for i := range 30 {
		wg.Add(1)
		go trickle(150+i, fmt.Sprintf("POST /api/v1/enlist HTTP/1.1\r\nHost: x\r\nX-Rollcall-Token: %s\r\nContent-Length: %d\r\n\r\n", agent, len(body)), body)
	}
	time.Sleep(3 * time.Second)

	if open := gauge(t, n.Registry(), "rollcall_http_conns_open", map[string]string{"listener": "api"}); open > 1024 {
		t.Errorf("the node holds %v connections, more than its cap of 1024", open)
	}
	if evicted := gauge(t, n.Registry(), "rollcall_http_conns_evicted_total", map[string]string{"listener": "api"}); evicted == 0 {
		t.Errorf("no idle connection was closed to make room for 1,200")
	}
	if asked.Load() < 20 || failed.Load() > 0 {
		t.Fatalf("health: %d of %d asks failed (first: %v)", failed.Load(), asked.Load(), firstFail.Load())
	}
}
