package tftp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rollcall/rollcall/lab/testenv"
)

// ipxeDir returns a directory holding the three iPXE binaries: Debian's
// /usr/lib/ipxe when installed (under CI=true it must be), else generated
// stand-ins.
func ipxeDir(t testing.TB) string {
	t.Helper()
	ok := true
	for _, f := range IPXEFiles {
		if _, err := os.Stat(filepath.Join(DefaultIPXEDir, f)); err != nil {
			ok = false
		}
	}
	if ok {
		return DefaultIPXEDir
	}
	testenv.Fallback(t, "%s lacks the iPXE binaries (apt-get install ipxe): testing generated stand-ins", DefaultIPXEDir)
	dir := t.TempDir()
	for i, f := range IPXEFiles {
		writeRandom(t, filepath.Join(dir, f), 70_000+i*300_000+i) // odd sizes, one over 512 KiB
	}
	return dir
}

func writeRandom(t testing.TB, path string, n int) [32]byte {
	t.Helper()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func fileSum(t testing.TB, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func testLogger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// startServer runs a server on 127.0.0.1:0 until the test ends and returns
// it with its address.
func startServer(t testing.TB, cfg Config, tweak ...func(*Server)) (*Server, string) {
	t.Helper()
	return startServerLog(t, cfg, testLogger(t, slog.LevelDebug), tweak...)
}

func startServerLog(t testing.TB, cfg Config, logger *slog.Logger, tweak ...func(*Server)) (*Server, string) {
	t.Helper()
	if cfg.Addr == "" && len(cfg.Addrs) == 0 {
		cfg.Addr = "127.0.0.1:0"
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tweak {
		f(s)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Start(context.Background(), logger) }()
	select {
	case <-s.Ready():
	case err := <-errc:
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		s.Stop()
		if err := <-errc; err != nil {
			t.Errorf("start returned %v", err)
		}
	})
	return s, s.Addrs()[0].String()
}

func counter(t testing.TB, s *Server, name, label string) int {
	t.Helper()
	m := s.Metrics()
	var v float64
	switch name {
	case "started":
		v = testutil.ToFloat64(m.started)
	case "finished":
		v = testutil.ToFloat64(m.finished.WithLabelValues(label))
	case "failed":
		v = testutil.ToFloat64(m.failed.WithLabelValues(label))
	case "refused":
		v = testutil.ToFloat64(m.refused.WithLabelValues(label))
	case "bytes":
		v = testutil.ToFloat64(m.bytes)
	case "inflight":
		v = testutil.ToFloat64(m.inFlight)
	default:
		t.Fatalf("no metric %s", name)
	}
	return int(v)
}

// eventually waits for cond (metrics are updated after the last packet).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// peer is a raw TFTP client socket for protocol-level tests.
type peer struct {
	t      testing.TB
	conn   *net.UDPConn
	server *net.UDPAddr // the listening port
	tid    *net.UDPAddr // the transfer's port, once known
}

func newPeer(t testing.TB, addr string) *peer {
	t.Helper()
	sa, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &peer{t: t, conn: c, server: sa}
}

func rrq(name, mode string, opts ...string) []byte {
	b := binary.BigEndian.AppendUint16(nil, opRRQ)
	for _, f := range append([]string{name, mode}, opts...) {
		b = append(append(b, f...), 0)
	}
	return b
}

func ack(block uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, opACK), block)
}

// send sends to the transfer port if known, else to the listening port.
func (p *peer) send(b []byte) {
	p.t.Helper()
	to := p.server
	if p.tid != nil {
		to = p.tid
	}
	if _, err := p.conn.WriteToUDP(b, to); err != nil {
		p.t.Fatal(err)
	}
}

// recv returns the next packet, or nil after wait.
func (p *peer) recv(wait time.Duration) []byte {
	p.t.Helper()
	buf := make([]byte, 70000)
	_ = p.conn.SetReadDeadline(time.Now().Add(wait))
	n, from, err := p.conn.ReadFromUDP(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	if err != nil {
		p.t.Fatal(err)
	}
	if p.tid == nil && from.Port != p.server.Port {
		p.tid = from
	}
	return buf[:n]
}

func (p *peer) mustRecv(wait time.Duration) []byte {
	p.t.Helper()
	b := p.recv(wait)
	if b == nil {
		p.t.Fatalf("no packet within %s", wait)
	}
	return b
}

func opcode(b []byte) uint16 {
	if len(b) < 2 {
		return 0
	}
	return binary.BigEndian.Uint16(b)
}

func blockOf(b []byte) uint16 { return binary.BigEndian.Uint16(b[2:4]) }

// getRaw fetches a file with the raw peer, ACKing everything, and returns
// the content (or the ERROR it got).
func (p *peer) getRaw(req []byte) ([]byte, error) {
	p.t.Helper()
	p.send(req)
	var out []byte
	want := uint16(1)
	blksize := defaultBlockSize
	for {
		b := p.recv(3 * time.Second)
		switch {
		case b == nil:
			return out, errors.New("timeout")
		case opcode(b) == opERROR:
			code, msg := peerError(b)
			return out, &peerErr{code, msg}
		case opcode(b) == opOACK:
			fields := strings.Split(string(b[2:]), "\x00")
			for i := 0; i+1 < len(fields); i += 2 {
				if fields[i] == "blksize" {
					blksize = atoi(fields[i+1])
				}
			}
			p.send(ack(0))
		case opcode(b) == opDATA && blockOf(b) == want:
			out = append(out, b[4:]...)
			p.send(ack(want))
			if len(b)-4 < blksize {
				return out, nil
			}
			want++
		}
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
