package node

import (
	"context"
	"net"

	"golang.org/x/sys/unix"
)

// sendBuffer is the send buffer of an API/boot connection. Left to the
// kernel's autotuning, a thousand machines pulling a 64 MiB initrd each grow
// their buffers toward tcp_wmem's maximum and push TCP into memory pressure:
// measured in lab/bench/http on loopback, 1,000 concurrent downloads ran at
// 0.79x nginx with autotuned buffers, 0.83x at 512 KiB, 0.68x at 2 MiB and
// 1.4x at 128-256 KiB (the kernel doubles the value set). 256 KiB (512 KiB
// effective) still covers a 10 GbE link's bandwidth-delay product at LAN
// round-trip times.
const sendBuffer = 256 << 10

// limitSendBuffer is the API server's ConnContext: it sets the send buffer
// of every accepted TCP connection.
func limitSendBuffer(ctx context.Context, c net.Conn) context.Context {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return ctx
	}
	if rc, err := tc.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, sendBuffer) })
	}
	return ctx
}
