//go:build !linux

package tftp

import (
	"errors"
	"net/netip"
	"time"
)

// dialBlocking is Linux-only; elsewhere every transfer uses the netpoller.
func dialBlocking(netip.Addr, netip.AddrPort, time.Duration) (packetConn, error) {
	return nil, errors.ErrUnsupported
}
