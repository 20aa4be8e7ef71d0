package dhcp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/rollcall/rollcall/dhcp/boot"
	"github.com/rollcall/rollcall/dhcp/full"
	"github.com/rollcall/rollcall/dhcp/lease"
	"github.com/rollcall/rollcall/dhcp/proxy"
	"github.com/rollcall/rollcall/dhcp/wire"
	"github.com/rollcall/rollcall/store"
)

// A reply is trimmed to what its client takes (wire.Fit) but never below
// its essential options. checkReplyFits makes sure, before the service
// starts, that those fit in what every client takes (wire.MinMessage) for
// every kind of client a network answers: otherwise some client would get
// an answer it cannot read, and nothing would say why.

// fit drops what does not fit in the client's limit from resp (wire.Fit
// says in which order), counts it, and says so once per client and xid: a
// client retransmitting, or its REQUEST after the DISCOVER, would repeat it.
func (s *server) fit(req *wire.Request, resp *dhcpv4.DHCPv4, limit int) {
	dropped, fits := wire.Fit(req.Pkt, resp, limit)
	s.m.trim(!fits).Inc()
	var buf [32]uint8
	codes := dropped.Codes(buf[:0])
	for _, c := range codes {
		s.m.optionDropped(c).Inc()
	}
	if !s.trimLog.first(req.Pkt.ClientHWAddr, req.Pkt.TransactionID) {
		return
	}
	list := make([]byte, 0, 4*len(codes))
	for i, c := range codes {
		if i > 0 {
			list = append(list, ',')
		}
		list = strconv.AppendUint(list, uint64(c), 10)
	}
	msg := "reply options dropped to fit the client's maximum message size"
	if !fits {
		msg = "reply past the client's maximum message size with its essential options alone; sent as it is"
	}
	req.Log().Warn(msg, "type", typeName(wire.MessageType(resp)), "dropped", string(list),
		"limit", limit, "size", wire.ClientSize(resp), "max_message_size_option", wire.OptUint16(req.Pkt, 57))
}

// mtu is the network's link MTU from its VLAN, or 0.
func (n *network) mtu() int {
	if st := n.settings.Load(); st != nil {
		return st.MTU
	}
	return 0
}

// xidOnce remembers (MAC, xid) pairs lately seen, in a fixed table: a
// collision only repeats a log line, and a flood of new pairs costs no
// memory.
type xidOnce struct {
	mu    sync.Mutex
	slots [1024]uint64
}

// first reports whether the pair is new, and remembers it.
func (o *xidOnce) first(mac net.HardwareAddr, xid dhcpv4.TransactionID) bool {
	h := uint64(14695981039346656037) // FNV-1a
	for _, b := range mac {
		h = (h ^ uint64(b)) * 1099511628211
	}
	for _, b := range xid {
		h = (h ^ uint64(b)) * 1099511628211
	}
	h |= 1 << 63 // 0 marks an empty slot
	i := h % uint64(len(o.slots))
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.slots[i] == h {
		return false
	}
	o.slots[i] = h
	return true
}

// fitClients are the kinds of client a network's answers are sized for,
// each with the longest options it may have echoed back (a client ID of
// wire.MaxClientID bytes, a PXE GUID).
var fitClients = []struct {
	name string
	opts map[uint8][]byte
}{
	{"a plain DHCP client", nil},
	{"BIOS PXE firmware", map[uint8][]byte{93: {0, 0}, 60: []byte("PXEClient:Arch:00000:UNDI:002001")}},
	{"x86-64 UEFI PXE firmware", map[uint8][]byte{93: {0, 7}, 60: []byte("PXEClient:Arch:00007:UNDI:003000")}},
	{"ARM64 UEFI PXE firmware", map[uint8][]byte{93: {0, 11}, 60: []byte("PXEClient:Arch:00011:UNDI:003000")}},
	{"32-bit UEFI PXE firmware", map[uint8][]byte{93: {0, 6}, 60: []byte("PXEClient:Arch:00006:UNDI:003000")}},
	{"x86-64 UEFI HTTP boot", map[uint8][]byte{93: {0, 16}, 60: []byte("HTTPClient:Arch:00016:UNDI:003001")}},
	{"ARM64 UEFI HTTP boot", map[uint8][]byte{93: {0, 19}, 60: []byte("HTTPClient:Arch:00019:UNDI:003001")}},
	{"32-bit UEFI HTTP boot", map[uint8][]byte{93: {0, 15}, 60: []byte("HTTPClient:Arch:00015:UNDI:003001")}},
	{"iPXE", map[uint8][]byte{93: {0, 0}, 77: []byte("iPXE"), 60: []byte("PXEClient:Arch:00000:UNDI:002001")}},
}

