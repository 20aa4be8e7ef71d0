package wire

import (
	"bytes"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// replies are packets of the shapes the server sends: a plain OFFER, a
// PXE ACK with boot fields longer than their BOOTP fields, an option over
// 255 bytes (split, RFC 3396) and an empty one, and a NAK.
func replies(t testing.TB) []*dhcpv4.DHCPv4 {
	req, err := dhcpv4.NewDiscovery(net.HardwareAddr{2, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	req.GatewayIPAddr = net.IP{10, 9, 0, 1}
	req.Options[82] = []byte{1, 2, 'a', 'b'}
	offer := NewReply(req, dhcpv4.MessageTypeOffer, netip.MustParseAddr("10.9.0.10"))
	offer.YourIPAddr = net.IP{10, 9, 1, 7}
	offer.Options.Update(dhcpv4.OptSubnetMask(net.IPMask{255, 255, 0, 0}))
	offer.Options.Update(dhcpv4.OptRouter(net.IP{10, 9, 0, 1}))
	offer.Options[51] = []byte{0, 0, 14, 16}

	ack := NewReply(req, dhcpv4.MessageTypeAck, netip.MustParseAddr("10.9.0.10"))
	ack.ServerIPAddr = net.IP{10, 9, 0, 10}
	ack.ServerHostName = strings.Repeat("s", 80)
	ack.BootFileName = strings.Repeat("f", 200)
	ack.Options[43] = bytes.Repeat([]byte{7}, 600)
	ack.Options[60] = []byte("PXEClient")
	ack.Options[224] = nil

	nak := NewReply(req, dhcpv4.MessageTypeNak, netip.Addr{})
	nak.SetBroadcast()
	return []*dhcpv4.DHCPv4{offer, ack, nak}
}

// AppendPacket writes what the packet library's ToBytes writes, after
// whatever the buffer already holds.
func TestAppendPacketMatchesToBytes(t *testing.T) {
	for i, p := range replies(t) {
		want := p.ToBytes()
		if got := AppendPacket(nil, p); !bytes.Equal(got, want) {
			t.Errorf("reply %d: AppendPacket differs from ToBytes:\n got %x\nwant %x", i, got, want)
		}
		prefix := []byte("keep")
		got := AppendPacket(prefix, p)
		if !bytes.HasPrefix(got, []byte("keep")) || !bytes.Equal(got[4:], want) {
			t.Errorf("reply %d: appending to a used buffer changed its start or the packet", i)
		}
	}
}

// FuzzAppendPacket: for any packet the library parses, the bytes agree
// with its own encoder's.
func FuzzAppendPacket(f *testing.F) {
	for _, p := range replies(f) {
		f.Add(p.ToBytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := dhcpv4.FromBytes(b)
		if err != nil {
			return
		}
		got, want := AppendPacket(nil, p), p.ToBytes()
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendPacket differs from ToBytes:\n got %x\nwant %x", got, want)
		}
		if Size(p) != len(got) {
			t.Fatalf("Size %d, AppendPacket wrote %d", Size(p), len(got))
		}
	})
}
