package wire

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

func TestMaxMessageSize(t *testing.T) {
	for name, tc := range map[string]struct {
		opt57 []byte
		mtu   int
		want  int
	}{
		"no option 57":               {nil, 0, 548},
		"576, udhcpc's":              {[]byte{0x02, 0x40}, 0, 548},
		"below the legal minimum":    {[]byte{0x01, 0x2c}, 0, 548},
		"zero":                       {[]byte{0, 0}, 0, 548},
		"malformed (one byte)":       {[]byte{0x05}, 0, 548},
		"malformed (three bytes)":    {[]byte{0x05, 0xdc, 0}, 0, 548},
		"1260, a BIOS PXE ROM's":     {[]byte{0x04, 0xec}, 0, 1232},
		"1500":                       {[]byte{0x05, 0xdc}, 0, 1472},
		"65535, capped at Ethernet":  {[]byte{0xff, 0xff}, 0, 1472},
		"65535 on a jumbo VLAN":      {[]byte{0xff, 0xff}, 9000, 1472},
		"1500 on a 1400-byte link":   {[]byte{0x05, 0xdc}, 1400, 1372},
		"no option on a small link":  {nil, 1400, 548},
		"an MTU below 576 is no cap": {[]byte{0x05, 0xdc}, 500, 1472},
	} {
		p := &dhcpv4.DHCPv4{Options: dhcpv4.Options{}}
		if tc.opt57 != nil {
			p.Options[57] = tc.opt57
		}
		if got := MaxMessageSize(p, tc.mtu); got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
	}
}

// Size and ClientSize count what AppendPacket writes.
func TestSize(t *testing.T) {
	for i, p := range replies(t) {
		b := AppendPacket(nil, p)
		if got := Size(p); got != len(b) {
			t.Errorf("reply %d: Size %d, AppendPacket wrote %d", i, got, len(b))
		}
		without := len(AppendPacket(nil, stripped(p, 82)))
		if got := ClientSize(p); got > without || (without > bootpMinLen && got != without) {
			t.Errorf("reply %d: ClientSize %d, AppendPacket without option 82 wrote %d", i, got, without)
		}
	}
}

func stripped(p *dhcpv4.DHCPv4, codes ...uint8) *dhcpv4.DHCPv4 {
	q := *p
	q.Options = dhcpv4.Options{}
	for c, v := range p.Options {
		q.Options[c] = v
	}
	for _, c := range codes {
		delete(q.Options, c)
	}
	return &q
}

