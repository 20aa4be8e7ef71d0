package tftp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// newPeerFrom is newPeer on another loopback address (Linux routes all of
// 127/8 to lo), so one test can be many machines.
func newPeerFrom(t testing.TB, addr string, ip net.IP) *peer {
	t.Helper()
	sa, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &peer{t: t, conn: c, server: sa}
}

func abort(code uint16) []byte {
	return append(binary.BigEndian.AppendUint16([]byte{0, byte(opERROR)}, code), "abort\x00"...)
}

// TestFloodOfSilentRequests is the probe's finding "TFTP slots held by 256
// packets": RRQs from 256 source ports asking timeout=255 and never ACKing
// (here from 32 addresses, 8 ports each, against 16 slots and 4 per
// address). Each is either refused at once or given a slot that its retry
// budget at our own timeout frees; a machine booting meanwhile gets its
// file, and every slot is free again afterwards.
func TestFloodOfSilentRequests(t *testing.T) {
	sockets(t, func(t *testing.T, tweak func(*Server)) {
		const ports, perAddr = 256, 8
		cfg := Config{Roots: threeBlocks(t), MaxTransfers: 16, MaxPerClient: 4, Timeout: 100 * time.Millisecond, Retries: 2}
		s, addr := startServerLog(t, cfg, testLogger(t, slog.LevelError), tweak)

		var held []*peer
		var firsts [][]byte // what each held slot sent first
		seen := map[string]int{}
		for i := range ports {
			p := newPeerFrom(t, addr, net.IPv4(127, 0, 1, byte(1+i/perAddr)))
			p.send(rrq("f.bin", "octet", "timeout", "255"))
			b := p.mustRecv(2 * time.Second)
			_, msg := peerError(b)
			switch {
			case opcode(b) == opDATA || opcode(b) == opOACK:
				held = append(held, p)
				firsts = append(firsts, b)
			case opcode(b) == opERROR && strings.HasSuffix(msg, "transfers from your address in progress"):
				seen[refusedPerClient]++
			case opcode(b) == opERROR && strings.HasPrefix(msg, "server busy: "):
				seen[refusedBusy]++
			default:
				t.Fatalf("request %d answered with %q", i, b)
			}
		}
		t.Logf("%d slots taken, refused: %v", len(held), seen)

		// A machine booting during the flood: perhaps busy at first, then
		// served (the deadline only keeps a regression from hanging). A
		// stalled test may miss the 100 ms timeout; then it tries again.
		legit := newPeer(t, addr)
		busy, timedOut := 0, 0
		for deadline := time.Now().Add(10 * time.Second); ; {
			legit.tid = nil
			got, err := legit.getRaw(rrq("f.bin", "octet", "tsize", "0"))
			if err == nil {
				if len(got) != 1280 {
					t.Fatalf("legitimate client got %d bytes", len(got))
				}
				break
			}
			var pe *peerErr
			switch {
			case !errors.As(err, &pe):
				t.Fatalf("legitimate client: %v", err)
			case strings.HasPrefix(pe.msg, "server busy: "):
				busy++
			case pe.msg == "timeout":
				timedOut++
			default:
				t.Fatalf("legitimate client: %v", err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("legitimate client still refused after the deadline: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}

		// Every slot the flood took was given up with a timeout ERROR after
		// 1 + Retries sends, whatever the RRQ asked.
		for i, p := range held {
			sends := 1 // firsts[i]
			for {
				b := p.mustRecv(5 * time.Second)
				if opcode(b) == opERROR {
					if _, msg := peerError(b); msg != "timeout" {
						t.Errorf("held slot %d ended with %q", i, msg)
					}
					break
				}
				if !bytes.Equal(b, firsts[i]) {
					t.Fatalf("held slot %d: got %q, want a retransmission of %q", i, b, firsts[i])
				}
				sends++
			}
			if sends != 1+cfg.Retries {
				t.Errorf("held slot %d: sent %d times, want %d", i, sends, 1+cfg.Retries)
			}
		}
		eventually(t, "every slot freed", func() bool {
			return counter(t, s, "inflight", "") == 0 && counter(t, s, "failed", failedTimeout) == len(held)+timedOut
		})
		if got := counter(t, s, "refused", refusedPerClient); got != seen[refusedPerClient] {
			t.Errorf("per-client refusals counted %d, clients saw %d", got, seen[refusedPerClient])
		}
		if got := counter(t, s, "refused", refusedBusy); got != seen[refusedBusy]+busy {
			t.Errorf("busy refusals counted %d, clients saw %d", got, seen[refusedBusy]+busy)
		}
		if n := counter(t, s, "finished", "complete"); n != 1 {
			t.Errorf("%d transfers complete, want the legitimate one", n)
		}
	})
}

// TestPerClientLimit: past MaxPerClient transfers from one address, a
// request gets a busy ERROR, counted apart from the global bound; other
// addresses are served, and the address may start another once one ends.
func TestPerClientLimit(t *testing.T) {
	s, addr := startServer(t, Config{Roots: threeBlocks(t), MaxPerClient: 2, Timeout: 5 * time.Second})
	var held []*peer
	for range 2 {
		p := newPeer(t, addr)
		p.send(rrq("f.bin", "octet", "tsize", "0"))
		if b := p.mustRecv(time.Second); opcode(b) != opOACK {
			t.Fatalf("got %q, want OACK", b)
		}
		held = append(held, p)
	}
	third := newPeer(t, addr)
	third.send(rrq("f.bin", "octet"))
	b := third.mustRecv(time.Second)
	if code, msg := peerError(b); opcode(b) != opERROR || code != errNotDefined || msg != "server busy: 2 transfers from your address in progress" {
		t.Fatalf("got %q, want the per-client busy error", b)
	}
	if n := counter(t, s, "refused", refusedPerClient); n != 1 {
		t.Errorf("per-client refusals %d, want 1", n)
	}

	if got, err := newPeerFrom(t, addr, net.IPv4(127, 0, 0, 2)).getRaw(rrq("f.bin", "octet")); err != nil || len(got) != 1280 {
		t.Fatalf("another address: %d bytes, %v", len(got), err)
	}

	held[0].send(abort(errOptionRefused)) // a UEFI size probe ends
	eventually(t, "probe's slot freed", func() bool { return counter(t, s, "inflight", "") == 1 })
	third.tid = nil
	if got, err := third.getRaw(rrq("f.bin", "octet")); err != nil || len(got) != 1280 {
		t.Fatalf("after a slot freed: %d bytes, %v", len(got), err)
	}
	if n := counter(t, s, "refused", refusedBusy); n != 0 {
		t.Errorf("busy refusals %d, want none", n)
	}
}

// TestOptionCaps: the OACK carries only what the transfer uses. A timeout
// past MaxTimeout is left out (RFC 2349 allows only echoing it), blksize is
// lowered to the cap, windowsize is not supported.
func TestOptionCaps(t *testing.T) {
	sockets(t, func(t *testing.T, tweak func(*Server)) {
		_, addr := startServer(t, Config{Roots: threeBlocks(t), Timeout: 100 * time.Millisecond, MaxTimeout: 2 * time.Second, MaxBlockSize: 1024}, tweak)
		cases := map[string]struct {
			opts []string
			oack string // "" when DATA 1 is due
		}{
			"timeout 255":            {[]string{"timeout", "255"}, ""},
			"timeout past the cap":   {[]string{"timeout", "3"}, ""},
			"timeout at the cap":     {[]string{"timeout", "2"}, "timeout\x002\x00"},
			"timeout 255 with tsize": {[]string{"tsize", "0", "timeout", "255"}, "tsize\x001280\x00"},
			"largest blksize":        {[]string{"blksize", "65464"}, "blksize\x001024\x00"},
			"windowsize":             {[]string{"windowsize", "65535"}, ""},
			"all of them": {
				[]string{"blksize", "65464", "tsize", "0", "timeout", "255", "windowsize", "64"},
				"blksize\x001024\x00tsize\x001280\x00",
			},
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
				p.send(abort(errNotDefined))
			})
		}
		// The declined 255 s is not what the server waits: with no ACK,
		// DATA 1 comes again (the deadline only keeps the test finite).
		p := newPeer(t, addr)
		p.send(rrq("f.bin", "octet", "timeout", "255"))
		first := p.mustRecv(time.Second)
		if again := p.mustRecv(5 * time.Second); !bytes.Equal(first, again) {
			t.Fatalf("got %q, want DATA 1 again", again[:4])
		}
		p.send(abort(errNotDefined))
	})
}

// TestTransferLifetime: a client that ACKs every block, but only after its
// retransmission, still loses its slot at the transfer's lifetime, with an
// ERROR. Each block costs at least one Timeout, so the 33 blocks cannot
// all be sent within the 300 ms MaxLifetime, and the retry budget of one
// block (11 × 50 ms) is longer than that, so only the lifetime can end it.
func TestTransferLifetime(t *testing.T) {
	sockets(t, func(t *testing.T, tweak func(*Server)) {
		dir := t.TempDir()
		writeRandom(t, filepath.Join(dir, "slow.bin"), 32*512+1)
		s, addr := startServer(t, Config{Roots: map[string]string{"": dir}, Timeout: 50 * time.Millisecond, Retries: 10, MaxLifetime: 300 * time.Millisecond}, tweak)
		p := newPeer(t, addr)
		p.send(rrq("slow.bin", "octet"))
		block, copies := uint16(1), 0
		for {
			b := p.mustRecv(5 * time.Second)
			if opcode(b) == opERROR {
				if _, msg := peerError(b); msg != "transfer time limit exceeded" {
					t.Fatalf("ended with %q", msg)
				}
				break
			}
			if opcode(b) != opDATA || blockOf(b) != block {
				continue // a late copy of the block before
			}
			if len(b)-4 < 512 {
				t.Fatal("the whole file was sent past the lifetime")
			}
			if copies++; copies == 2 {
				p.send(ack(block))
				block, copies = block+1, 0
			}
		}
		eventually(t, "expiry counted, slot freed", func() bool {
			return counter(t, s, "failed", failedExpired) == 1 && counter(t, s, "inflight", "") == 0
		})
		if n := counter(t, s, "failed", failedTimeout); n != 0 {
			t.Errorf("%d timeouts: the client never ran out of retries", n)
		}
	})
}

func TestLifetime(t *testing.T) {
	cfg, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	slow, _ := Config{MinRate: 1000, MaxLifetime: time.Minute}.withDefaults()
	for name, tc := range map[string]struct {
		cfg  Config
		size int64
		want time.Duration
	}{
		"unknown size":      {cfg, -1, 10 * time.Minute},
		"empty":             {cfg, 0, 10 * time.Second},
		"undionly.kpxe":     {cfg, 70 << 10, 10*time.Second + 2187500*time.Microsecond},
		"ipxe.efi":          {cfg, 1 << 20, 42 * time.Second},
		"32 MiB, capped":    {cfg, 32 << 20, 10 * time.Minute},
		"huge":              {cfg, 1 << 62, 10 * time.Minute},
		"slow rate":         {slow, 1500, 11500 * time.Millisecond},
		"slow rate, capped": {slow, 50_000, time.Minute},
	} {
		if got := tc.cfg.lifetime(tc.size); got != tc.want {
			t.Errorf("%s: lifetime(%d) = %s, want %s", name, tc.size, got, tc.want)
		}
	}
}

// TestRequestBounds: a request is bounded in its name and option count,
// not only in its length; past them it is malformed, refused and counted.
func TestRequestBounds(t *testing.T) {
	opts := func(n int) []string {
		var o []string
		for i := range n {
			o = append(o, "x-opt"+string(rune('a'+i%26)), "1")
		}
		return o
	}
	for name, tc := range map[string]struct {
		b   []byte
		err string // "" when it parses
	}{
		"16 options":         {rrq("f.bin", "octet", opts(16)...), ""},
		"17 options":         {rrq("f.bin", "octet", opts(17)...), "more than 16 options"},
		"700 empty options":  {append(rrq("f.bin", "octet"), bytes.Repeat([]byte{0}, 700)...), "more than 16 options"},
		"name of 512 bytes":  {rrq(strings.Repeat("a", 512), "octet"), ""},
		"name of 513 bytes":  {rrq(strings.Repeat("a", 513), "octet"), "file name of 513 bytes is longer than 512"},
		"odd option count":   {rrq("f.bin", "octet", "blksize"), "has no value"},
		"longest ok request": {rrq(strings.Repeat("a", 512), "octet", "blksize", strings.Repeat("9", 900)), ""},
	} {
		_, err := parseRequest(tc.b)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", name, err, tc.err)
		}
	}

	s, addr := startServer(t, Config{Roots: threeBlocks(t)})
	for _, b := range [][]byte{rrq("f.bin", "octet", opts(17)...), rrq(strings.Repeat("a", 513), "octet")} {
		p := newPeer(t, addr)
		p.send(b)
		r := p.mustRecv(time.Second)
		if code, _ := peerError(r); opcode(r) != opERROR || code != errIllegalOperation {
			t.Errorf("answered with %q", r)
		}
	}
	eventually(t, "counted", func() bool { return counter(t, s, "refused", refusedMalformed) == 2 })
}

// TestDuplicateRequestFlood: RRQs repeated from a running transfer's port
// queue one recheck at a time, not one timer and copy each.
func TestDuplicateRequestFlood(t *testing.T) {
	s, addr := startServer(t, Config{Roots: threeBlocks(t), Timeout: 5 * time.Second})
	p := newPeer(t, addr)
	req := rrq("f.bin", "octet")
	p.send(req)
	wantData(t, p.mustRecv(time.Second), 1, 512)
	const dups = 200
	for range dups {
		if _, err := p.conn.WriteToUDP(req, p.server); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "duplicates counted", func() bool { return counter(t, s, "refused", refusedDuplicate) == dups })
	s.activeMu.Lock()
	n := len(s.rechecks)
	s.activeMu.Unlock()
	if n != 0 {
		t.Errorf("%d rechecks pending after every duplicate was judged", n)
	}
	if b := p.recv(100 * time.Millisecond); b != nil && opcode(b) != opDATA {
		t.Errorf("duplicate answered with %q", b)
	}
}

func TestConfigLimits(t *testing.T) {
	for name, cfg := range map[string]Config{
		"negative per-client":  {MaxPerClient: -1},
		"negative max timeout": {MaxTimeout: -time.Second},
		"max timeout below":    {Timeout: 5 * time.Second, MaxTimeout: 2 * time.Second},
		"too many retries":     {Retries: maxRetries + 1},
		"negative rate":        {MinRate: -1},
		"negative lifetime":    {MaxLifetime: -time.Second},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	type limits struct {
		MaxTransfers, MaxPerClient, Retries, MinRate int
		Timeout, MaxTimeout, MaxLifetime             time.Duration
	}
	of := func(c Config) limits {
		c, err := c.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		return limits{c.MaxTransfers, c.MaxPerClient, c.Retries, c.MinRate, c.Timeout, c.MaxTimeout, c.MaxLifetime}
	}
	for name, tc := range map[string]struct {
		cfg  Config
		want limits
	}{
		"zero":         {Config{}, limits{256, 8, 5, 32 << 10, time.Second, 3 * time.Second, 10 * time.Minute}},
		"long timeout": {Config{Timeout: 10 * time.Second}, limits{256, 8, 5, 32 << 10, 10 * time.Second, 10 * time.Second, 10 * time.Minute}},
		"set": {
			Config{MaxTransfers: 10, MaxPerClient: 2, Retries: 10, MinRate: 1, Timeout: time.Second, MaxTimeout: 5 * time.Second, MaxLifetime: time.Hour},
			limits{10, 2, 10, 1, time.Second, 5 * time.Second, time.Hour},
		},
	} {
		if diff := cmp.Diff(tc.want, of(tc.cfg)); diff != "" {
			t.Errorf("%s: defaults (-want +got):\n%s", name, diff)
		}
	}
}
