package bootfiles

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/tftp"
)

// Legacy pxelinux, only where iPXE cannot run: on a VLAN whose boot loader
// is pxelinux, DHCP hands BIOS PXE firmware syslinux's lpxelinux.0 (it can
// fetch the kernel and initrd over HTTP), TFTP serves it with the modules
// its configuration uses, and each machine's pxelinux.cfg file is rendered
// on request from replicated state (templates/pxelinux.cfg), with the same
// decisions and kernel arguments as its iPXE script. UEFI firmware keeps
// iPXE: PXELINUX's EFI builds are not served.

// The directories pxelinux_dir and syslinux_dir default to: where Debian
// installs package pxelinux and syslinux-common's BIOS modules.
const (
	DefaultPXELinuxDir = "/usr/lib/PXELINUX"
	DefaultSyslinuxDir = "/usr/lib/syslinux/modules/bios"
)

var (
	// pxelinuxLoaders are served from pxelinux_dir.
	pxelinuxLoaders = []string{"lpxelinux.0"}
	// syslinuxModules are served from syslinux_dir: ldlinux.c32 (the core
	// loads it before reading any configuration), poweroff.c32 for ready
	// machines, reboot.c32 for waiting ones and the libcom32.c32 it links.
	syslinuxModules = []string{"ldlinux.c32", "poweroff.c32", "reboot.c32", "libcom32.c32"}
)

// pxelinuxCfgDir is where pxelinux looks for its configuration, relative to
// the directory it was loaded from (the TFTP root here).
const pxelinuxCfgDir = "pxelinux.cfg/"

// TFTPRoots is TFTP's allow-list (tftp.Config.Roots): the iPXE binaries of
// ipxe_dir, and lpxelinux.0 and its modules from pxelinux_dir and
// syslinux_dir. A file that is not installed is refused until it is (the
// tftp package warns at start).
func (s *Server) TFTPRoots() map[string]string {
	roots := tftp.DefaultRoots(s.conf.IPXEDir)
	for _, f := range pxelinuxLoaders {
		roots[f] = filepath.Join(s.conf.PXELinuxDir, f)
	}
	for _, f := range syslinuxModules {
		roots[f] = filepath.Join(s.conf.SyslinuxDir, f)
	}
	return roots
}

// ResolveTFTP is the TFTP server's Resolver (tftp.Config.Resolver): it
// renders pxelinux.cfg files.
//
// pxelinux asks, in order, for pxelinux.cfg/<client UUID>, /01-<MAC with
// dashes>, /<IP in hex> shortened a digit at a time (C0A80A05, C0A80A0, …,
// C), then /default, and takes the first that exists. The UUID and hex
// names are never found, so every machine reaches its MAC file, which
// always exists: an unknown machine gets the commissioning entry there.
// default is only asked when that failed; it is rendered for the MAC whose
// lease holds the asking address, else as for an unknown machine (the
// reference's default menu commissioned). Any other name is not found; a
// MAC file whose MAC is not a MAC is refused and counted.
func (s *Server) ResolveTFTP(_ context.Context, name string, remote netip.AddrPort) (io.ReadCloser, int64, error) {
	file, ok := strings.CutPrefix(name, pxelinuxCfgDir)
	if !ok || strings.Contains(file, "/") {
		return nil, 0, fs.ErrNotExist
	}
	var mac string
	switch {
	case file == "default":
		mac = s.macOfLease(remote.Addr())
	case strings.HasPrefix(file, "01-"):
		m, err := store.NormalizeMAC(file[len("01-"):])
		if err != nil {
			s.m.BootRefused.Inc()
			return nil, 0, fmt.Errorf("pxelinux config %q: %w (%w)", file, err, fs.ErrNotExist)
		}
		mac = m
	default:
		return nil, 0, fs.ErrNotExist
	}
	host, err := s.httpHostFor(remote)
	if err != nil {
		return nil, 0, fmt.Errorf("pxelinux config: no address to reach %s from: %w", remote.Addr(), err)
	}
	data, err := s.bootFor(mac, host, true)
	if err != nil {
		return nil, 0, fmt.Errorf("pxelinux config: cannot read state: %w", err)
	}
	var buf bytes.Buffer
	if err := s.conf.Templates.pxelinux.Execute(&buf, data); err != nil {
		return nil, 0, fmt.Errorf("pxelinux config: template: %w", err)
	}
	s.log.Debug("pxelinux config", "file", file, "mac", mac, "machine", data.Machine, "action", data.Action)
	return io.NopCloser(&buf), int64(buf.Len()), nil
}

// macOfLease is the MAC holding a DHCP lease on ip, or "".
func (s *Server) macOfLease(ip netip.Addr) string {
	var mac string
	s.conf.DB.View(func(tx *store.Tx) error {
		if l, err := tx.Lease(ip.Unmap()); err == nil {
			mac = l.MAC
		}
		return nil
	})
	return mac
}

// httpHostFor is this node's HTTP server as a client at remote reaches it:
// the address the kernel would answer it from (as DHCP's boot URLs name
// the address that answered) and the HTTP port, which is left out when 80.
func (s *Server) httpHostFor(remote netip.AddrPort) (string, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(remote))
	if err != nil {
		return "", err
	}
	local := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	c.Close()
	_, port, _ := net.SplitHostPort(s.conf.HTTPAddr())
	if port == "80" {
		if local.Is6() {
			return "[" + local.String() + "]", nil
		}
		return local.String(), nil
	}
	return net.JoinHostPort(local.String(), port), nil
}
