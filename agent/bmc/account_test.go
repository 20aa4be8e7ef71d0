package bmc

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bougou/go-ipmi/pkg/bmc"
	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/app"
	"github.com/bougou/go-ipmi/pkg/hal"
	"github.com/bougou/go-ipmi/pkg/hal/mock"
	"github.com/bougou/go-ipmi/pkg/handlers"
	"github.com/bougou/go-ipmi/pkg/server"
	"github.com/bougou/go-ipmi/pkg/transport/udp"
	"github.com/bougou/go-ipmi/pkg/types"
)

// simBMC is go-ipmi's own BMC (pkg/bmc + pkg/server over a mock HAL) on
// 127.0.0.1, a real RMCP+ peer: the account logic runs over lanplus against
// it as it runs over /dev/ipmi0 on a machine.
type simBMC struct {
	b    *bmc.BMC
	addr *net.UDPAddr
}

type simOpts struct {
	maxUsers uint8
	users    map[uint8]string // slot → name (slot 2 is always admin)
	refuse   map[uint8]types.CompletionCode
}

func startBMC(t *testing.T, o simOpts) *simBMC {
	t.Helper()
	info := bmc.DeviceInfo{DeviceID: 0x20, DeviceRevision: 1, FirmwareMajor: 2, FirmwareMinor: 0x31, IPMIVersion: 0x20, ManufacturerID: 674, ProductID: 0x0100}
	var guid [16]byte
	copy(guid[:], "rollcall-agentbm")
	h := mock.New()
	if err := h.Network().SetConfig(context.Background(), &hal.IPConfig{
		IP: [4]byte{192, 0, 2, 17}, Mask: [4]byte{255, 255, 255, 0}, MAC: [6]byte{0xd0, 0x94, 0x66, 0x1a, 0x2b, 0x3c},
	}); err != nil {
		t.Fatal(err)
	}
	b := bmc.New(info, guid, h, bmc.WithCipherSuites([]types.CipherSuiteID{types.CipherSuiteID3, types.CipherSuiteID17}))
	if o.maxUsers != 0 {
		b.Users = bmc.NewUserStore(bmc.WithMaxUsers(o.maxUsers))
	}
	users := map[uint8]string{2: "admin"}
	for id, n := range o.users {
		users[id] = n
	}
	for id, name := range users {
		u, err := b.Users.Add(id, name)
		if err != nil {
			t.Fatal(err)
		}
		u.SetPassword([]byte("secret-" + name))
		u.Enabled = true
		u.ChannelAccess[1] = bmc.UserChannelAccess{MaxPrivilege: bmc.PrivilegeLevelAdministrator, Enabled: true}
		// SOL off for the existing accounts, so that taking one over must
		// turn it on (new slots start with SOL allowed on this BMC).
		u.SetPayloadAccess(1, false, 0x02, 0)
	}
	reg := handlers.NewRegistry()
	// A vendor that refuses a command answers with a completion code; the
	// middleware plays that vendor for the commands in refuse.
	reg.Use(func(next handlers.Handler) handlers.Handler {
		return handlers.HandlerFunc(func(ctx context.Context, hctx *handlers.HandlerContext, req []byte) ([]byte, types.CompletionCode, error) {
			if hctx != nil && uint8(hctx.Command.NetFn) == uint8(types.NetFnAppRequest) {
				if cc, ok := o.refuse[hctx.Command.ID]; ok {
					return nil, cc, nil
				}
			}
			return next.Handle(ctx, hctx, req)
		})
	})
	handlers.RegisterAllHandlers(reg)
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewServer(b, udp.Wrap(pc), server.WithHandlerRegistry(reg))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); _ = srv.Close(); _ = pc.Close(); <-done })
	return &simBMC{b: b, addr: pc.LocalAddr().(*net.UDPAddr)}
}

