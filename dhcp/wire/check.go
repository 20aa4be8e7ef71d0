package wire

import (
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// Bounds on what a client sends that the server echoes in a reply or
// writes into a lease record (and so through Raft to every node). The
// packet library concatenates repeated options (RFC 3396), so without
// them one option could fill the whole datagram.
const (
	// MaxClientID is option 61's longest standard form: type 255, a
	// 4-byte IAID and a DUID of at most 130 bytes (RFC 4361 §6.1, RFC
	// 8415 §11.1). RFC 2132 §9.14 sets the shortest at 2.
	MaxClientID = 1 + 4 + 130
	// MaxAgentInfo is one option 82 (RFC 3046 §2.0): relays never split it.
	MaxAgentInfo = 255
	// MaxClientGUID is option 97: a type byte and a 16-byte GUID (RFC
	// 4578 §2.2).
	MaxClientGUID = 17
	// MaxHostname bounds option 12 as recorded in a lease; a longer or
	// odd one is not recorded (the request is still answered).
	MaxHostname = 63
)

// CheckHW refuses a request whose client hardware address cannot be
// answered or leased: not Ethernet with a 6-byte chaddr (ReasonBadHWAddr);
// or the broadcast address, a multicast one (the I/G bit, the low bit of
// the first octet, set; broadcast is one too) or all zeros
// (ReasonBadChaddr), which no NIC has and a unicast reply cannot reach.
func CheckHW(p *dhcpv4.DHCPv4) error {
	if p.HWType != iana.HWTypeEthernet || len(p.ClientHWAddr) != 6 {
		return Dropf(ReasonBadHWAddr)
	}
	hw := p.ClientHWAddr
	if hw[0]&1 != 0 || hw[0]|hw[1]|hw[2]|hw[3]|hw[4]|hw[5] == 0 {
		return Dropf(ReasonBadChaddr)
	}
	return nil
}

// CheckOptions refuses a request carrying an option that would be echoed
// or recorded past its bound (ReasonBadOption), and returns that option's
// code.
func CheckOptions(p *dhcpv4.DHCPv4) (uint8, error) {
	if v, ok := p.Options[61]; ok && (len(v) < 2 || len(v) > MaxClientID) {
		return 61, Dropf(ReasonBadOption)
	}
	if v, ok := p.Options[82]; ok && len(v) > MaxAgentInfo {
		return 82, Dropf(ReasonBadOption)
	}
	if v, ok := p.Options[97]; ok && len(v) > MaxClientGUID {
		return 97, Dropf(ReasonBadOption)
	}
	return 0, nil
}
