//go:build linux

package sysinit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/sys/unix"
)

// Lease is an address a NIC got by DHCP and now carries.
type Lease struct {
	Interface string
	MAC       net.HardwareAddr
	IP        net.IP
	Mask      net.IPMask
	Router    net.IP
	Server    net.IP
}

// Network brings lo and every Ethernet NIC with a device up, runs DHCP on
// all of them at once, and configures each address it gets; the first lease
// with a router gives the default route. It returns the leases (sorted by
// interface), or an error when no NIC got one.
func Network(ctx context.Context, timeout time.Duration, log *slog.Logger) ([]Lease, error) {
	if err := linkUp("lo"); err != nil {
		log.Warn("lo up", "err", err)
	}
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var mu sync.Mutex
	var leases []Lease
	var wg sync.WaitGroup
	for _, e := range ents {
		name := e.Name()
		if _, err := os.Stat("/sys/class/net/" + name + "/device"); err != nil {
			continue
		}
		if t, _ := os.ReadFile("/sys/class/net/" + name + "/type"); strings.TrimSpace(string(t)) != "1" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := upWithDHCP(ctx, name, log)
			if err != nil {
				log.Info("no DHCP lease", "iface", name, "err", err)
				return
			}
			mu.Lock()
			leases = append(leases, *l)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(leases) == 0 {
		return nil, errors.New("no NIC got a DHCP lease")
	}
	sortLeases(leases)
	for _, l := range leases {
		if l.Router != nil {
			ifc, err := net.InterfaceByName(l.Interface)
			if err == nil {
				err = routeAddDefault(ifc.Index, l.Router)
			}
			if err != nil {
				log.Warn("default route", "iface", l.Interface, "via", l.Router, "err", err)
				continue
			}
			break
		}
	}
	return leases, nil
}

func sortLeases(ls []Lease) {
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && ls[j].Interface < ls[j-1].Interface; j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
}

func upWithDHCP(ctx context.Context, name string, log *slog.Logger) (*Lease, error) {
	if err := linkUp(name); err != nil {
		return nil, fmt.Errorf("link up: %w", err)
	}
	// Autonegotiation takes a few seconds after the link comes up.
	for i := 0; i < 100; i++ {
		if c, _ := os.ReadFile("/sys/class/net/" + name + "/carrier"); strings.TrimSpace(string(c)) == "1" {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, err
	}
	l, err := DHCP(ctx, ifc)
	if err != nil {
		return nil, err
	}
	ones, _ := l.Mask.Size()
	if err := addrAdd(ifc.Index, l.IP, ones); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("add %s/%d: %w", l.IP, ones, err)
	}
	log.Info("DHCP lease", "iface", name, "ip", l.IP, "mask", ones, "router", l.Router, "server", l.Server)
	return l, nil
}

// DHCP runs DISCOVER/OFFER/REQUEST/ACK (RFC 2131 §3.1) on one interface
// through a UDP socket bound to it on port 68. The broadcast flag asks the
// server to broadcast its answers, which reach the socket before the
// interface has an address.
func DHCP(ctx context.Context, ifc *net.Interface) (*Lease, error) {
	conn, err := dhcpSocket(ifc.Name)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	bcast := &net.UDPAddr{IP: net.IPv4bcast, Port: 67}
	opts := dhcpv4.WithRequestedOptions(dhcpv4.OptionSubnetMask, dhcpv4.OptionRouter, dhcpv4.OptionDomainNameServer, dhcpv4.OptionServerIdentifier)
	for wait := 2 * time.Second; ; wait = min(wait*2, 16*time.Second) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		disc, err := dhcpv4.NewDiscovery(ifc.HardwareAddr, dhcpv4.WithBroadcast(true), opts)
		if err != nil {
			return nil, err
		}
		offer, err := exchange(ctx, conn, bcast, disc, dhcpv4.MessageTypeOffer, wait)
		if err != nil {
			continue
		}
		req, err := dhcpv4.NewRequestFromOffer(offer, dhcpv4.WithBroadcast(true), opts)
		if err != nil {
			return nil, err
		}
		ack, err := exchange(ctx, conn, bcast, req, dhcpv4.MessageTypeAck, wait)
		if err != nil {
			continue // a NAK or silence: start over
		}
		l := &Lease{Interface: ifc.Name, MAC: ifc.HardwareAddr, IP: ack.YourIPAddr.To4(), Mask: ack.SubnetMask(), Server: ack.ServerIdentifier()}
		if l.Mask == nil {
			l.Mask = l.IP.DefaultMask()
		}
		if rs := ack.Router(); len(rs) > 0 {
			l.Router = rs[0].To4()
		}
		return l, nil
	}
}

