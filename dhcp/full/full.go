// Package full is full-mode DHCP (RFC 2131): the node hands out addresses
// and network configuration. A known machine with an address assigned in
// the subnet gets that address from the local store, needing no quorum;
// anyone else gets a dynamic lease from this node's blocks (package lease).
// Network-boot clients also get their boot file (package boot).
package full

import (
	"context"
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/coredhcp/coredhcp/handler"
	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/rollcall/rollcall/dhcp/boot"
	"github.com/rollcall/rollcall/dhcp/lease"
	"github.com/rollcall/rollcall/dhcp/wire"
)

// Leases is what full mode needs from the dynamic pool.
type Leases interface {
	Offer(mac, clientID string, requested netip.Addr) (netip.Addr, time.Duration, bool)
	Commit(mac, clientID, hostname string, ip netip.Addr) (time.Duration, lease.Verdict)
	Release(mac string, ip netip.Addr) bool
	Decline(mac string, ip netip.Addr) bool
	Forget(mac string)
}

// Assignment is a known machine's address in the subnet.
type Assignment struct {
	IP       netip.Addr
	Hostname string
}

// Machines looks up known machines in the local store.
type Machines interface {
	Assigned(mac string, subnet netip.Prefix) (Assignment, bool)
}

// Settings is the subnet's configuration handed to clients.
type Settings struct {
	Subnet    netip.Prefix
	Router    netip.Addr
	DNS       []netip.Addr
	Domain    string
	MTU       int
	LeaseTime time.Duration // for known machines' fixed addresses
}

// Handler is full-mode DHCP for one subnet.
type Handler struct {
	Settings func() Settings
	Leases   Leases
	Machines Machines
	Boot     boot.Config
}

var _ wire.Handler = (*Handler)(nil)

// Handle answers one request.
func (h *Handler) Handle(ctx context.Context, req *wire.Request) (*dhcpv4.DHCPv4, error) {
	p := req.Pkt
	st := h.Settings()
	switch wire.MessageType(p) {
	case dhcpv4.MessageTypeDiscover:
		return h.discover(req, st)
	case dhcpv4.MessageTypeRequest:
		return h.request(req, st)
	case dhcpv4.MessageTypeRelease:
		if !h.Leases.Release(req.MAC, wire.Addr(p.ClientIPAddr)) {
			return nil, wire.Dropf(wire.ReasonUnknownLease)
		}
		req.Debug("released", "ip", wire.Addr(p.ClientIPAddr))
		return nil, nil // RELEASE has no answer
	case dhcpv4.MessageTypeDecline:
		ip := wire.OptAddr(p, 50)
		if !h.Leases.Decline(req.MAC, ip) {
			return nil, wire.Dropf(wire.ReasonUnknownLease)
		}
		req.Log().Warn("address declined by the client (in use on the network): quarantined", "ip", ip)
		return nil, nil
	case dhcpv4.MessageTypeInform:
		resp := wire.NewReply(p, dhcpv4.MessageTypeAck, req.Local)
		resp.ClientIPAddr = p.ClientIPAddr
		return wire.Chain(p, resp, h.netOptions(st, 0, "")...), nil
	case 0:
		return nil, wire.Dropf(wire.ReasonNoMsgType)
	case dhcpv4.MessageTypeOffer, dhcpv4.MessageTypeAck, dhcpv4.MessageTypeNak:
		return nil, wire.Dropf(wire.ReasonIgnored)
	default: // lease query and bulk types are not served; anything past them is unknown
		if wire.MessageType(p) <= 18 {
			return nil, wire.Dropf(wire.ReasonIgnored)
		}
		return nil, wire.Dropf(wire.ReasonUnknownType)
	}
}

func (h *Handler) discover(req *wire.Request, st Settings) (*dhcpv4.DHCPv4, error) {
	p := req.Pkt
	var ip netip.Addr
	var d time.Duration
	var host string
	if a, ok := h.Machines.Assigned(req.MAC, st.Subnet); ok {
		ip, d, host = a.IP, st.LeaseTime, a.Hostname
	} else {
		requested := wire.OptAddr(p, 50)
		if !st.Subnet.Contains(requested) {
			requested = netip.Addr{}
		}
		var ok bool
		ip, d, ok = h.Leases.Offer(req.MAC, wire.ClientID(p), requested)
		if !ok {
			return nil, wire.Dropf(wire.ReasonNoAddress)
		}
	}
	resp := wire.NewReply(p, dhcpv4.MessageTypeOffer, req.Local)
	resp.YourIPAddr = wire.IP(ip)
	resp = wire.Chain(p, resp, h.netOptions(st, d, host)...)
	h.boot(req, resp)
	req.Debug("offer", "ip", ip, "lease", d)
	return resp, nil
}