// worstAddr is the longest dotted quad: it answers in boot URLs and
// option 66, and the node's address may not be known yet.
var worstAddr = netip.MustParseAddr("255.255.255.255")

// checkReplyFits builds the answer each kind of client would get on n,
// through the mode's own handler, and refuses the network when the
// answer's essential options alone are past wire.MinMessage.
func checkReplyFits(n Network, bc boot.Config) error {
	bc.PXELinux = n.BootLoader == store.BootLoaderPXELinux
	var h wire.Handler
	if n.Mode == store.DHCPProxy {
		h = &proxy.Handler{Boot: bc}
	} else {
		st := full.Settings{Subnet: n.Subnet, Router: worstAddr, LeaseTime: time.Hour}
		h = &full.Handler{Settings: func() full.Settings { return st }, Leases: fitLeases{}, Machines: fitLeases{}, Boot: bc}
	}
	for _, c := range fitClients {
		opts := map[uint8][]byte{61: make([]byte, wire.MaxClientID), 97: make([]byte, wire.MaxClientGUID)}
		for k, v := range c.opts {
			opts[k] = v
		}
		p, resp := sampleAnswer(h, n.Iface, opts)
		if resp == nil {
			continue // not answered on this network (no loader for it, or proxy mode and not a boot client)
		}
		if _, fits := wire.Fit(p, resp, wire.MinMessage); !fits {
			file := resp.BootFileName
			if file == "" {
				file = strings.TrimSuffix(string(resp.Options[67]), "\x00")
			}
			return fmt.Errorf("dhcp: network %s on %s: the %s answer to %s is %d bytes with only its essential options, past the %d bytes every client takes (a 576-byte datagram, RFC 2131 §2): boot file %q is too long",
				n.Subnet, n.Iface, n.Mode, c.name, wire.ClientSize(resp), wire.MinMessage, file)
		}
	}
	return nil
}

// warnLongOptions says, when a full-mode subnet's settings are loaded
// and its answer to a plain client changed size, that the answer is past
// what every client takes: clients that do not say they take more (option
// 57) will get it trimmed. Settings load from one goroutine at a time.
func (s *server) warnLongOptions(n *network, st full.Settings) {
	if n.Mode != store.DHCPFull {
		return
	}
	h := &full.Handler{Settings: func() full.Settings { return st }, Leases: fitLeases{}, Machines: fitLeases{}}
	_, resp := sampleAnswer(h, n.Iface, nil)
	if resp == nil || wire.ClientSize(resp) == n.sampleSize {
		return
	}
	n.sampleSize = wire.ClientSize(resp)
	if n.sampleSize > wire.MinMessage {
		s.log.Warn("dhcp: the subnet's options are past the 548 bytes every client takes; replies to clients that do not say they take more (option 57) lose options",
			"subnet", n.Subnet, "iface", n.Iface, "size", wire.ClientSize(resp), "dns_servers", len(st.DNS))
	}
}

// sampleAnswer runs a DISCOVER with opts through h, as from a client of
// MAC 02:00:00:00:00:01 to this node at worstAddr.
func sampleAnswer(h wire.Handler, iface string, opts map[uint8][]byte) (req, resp *dhcpv4.DHCPv4) {
	req = &dhcpv4.DHCPv4{
		OpCode: dhcpv4.OpcodeBootRequest, HWType: 1, ClientHWAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1},
		ClientIPAddr: net.IPv4zero, YourIPAddr: net.IPv4zero, ServerIPAddr: net.IPv4zero, GatewayIPAddr: net.IPv4zero,
		Options: dhcpv4.Options{53: {byte(dhcpv4.MessageTypeDiscover)}},
	}
	for k, v := range opts {
		req.Options[k] = v
	}
	resp, _ = h.Handle(context.Background(), &wire.Request{
		Pkt: req, MAC: req.ClientHWAddr.String(), Iface: iface, Port: wire.ServerPort,
		Local: worstAddr, Base: discardLog,
	})
	return req, resp
}

var discardLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// fitLeases offers an address to everyone and knows no machine.
type fitLeases struct{}

func (fitLeases) Offer(string, string, netip.Addr) (netip.Addr, time.Duration, bool) {
	return worstAddr, time.Hour, true
}

func (fitLeases) Commit(string, string, string, netip.Addr) (time.Duration, lease.Verdict) {
	return time.Hour, lease.ACK
}
func (fitLeases) Release(string, netip.Addr) bool { return false }
func (fitLeases) Decline(string, netip.Addr) bool { return false }
func (fitLeases) Forget(string)                   {}

func (fitLeases) Assigned(string, netip.Prefix) (full.Assignment, bool) {
	return full.Assignment{}, false
}
