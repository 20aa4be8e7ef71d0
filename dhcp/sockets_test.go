package dhcp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// listenClient opens a client-side UDP socket on port bound to ifname,
// with deadlines (tests that play a DHCP client).
func listenClient(ifname string, port int) (*ipv4.PacketConn, error) {
	c, err := listenOn(context.Background(), ifname, port)
	if err != nil {
		return nil, fmt.Errorf("listen on %s port %d: %w", ifname, port, err)
	}
	return ipv4.NewPacketConn(c), nil
}

// setNeighbor puts a complete ARP entry for an address nobody answers for
// yet, on the named interface; a bad interface is an error, not a crash.
func TestSetNeighbor(t *testing.T) {
	need(t)
	a, b := newNS(t, "arpa"), newNS(t, "arpb")
	veth(t, a, "x0", "10.213.9.1/24", b, "y0", "")
	mac := net.HardwareAddr{0x02, 0x13, 0x00, 0x00, 0x09, 0x32}
	done := make(chan error, 1)
	inNS(t, a, func() {
		s, err := listen("x0", 6767)
		if err != nil {
			done <- err
			return
		}
		defer s.Close()
		if err := setNeighbor(s.fd, "x0", netip.MustParseAddr("10.213.9.50"), mac); err != nil {
			done <- err
			return
		}
		if err := setNeighbor(s.fd, "no-such-if", netip.MustParseAddr("10.213.9.51"), mac); err == nil {
			done <- fmt.Errorf("an ARP entry on a missing interface was accepted")
			return
		}
		done <- nil
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if out := a.ip(t, "neigh", "show", "10.213.9.50", "dev", "x0"); !strings.Contains(out, "lladdr "+mac.String()) {
		t.Fatalf("no ARP entry for 10.213.9.50 at %s: %q", mac, out)
	}
}

// threadNice reads a thread's nice value from /proc (field 19 of stat).
func threadNice(t *testing.T, tid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	n, err := strconv.Atoi(f[16])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A reader thread of a node whose threads run at nice 5 moves itself to 0.
func TestReaderAheadOfBackground(t *testing.T) {
	need(t) // raising a priority needs CAP_SYS_NICE
	type res struct{ before, after int }
	done := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		tid := unix.Gettid()
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, 5); err != nil {
			t.Error(err)
		}
		before := threadNice(t, tid)
		if !aheadOfBackground() {
			t.Error("aheadOfBackground failed")
		}
		done <- res{before, threadNice(t, tid)}
	}()
	r := <-done
	if r.before != 5 || r.after != 0 {
		t.Errorf("nice %d, then %d; want 5, then 0", r.before, r.after)
	}
}
