package dhcp

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/sys/unix"
)

// ProbeClass is the vendor class (option 60) of the DISCOVER Probe sends.
// Rollcall's own servers drop such a DISCOVER unanswered (process), so
// every OFFER a probe gets comes from some other server.
const ProbeClass = "rollcall-doctor-probe"

// Offer is a DHCP server that answered a probe.
type Offer struct {
	Server netip.Addr // its server identifier (option 54), or the packet's source
	Offer  netip.Addr // the address it offered (yiaddr; unset for a proxy's offer)
	// PXE is set when the offer carries PXE boot options (a boot file or
	// the PXEClient class): a proxy or boot server.
	PXE bool
}

// Bounds of a probe: the answers it reads, and how long.
const (
	maxProbeOffers = 32
	maxProbeWait   = 10 * time.Second
)

// Probe broadcasts one DHCPDISCOVER on iface, from a random locally
// administered MAC, and lists the servers that answer within wait (at
// most ten seconds), each once. It binds UDP port 68 on iface, beside
// any DHCP client of the host, and needs the privilege to (root, or
// CAP_NET_BIND_SERVICE and CAP_NET_RAW for SO_BINDTODEVICE). The doctor
// runs it on each VLAN a node serves to find a foreign DHCP server.
func Probe(ctx context.Context, iface string, wait time.Duration) ([]Offer, error) {
	wait = min(wait, maxProbeWait)
	c, err := listenOn(ctx, iface, 68)
	if err != nil {
		return nil, fmt.Errorf("dhcp probe on %s: %w", iface, err)
	}
	defer c.Close()
	mac := make(net.HardwareAddr, 6)
	if _, err := rand.Read(mac); err != nil {
		return nil, err
	}
	mac[0] = mac[0]&^1 | 2 // unicast, locally administered
	d, err := dhcpv4.NewDiscovery(mac,
		dhcpv4.WithBroadcast(true),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier(ProbeClass)),
		dhcpv4.WithRequestedOptions(dhcpv4.OptionSubnetMask, dhcpv4.OptionRouter, dhcpv4.OptionServerIdentifier))
	if err != nil {
		return nil, err
	}
	if _, err := c.WriteTo(d.ToBytes(), &net.UDPAddr{IP: net.IPv4bcast, Port: 67}); err != nil {
		return nil, fmt.Errorf("dhcp probe on %s: send: %w", iface, err)
	}
	deadline := time.Now().Add(wait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = c.SetReadDeadline(deadline)
	var offers []Offer
	buf := make([]byte, 4096)
	for len(offers) < maxProbeOffers {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || isTimeout(err) {
				break
			}
			return offers, fmt.Errorf("dhcp probe on %s: %w", iface, err)
		}
		p, err := dhcpv4.FromBytes(buf[:n])
		if err != nil || p.OpCode != dhcpv4.OpcodeBootReply || p.TransactionID != d.TransactionID ||
			p.MessageType() != dhcpv4.MessageTypeOffer {
			continue // not an answer to this probe
		}
		o := Offer{PXE: p.BootFileName != "" || string(p.Options.Get(dhcpv4.OptionClassIdentifier)) == "PXEClient"}
		if a, ok := netip.AddrFromSlice(p.ServerIdentifier().To4()); ok {
			o.Server = a
		} else if ua, ok := from.(*net.UDPAddr); ok {
			o.Server, _ = netip.AddrFromSlice(ua.IP.To4())
		}
		if a, ok := netip.AddrFromSlice(p.YourIPAddr.To4()); ok && !a.IsUnspecified() {
			o.Offer = a
		}
		if !slices.ContainsFunc(offers, func(x Offer) bool { return x.Server == o.Server }) {
			offers = append(offers, o)
		}
	}
	return offers, nil
}

// listenOn opens a UDP socket on port bound to iface, able to broadcast,
// beside other sockets on the port (a host's DHCP client): a DHCP
// client's socket, for Probe and the tests' clients.
func listenOn(ctx context.Context, iface string, port int) (net.PacketConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			for _, o := range []int{unix.SO_REUSEADDR, unix.SO_REUSEPORT, unix.SO_BROADCAST} {
				if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o, 1); serr != nil {
					return
				}
			}
			serr = unix.BindToDevice(int(fd), iface)
		})
		return errors.Join(err, serr)
	}}
	return lc.ListenPacket(ctx, "udp4", fmt.Sprintf(":%d", port))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
