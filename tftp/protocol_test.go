package tftp

import (
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sockets runs a test with each kind of transfer socket: the blocking one
// used while few transfers run, and the netpoller's.
func sockets(t *testing.T, f func(t *testing.T, tweak func(*Server))) {
	t.Run("blocking", func(t *testing.T) { f(t, func(s *Server) { s.blockingMax = 1 << 30 }) })
	t.Run("netpoll", func(t *testing.T) { f(t, func(s *Server) { s.blockingMax = -1 }) })
}

// threeBlocks serves f.bin of 2.5 blocks at 512 (and tiny.bin, 5 bytes).
func threeBlocks(t *testing.T) map[string]string {
	dir := t.TempDir()
	b := bytes.Repeat([]byte("0123456789abcdef"), 80) // 1280 bytes
	if err := os.WriteFile(filepath.Join(dir, "f.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "exact.bin"), b[:1024], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "text.txt"), []byte("a\nb\rc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"": dir}
}

func wantData(t *testing.T, b []byte, block uint16, size int) {
	t.Helper()
	if opcode(b) != opDATA || blockOf(b) != block || len(b)-4 != size {
		t.Fatalf("got opcode %d block %d with %d bytes, want DATA %d with %d", opcode(b), blockOf(b), len(b)-4, block, size)
	}
}

func TestDuplicateACKNeverResends(t *testing.T) {
	sockets(t, func(t *testing.T, tweak func(*Server)) {
		s, addr := startServer(t, Config{Roots: threeBlocks(t), Timeout: 2 * time.Second}, tweak)
		p := newPeer(t, addr)
		p.send(rrq("f.bin", "octet"))
		wantData(t, p.mustRecv(time.Second), 1, 512)
		p.send(ack(1))
		wantData(t, p.mustRecv(time.Second), 2, 512)
		// Duplicate ACKs of block 1 (a delayed copy): the Sorcerer's
		// Apprentice answer would be a second DATA 2. Nothing must come.
		p.send(ack(1))
		p.send(ack(1))
		p.send(ack(0))
		if b := p.recv(300 * time.Millisecond); b != nil {
			t.Fatalf("server answered a duplicate ACK with %q", b[:4])
		}
		p.send(ack(2))
		wantData(t, p.mustRecv(time.Second), 3, 256)
		p.send(ack(3))
		eventually(t, "complete", func() bool { return counter(t, s, "finished", "complete") == 1 })
		if n := counter(t, s, "bytes", ""); n != 1280 {
			t.Errorf("bytes sent %d, want 1280", n)
		}
	})
}

func TestRetransmitOnTimeout(t *testing.T) {
	sockets(t, func(t *testing.T, tweak func(*Server)) {
		s, addr := startServer(t, Config{Roots: threeBlocks(t), Timeout: 100 * time.Millisecond, Retries: 3}, tweak)
		p := newPeer(t, addr)
		p.send(rrq("f.bin", "octet"))
		first := p.mustRecv(time.Second)
		wantData(t, first, 1, 512)
		again := p.mustRecv(time.Second) // no ACK: the same block again
		if !bytes.Equal(first, again) {
			t.Fatalf("retransmission differs")
		}
		p.send(ack(1))
		b := p.mustRecv(time.Second)
		for opcode(b) == opDATA && blockOf(b) == 1 { // a retransmission raced our ACK
			b = p.mustRecv(time.Second)
		}
		wantData(t, b, 2, 512)

		// Now go silent: 1 + Retries sends of block 2, then an ERROR.
		n := 1
		for {
			b = p.mustRecv(2 * time.Second)
			if opcode(b) == opERROR {
				break
			}
			wantData(t, b, 2, 512)
			n++
		}
		if n != 4 {
			t.Errorf("block 2 sent %d times, want 1 + 3 retries", n)
		}
		eventually(t, "timeout counted", func() bool { return counter(t, s, "failed", failedTimeout) == 1 })
	})
}

func TestOptions(t *testing.T) {
	sockets(t, func(t *testing.T, tweak func(*Server)) {
		s, addr := startServer(t, Config{Roots: threeBlocks(t), MaxBlockSize: 1024}, tweak)
		cases := map[string]struct {
			opts []string
			oack string // "" when no OACK is due
		}{
			"blksize":           {[]string{"blksize", "600"}, "blksize\x00600\x00"},
			"blksize capped":    {[]string{"blksize", "1468"}, "blksize\x001024\x00"},
			"tsize":             {[]string{"tsize", "0"}, "tsize\x001280\x00"},
			"both, upper case":  {[]string{"BLKSIZE", "512", "TSize", "0"}, "blksize\x00512\x00tsize\x001280\x00"},
			"timeout":           {[]string{"timeout", "3"}, "timeout\x003\x00"},
			"unknown only":      {[]string{"windowsize", "4", "multicast", ""}, ""},
			"bad blksize":       {[]string{"blksize", "7"}, ""},
			"bad blksize large": {[]string{"blksize", "70000"}, ""},
			"bad timeout":       {[]string{"timeout", "0"}, ""},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				p := newPeer(t, addr)
				p.send(rrq("f.bin", "octet", tc.opts...))
				b := p.mustRecv(time.Second)
				if tc.oack == "" {
					wantData(t, b, 1, 512)
				} else if opcode(b) != opOACK || string(b[2:]) != tc.oack {
					t.Fatalf("got %q, want OACK %q", b, tc.oack)
				}
				p.send(binary.BigEndian.AppendUint16([]byte{0, byte(opERROR)}, 0)) // abandon
			})
		}
		// A full transfer at a negotiated blksize.
		got, err := newPeer(t, addr).getRaw(rrq("f.bin", "octet", "blksize", "1000", "tsize", "0"))
		if err != nil || len(got) != 1280 {
			t.Fatalf("got %d bytes, %v", len(got), err)
		}
		// Exactly two blocks: a final empty DATA 3 ends it.
		got, err = newPeer(t, addr).getRaw(rrq("exact.bin", "octet"))
		if err != nil || len(got) != 1024 {
			t.Fatalf("exact: got %d bytes, %v", len(got), err)
		}
		eventually(t, "complete", func() bool { return counter(t, s, "finished", "complete") == 2 })
	})
}

