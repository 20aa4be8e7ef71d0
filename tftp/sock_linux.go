//go:build linux

package tftp

import (
	"net/netip"
	"syscall"
	"time"
)

// blockingConn is a blocking, connected UDP socket used with plain
// read(2)/write(2), the way tftpd-hpa's transfer processes work: a read
// parks the OS thread in the kernel until the ACK arrives or SO_RCVTIMEO
// passes. See the notes at the top of transfer.go for when it is used.
type blockingConn struct {
	fd      int
	timeout time.Duration
}

func dialBlocking(laddr netip.Addr, raddr netip.AddrPort, timeout time.Duration) (packetConn, error) {
	family := syscall.AF_INET
	if raddr.Addr().Is6() {
		family = syscall.AF_INET6
	}
	fd, err := syscall.Socket(family, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	c := &blockingConn{fd: fd}
	if laddr.IsValid() {
		if err := syscall.Bind(fd, sockaddr(netip.AddrPortFrom(laddr, 0))); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := syscall.Connect(fd, sockaddr(raddr)); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.setTimeout(timeout); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func sockaddr(ap netip.AddrPort) syscall.Sockaddr {
	if ap.Addr().Is4() {
		return &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return &syscall.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

func (c *blockingConn) setTimeout(d time.Duration) error {
	tv := syscall.NsecToTimeval(d.Nanoseconds())
	if err := syscall.SetsockoptTimeval(c.fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	c.timeout = d
	return nil
}

func (c *blockingConn) Write(b []byte) (int, error) {
	for {
		n, err := syscall.Write(c.fd, b)
		if err != syscall.EINTR {
			return n, err
		}
	}
}

// Read returns errTimeout when SO_RCVTIMEO expires. The timeout restarts
// with each read; the sender checks its absolute deadline after every
// packet it ignores, so a stream of duplicates cannot hold it off.
func (c *blockingConn) Read(b []byte) (int, error) {
	for {
		n, err := syscall.Read(c.fd, b)
		switch err {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return 0, errTimeout
		}
		return n, err
	}
}

// Shutdown wakes a blocked read (it returns 0) on a connected socket.
func (c *blockingConn) Shutdown() { _ = syscall.Shutdown(c.fd, syscall.SHUT_RD) }

func (c *blockingConn) Close() error { return syscall.Close(c.fd) }

// Arm only changes SO_RCVTIMEO when the timeout changed (a client's RFC
// 2349 timeout option).
func (c *blockingConn) Arm(_ time.Time, timeout time.Duration, _ bool) error {
	if timeout == c.timeout {
		return nil
	}
	return c.setTimeout(timeout)
}