// exchange sends msg and waits up to wait for an answer of type want with
// the same transaction ID.
func exchange(ctx context.Context, conn net.PacketConn, to net.Addr, msg *dhcpv4.DHCPv4, want dhcpv4.MessageType, wait time.Duration) (*dhcpv4.DHCPv4, error) {
	if _, err := conn.WriteTo(msg.ToBytes(), to); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetReadDeadline(deadline)
	buf := make([]byte, 1500)
	for {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			return nil, err
		}
		m, err := dhcpv4.FromBytes(buf[:n])
		if err != nil || m.OpCode != dhcpv4.OpcodeBootReply || m.TransactionID != msg.TransactionID {
			continue
		}
		switch m.MessageType() {
		case want:
			return m, nil
		case dhcpv4.MessageTypeNak:
			return nil, errors.New("NAK")
		}
	}
}

func dhcpSocket(ifname string) (net.PacketConn, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, err
	}
	for _, o := range []int{unix.SO_REUSEADDR, unix.SO_BROADCAST} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o, 1); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	if err := unix.BindToDevice(fd, ifname); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind to %s: %w", ifname, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: 68}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind :68: %w", err)
	}
	f := os.NewFile(uintptr(fd), "dhcp-"+ifname)
	defer f.Close()
	return net.FilePacketConn(f)
}

// linkUp sets IFF_UP (SIOCSIFFLAGS).
func linkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// addrAdd and routeAddDefault speak rtnetlink (RFC 3549) directly: two
// messages do not justify a netlink library in the image.
func addrAdd(index int, ip net.IP, prefix int) error {
	ip4 := ip.To4()
	body := []byte{unix.AF_INET, byte(prefix), 0, unix.RT_SCOPE_UNIVERSE}
	body = binary.NativeEndian.AppendUint32(body, uint32(index))
	body = appendAttr(body, unix.IFA_LOCAL, ip4)
	body = appendAttr(body, unix.IFA_ADDRESS, ip4)
	if prefix < 31 {
		mask := net.CIDRMask(prefix, 32)
		bc := make(net.IP, 4)
		for i := range bc {
			bc[i] = ip4[i] | ^mask[i]
		}
		body = appendAttr(body, unix.IFA_BROADCAST, bc)
	}
	return netlinkDo(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL, body)
}

func routeAddDefault(index int, gw net.IP) error {
	body := []byte{unix.AF_INET, 0, 0, 0, unix.RT_TABLE_MAIN, unix.RTPROT_DHCP, unix.RT_SCOPE_UNIVERSE, unix.RTN_UNICAST, 0, 0, 0, 0}
	body = appendAttr(body, unix.RTA_GATEWAY, gw.To4())
	body = appendAttr(body, unix.RTA_OIF, binary.NativeEndian.AppendUint32(nil, uint32(index)))
	return netlinkDo(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, body)
}

func appendAttr(b []byte, typ uint16, v []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(v)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func netlinkDo(typ uint16, flags uint16, body []byte) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	msg := binary.NativeEndian.AppendUint32(nil, uint32(unix.NLMSG_HDRLEN+len(body)))
	msg = binary.NativeEndian.AppendUint16(msg, typ)
	msg = binary.NativeEndian.AppendUint16(msg, unix.NLM_F_REQUEST|unix.NLM_F_ACK|flags)
	msg = binary.NativeEndian.AppendUint32(msg, 1) // seq
	msg = binary.NativeEndian.AppendUint32(msg, 0) // pid: the kernel fills it
	msg = append(msg, body...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
			if code := int32(binary.NativeEndian.Uint32(m.Data[:4])); code != 0 {
				return unix.Errno(-code)
			}
			return nil
		}
	}
	return nil
}