// fitReply is an OFFER as full mode writes it for a subnet with many DNS
// servers, to a PXE client.
func fitReply(t testing.TB, dns int) (req, resp *dhcpv4.DHCPv4) {
	req, err := dhcpv4.NewDiscovery(net.HardwareAddr{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	req.Options = dhcpv4.Options{53: {1}, 61: {1, 2, 0, 0, 0, 0, 1}}
	resp = NewReply(req, dhcpv4.MessageTypeOffer, netip.MustParseAddr("10.9.0.10"))
	resp.YourIPAddr = net.IP{10, 9, 1, 7}
	resp.Options[1] = []byte{255, 255, 0, 0}
	resp.Options[3] = []byte{10, 9, 0, 1}
	resp.Options[28] = []byte{10, 9, 255, 255}
	resp.Options[51] = []byte{0, 0, 14, 16}
	resp.Options[58] = []byte{0, 0, 7, 8}
	resp.Options[59] = []byte{0, 0, 12, 78}
	resp.Options[26] = []byte{5, 220}
	resp.Options[15] = []byte("lab.example")
	resp.Options[6] = bytes.Repeat([]byte{10, 9, 0, 2}, dns)
	return req, resp
}

func codes(p *dhcpv4.DHCPv4) []uint8 {
	var s OptionSet
	for c := range p.Options {
		s.Add(c)
	}
	return s.Codes(nil)
}

// Fit keeps the essentials, then what the client asked for in its order,
// then boot options, then the rest by code, each while it fits; option 82
// is not counted (the relay strips it).
func TestFit(t *testing.T) {
	for name, tc := range map[string]struct {
		dns     int
		prl     []byte
		limit   int
		edit    func(req, resp *dhcpv4.DHCPv4)
		dropped []uint8
		over    bool
	}{
		"fits: nothing dropped": {dns: 2, prl: []byte{1, 3, 6}, limit: 548},
		"100 DNS servers, asked for: they go, the small ones stay": {
			dns: 100, prl: []byte{1, 3, 6, 15}, limit: 548, dropped: []uint8{6},
		},
		"100 DNS servers, not asked for":     {dns: 100, prl: []byte{1, 3}, limit: 548, dropped: []uint8{6}},
		"100 DNS servers fit a larger limit": {dns: 100, prl: []byte{1, 3, 6}, limit: 1472},
		"asked-for order wins over code order": {
			// Room for one of the two: 15 was asked for first.
			dns: 0, prl: []byte{15, 12}, limit: 319, dropped: []uint8{12, 26, 28, 58, 59},
			edit: func(_, resp *dhcpv4.DHCPv4) {
				delete(resp.Options, 6)
				resp.Options[15] = bytes.Repeat([]byte{'d'}, 40)
				resp.Options[12] = bytes.Repeat([]byte{'h'}, 40)
			},
		},
		"boot options before nice-to-haves": {
			dns: 0, prl: []byte{1, 3}, limit: 305, dropped: []uint8{15, 26, 28, 58, 59},
			edit: func(_, resp *dhcpv4.DHCPv4) {
				delete(resp.Options, 6)
				resp.BootFileName = "undionly.kpxe"
				resp.Options[66] = append([]byte("10.9.0.10"), 0)
				resp.Options[67] = append([]byte("undionly.kpxe"), 0)
				resp.Options[15] = bytes.Repeat([]byte{'d'}, 40)
			},
		},
		"option 67 is essential when the file field is empty": {
			dns: 0, prl: []byte{1, 3}, limit: 548, dropped: []uint8{15, 26, 28, 58, 59}, over: true,
			edit: func(_, resp *dhcpv4.DHCPv4) {
				delete(resp.Options, 6)
				resp.Options[67] = bytes.Repeat([]byte{'f'}, 300)
			},
		},
		"option 82 is not counted and never dropped": {
			dns: 1, prl: []byte{1, 3, 6}, limit: 548,
			edit: func(_, resp *dhcpv4.DHCPv4) { resp.Options[82] = bytes.Repeat([]byte{1}, 255) },
		},
		"the client's own long client ID stays even past the limit": {
			dns: 0, prl: []byte{1, 3}, limit: 548, dropped: []uint8{15, 26, 28, 58, 59}, over: true,
			edit: func(_, resp *dhcpv4.DHCPv4) {
				delete(resp.Options, 6)
				resp.Options[61] = bytes.Repeat([]byte{7}, 255)
				resp.Options[97] = bytes.Repeat([]byte{0}, 17)
				resp.Options[60] = []byte("PXEClient")
				resp.Options[43] = []byte{6, 1, 8, 255}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			req, resp := fitReply(t, tc.dns)
			if tc.dns == 0 {
				delete(resp.Options, 6)
			}
			req.Options[55] = tc.prl
			if tc.edit != nil {
				tc.edit(req, resp)
			}
			before := codes(resp)
			dropped, fits := Fit(req, resp, tc.limit)
			if diff := cmp.Diff(tc.dropped, dropped.Codes(nil)); diff != "" {
				t.Errorf("dropped (-want +got):\n%s", diff)
			}
			if fits == tc.over {
				t.Errorf("fits = %v, want %v", fits, !tc.over)
			}
			if fits && ClientSize(resp) > tc.limit {
				t.Errorf("fits, but ClientSize %d > %d", ClientSize(resp), tc.limit)
			}
			for _, c := range before {
				if _, ok := resp.Options[c]; ok == dropped.Has(c) {
					t.Errorf("option %d: still there %v, dropped %v", c, ok, dropped.Has(c))
				}
				if Essential(resp, c) && dropped.Has(c) {
					t.Errorf("essential option %d dropped", c)
				}
			}
			if got := len(AppendPacket(nil, resp)) - optLenOf(resp, 82); fits && got > tc.limit {
				t.Errorf("wrote %d bytes for the client, limit %d", got, tc.limit)
			}
		})
	}
}

func optLenOf(p *dhcpv4.DHCPv4, code uint8) int {
	if v, ok := p.Options[code]; ok {
		return optionLen(len(v))
	}
	return 0
}

// FuzzFit: for any packet the library parses, taken as both request and
// reply, Fit drops exactly what it says, never an essential option, and
// leaves a reply within the limit unless it says it could not.
func FuzzFit(f *testing.F) {
	for _, p := range replies(f) {
		f.Add(p.ToBytes())
	}
	req, resp := fitReply(f, 100)
	req.Options[55] = []byte{1, 3, 6, 15, 66, 67}
	for k, v := range req.Options {
		resp.Options[k] = v
	}
	f.Add(resp.ToBytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := dhcpv4.FromBytes(b)
		if err != nil {
			return
		}
		before := stripped(p)
		limit := MaxMessageSize(p, 0)
		dropped, fits := Fit(p, p, limit)
		for c := range before.Options {
			_, kept := p.Options[c]
			if kept == dropped.Has(c) {
				t.Fatalf("option %d: kept %v, reported dropped %v", c, kept, dropped.Has(c))
			}
			if !kept && Essential(p, c) {
				t.Fatalf("essential option %d dropped", c)
			}
		}
		if size := ClientSize(p); fits != (size <= limit) {
			t.Fatalf("fits %v with ClientSize %d and limit %d", fits, size, limit)
		}
	})
}
