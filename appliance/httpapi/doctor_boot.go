package httpapi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
)

// BootTarget is where this node's DHCP points a booting machine on one
// VLAN: the TFTP server and the loader files PXE firmware asks it for,
// and the HTTP base of UEFI HTTP boot (the loaders under /boot/).
type BootTarget struct {
	VLAN  string
	TFTP  netip.AddrPort
	Files []string
	HTTP  string // http://addr:port
}

// doctorTimeoutBoot bounds one TFTP or HTTP try.
const doctorTimeoutBoot = 3 * time.Second

// doctorBoot asks, as a machine would, for each loader over TFTP (the
// first block, then it stops the transfer) and over HTTP (HEAD), where
// DHCP points on each VLAN this node serves; one check per VLAN.
func (s *Server) doctorBoot(ctx context.Context, d *doctor) {
	if s.cfg.BootTargets == nil {
		return
	}
	targets := s.cfg.BootTargets()
	problems := make([][]string, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			var mu sync.Mutex
			var fw sync.WaitGroup
			for _, f := range t.Files {
				fw.Go(func() {
					var p []string
					if err := tftpFirstBlock(ctx, t.TFTP, f); err != nil {
						p = append(p, fmt.Sprintf("TFTP %s %s: %v", t.TFTP, f, err))
					}
					if err := httpHead(ctx, t.HTTP+"/boot/"+f); err != nil {
						p = append(p, fmt.Sprintf("HTTP %s/boot/%s: %v", t.HTTP, f, err))
					}
					mu.Lock()
					problems[i] = append(problems[i], p...)
					mu.Unlock()
				})
			}
			fw.Wait()
		})
	}
	wg.Wait()
	for i, t := range targets {
		slices.Sort(problems[i]) // the files were asked in parallel
		if len(problems[i]) > 0 {
			d.add("boot files", wire.DoctorFail, "check that the node's TFTP and HTTP services run (rollcall doctor: services) and that no firewall stands between the VLAN and them; a missing loader comes with the ipxe package (make image)",
				"%s: %s", t.VLAN, strings.Join(problems[i], "; "))
			continue
		}
		d.add("boot files", wire.DoctorOK, "", "%s: %s served over TFTP at %s and HTTP at %s", t.VLAN, strings.Join(t.Files, ", "), t.TFTP, t.HTTP)
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
