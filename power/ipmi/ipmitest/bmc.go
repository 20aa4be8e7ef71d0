// Package ipmitest runs simulated BMCs in-process for tests and the lab:
// go-ipmi's own BMC server (pkg/server + pkg/bmc) over an in-memory HAL,
// listening for RMCP+ (lanplus) on 127.0.0.1 with a random UDP port. It is
// a real protocol peer (ipmitool 1.8.19 talks to it), not a fake of our
// driver's calls.
package ipmitest

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/bougou/go-ipmi/pkg/bmc"
	"github.com/bougou/go-ipmi/pkg/hal/mock"
	"github.com/bougou/go-ipmi/pkg/server"
	"github.com/bougou/go-ipmi/pkg/transport"
	"github.com/bougou/go-ipmi/pkg/transport/udp"
	"github.com/bougou/go-ipmi/pkg/types"
)

// BMC is one simulated BMC.
type BMC struct {
	counting
	Addr   *net.UDPAddr
	HAL    *mock.HAL
	srv    *server.Server
	conn   *net.UDPConn
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs a BMC with one administrator (user id 2) and the given cipher
// suites (default 3 and 17).
func Start(user, password string, ciphers ...types.CipherSuiteID) (*BMC, error) {
	if len(ciphers) == 0 {
		ciphers = []types.CipherSuiteID{types.CipherSuiteID3, types.CipherSuiteID17}
	}
	info := bmc.DeviceInfo{
		DeviceID: 0x20, DeviceRevision: 1, FirmwareMajor: 2, FirmwareMinor: 0x31,
		IPMIVersion: 0x20, ManufacturerID: 10876, ProductID: 0x1234, AdditionalDeviceSupport: 0xbf,
	}
	var guid [16]byte
	copy(guid[:], "rollcall-ipmitst")
	h := mock.New()
	b := bmc.New(info, guid, h, bmc.WithCipherSuites(ciphers))
	u, err := b.Users.Add(2, user)
	if err != nil {
		return nil, fmt.Errorf("simulated bmc: add user: %w", err)
	}
	u.SetPassword([]byte(password))
	u.Enabled = true
	u.ChannelAccess[1] = bmc.UserChannelAccess{MaxPrivilege: bmc.PrivilegeLevelAdministrator, Enabled: true}

	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("simulated bmc: listen: %w", err)
	}
	s := &BMC{Addr: pc.LocalAddr().(*net.UDPAddr), HAL: h, conn: pc, done: make(chan struct{})}
	s.counting = counting{PacketConn: udp.Wrap(pc), seen: map[byte]int{}}
	s.srv = server.NewServer(b, &s.counting)
	srv := s.srv
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		_ = srv.Serve(ctx)
	}()
	return s, nil
}

// Address is host:port for a power.Target.
func (s *BMC) Address() string { return s.Addr.String() }

// Close stops the BMC.
func (s *BMC) Close() {
	s.cancel()
	_ = s.srv.Close()
	_ = s.conn.Close()
	<-s.done
}

// PowerOn reports the simulated chassis power.
func (s *BMC) PowerOn() bool {
	on, _ := s.HAL.Chassis().PowerState(context.Background())
	return on
}

// BootFlags returns the boot flags last set (nil if none).
func (s *BMC) BootFlags() *types.BootOptionParam_BootFlags {
	f, err := s.HAL.Chassis().GetBootFlags(context.Background())
	if err != nil {
		return nil
	}
	return f
}

// counting wraps the server's socket and counts RMCP+ payload types
// received (IPMI v2.0 §13.27.3: 0x10 Open Session, 0x12 RAKP 1, 0x14 RAKP 3),
// so tests can assert how many logins a client attempted.
type counting struct {
	transport.PacketConn
	mu   sync.Mutex
	seen map[byte]int
}

func (c *counting) ReadFrom(b []byte) (int, net.Addr, error) {
	n, a, err := c.PacketConn.ReadFrom(b)
	if err == nil && n > 5 && b[4] == 0x06 { // RMCP+ (auth type 6)
		c.mu.Lock()
		c.seen[b[5]&0x3f]++
		c.mu.Unlock()
	}
	return n, a, err
}

// Received counts RMCP+ packets of a payload type.
func (c *counting) Received(payloadType byte) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[payloadType]
}

// Payload types for Received.
const (
	PayloadOpenSession byte = 0x10
	PayloadRAKP1       byte = 0x12
	PayloadRAKP3       byte = 0x14
)
