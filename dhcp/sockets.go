package dhcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/rollcall/rollcall/dhcp/wire"
)

// Start serves DHCP until ctx ends. It opens its sockets first and returns
// an error if it cannot (no such interface, no permission); after that it
// returns nil when ctx ends. Interface addresses are read once, at start.
func (c Config) Start(ctx context.Context, log *slog.Logger) error {
	s, err := newServer(c, log)
	if err != nil {
		return err
	}
	if len(s.order) == 0 {
		log.Info("dhcp: no network to serve on this node")
		<-ctx.Done()
		return nil
	}
	for _, ifc := range s.order {
		ni, err := net.InterfaceByName(ifc.name)
		if err != nil {
			return fmt.Errorf("dhcp: interface %s: %w", ifc.name, err)
		}
		addrs, err := ni.Addrs()
		if err != nil {
			return fmt.Errorf("dhcp: interface %s addresses: %w", ifc.name, err)
		}
		var v4 []netip.Addr
		for _, a := range addrs {
			if pn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(pn.IP.To4()); ok && pn.IP.To4() != nil {
					v4 = append(v4, ip)
				}
			}
		}
		if err := s.setAddrs(ifc, ni.Index, v4); err != nil {
			return err
		}
	}
	s.excludeOwn()
	var conns []*conn
	closeAll := func() {
		for _, c := range conns {
			c.pc.Close()
		}
	}
	for _, ifc := range s.order {
		ports := []int{wire.ServerPort}
		if ifc.proxy {
			ports = append(ports, wire.PXEPort)
		}
		for _, port := range ports {
			pc, err := listen(ifc.name, port)
			if err != nil {
				closeAll()
				return err
			}
			conns = append(conns, &conn{pc: pc, ifc: ifc, port: port})
		}
	}
	log.Info("dhcp: serving", "networks", len(s.cfg.Networks), "sockets", len(conns))
	bg := s.background(ctx)
	var wg sync.WaitGroup
	for _, c := range conns {
		for range s.cfg.Workers {
			wg.Add(1)
			go func() { defer wg.Done(); s.serve(ctx, c) }()
		}
	}
	<-ctx.Done()
	closeAll()
	wg.Wait()
	bg.Wait()
	return nil
}

type conn struct {
	pc   *ipv4.PacketConn
	ifc  *iface
	port int
}

// listen opens a UDP socket on port bound to one interface, with the
// destination address and interface of every datagram reported.
func listen(ifname string, port int) (*ipv4.PacketConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr != nil {
				return
			}
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1); serr != nil {
				return
			}
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
			serr = unix.BindToDevice(int(fd), ifname)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := lc.ListenPacket(context.Background(), "udp4", ":"+strconv.Itoa(port))
	if err != nil {
		return nil, fmt.Errorf("dhcp: listen on %s port %d: %w", ifname, port, err)
	}
	pc := ipv4.NewPacketConn(c)
	if err := pc.SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true); err != nil {
		c.Close()
		return nil, fmt.Errorf("dhcp: listen on %s port %d: control messages: %w", ifname, port, err)
	}
	return pc, nil
}

// serve reads datagrams and answers them until the socket closes.
func (s *server) serve(ctx context.Context, c *conn) {
	buf := make([]byte, 4096)
	for {
		n, cm, src, err := c.pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			s.log.Warn("dhcp: read", "iface", c.ifc.name, "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		pk := packet{ifc: c.ifc, port: c.port, data: buf[:n]}
		if ua, ok := src.(*net.UDPAddr); ok {
			pk.src = ua.AddrPort()
			pk.src = netip.AddrPortFrom(pk.src.Addr().Unmap(), pk.src.Port())
		}
		if cm != nil {
			if d, ok := netip.AddrFromSlice(cm.Dst.To4()); ok && cm.Dst.To4() != nil {
				pk.dst = d
			}
		}
		r, _ := s.process(ctx, pk)
		if r.data == nil {
			continue
		}
		wcm := &ipv4.ControlMessage{IfIndex: c.ifc.index}
		if r.local.IsValid() {
			wcm.Src = wire.IP(r.local)
		}
		if _, err := c.pc.WriteTo(r.data, wcm, net.UDPAddrFromAddrPort(r.to)); err != nil {
			s.m.drops.WithLabelValues(wire.ReasonSendFailed).Inc()
			s.log.Debug("dhcp: send", "to", r.to, "err", err)
			continue
		}
		s.m.out(r.typ).Inc()
	}
}
