// Package wire holds what the DHCPv4 mode handlers share with the server
// that owns the sockets: the request as it arrived (packet plus where it came
// from), the Handler interface both modes implement, counted drop reasons,
// the option helpers common to full and proxy replies (RFC 2131, RFC
// 2132, RFC 3046), the bounds on what a client sends (check.go) and the
// sizing of replies to what the client takes (fit.go).
package wire

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/coredhcp/coredhcp/handler"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

// Ports of the DHCP/PXE protocols.
const (
	ServerPort = 67   // DHCP server (and relay agents)
	ClientPort = 68   // DHCP client
	PXEPort    = 4011 // PXE boot server discovery (proxy DHCP)
)

// Request is one decoded packet and where it came from.
type Request struct {
	Pkt     *dhcpv4.DHCPv4
	MAC     string // chaddr, lowercase colon form
	Iface   string
	Port    int            // local port it arrived on: 67 or 4011
	Src     netip.AddrPort // sender (a client, or a relay agent)
	Local   netip.Addr     // this node's address that answers: option 54, siaddr, boot URLs
	Now     time.Time
	Relayed bool // giaddr set

	// Base is the server's logger; Log derives the per-packet one (mac,
	// xid, iface) on first use, so packets that log nothing pay nothing.
	Base *slog.Logger
	log  *slog.Logger
}

// Log is the per-packet logger.
func (r *Request) Log() *slog.Logger {
	if r.log == nil {
		if r.Base == nil {
			r.Base = slog.Default()
		}
		r.log = r.Base.With("mac", r.MAC, "xid", hex.EncodeToString(r.Pkt.TransactionID[:]), "iface", r.Iface)
	}
	return r.log
}

// Debug logs at debug level when that level is on.
func (r *Request) Debug(msg string, args ...any) {
	if r.Base != nil && r.Base.Enabled(context.Background(), slog.LevelDebug) {
		r.Log().Debug(msg, args...)
	}
}

// Handler decides the answer to one request: a reply to send, or nil and a
// Drop saying why nothing is sent. Full and proxy DHCP are two Handlers.
type Handler interface {
	Handle(ctx context.Context, req *Request) (*dhcpv4.DHCPv4, error)
}

// Drop is why a request got no answer. Reasons are short, fixed strings:
// they label the drops metric.
type Drop struct{ Reason string }

func (d *Drop) Error() string { return "dropped: " + d.Reason }

// Drop reasons.
const (
	ReasonMalformed    = "malformed"       // not a parseable BOOTREQUEST
	ReasonNotRequest   = "not_request"     // op is not BOOTREQUEST
	ReasonNoMsgType    = "no_message_type" // option 53 missing (BOOTP)
	ReasonUnknownType  = "unknown_message_type"
	ReasonBadHWAddr    = "bad_hwaddr"     // not Ethernet with a 6-byte chaddr
	ReasonBadChaddr    = "bad_chaddr"     // chaddr broadcast, multicast or zero
	ReasonBadOption    = "bad_option"     // an option echoed or recorded is past its bound (CheckOptions)
	ReasonRateLimited  = "rate_limited"   // flood from one MAC
	ReasonOtherSubnet  = "other_subnet"   // relayed from, or asking for, a network we do not serve
	ReasonNotForUs     = "not_for_us"     // REQUEST for another server, or a lease another node owns
	ReasonNoAddress    = "pool_exhausted" // no free address in this node's blocks
	ReasonNotPXE       = "not_pxe"        // proxy mode: not a PXE/HTTP boot client
	ReasonUnknownLease = "unknown_lease"  // RELEASE/DECLINE for a lease we do not know
	ReasonNoBootFile   = "no_boot_file"   // proxy mode: an architecture with no loader configured
	ReasonIgnored      = "ignored"        // a message type this mode does not answer
	ReasonSendFailed   = "send_failed"
	ReasonNoHandler    = "no_handler" // no served network matches
)

// Dropf returns a Drop for reason.
func Dropf(reason string) error { return &Drop{Reason: reason} }

// DropReason returns the reason of a Drop, or "error" for anything else.
func DropReason(err error) string {
	var d *Drop
	if errors.As(err, &d) {
		return d.Reason
	}
	return "error"
}

// Chain runs coredhcp handlers in order until one stops the chain; a nil
// response from a stopping handler means no reply.
func Chain(req, resp *dhcpv4.DHCPv4, hs ...handler.Handler4) *dhcpv4.DHCPv4 {
	for _, h := range hs {
		var stop bool
		resp, stop = h(req, resp)
		if stop {
			return resp
		}
	}
	return resp
}

