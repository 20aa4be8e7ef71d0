package dhcp

import (
	"bytes"
	"encoding/hex"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rollcall/rollcall/dhcp/wire"
	"github.com/rollcall/rollcall/lab/bench/dhcp/replica"
	"github.com/rollcall/rollcall/store"
)

// logBuf collects what a server logs, as text lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }

// lines returns the logged lines that contain every one of subs.
func (l *logBuf) lines(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		ok := line != ""
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

func newLogBuf() (*logBuf, *slog.Logger) {
	l := &logBuf{}
	return l, slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func manyDNS(n int) []netip.Addr {
	var out []netip.Addr
	for i := range n {
		out = append(out, netip.AddrFrom4([4]byte{10, 213, 200, byte(i + 1)}))
	}
	return out
}

func hexXID(x dhcpv4.TransactionID) string { return hex.EncodeToString(x[:]) }

// Finding: with 100 DNS servers on a subnet the OFFER was 690 bytes for a
// client that said it takes 576, and it got no lease. Every reply now fits
// the client's option 57 (548 bytes of DHCP message without it, or below
// 576), keeping the essential options, dropping in wire.Fit's order, with
// a warning once per client and xid and a count per option.
func TestRepliesFitMaxMessageSize(t *testing.T) {
	logs, log := newLogBuf()
	r := newRig(t, rigOpts{dns: manyDNS(100), log: log})
	r.ready(0)
	if n := len(logs.lines("level=WARN", "subnet's options are past", "dns_servers=100")); n != 1 {
		t.Errorf("loading the subnet warned %d times that its options do not fit 548 bytes, want once", n)
	}
	m := r.nodes[0].srv.m
	mms := func(n uint16) dhcpv4.Option {
		return dhcpv4.OptGeneric(dhcpv4.OptionMaximumDHCPMessageSize, []byte{byte(n >> 8), byte(n)})
	}
	prl := func(codes ...uint8) dhcpv4.Option {
		return dhcpv4.OptGeneric(dhcpv4.OptionParameterRequestList, codes)
	}
	for i, tc := range []struct {
		name    string
		opts    []dhcpv4.Option
		edit    func(*dhcpv4.DHCPv4)
		limit   int  // bytes of DHCP message the client takes
		wantDNS bool // all 100 DNS servers still in the reply
	}{
		{name: "udhcpc: 576, asks for 1 3 6 12 15 28 42", opts: []dhcpv4.Option{mms(576), prl(1, 3, 6, 12, 15, 28, 42)}, limit: 548},
		{name: "no option 57", limit: 548},
		{name: "option 57 below the minimum", opts: []dhcpv4.Option{mms(300)}, limit: 548},
		{name: "option 57 malformed", edit: func(p *dhcpv4.DHCPv4) { p.Options[57] = []byte{9} }, limit: 548},
		{name: "option 57 of 1500", opts: []dhcpv4.Option{mms(1500)}, limit: 1472, wantDNS: true},
		{name: "option 57 of 65535: no fragmented reply", opts: []dhcpv4.Option{mms(65535)}, limit: 1472, wantDNS: true},
		{name: "PXE firmware, 1260", opts: []dhcpv4.Option{mms(1260)}, limit: 1232, wantDNS: true, edit: func(p *dhcpv4.DHCPv4) {
			p.Options[60] = []byte("PXEClient:Arch:00000:UNDI:002001")
			p.Options[93] = []byte{0, 0}
			p.Options[97] = make([]byte, 17)
		}},
		{name: "PXE firmware without option 57", limit: 548, edit: func(p *dhcpv4.DHCPv4) {
			p.Options[55] = []byte{1, 3, 6, 43, 60, 66, 67, 97}
			p.Options[60] = []byte("PXEClient:Arch:00007:UNDI:003000")
			p.Options[93] = []byte{0, 7}
			p.Options[97] = make([]byte, 17)
		}},
		{name: "relayed with a full option 82: not counted, still echoed", opts: []dhcpv4.Option{mms(576)}, limit: 548, edit: func(p *dhcpv4.DHCPv4) {
			p.GatewayIPAddr = net.IP{10, 213, 0, 254}
			p.Options[82] = bytes.Repeat([]byte{1, 3, 'a', 'b', 'c'}, 51)
		}},
		{name: "longest client ID echoed", limit: 548, edit: func(p *dhcpv4.DHCPv4) {
			p.Options[61] = bytes.Repeat([]byte{0xff}, wire.MaxClientID)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := 300 + i
			d := discover(macOf(client), xidOf(client), tc.opts...)
			if tc.edit != nil {
				tc.edit(d)
			}
			src := clientSrc
			if d.GatewayIPAddr.To4() != nil && !d.GatewayIPAddr.IsUnspecified() {
				src = netip.AddrPortFrom(wire.Addr(d.GatewayIPAddr), 67)
			}
			trimmed, dnsDrops := m.Trimmed(), m.OptionDrops(6)
			check := func(kind string, p *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
				t.Helper()
				rep, err := r.process(0, p, src, netip.Addr{}, wire.ServerPort)
				if rep.data == nil {
					t.Fatalf("%s: no reply: %v", kind, err)
				}
				got := mustParse(t, rep.data)
				size := len(rep.data)
				if v, ok := got.Options[82]; ok {
					size -= 2 + len(v) // the relay strips it
				}
				if size > tc.limit {
					t.Errorf("%s: %d bytes for the client, more than the %d it takes", kind, size, tc.limit)
				}
				for _, c := range []uint8{53, 54, 51, 1, 3} {
					if _, ok := got.Options[c]; !ok {
						t.Errorf("%s: essential option %d dropped", kind, c)
					}
				}
				for _, c := range []uint8{61, 82, 97} {
					if v, ok := p.Options[c]; ok && !bytes.Equal(got.Options[c], v) {
						t.Errorf("%s: option %d not echoed", kind, c)
					}
				}
				if _, ok := p.Options[60]; ok && (got.BootFileName == "" || len(got.Options[60]) == 0 || len(got.Options[43]) == 0) {
					t.Errorf("%s: PXE client without its boot answer: %s", kind, got.Summary())
				}
				if n := len(got.DNS()); (n == 100) != tc.wantDNS || (n != 0 && n != 100) {
					t.Errorf("%s: %d DNS servers in the reply, want all 100: %v", kind, n, tc.wantDNS)
				}
				if got.DomainName() != "lab.example" {
					t.Errorf("%s: the domain (13 bytes) went with the DNS servers", kind)
				}
				return got
			}
			offer := check("offer", d)
			// A retransmission and the REQUEST: same xid, no more warnings.
			check("offer again", d)
			req := requestFor(offer, xidOf(client), tc.opts...)
			for _, c := range []uint8{55, 57, 60, 61, 82, 93, 97} {
				if v, ok := d.Options[c]; ok {
					req.Options[c] = v
				}
			}
			req.GatewayIPAddr = d.GatewayIPAddr
			if ack := check("ack", req); wire.Addr(ack.YourIPAddr) != wire.Addr(offer.YourIPAddr) || ack.MessageType() != dhcpv4.MessageTypeAck {
				t.Fatalf("no ACK of the offered address: %s", ack.Summary())
			}
			warned := logs.lines("level=WARN", "mac="+macOf(client).String(), "xid="+hexXID(xidOf(client)))
			if tc.wantDNS {
				if len(warned) != 0 || m.Trimmed() != trimmed {
					t.Errorf("a reply that fits was trimmed: %q", warned)
				}
				return
			}
			if len(warned) != 1 || !strings.Contains(warned[0], "dropped=6") {
				t.Errorf("want one warning naming option 6 for this client and xid, got %q", warned)
			}
			if got := m.Trimmed() - trimmed; got != 3 {
				t.Errorf("%v replies counted as trimmed, want 3", got)
			}
			if got := m.OptionDrops(6) - dnsDrops; got != 3 {
				t.Errorf("option 6 counted dropped %v times, want 3", got)
			}
		})
	}
	// A new xid from the same client warns again.
	d := discover(macOf(300), xidOf(9300), mms(576))
	if rep, err := r.process(0, d, clientSrc, netip.Addr{}, wire.ServerPort); rep.data == nil {
		t.Fatal(err)
	}
	if n := len(logs.lines("level=WARN", "mac="+macOf(300).String(), "xid="+hexXID(xidOf(9300)))); n != 1 {
		t.Errorf("new xid: %d warnings, want 1", n)
	}
}

// A VLAN with a small MTU caps replies below what option 57 says.
func TestRepliesFitLinkMTU(t *testing.T) {
	r := newRig(t, rigOpts{dns: manyDNS(100), mtu: 600})
	r.ready(0)
	d := discover(macOf(400), xidOf(400), dhcpv4.OptGeneric(dhcpv4.OptionMaximumDHCPMessageSize, []byte{0x05, 0xdc}))
	rep, err := r.process(0, d, clientSrc, netip.Addr{}, wire.ServerPort)
	if rep.data == nil {
		t.Fatal(err)
	}
	if len(rep.data) > 600-28 {
		t.Errorf("%d-byte reply on a 600-byte link", len(rep.data))
	}
}

// Finding: an OFFER went to a broadcast, multicast or zero chaddr. No such
// request is answered, leased or recorded; each is counted and logged at
// debug.
func TestBadChaddrDropped(t *testing.T) {
	logs, log := newLogBuf()
	r := newRig(t, rigOpts{log: log})
	r.ready(0)
	if w := logs.lines("subnet's options are past"); len(w) != 0 {
		t.Errorf("a subnet with one DNS server warned that its options do not fit: %q", w)
	}
	s := r.nodes[0].srv
	for name, tc := range map[string]struct {
		hw     net.HardwareAddr
		reason string
	}{
		"broadcast":      {net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, wire.ReasonBadChaddr},
		"all zeros":      {net.HardwareAddr{0, 0, 0, 0, 0, 0}, wire.ReasonBadChaddr},
		"IPv4 multicast": {net.HardwareAddr{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03}, wire.ReasonBadChaddr},
		"IPv6 multicast": {net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, wire.ReasonBadChaddr},
		"group bit":      {net.HardwareAddr{0x03, 0x13, 0, 0, 0, 1}, wire.ReasonBadChaddr},
		"hlen 7":         {net.HardwareAddr{0x02, 0x13, 0, 0, 0, 1, 9}, wire.ReasonBadHWAddr},
		"hlen 0":         {net.HardwareAddr{}, wire.ReasonBadHWAddr},
	} {
		t.Run(name, func(t *testing.T) {
			_, freeBefore := r.pool(0).Snapshot()
			ip := netip.MustParseAddr("10.213.1.77")
			for _, p := range []*dhcpv4.DHCPv4{
				discover(tc.hw, xidOf(500)),
				withType(discover(tc.hw, xidOf(501), dhcpv4.OptRequestedIPAddress(wire.IP(ip))), dhcpv4.MessageTypeRequest),
				renewal(wire.IP(ip), tc.hw, xidOf(502)),
				withType(discover(tc.hw, xidOf(503)), dhcpv4.MessageTypeInform),
			} {
				before := testutil.ToFloat64(s.m.drops.WithLabelValues(tc.reason))
				rep, err := r.process(0, p, clientSrc, netip.Addr{}, wire.ServerPort)
				if rep.data != nil || wire.DropReason(err) != tc.reason {
					t.Errorf("%s: reply %v, reason %q; want none, %q", wire.MessageType(p), rep.data != nil, wire.DropReason(err), tc.reason)
				}
				if after := testutil.ToFloat64(s.m.drops.WithLabelValues(tc.reason)); after != before+1 {
					t.Errorf("%s: counted %v times, want once", wire.MessageType(p), after-before)
				}
			}
			if _, free := r.pool(0).Snapshot(); free != freeBefore {
				t.Errorf("free addresses went from %d to %d", freeBefore, free)
			}
			if _, _, ok := r.pool(0).Lease(tc.hw.String()); ok {
				t.Errorf("%s holds a lease", tc.hw)
			}
			if err := r.flush(0); err != nil {
				t.Fatal(err)
			}
			_ = r.c.DB(0).View(func(tx *store.Tx) error {
				if ls, _ := tx.LeasesByMAC(tc.hw.String()); len(ls) > 0 {
					t.Errorf("leases recorded for %s: %+v", tc.hw, ls)
				}
				if _, err := tx.SeenMAC(tc.hw.String()); err == nil {
					t.Errorf("a sighting of %s recorded", tc.hw)
				}
				return nil
			})
			if len(logs.lines("level=DEBUG", "reason="+tc.reason, "xid="+hexXID(xidOf(500)))) == 0 {
				t.Errorf("no debug line for the drop")
			}
		})
	}
}

// Finding: options the server echoes (61, 82, 97) or records in a lease
// (61, 12) reached the reply and the store at any length (the packet
// library joins repeated options, RFC 3396). Past their bounds the request
// is dropped; an odd host name is not recorded.
func TestClientOptionBounds(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.ready(0)
	s := r.nodes[0].srv
	long := func(n int) []byte { return bytes.Repeat([]byte{'a'}, n) }
	for i, tc := range []struct {
		name     string
		opts     map[uint8][]byte
		refused  bool
		clientID string // recorded in the lease
		hostname string
	}{
		{name: "client ID concatenated to 600 bytes", opts: map[uint8][]byte{61: long(600)}, refused: true},
		{name: "client ID one past its bound", opts: map[uint8][]byte{61: long(wire.MaxClientID + 1)}, refused: true},
		{name: "client ID of one byte", opts: map[uint8][]byte{61: {1}}, refused: true},
		{name: "relay info of 300 bytes", opts: map[uint8][]byte{82: long(300)}, refused: true},
		{name: "PXE GUID of 40 bytes", opts: map[uint8][]byte{97: long(40), 60: []byte("PXEClient:Arch:00000:UNDI:002001")}, refused: true},
		{name: "longest client ID", opts: map[uint8][]byte{61: long(wire.MaxClientID)}, clientID: hex.EncodeToString(long(wire.MaxClientID))},
		{name: "host name", opts: map[uint8][]byte{12: []byte("node-07")}, hostname: "node-07"},
		{name: "host name of 900 bytes", opts: map[uint8][]byte{12: long(900)}},
		{name: "host name with markup", opts: map[uint8][]byte{12: []byte(`<b>"x";rm</b>`)}},
		{name: "host name with a control byte", opts: map[uint8][]byte{12: []byte("node\x1b[2J")}},
		{name: "user class of 2000 bytes, vendor class of 1000", opts: map[uint8][]byte{77: long(2000), 60: long(1000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := 600 + i
			d := discover(macOf(client), xidOf(client))
			for k, v := range tc.opts {
				d.Options[k] = v
			}
			before := testutil.ToFloat64(s.m.drops.WithLabelValues(wire.ReasonBadOption))
			offer, _, err := r.send(0, d, clientSrc, netip.Addr{})
			if tc.refused {
				if offer != nil || wire.DropReason(err) != wire.ReasonBadOption {
					t.Fatalf("answered (%v), want dropped as %s", err, wire.ReasonBadOption)
				}
				if after := testutil.ToFloat64(s.m.drops.WithLabelValues(wire.ReasonBadOption)); after != before+1 {
					t.Errorf("counted %v times, want once", after-before)
				}
				return
			}
			if offer == nil {
				t.Fatalf("no offer: %v", err)
			}
			req := requestFor(offer, xidOf(client))
			for k, v := range tc.opts {
				req.Options[k] = v
			}
			ack, _, err := r.send(0, req, clientSrc, netip.Addr{})
			if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
				t.Fatalf("no ACK: %v", err)
			}
			if err := r.flush(0); err != nil {
				t.Fatal(err)
			}
			l, err := r.storeLease(0, wire.Addr(ack.YourIPAddr))
			if err != nil {
				t.Fatal(err)
			}
			if l.ClientID != tc.clientID || l.Hostname != tc.hostname {
				t.Errorf("lease records client ID %q, host name %q; want %q, %q", l.ClientID, l.Hostname, tc.clientID, tc.hostname)
			}
			_ = r.c.DB(0).View(func(tx *store.Tx) error {
				if seen, err := tx.SeenMAC(macOf(client).String()); err == nil && len(seen.UserClass) > 64 {
					t.Errorf("sighting records a %d-byte user class", len(seen.UserClass))
				}
				return nil
			})
		})
	}
}

// The limiter's memory is bounded under a flood of made-up MACs.
func TestLimiterBounded(t *testing.T) {
	l := newLimiter(10, 20)
	now := newClock().Now()
	for i := range maxLimited + 10 {
		l.allow(macOf(i).String(), now)
	}
	if len(l.m) > maxLimited {
		t.Errorf("limiter tracks %d MACs, bound %d", len(l.m), maxLimited)
	}
}

// A network whose essential answer cannot fit what every client takes is
// refused when the server is built, with the reason; many DNS servers are
// no reason (they are dropped as needed).
func TestConfigRefusesOversizeAnswer(t *testing.T) {
	c, err := replica.New(t.TempDir(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	long := "/boot/" + strings.Repeat("x", 200)
	for name, tc := range map[string]struct {
		mode string
		boot BootConfig
		want []string // in the error; none: accepted
	}{
		"full, defaults":           {mode: store.DHCPFull},
		"proxy, defaults":          {mode: store.DHCPProxy},
		"full, long iPXE script":   {mode: store.DHCPFull, boot: BootConfig{ScriptPath: long}, want: []string{"iPXE", "548", "10.213.0.0/16", long}},
		"proxy, long iPXE script":  {mode: store.DHCPProxy, boot: BootConfig{ScriptPath: long}, want: []string{"proxy", "iPXE"}},
		"full, long HTTP prefix":   {mode: store.DHCPFull, boot: BootConfig{HTTPPrefix: long}, want: []string{"UEFI HTTP boot"}},
		"full, long BIOS loader":   {mode: store.DHCPFull, boot: BootConfig{BIOS: strings.Repeat("b", 300)}, want: []string{"BIOS PXE firmware"}},
		"full, 127-byte file name": {mode: store.DHCPFull, boot: BootConfig{BIOS: strings.Repeat("b", 127)}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := Config{Node: "n1", DB: c.DB(0), Replicator: c.Node(0), Boot: tc.boot,
				Networks: []Network{{Iface: "eth0", Subnet: testSubnet, Mode: tc.mode}}}
			_, err := newServer(cfg, testLog(t))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