// dial logs in over lanplus as the BMC's administrator.
func (s *simBMC) dial(t *testing.T, user, pass string) *client.Client {
	t.Helper()
	c, err := client.NewClient("127.0.0.1", s.addr.Port, user, pass)
	if err != nil {
		t.Fatal(err)
	}
	c.WithCipherSuiteID(types.CipherSuiteID17).WithTimeout(2 * time.Second)
	if err := c.Connect(context.Background()); err != nil {
		t.Fatalf("login as %s: %v", user, err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func TestSetup(t *testing.T) {
	cases := map[string]struct {
		sim       simOpts
		wantID    int
		wantErr   string // substring of an entry in Errors; "" for none
		wantPass  bool
		wantAdmin bool
	}{
		"empty slot":           {wantID: 3, wantPass: true, wantAdmin: true},
		"slots 3 and 4 in use": {sim: simOpts{users: map[uint8]string{3: "ops", 4: "monitor"}}, wantID: 5, wantPass: true, wantAdmin: true},
		"existing commissioner": {
			sim:    simOpts{users: map[uint8]string{3: "ops", 7: "commissioner"}},
			wantID: 7, wantPass: true, wantAdmin: true,
		},
		"no free slot": {
			sim:     simOpts{maxUsers: 4, users: map[uint8]string{3: "ops", 4: "monitor"}},
			wantErr: "no free user slot",
		},
		"password refused": {
			// iDRAC answers an unacceptable password with an OEM code.
			sim:     simOpts{refuse: map[uint8]types.CompletionCode{0x47: 0x80}},
			wantErr: "set password (user 3)",
		},
		"SOL payload refused": {
			sim:    simOpts{refuse: map[uint8]types.CompletionCode{0x4c: types.CodeInvalidCommand}},
			wantID: 3, wantPass: true, wantAdmin: true, wantErr: "enable SOL payload",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sim := startBMC(t, tc.sim)
			c := sim.dial(t, "admin", "secret-admin")
			got := Setup(context.Background(), c, Options{})

			if got.Driver != "ipmi" || got.Source != "in-band" || got.Channel != 1 {
				t.Errorf("driver %q source %q channel %d", got.Driver, got.Source, got.Channel)
			}
			if got.Address != "192.0.2.17" || got.MAC != "d0:94:66:1a:2b:3c" {
				t.Errorf("address %q mac %q, want 192.0.2.17 d0:94:66:1a:2b:3c", got.Address, got.MAC)
			}
			if tc.wantErr == "" && len(got.Errors) > 0 {
				t.Errorf("errors: %q", got.Errors)
			}
			if tc.wantErr != "" && !strings.Contains(strings.Join(got.Errors, "\n"), tc.wantErr) {
				t.Errorf("errors %q, want one with %q", got.Errors, tc.wantErr)
			}
			if got.UserID != tc.wantID {
				t.Errorf("user id %d, want %d", got.UserID, tc.wantID)
			}
			if !tc.wantPass {
				if got.Password != "" || got.User != "" {
					t.Errorf("reported user %q password %q for an account that was not set up", got.User, got.Password)
				}
				return
			}
			if got.User != "commissioner" || len(got.Password) != 16 {
				t.Fatalf("user %q password %q", got.User, got.Password)
			}
			// The BMC holds the account as reported...
			u, err := sim.b.Users.Get(uint8(got.UserID))
			if err != nil {
				t.Fatal(err)
			}
			if u.Name != "commissioner" || !u.Enabled || !u.VerifyPassword([]byte(got.Password)) {
				t.Errorf("slot %d: name %q enabled %v password ok %v", got.UserID, u.Name, u.Enabled, u.VerifyPassword([]byte(got.Password)))
			}
			ca := u.ChannelAccess[1]
			if tc.wantAdmin && (ca.MaxPrivilege != bmc.PrivilegeLevelAdministrator || !ca.Enabled || !ca.LinkAuth) {
				t.Errorf("channel access %+v, want administrator with IPMI messaging and link auth", ca)
			}
			if !strings.Contains(tc.wantErr, "SOL") && !u.PayloadAccessFor(1).SOLEnabled() {
				t.Error("SOL payload not enabled")
			}
			// ...and the server can log in with it as administrator.
			c2 := sim.dial(t, got.User, got.Password)
			res := &app.GetUserAccessResponse{}
			if err := c2.Exchange(context.Background(), &app.GetUserAccessRequest{ChannelNumber: 1, UserID: uint8(got.UserID)}, res); err != nil {
				t.Fatal(err)
			}
			if res.MaxPrivLevel != types.PrivilegeLevelAdministrator {
				t.Errorf("privilege %v", res.MaxPrivLevel)
			}
		})
	}
}

// The existing vendor administrator keeps its password: Setup never
// touches a slot it did not pick.
func TestSetupLeavesOtherSlots(t *testing.T) {
	sim := startBMC(t, simOpts{users: map[uint8]string{3: "ops"}})
	got := Setup(context.Background(), sim.dial(t, "admin", "secret-admin"), Options{User: "rollcall"})
	if got.UserID != 4 || got.User != "rollcall" {
		t.Fatalf("user %d %q", got.UserID, got.User)
	}
	for id, name := range map[uint8]string{2: "admin", 3: "ops"} {
		u, err := sim.b.Users.Get(id)
		if err != nil || u.Name != name || !u.VerifyPassword([]byte("secret-"+name)) {
			t.Errorf("slot %d changed: %+v %v", id, u, err)
		}
	}
}

func TestNewPassword(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		p, err := NewPassword()
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != 16 || seen[p] {
			t.Fatalf("password %q (len %d, repeated %v)", p, len(p), seen[p])
		}
		seen[p] = true
		for _, set := range []string{"ABCDEFGHJKLMNPQRSTUVWXYZ", "abcdefghijkmnopqrstuvwxyz", "23456789", "-_.+="} {
			if !strings.ContainsAny(p, set) {
				t.Errorf("%q has nothing from %q", p, set)
			}
		}
	}
}

func TestVerifyHint(t *testing.T) {
	sim := startBMC(t, simOpts{})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sim.addr.Port))
	ok := VerifyHint(context.Background(), Hint{Driver: "ipmi", Address: addr, User: "admin", Password: "secret-admin"})
	if len(ok.Errors) != 0 || ok.Password != "secret-admin" || ok.User != "admin" || ok.Source != "hint" || ok.Address != addr {
		t.Errorf("good hint: %+v", ok)
	}
	bad := VerifyHint(context.Background(), Hint{Driver: "ipmi", Address: addr, User: "admin", Password: "wrong"})
	if len(bad.Errors) == 0 || bad.Password != "" || bad.User != "" {
		t.Errorf("bad hint reported as %+v", bad)
	}
	other := VerifyHint(context.Background(), Hint{Driver: "proxmox", Address: "pve:8006", User: "root@pam", Password: "x"})
	if len(other.Errors) == 0 || other.Password != "" {
		t.Errorf("unverifiable driver: %+v", other)
	}
}

func TestHasInBand(t *testing.T) {
	if HasInBand(t.TempDir()) {
		t.Error("empty root has an IPMI device")
	}
	var _ Exchanger = (*client.Client)(nil)
}