func (h *Handler) request(req *wire.Request, st Settings) (*dhcpv4.DHCPv4, error) {
	p := req.Pkt
	if sid := wire.OptAddr(p, 54); sid.IsValid() && sid != req.Local {
		// SELECTING, and the client chose another server (RFC 2131 §4.3.2).
		h.Leases.Forget(req.MAC)
		return nil, wire.Dropf(wire.ReasonNotForUs)
	}
	ip := wire.OptAddr(p, 50)
	if !ip.IsValid() {
		ip = wire.Addr(p.ClientIPAddr)
	}
	if !ip.IsValid() {
		return nil, wire.Dropf(wire.ReasonMalformed)
	}
	if !st.Subnet.Contains(ip) {
		req.Debug("nak: address of another network", "ip", ip)
		return nak(req), wire.Dropf(wire.ReasonOtherSubnet)
	}
	var d time.Duration
	var host string
	if a, ok := h.Machines.Assigned(req.MAC, st.Subnet); ok {
		if a.IP != ip {
			return nak(req), nil
		}
		d, host = st.LeaseTime, a.Hostname
	} else {
		var v lease.Verdict
		d, v = h.Leases.Commit(req.MAC, wire.ClientID(p), wire.Hostname(p), ip)
		switch v {
		case lease.Silent:
			return nil, wire.Dropf(wire.ReasonNotForUs)
		case lease.NAK:
			req.Debug("nak", "ip", ip)
			return nak(req), nil
		}
	}
	resp := wire.NewReply(p, dhcpv4.MessageTypeAck, req.Local)
	resp.YourIPAddr = wire.IP(ip)
	resp.ClientIPAddr = p.ClientIPAddr
	resp = wire.Chain(p, resp, h.netOptions(st, d, host)...)
	h.boot(req, resp)
	req.Debug("ack", "ip", ip, "lease", d)
	return resp, nil
}

// nak is a DHCPNAK: server identifier and message type only (RFC 2131
// table 3), and the broadcast bit so relays broadcast it too.
func nak(req *wire.Request) *dhcpv4.DHCPv4 {
	resp := wire.NewReply(req.Pkt, dhcpv4.MessageTypeNak, req.Local)
	if req.Relayed {
		resp.SetBroadcast()
	}
	return resp
}

func (h *Handler) boot(req *wire.Request, resp *dhcpv4.DHCPv4) {
	c := boot.Classify(req.Pkt)
	if c.Kind == boot.NotBoot {
		return
	}
	a, ok := h.Boot.Decide(c, req.MAC, req.Local)
	if !ok {
		req.Log().Info("network-boot client of an architecture with no loader configured", "arch", c.Arch, "kind", c.Kind)
		return
	}
	boot.Apply(resp, req.Pkt, a, req.Local)
	req.Debug("boot", "kind", a.Kind, "file", a.File, "arch", c.Arch)
}

// netOptions are the subnet's options as a coredhcp handler chain.
func (h *Handler) netOptions(st Settings, d time.Duration, host string) []handler.Handler4 {
	hs := []handler.Handler4{
		func(_, resp *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, bool) {
			m := st.Subnet.Masked()
			resp.Options.Update(dhcpv4.OptSubnetMask(maskOf(m.Bits())))
			resp.Options.Update(dhcpv4.OptBroadcastAddress(wire.IP(lastAddr(m))))
			return resp, false
		},
	}
	if st.Router.IsValid() {
		hs = append(hs, func(_, resp *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, bool) {
			resp.Options.Update(dhcpv4.OptRouter(wire.IP(st.Router)))
			return resp, false
		})
	}
	if len(st.DNS) > 0 {
		hs = append(hs, func(_, resp *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, bool) {
			ips := make([]byte, 0, 4*len(st.DNS))
			for _, a := range st.DNS {
				if a.Is4() {
					b := a.As4()
					ips = append(ips, b[:]...)
				}
			}
			if len(ips) > 0 {
				resp.Options[6] = ips
			}
			return resp, false
		})
	}
	if st.Domain != "" {
		hs = append(hs, func(_, resp *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, bool) {
			resp.Options.Update(dhcpv4.OptDomainName(st.Domain))
			return resp, false
		})
	}
	if st.MTU >= 576 && st.MTU <= 65535 {
		hs = append(hs, func(_, resp *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, bool) {
			resp.Options[26] = binary.BigEndian.AppendUint16(nil, uint16(st.MTU))
			return resp, false
		})
	}
	if host != "" {
		hs = append(hs, func(_, resp *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, bool) {
			resp.Options.Update(dhcpv4.OptHostName(host))
			return resp, false
		})
	}
	if d > 0 {
		hs = append(hs, func(_, resp *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, bool) {
			// T1 at half the lease, T2 at seven eighths (RFC 2131 §4.4.5).
			secs := uint32(d / time.Second)
			resp.Options[51] = binary.BigEndian.AppendUint32(nil, secs)
			resp.Options[58] = binary.BigEndian.AppendUint32(nil, secs/2)
			resp.Options[59] = binary.BigEndian.AppendUint32(nil, secs/8*7)
			return resp, false
		})
	}
	return hs
}

func maskOf(bits int) []byte {
	v := ^uint32(0) << (32 - bits)
	if bits == 0 {
		v = 0
	}
	return binary.BigEndian.AppendUint32(nil, v)
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	v := binary.BigEndian.Uint32(b[:]) | (1<<(32-p.Bits()) - 1)
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}