// NewReply starts a reply to req of type t from server: xid, chaddr, flags,
// giaddr, option 82 (RFC 3046 §2.2: echoed unchanged) and option 61 (RFC
// 6842) copied.
func NewReply(req *dhcpv4.DHCPv4, t dhcpv4.MessageType, server netip.Addr) *dhcpv4.DHCPv4 {
	resp := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootReply,
		HWType:        req.HWType,
		TransactionID: req.TransactionID,
		Flags:         req.Flags,
		GatewayIPAddr: req.GatewayIPAddr,
		ClientHWAddr:  req.ClientHWAddr,
		ClientIPAddr:  net.IPv4zero,
		YourIPAddr:    net.IPv4zero,
		ServerIPAddr:  net.IPv4zero,
		Options:       dhcpv4.Options{},
	}
	resp.Options.Update(dhcpv4.OptMessageType(t))
	if server.IsValid() {
		resp.Options.Update(dhcpv4.OptServerIdentifier(IP(server)))
	}
	for _, code := range []uint8{82, 61} {
		if v, ok := req.Options[code]; ok {
			resp.Options[code] = append([]byte(nil), v...)
		}
	}
	return resp
}

// IP converts an address for the packet library.
func IP(a netip.Addr) net.IP {
	if !a.IsValid() {
		return net.IPv4zero
	}
	b := a.As4()
	return net.IP(b[:])
}

// Addr converts a packet address; zero or invalid gives an invalid Addr.
func Addr(ip net.IP) netip.Addr {
	ip4 := ip.To4()
	if ip4 == nil {
		return netip.Addr{}
	}
	a := netip.AddrFrom4([4]byte(ip4))
	if a.IsUnspecified() {
		return netip.Addr{}
	}
	return a
}

// OptAddr returns a 4-byte address option.
func OptAddr(p *dhcpv4.DHCPv4, code uint8) netip.Addr {
	v := p.Options[code]
	if len(v) != 4 {
		return netip.Addr{}
	}
	return netip.AddrFrom4([4]byte(v))
}

// MessageType returns option 53, or 0 when it is missing or malformed.
func MessageType(p *dhcpv4.DHCPv4) dhcpv4.MessageType {
	v := p.Options[53]
	if len(v) != 1 {
		return 0
	}
	return dhcpv4.MessageType(v[0])
}

// ClientID returns option 61 in hex, or "" when it is missing or out of
// CheckOptions' bounds: it goes into the lease record.
func ClientID(p *dhcpv4.DHCPv4) string {
	v := p.Options[61]
	if len(v) < 2 || len(v) > MaxClientID {
		return ""
	}
	const hexd = "0123456789abcdef"
	out := make([]byte, 0, 2*len(v))
	for _, b := range v {
		out = append(out, hexd[b>>4], hexd[b&15])
	}
	return string(out)
}

// Hostname returns option 12 when it is a plausible host name, else "":
// at most MaxHostname bytes of letters, digits, '-', '_' and '.', starting
// with a letter or digit. It goes into the lease record and from there to
// the UI, exports and DNS providers, so anything else (quotes, slashes,
// control bytes) is not recorded.
func Hostname(p *dhcpv4.DHCPv4) string {
	v := p.Options[12]
	if len(v) == 0 || len(v) > MaxHostname || !alnum(v[0]) {
		return ""
	}
	for _, c := range v {
		if !alnum(c) && c != '-' && c != '_' && c != '.' {
			return ""
		}
	}
	return string(v)
}

func alnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// LinkSelection is the address that names the client's subnet when a relay
// or the client says so apart from giaddr: option 118 (RFC 3011, subnet
// selection), else option 82's link-selection suboption 5 (RFC 3527, a
// relay whose giaddr is on another network than the client's). It is
// invalid when neither is there or either is malformed.
func LinkSelection(p *dhcpv4.DHCPv4) netip.Addr {
	if a := OptAddr(p, 118); a.IsValid() && !a.IsUnspecified() {
		return a
	}
	rai := p.Options[82]
	for len(rai) >= 2 {
		code, n := rai[0], int(rai[1])
		if len(rai) < 2+n {
			return netip.Addr{}
		}
		if code == 5 && n == 4 {
			if a := netip.AddrFrom4([4]byte(rai[2:6])); !a.IsUnspecified() {
				return a
			}
			return netip.Addr{}
		}
		rai = rai[2+n:]
	}
	return netip.Addr{}
}

// OptUint16 returns a 2-byte option as a number, or 0.
func OptUint16(p *dhcpv4.DHCPv4, code uint8) int {
	v := p.Options[code]
	if len(v) != 2 {
		return 0
	}
	return int(v[0])<<8 | int(v[1])
}
