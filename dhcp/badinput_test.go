package dhcp

import (
	"context"
	"encoding/hex"
	"net/netip"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rollcall/rollcall/dhcp/wire"
)

func TestBadInput(t *testing.T) {
	r := newRig(t, rigOpts{tweak: func(c *Config) { c.RatePerMAC, c.RateBurst = 5, 10 }})
	r.ready(0)
	good := discover(macOf(1), xidOf(1)).ToBytes()
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := map[string]struct {
		data   []byte
		reason string
	}{
		"empty":            {nil, wire.ReasonMalformed},
		"truncated header": {good[:100], wire.ReasonMalformed},
		"no cookie":        {mut(func(b []byte) []byte { b[236] = 0; return b }), wire.ReasonMalformed},
		"option longer than the packet": {mut(func(b []byte) []byte {
			b = b[:240]
			return append(b, 53, 1, 1, 12, 200, 'x')
		}), wire.ReasonMalformed},
		"huge":       {make([]byte, 9000), wire.ReasonMalformed},
		"a reply":    {mut(func(b []byte) []byte { b[0] = 2; return b }), wire.ReasonNotRequest},
		"hlen 16":    {mut(func(b []byte) []byte { b[2] = 16; return b }), wire.ReasonBadHWAddr},
		"token ring": {mut(func(b []byte) []byte { b[1] = 6; return b }), wire.ReasonBadHWAddr},
		"bootp (no option 53)": {mut(func(b []byte) []byte {
			b = b[:240]
			return append(b, 255)
		}), wire.ReasonNoMsgType},
		"unknown type":        {withType(discover(macOf(2), xidOf(2)), 200).ToBytes(), wire.ReasonUnknownType},
		"offer from a client": {withType(discover(macOf(2), xidOf(2)), dhcpv4.MessageTypeOffer).ToBytes(), wire.ReasonIgnored},
		"request for another network": {func() []byte {
			p := renewal(wire.IP(netip.MustParseAddr("192.0.2.9")), macOf(3), xidOf(3))
			return p.ToBytes()
		}(), wire.ReasonOtherSubnet},
		"release of someone else's lease": {withType(renewal(wire.IP(netip.MustParseAddr("10.213.1.40")), macOf(4), xidOf(4)), dhcpv4.MessageTypeRelease).ToBytes(), wire.ReasonUnknownLease},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := testutil.ToFloat64(r.nodes[0].srv.m.drops.WithLabelValues(tc.reason))
			rep, err := r.nodes[0].srv.process(context.Background(), packet{ifc: r.nodes[0].srv.order[0], port: 67, src: clientSrc, dst: broadcastAddr, data: tc.data})
			if got := wire.DropReason(err); got != tc.reason {
				t.Errorf("reason %q, want %q (reply %v)", got, tc.reason, rep.data != nil)
			}
			if after := testutil.ToFloat64(r.nodes[0].srv.m.drops.WithLabelValues(tc.reason)); after != before+1 {
				t.Errorf("drop %q counted %v times, want once", tc.reason, after-before)
			}
		})
	}

	// A flood from one MAC is cut to its burst; others are still served.
	flood := discover(macOf(9), xidOf(9))
	served := 0
	for range 200 {
		if p, _, _ := r.send(0, flood, clientSrc, netip.Addr{}); p != nil {
			served++
		}
	}
	if served > 10 {
		t.Errorf("flood from one MAC answered %d times, want at most the burst of 10", served)
	}
	if p, _ := r.dora(0, 10); p == nil {
		t.Error("another client is not served during a flood")
	}
	// The flood took one address, not 200.
	_, free := r.pool(0).Snapshot()
	if blocks, _ := r.pool(0).Snapshot(); blocks*32-free > 8 {
		t.Errorf("%d addresses in use after a flood from one MAC and one client", blocks*32-free)
	}
}

// FuzzHandle runs arbitrary datagrams through the whole packet path of a
// full-mode and a proxy-mode server: no panic, no reply that does not parse,
// and never two clients bound to one address.
func FuzzHandle(f *testing.F) {
	for _, p := range pxeClients() {
		f.Add(p.ToBytes(), uint16(67))
	}
	f.Add(discover(macOf(1), xidOf(1)).ToBytes(), uint16(4011))
	f.Add(renewal(wire.IP(netip.MustParseAddr("10.213.1.33")), macOf(1), xidOf(1)).ToBytes(), uint16(67))
	b, _ := hex.DecodeString("0101060000003d1d0000000000000000000000000000000000000000000b8201fc4200000000000000000000000000000000")
	f.Add(b, uint16(67))
	// Subnet and link selection (options 118 and 82/5), whole and cut short.
	for _, opts := range []map[uint8][]byte{
		{118: {10, 213, 0, 254}},
		{82: {1, 2, 'p', '1', 5, 4, 10, 213, 0, 254}},
		{82: {5, 4, 10, 213}},
		{82: {5, 200, 10, 213, 0, 254}},
	} {
		d := discover(macOf(9), xidOf(9))
		d.GatewayIPAddr = wire.IP(netip.MustParseAddr("192.0.2.1"))
		for code, v := range opts {
			d.Options[code] = v
		}
		f.Add(d.ToBytes(), uint16(67))
	}
	rf := newRig(f, rigOpts{})
	rp := newRig(f, rigOpts{mode: "proxy"})
	rf.ready(0)
	bound := map[netip.Addr]string{}
	f.Fuzz(func(t *testing.T, data []byte, port uint16) {
		p := 67
		if port%2 == 1 {
			p = 4011
		}
		for _, r := range []*rig{rf, rp} {
			n := r.nodes[0]
			rep, _ := n.srv.process(context.Background(), packet{ifc: n.srv.order[0], port: p, src: clientSrc, dst: broadcastAddr, data: data})
			if rep.data == nil {
				continue
			}
			out, err := dhcpv4.FromBytes(rep.data)
			if err != nil {
				t.Fatalf("reply does not parse: %v", err)
			}
			// Answered: a unicast chaddr, options within bounds, and a
			// reply the client takes (the network's essential answer was
			// checked to fit with the longest echoes allowed).
			in, _ := dhcpv4.FromBytes(data)
			if err := wire.CheckHW(in); err != nil {
				t.Fatalf("answered a request with chaddr %s: %v", in.ClientHWAddr, err)
			}
			if code, err := wire.CheckOptions(in); err != nil {
				t.Fatalf("answered a request with option %d of %d bytes", code, len(in.Options[code]))
			}
			if size, limit := wire.ClientSize(out), wire.MaxMessageSize(in, 1500); size > limit {
				t.Fatalf("reply of %d bytes for a client that takes %d", size, limit)
			}
			if r == rf && out.MessageType() == dhcpv4.MessageTypeAck {
				ip := wire.Addr(out.YourIPAddr)
				mac := out.ClientHWAddr.String()
				if old, ok := bound[ip]; ok && old != mac {
					t.Fatalf("%s acked to %s and %s", ip, old, mac)
				}
				if ip.IsValid() {
					bound[ip] = mac
				}
			}
		}
	})
}
