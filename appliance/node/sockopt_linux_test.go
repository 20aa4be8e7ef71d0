package node

import (
	"context"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// An accepted connection leaves ConnContext with the fixed send buffer
// (Linux reports twice the value set: its bookkeeping overhead).
func TestLimitSendBuffer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			buf := make([]byte, 1)
			c.Read(buf)
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if got := limitSendBuffer(ctx, c); got != ctx {
		t.Error("ConnContext replaced the context")
	}
	rc, _ := c.(*net.TCPConn).SyscallConn()
	var got int
	rc.Control(func(fd uintptr) { got, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF) })
	if err != nil || got != 2*sendBuffer {
		t.Fatalf("SO_SNDBUF = %d (%v), want %d", got, err, 2*sendBuffer)
	}
}
