//go:build linux

package sysinit

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// LinkUp brings an interface up.
func LinkUp(name string) error { return linkUp(name) }

// AddAddress puts a static address on an interface (an address it has
// already is fine).
func AddAddress(ifname string, p netip.Prefix) error {
	if !p.Addr().Is4() {
		return fmt.Errorf("add %s to %s: only IPv4 addresses", p, ifname)
	}
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return err
	}
	a := p.Addr().As4()
	if err := addrAdd(ifc.Index, net.IP(a[:]), p.Bits()); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add %s to %s: %w", p, ifname, err)
	}
	return nil
}

// AddDefaultRoute routes everything off-link through gw on ifname.
func AddDefaultRoute(ifname string, gw netip.Addr) error {
	if !gw.Is4() {
		return fmt.Errorf("default route via %s: only IPv4", gw)
	}
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return err
	}
	a := gw.As4()
	if err := routeAddDefault(ifc.Index, net.IP(a[:])); err != nil {
		return fmt.Errorf("default route via %s on %s: %w", gw, ifname, err)
	}
	return nil
}
