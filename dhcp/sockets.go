package dhcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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
			c.sock.Close()
		}
	}
	for _, ifc := range s.order {
		ports := []int{wire.ServerPort}
		if ifc.proxy {
			ports = append(ports, wire.PXEPort)
		}
		for _, port := range ports {
			sock, err := listen(ifc.name, port)
			if err != nil {
				closeAll()
				return err
			}
			conns = append(conns, &conn{sock: sock, ifc: ifc, port: port})
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
	for _, c := range conns {
		c.sock.wake()
	}
	wg.Wait()
	closeAll()
	bg.Wait()
	s.handOff()
	return nil
}

type conn struct {
	sock *udpSocket
	ifc  *iface
	port int
}

// serve reads datagrams and answers them until the socket is shut down.
// It keeps its OS thread: the socket is a blocking one (see udpSocket).
func (s *server) serve(ctx context.Context, c *conn) {
	runtime.LockOSThread()
	// A thread whose priority was raised is never unlocked: it exits with
	// this goroutine instead of running others at that priority.
	if !(s.cfg.WorkersAhead && aheadOfBackground()) {
		defer runtime.UnlockOSThread()
	}
	buf := make([]byte, 4096)
	out := make([]byte, 0, 1500)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofInet4Pktinfo))
	for {
		n, src, dst, err := c.sock.read(buf, oob)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, errShutdown) {
				return
			}
			s.log.Warn("dhcp: read", "iface", c.ifc.name, "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		r, _ := s.process(ctx, packet{ifc: c.ifc, port: c.port, data: buf[:n], src: src, dst: dst, out: out})
		if r.data == nil {
			continue
		}
		if r.hw != nil {
			// Unicast to a client without an address needs its MAC in
			// the ARP table; without that, broadcast reaches it too.
			if err := setNeighbor(c.sock.fd, c.ifc.name, r.to.Addr(), r.hw); err != nil {
				s.log.Debug("dhcp: unicast reply falls back to broadcast", "err", err)
				r.to = netip.AddrPortFrom(broadcastAddr, wire.ClientPort)
			}
		}
		if err := c.sock.write(r.data, r.to, c.ifc.index, r.local, oob); err != nil {
			s.m.drops.WithLabelValues(wire.ReasonSendFailed).Inc()
			s.log.Debug("dhcp: send", "to", r.to, "err", err)
			continue
		}
		s.m.out(r.typ).Inc()
	}
}

// aheadOfBackground sets the calling (locked) thread to nice 0, ahead of
// a process whose other threads run at a positive nice value (WorkersAhead).
func aheadOfBackground() bool {
	return unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 0) == nil
}

// udpSocket is a blocking UDP socket bound to one interface and port,
// read and written with recvmsg/sendmsg directly from OS threads that stay
// parked in the kernel until a datagram arrives, the way Kea's server works.
// Go's netpoller would add an EAGAIN read, an epoll wake-up and a goroutine
// hand-off to every packet; under load those hand-offs, not the work, set
// the reply-latency tail that made perfdhcp's socket overflow (measured in
// lab/bench/dhcp). IP_PKTINFO reports each datagram's destination address
// and sets a reply's interface and source address.
type udpSocket struct {
	fd       int
	shutdown atomic.Bool
}

// errShutdown is read's answer once the socket is shut down.
var errShutdown = errors.New("dhcp: socket shut down")

// listen opens the socket for port on ifname.
func listen(ifname string, port int) (*udpSocket, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dhcp: socket for %s port %d: %w", ifname, port, err)
	}
	s := &udpSocket{fd: fd}
	set := func(level, opt, v int) error { return unix.SetsockoptInt(fd, level, opt, v) }
	tv := unix.NsecToTimeval((250 * time.Millisecond).Nanoseconds())
	for _, step := range []func() error{
		func() error { return set(unix.SOL_SOCKET, unix.SO_REUSEADDR, 1) },
		func() error { return set(unix.SOL_SOCKET, unix.SO_BROADCAST, 1) },
		func() error { return set(unix.IPPROTO_IP, unix.IP_PKTINFO, 1) },
		func() error { _ = set(unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20); return nil },
		// A periodic wake-up, so a reader notices shutdown even if the
		// kernel's wake-up on shutdown(2) is missed.
		func() error { return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv) },
		func() error { return unix.BindToDevice(fd, ifname) },
		func() error { return unix.Bind(fd, &unix.SockaddrInet4{Port: port}) },
	} {
		if err := step(); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("dhcp: listen on %s port %d: %w", ifname, port, err)
		}
	}
	return s, nil
}

