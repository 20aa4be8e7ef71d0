package wire

import (
	"encoding/binary"
	"net"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// bootpMinLen is the shortest BOOTP message (RFC 951): some relays and
// clients drop anything shorter, so replies are padded to it.
const bootpMinLen = 300

// AppendPacket appends p in wire form to dst and returns the result: the
// same bytes as p.ToBytes() (options in ascending code order but the relay
// agent's option 82 last, RFC 3046 §2.1; longer than
// 255 bytes split as RFC 3396 says, padded to 300 bytes), without its
// allocations: the reply path writes into one buffer per reader thread
// instead of sorting the option map into a new slice and growing a new
// buffer for every packet (a tenth of the packet path's CPU in
// lab/bench/dhcp's profile).
func AppendPacket(dst []byte, p *dhcpv4.DHCPv4) []byte {
	start := len(dst)
	var hdr [236]byte
	hdr[0], hdr[1], hdr[2], hdr[3] = byte(p.OpCode), byte(p.HWType), byte(len(p.ClientHWAddr)), p.HopCount
	copy(hdr[4:8], p.TransactionID[:])
	binary.BigEndian.PutUint16(hdr[8:], p.NumSeconds)
	binary.BigEndian.PutUint16(hdr[10:], p.Flags)
	putIP(hdr[12:16], p.ClientIPAddr)
	putIP(hdr[16:20], p.YourIPAddr)
	putIP(hdr[20:24], p.ServerIPAddr)
	putIP(hdr[24:28], p.GatewayIPAddr)
	copy(hdr[28:44], p.ClientHWAddr)
	copy(hdr[44:44+63], p.ServerHostName)
	copy(hdr[108:108+127], p.BootFileName)
	dst = append(dst, hdr[:]...)
	dst = append(dst, 99, 130, 83, 99) // magic cookie
	// Codes in ascending order, as ToBytes writes them: a small insertion
	// sort on the stack (a reply carries a dozen options).
	var codes [255]uint8
	n := 0
	for c := range p.Options {
		if c == 0 || c == 255 || c == 82 {
			continue
		}
		i := n
		for i > 0 && codes[i-1] > c {
			codes[i] = codes[i-1]
			i--
		}
		codes[i] = c
		n++
	}
	if _, ok := p.Options[82]; ok {
		codes[n] = 82
		n++
	}
	for _, c := range codes[:n] {
		data := p.Options[c]
		if len(data) == 0 {
			dst = append(dst, c, 0)
			continue
		}
		for len(data) > 0 {
			k := min(len(data), 255)
			dst = append(dst, c, byte(k))
			dst = append(dst, data[:k]...)
			data = data[k:]
		}
	}
	dst = append(dst, 255)
	for len(dst)-start < bootpMinLen {
		dst = append(dst, 0)
	}
	return dst
}

// putIP writes an IPv4 address; anything else leaves zeros, as ToBytes does.
func putIP(b []byte, ip net.IP) {
	if ip4 := ip.To4(); ip4 != nil {
		copy(b, ip4)
	}
}
