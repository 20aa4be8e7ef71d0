// Package proxy is proxy DHCP (PXE 2.1 spec §2.2, "DHCP already on the
// network"): another server hands out addresses, this node only tells
// network-boot clients what to boot. It answers DISCOVERs from PXE and UEFI
// HTTP clients on port 67 with an OFFER without an address (yiaddr 0,
// option 60 "PXEClient", option 54, option 43 with discovery control 8,
// siaddr and file), and the boot-server REQUESTs that firmware sends to port
// 4011 with an ACK back to their source.
package proxy

import (
	"context"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/rollcall/rollcall/dhcp/boot"
	"github.com/rollcall/rollcall/dhcp/wire"
)

// Handler is proxy DHCP on one network.
type Handler struct {
	Boot boot.Config
}

var _ wire.Handler = (*Handler)(nil)

// Handle answers one request.
func (h *Handler) Handle(ctx context.Context, req *wire.Request) (*dhcpv4.DHCPv4, error) {
	p := req.Pkt
	if !boot.IsBootClient(p) {
		return nil, wire.Dropf(wire.ReasonNotPXE)
	}
	var t dhcpv4.MessageType
	switch mt := wire.MessageType(p); {
	case mt == 0:
		return nil, wire.Dropf(wire.ReasonNoMsgType)
	case req.Port == wire.PXEPort && (mt == dhcpv4.MessageTypeRequest || mt == dhcpv4.MessageTypeInform):
		t = dhcpv4.MessageTypeAck
	case req.Port != wire.PXEPort && mt == dhcpv4.MessageTypeDiscover:
		t = dhcpv4.MessageTypeOffer
	case mt > 18: // past the lease-query and bulk types (RFC 4388, 6926, 7724)
		return nil, wire.Dropf(wire.ReasonUnknownType)
	default:
		// The address server answers everything else.
		return nil, wire.Dropf(wire.ReasonIgnored)
	}
	c := boot.Classify(p)
	if c.Kind == boot.NotBoot {
		c.Kind = boot.PXE
	}
	a, ok := h.Boot.Decide(c, req.MAC, req.Local)
	if !ok {
		req.Log().Info("network-boot client of an architecture with no loader configured", "arch", c.Arch)
		return nil, wire.Dropf(wire.ReasonNoBootFile)
	}
	resp := wire.NewReply(p, t, req.Local)
	if t == dhcpv4.MessageTypeAck {
		resp.ClientIPAddr = p.ClientIPAddr
	}
	boot.Apply(resp, p, a, req.Local)
	// A proxy offer is recognised by its option 60; iPXE looks for
	// "PXEClient" too.
	if a.Kind != boot.HTTP {
		resp.Options[60] = []byte("PXEClient")
		resp.Options[43] = []byte{6, 1, 8, 255}
	}
	req.Debug("proxy boot answer", "type", t, "port", req.Port, "kind", a.Kind, "file", a.File)
	return resp, nil
}