// TestSizeProbe: UEFI asks for tsize and aborts with error 8 once it has
// it. That is a finished size probe, not a failure.
func TestSizeProbe(t *testing.T) {
	s, addr := startServer(t, Config{Roots: threeBlocks(t)})
	p := newPeer(t, addr)
	p.send(rrq("f.bin", "octet", "tsize", "0", "blksize", "1468"))
	b := p.mustRecv(time.Second)
	if opcode(b) != opOACK || !strings.Contains(string(b), "tsize\x001280\x00") {
		t.Fatalf("got %q, want an OACK with tsize", b)
	}
	p.send(append(binary.BigEndian.AppendUint16([]byte{0, byte(opERROR)}, errOptionRefused), "User aborted the transfer\x00"...))
	eventually(t, "size probe counted", func() bool { return counter(t, s, "finished", "size-probe") == 1 })
	for _, r := range []string{failedPeer, failedTimeout} {
		if n := counter(t, s, "failed", r); n != 0 {
			t.Errorf("failed{%s} = %d", r, n)
		}
	}
	if b := p.recv(200 * time.Millisecond); b != nil {
		t.Errorf("server sent %q after the abort", b)
	}
}

func TestBusyAndDuplicateRequest(t *testing.T) {
	s, addr := startServer(t, Config{Roots: threeBlocks(t), MaxTransfers: 1, Timeout: 5 * time.Second})
	p := newPeer(t, addr)
	p.send(rrq("f.bin", "octet"))
	wantData(t, p.mustRecv(time.Second), 1, 512)

	// The same client retransmits its RRQ: ignored, no second transfer.
	if _, err := p.conn.WriteToUDP(rrq("f.bin", "octet"), p.server); err != nil {
		t.Fatal(err)
	}

	if b := p.recv(200 * time.Millisecond); b != nil {
		t.Fatalf("duplicate RRQ answered with %q", b)
	}
	eventually(t, "duplicate counted", func() bool { return counter(t, s, "refused", refusedDuplicate) == 1 })

	// Another client while the one slot is taken.
	q := newPeer(t, addr)
	q.send(rrq("f.bin", "octet"))
	b := q.mustRecv(time.Second)
	if code, msg := peerError(b); opcode(b) != opERROR || code != errNotDefined || msg != "server busy: 1 transfers in progress" {
		t.Fatalf("got %q, want the busy error", b)
	}
	if counter(t, s, "refused", refusedBusy) != 1 {
		t.Error("busy refusal not counted")
	}
}

// TestStopAbortsTransfers: Stop ends a transfer whose client went silent at
// once (not after the timeout) and tells the client.
func TestStopAbortsTransfers(t *testing.T) {
	sockets(t, func(t *testing.T, tweak func(*Server)) {
		s, addr := startServer(t, Config{Roots: threeBlocks(t), Timeout: 10 * time.Second}, tweak)
		p := newPeer(t, addr)
		p.send(rrq("f.bin", "octet"))
		wantData(t, p.mustRecv(time.Second), 1, 512)
		start := time.Now()
		s.Stop()
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Stop took %s", d)
		}
		b := p.mustRecv(time.Second)
		if code, msg := peerError(b); opcode(b) != opERROR || msg != "server shutting down" {
			t.Errorf("got %q (code %d), want the shutdown error", b, code)
		}
		if n := counter(t, s, "failed", failedCanceled); n != 1 {
			t.Errorf("canceled = %d", n)
		}
	})
}

