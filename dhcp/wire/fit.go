package wire

import (
	"encoding/binary"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// Reply sizes, in bytes of DHCP message (BOOTP header, cookie, options).
//
// RFC 2131 §2 has every client take a 576-byte IP datagram (312 octets of
// options); less the IP and UDP headers that is 548 bytes of DHCP message.
// Option 57 (RFC 2132 §9.10) may raise it. Whether that value counts the
// IP and UDP headers is read both ways (busybox udhcpc sends 576 meaning
// the datagram and drops a longer one unseen; ISC dhcpd takes the headers
// off), so they are always taken off: a reply then fits either reading.
const (
	MinMessage   = 576 - ipUDPHeaders  // what every client takes
	MaxMessage   = 1500 - ipUDPHeaders // what an Ethernet frame carries unfragmented
	ipUDPHeaders = 20 + 8
	fixedLen     = 236 + 4 + 1 // header, cookie, end option
)

// MaxMessageSize is the longest reply req's client takes on a link of
// the given MTU (0: unknown, taken as 1500): its option 57 less the IP and
// UDP headers, never below MinMessage (values under 576 are read as 576,
// the legal minimum) nor above what the MTU carries unfragmented (a client
// reading a raw socket loses a fragmented reply). Without option 57, or
// with a malformed one, it is MinMessage.
func MaxMessageSize(req *dhcpv4.DHCPv4, mtu int) int {
	n := MinMessage
	if v := req.Options[57]; len(v) == 2 {
		n = int(binary.BigEndian.Uint16(v)) - ipUDPHeaders
	}
	most := MaxMessage
	if mtu >= 576 {
		most = min(most, mtu-ipUDPHeaders)
	}
	return min(max(n, MinMessage), most)
}

// optionLen is the encoded length of an option of n data bytes, split as
// RFC 3396 says when longer than 255 (as AppendPacket writes it).
func optionLen(n int) int {
	if n == 0 {
		return 2
	}
	return n + 2*((n+254)/255)
}

// Size is len(AppendPacket(nil, p)), without encoding it.
func Size(p *dhcpv4.DHCPv4) int {
	n := fixedLen
	for c, v := range p.Options {
		if c != 0 && c != 255 {
			n += optionLen(len(v))
		}
	}
	return max(n, bootpMinLen)
}

// ClientSize is the size of p as its client receives it: without option
// 82, which the relay agent strips before forwarding the reply (RFC 3046
// §2.2), and without the padding to 300 bytes. Fit holds it to the limit.
func ClientSize(p *dhcpv4.DHCPv4) int {
	n := fixedLen
	for c, v := range p.Options {
		if c != 0 && c != 255 && c != 82 {
			n += optionLen(len(v))
		}
	}
	return n
}

// Essential reports whether option code of resp is never dropped to make
// the reply fit: 53 (message type), 54 (server identifier), 51 (lease
// time), 1 (subnet mask), 3 (router); the client's own options that must be
// echoed, 61 (RFC 6842) and 97 (PXE client GUID, RFC 4578 §2.2), and 82
// (RFC 3046, stripped by the relay before the client sees it); and a boot
// answer's 60 and 43 (a PXE ROM ignores an offer without them) and 67 when
// the boot file name does not fit the file field, so lives only there.
func Essential(resp *dhcpv4.DHCPv4, code uint8) bool {
	switch code {
	case 53, 54, 51, 1, 3, 61, 97, 82, 60, 43:
		return true
	case 67:
		return resp.BootFileName == ""
	}
	return false
}

// bootCodes are the boot options that may go (Essential keeps the rest),
// in the order they are kept: the boot file name when the file field has
// it too (67), the TFTP server name (66, siaddr has it too), PXELINUX's
// (209–211).
var bootCodes = [...]uint8{67, 66, 209, 210, 211}

// OptionSet is a set of option codes, kept without allocating.
type OptionSet [4]uint64

// Add puts code in the set.
func (s *OptionSet) Add(code uint8) { s[code>>6] |= 1 << (code & 63) }

// Has reports whether code is in the set.
func (s *OptionSet) Has(code uint8) bool { return s[code>>6]&(1<<(code&63)) != 0 }

// Codes appends the codes in the set to dst, in ascending order.
func (s *OptionSet) Codes(dst []uint8) []uint8 {
	for c := range 256 {
		if s.Has(uint8(c)) {
			dst = append(dst, uint8(c))
		}
	}
	return dst
}

// Fit drops options from resp, a reply to req, until ClientSize(resp) is
// at most limit, and returns what it dropped. Option overload (RFC 2132
// §9.3, the sname and file fields as option space) is not used: an option
// that does not fit is dropped.
//
// Options are kept in this order, each one while it still fits in what the
// ones before it left, so a long option that does not fit gives way to
// shorter ones after it:
//
//  1. the Essential ones, always (even past limit: then fits is false);
//  2. the options the client asked for, in the order of its option 55;
//  3. boot options it did not ask for (bootCodes order);
//  4. every other option, by ascending code (nice-to-haves: broadcast
//     address, MTU, renewal times, DNS, domain, host name, …).
func Fit(req, resp *dhcpv4.DHCPv4, limit int) (dropped OptionSet, fits bool) {
	size := fixedLen
	for c, v := range resp.Options {
		if c != 0 && c != 255 && c != 82 && Essential(resp, c) {
			size += optionLen(len(v))
		}
	}
	var decided OptionSet
	try := func(c uint8) {
		if c == 0 || c == 255 || decided.Has(c) {
			return
		}
		decided.Add(c)
		v, ok := resp.Options[c]
		if !ok || Essential(resp, c) {
			return
		}
		if n := optionLen(len(v)); size+n <= limit {
			size += n
			return
		}
		delete(resp.Options, c)
		dropped.Add(c)
	}
	for _, c := range req.Options[55] {
		try(c)
	}
	for _, c := range bootCodes {
		try(c)
	}
	for c := 1; c < 255; c++ {
		try(uint8(c))
	}
	return dropped, size <= limit
}
