package httpapi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
)

// ServedNetwork is a network this node's DHCP serves, as the DHCP service
// itself sees it (one a subnet): the VLAN, the interface, the mode, and
// where its answers point a booting machine: the TFTP server and the
// loader files PXE firmware asks it for, and the HTTP base of UEFI HTTP
// boot (the loaders under /boot/). TFTP is unset when the interface has
// no address in the subnet.
type ServedNetwork struct {
	VLAN, Iface, Mode string
	TFTP              netip.AddrPort
	Files             []string
	HTTP              string // http://addr:port
}

// doctorTimeoutBoot bounds one TFTP or HTTP try.
const doctorTimeoutBoot = 3 * time.Second

// doctorBoot asks, as a machine would, for each loader over TFTP (the
// first block, then it stops the transfer) and over HTTP (HEAD), where
// DHCP points on each network this node serves; one check a network.
func (s *Server) doctorBoot(ctx context.Context, d *doctor, served []ServedNetwork) {
	type ask struct {
		net      int
		file     string
		problems []string
	}
	var asks []*ask
	for i, sn := range served {
		if sn.TFTP.IsValid() {
			for _, f := range sn.Files {
				asks = append(asks, &ask{net: i, file: f})
			}
		}
	}
	var wg sync.WaitGroup
	for _, a := range asks {
		sn := served[a.net]
		wg.Go(func() {
			if err := tftpFirstBlock(ctx, sn.TFTP, a.file); err != nil {
				a.problems = append(a.problems, fmt.Sprintf("TFTP %s %s: %v", sn.TFTP, a.file, err))
			}
			if err := httpHead(ctx, sn.HTTP+"/boot/"+a.file); err != nil {
				a.problems = append(a.problems, fmt.Sprintf("HTTP %s/boot/%s: %v", sn.HTTP, a.file, err))
			}
		})
	}
	wg.Wait()
	problems := make([][]string, len(served))
	for _, a := range asks { // in the order of the files
		problems[a.net] = append(problems[a.net], a.problems...)
	}
	for i, sn := range served {
		switch {
		case !sn.TFTP.IsValid():
			// doctorInterfaces says what is wrong
		case len(problems[i]) > 0:
			d.add("boot files", wire.DoctorFail, "check that the node's TFTP and HTTP services run (rollcall doctor: services) and that no firewall stands between the VLAN and them; a missing loader comes with the ipxe package (make image)",
				"%s: %s", sn.VLAN, strings.Join(problems[i], "; "))
		default:
			d.add("boot files", wire.DoctorOK, "", "%s: %s served over TFTP at %s and HTTP at %s", sn.VLAN, strings.Join(sn.Files, ", "), sn.TFTP, sn.HTTP)
		}
	}
}

// tftpFirstBlock reads the first block of file from the TFTP server at
// addr (RFC 1350, no options), then ends the transfer with an error
// packet, as a client that has seen enough.
func tftpFirstBlock(ctx context.Context, addr netip.AddrPort, file string) error {
	c, err := net.ListenUDP("udp", nil)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(doctorTimeoutBoot)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = c.SetDeadline(deadline)
	rrq := append(append(append([]byte{0, 1}, file...), 0), "octet\x00"...)
	if _, err := c.WriteToUDPAddrPort(rrq, addr); err != nil {
		return err
	}
	buf := make([]byte, 1024)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return errors.New("no answer")
			}
			return err
		}
		if from.Addr().Unmap() != addr.Addr().Unmap() || n < 4 {
			continue // not the server
		}
		switch binary.BigEndian.Uint16(buf) {
		case 3: // DATA
			if binary.BigEndian.Uint16(buf[2:]) != 1 {
				continue
			}
			_, _ = c.WriteToUDPAddrPort([]byte("\x00\x05\x00\x00doctor: enough\x00"), from)
			return nil
		case 5: // ERROR
			return fmt.Errorf("refused: %s", strings.TrimRight(string(buf[4:n]), "\x00"))
		}
	}
}

// httpHead asks for url with HEAD and wants a 200.
func httpHead(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, doctorTimeoutBoot)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}