// read returns the next datagram, its source and the address it was sent
// to (the interface address, or broadcast).
func (s *udpSocket) read(buf, oob []byte) (int, netip.AddrPort, netip.Addr, error) {
	for {
		if s.shutdown.Load() {
			return 0, netip.AddrPort{}, netip.Addr{}, errShutdown
		}
		n, oobn, _, from, err := unix.Recvmsg(s.fd, buf, oob, 0)
		switch {
		case err == unix.EINTR, err == unix.EAGAIN:
			continue // EAGAIN: SO_RCVTIMEO passed
		case err != nil:
			return 0, netip.AddrPort{}, netip.Addr{}, err
		}
		sa, ok := from.(*unix.SockaddrInet4)
		if !ok {
			continue // a shut-down socket returns no source
		}
		var dst netip.Addr
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_PKTINFO && len(m.Data) >= unix.SizeofInet4Pktinfo {
					info := (*unix.Inet4Pktinfo)(unsafe.Pointer(&m.Data[0]))
					dst = netip.AddrFrom4(info.Addr)
				}
			}
		}
		return n, netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port)), dst, nil
	}
}

// write sends b to to out of interface ifindex, from src when it is valid.
// oob is scratch space of CmsgSpace(SizeofInet4Pktinfo) bytes.
func (s *udpSocket) write(b []byte, to netip.AddrPort, ifindex int, src netip.Addr, oob []byte) error {
	oob = oob[:unix.CmsgSpace(unix.SizeofInet4Pktinfo)]
	clear(oob)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
	h.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
	info := (*unix.Inet4Pktinfo)(unsafe.Pointer(&oob[unix.CmsgLen(0)]))
	info.Ifindex = int32(ifindex)
	if src.Is4() {
		info.Spec_dst = src.As4()
	}
	for {
		_, err := unix.SendmsgN(s.fd, b, oob, &unix.SockaddrInet4{Port: int(to.Port()), Addr: to.Addr().As4()}, 0)
		if err != unix.EINTR {
			return err
		}
	}
}

// wake makes the readers return errShutdown (shutdown(2) wakes a blocked
// recvmsg); Start closes the socket once they have.
func (s *udpSocket) wake() {
	s.shutdown.Store(true)
	_ = unix.Shutdown(s.fd, unix.SHUT_RDWR)
}

func (s *udpSocket) Close() error { return unix.Close(s.fd) }

// atfCom is ATF_COM of <net/if_arp.h>: the entry is complete (has a MAC).
const atfCom = 0x02

// arpReq is struct arpreq of <net/if_arp.h>, for SIOCSARP.
type arpReq struct {
	pa    unix.RawSockaddrInet4
	ha    unix.RawSockaddr
	flags int32
	mask  unix.RawSockaddrInet4
	dev   [unix.IFNAMSIZ]byte
}

// setNeighbor puts ip → mac in the kernel's ARP table for ifname (a
// complete, dynamic entry that ages out as any other), so that a reply to
// a client that has no address yet and did not ask for broadcast can be
// sent to it as unicast (RFC 2131 §4.1), as dnsmasq does: the kernel could
// not resolve the address by ARP, the client cannot answer for it yet.
func setNeighbor(fd int, ifname string, ip netip.Addr, mac net.HardwareAddr) error {
	if !ip.Is4() || len(mac) != 6 || len(ifname) >= unix.IFNAMSIZ {
		return fmt.Errorf("dhcp: no ARP entry for %s at %s on %q", ip, mac, ifname)
	}
	var r arpReq
	r.pa.Family = unix.AF_INET
	r.pa.Addr = ip.As4()
	r.ha.Family = unix.ARPHRD_ETHER
	for i, b := range mac {
		r.ha.Data[i] = int8(b)
	}
	r.flags = atfCom
	copy(r.dev[:], ifname)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCSARP, uintptr(unsafe.Pointer(&r))); errno != 0 {
		return fmt.Errorf("dhcp: ARP entry for %s at %s on %s: %w", ip, mac, ifname, errno)
	}
	return nil
}