func TestNetascii(t *testing.T) {
	_, addr := startServer(t, Config{Roots: threeBlocks(t)})
	got, err := newPeer(t, addr).getRaw(rrq("text.txt", "NetASCII", "tsize", "0"))
	if err != nil || string(got) != "a\r\nb\r\x00c\r\n" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// TestStrayPackets: DATA/ACK/ERROR to the listening port get no answer
// (two servers must not ping-pong errors); garbage gets "illegal operation".
func TestStrayPackets(t *testing.T) {
	s, addr := startServer(t, Config{Roots: threeBlocks(t)})
	for _, b := range [][]byte{ack(1), {0, byte(opDATA), 0, 1, 'x'}, {0, byte(opERROR), 0, 0, 0}, {0, byte(opOACK), 0}} {
		p := newPeer(t, addr)
		p.send(b)
		if r := p.recv(100 * time.Millisecond); r != nil {
			t.Errorf("%q answered with %q", b, r)
		}
	}
	for _, b := range [][]byte{{0}, {0, 9, 'x', 0}, {0, 1}, {0, 1, 'x', 0}, []byte("\x00\x01x\x00octet"), []byte("\x00\x01\x00octet\x00"), []byte("\x00\x01x\x00octet\x00blksize\x00")} {
		p := newPeer(t, addr)
		p.send(b)
		r := p.mustRecv(time.Second)
		if code, _ := peerError(r); opcode(r) != opERROR || code != errIllegalOperation {
			t.Errorf("%q answered with %q", b, r)
		}
	}
	eventually(t, "counted", func() bool {
		return counter(t, s, "refused", refusedUnexpected) == 4 && counter(t, s, "refused", refusedMalformed) == 7
	})
}

func TestConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"negative transfers": {MaxTransfers: -1},
		"negative timeout":   {Timeout: -time.Second},
		"negative retries":   {Retries: -1},
		"blksize too small":  {MaxBlockSize: 4},
		"blksize too large":  {MaxBlockSize: 70000},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	s, err := New(Config{Addr: "127.0.0.1:0", Roots: map[string]string{"x": "/nonexistent/dir/"}})
	if err != nil {
		t.Fatal(err)
	}
	// A missing file root is only warned about; a root key that names the
	// top must be a directory.
	done := make(chan error, 1)
	go func() { done <- s.Start(t.Context(), testLogger(t, 0)) }()
	<-s.Ready()
	s.Stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "f")
	os.WriteFile(f, nil, 0o644)
	s, _ = New(Config{Addr: "127.0.0.1:0", Roots: map[string]string{"": f}})
	if err := s.Start(t.Context(), testLogger(t, 0)); err == nil || !strings.Contains(err.Error(), "needs a name") {
		t.Errorf("file at the top: %v", err)
	}
	s, _ = New(Config{Addr: "256.0.0.1:69"})
	if err := s.Start(t.Context(), testLogger(t, 0)); err == nil {
		t.Error("bad address: no error")
	}

}

// TestSizeProbeThenDownloadSamePort: UEFI aborts the size probe and sends
// its real RRQ from the same port at once. That RRQ must be served even if
// it arrives before the probe's transfer has read the abort.
func TestSizeProbeThenDownloadSamePort(t *testing.T) {
	s, addr := startServer(t, Config{Roots: threeBlocks(t)})
	for i := range 20 {
		p := newPeer(t, addr)
		req := rrq("f.bin", "octet", "tsize", "0", "blksize", "1468")
		p.send(req)
		b := p.mustRecv(time.Second)
		if opcode(b) != opOACK {
			t.Fatalf("got %q, want OACK", b)
		}
		abort := append(binary.BigEndian.AppendUint16([]byte{0, byte(opERROR)}, errOptionRefused), "abort\x00"...)
		p.send(abort)
		p.tid = nil
		got, err := p.getRaw(req)
		if err != nil || len(got) != 1280 {
			t.Fatalf("round %d: download after probe: %d bytes, %v", i, len(got), err)
		}
	}
	eventually(t, "counted", func() bool {
		return counter(t, s, "finished", "size-probe") == 20 && counter(t, s, "finished", "complete") == 20
	})
}

// TestDualStackListener: the default kind of address (":port", one IPv6
// socket taking IPv4 too) serves IPv4 clients, and answers refusals from
// the address they were sent to.
func TestDualStackListener(t *testing.T) {
	_, addr := startServer(t, Config{Addr: ":0", Roots: threeBlocks(t)})
	_, port, _ := net.SplitHostPort(addr)
	addr = net.JoinHostPort("127.0.0.1", port)
	if got, err := newPeer(t, addr).getRaw(rrq("f.bin", "octet", "blksize", "1468")); err != nil || len(got) != 1280 {
		t.Fatalf("got %d bytes, %v", len(got), err)
	}
	p := newPeer(t, addr)
	p.send(wrq("f.bin"))
	buf := make([]byte, 600)
	_ = p.conn.SetReadDeadline(time.Now().Add(time.Second))
	n, from, err := p.conn.ReadFromUDP(buf)
	if err != nil || opcode(buf[:n]) != opERROR || !from.IP.Equal(net.IPv4(127, 0, 0, 1)) || strconv.Itoa(from.Port) != port {
		t.Fatalf("refusal %q from %v, %v", buf[:n], from, err)
	}
}
