//go:build linux

package collect

import (
	"bytes"
	"context"
	"errors"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rollcall/rollcall/store/inventory"
)

// ethtoolDriverInfo asks the driver for its firmware version and name
// (ETHTOOL_GDRVINFO through SIOCETHTOOL), which sysfs does not carry.
func ethtoolDriverInfo(name string) (firmware, driver string) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", ""
	}
	defer unix.Close(fd)
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, name)
	if err != nil {
		return "", ""
	}
	cstr := func(b []byte) string {
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i]
		}
		return string(b)
	}
	fw := cstr(info.Fw_version[:])
	if fw == "N/A" {
		fw = ""
	}
	return fw, cstr(info.Driver[:])
}

// lldpGroups are the destination addresses LLDP uses (802.1AB §7.1): the
// nearest bridge, nearest non-TPMR bridge and nearest customer bridge.
var lldpGroups = [][6]byte{
	{0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e},
	{0x01, 0x80, 0xc2, 0x00, 0x00, 0x03},
	{0x01, 0x80, 0xc2, 0x00, 0x00, 0x00},
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// listenLLDP reads LLDP frames on one interface through an AF_PACKET socket
// until it hears a neighbour or ctx ends. Hearing nothing is not an error:
// many lab switches do not send LLDP.
func listenLLDP(ctx context.Context, name string) ([]inventory.LLDP, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(EtherTypeLLDP)))
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(EtherTypeLLDP), Ifindex: ifc.Index}); err != nil {
		return nil, err
	}
	for _, g := range lldpGroups {
		mreq := &unix.PacketMreq{Ifindex: int32(ifc.Index), Type: unix.PACKET_MR_MULTICAST, Alen: 6}
		copy(mreq.Address[:], g[:])
		_ = unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, mreq)
	}
	buf := make([]byte, 9000)
	for {
		if ctx.Err() != nil {
			return nil, nil
		}
		wait := 200 * time.Millisecond
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			wait = max(time.Until(dl), time.Millisecond)
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, int(wait/time.Millisecond))
		if errors.Is(err, unix.EINTR) || n == 0 {
			continue
		}
		if err != nil {
			return nil, err
		}
		m, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			return nil, err
		}
		nb, err := ParseLLDPFrame(buf[:m])
		if err != nil {
			continue
		}
		nb.Interface = name
		return []inventory.LLDP{nb}, nil
	}
}
