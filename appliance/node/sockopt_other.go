//go:build !linux

package node

import (
	"context"
	"net"
)

// limitSendBuffer leaves the kernel's default where it is not Linux.
func limitSendBuffer(ctx context.Context, _ net.Conn) context.Context { return ctx }
