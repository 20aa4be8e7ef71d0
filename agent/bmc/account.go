// Package bmc gives Rollcall an administrator account on the machine's
// baseboard management controller, as the reference's "BMC account" section
// asks: in-band through the host's IPMI device when there is one (IPMI v2.0
// §22.24 Get Channel Info, §22.26–22.30 user commands, §24.6 Set User
// Payload Access), otherwise by verifying a hint the appliance holds.
//
// The account logic runs over Exchanger, which go-ipmi's client satisfies
// whatever its interface: the open interface (/dev/ipmi0) on the machine,
// lanplus against a simulated BMC in tests.
package bmc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"

	"github.com/bougou/go-ipmi/pkg/command/app"
	"github.com/bougou/go-ipmi/pkg/command/transport"
	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/rollcall/rollcall/store/inventory"
)

// Exchanger sends one IPMI request and decodes its response.
type Exchanger interface {
	Exchange(ctx context.Context, request types.Request, response types.Response) error
}

// Options for Setup.
type Options struct {
	// User is the account's name (default "commissioner").
	User string
	// Password is for tests; empty generates a random one.
	Password string
	// FirstUserID is the lowest slot Setup may take (default 3: slot 1 is
	// the anonymous user and slot 2 the vendor's administrator).
	FirstUserID uint8
}

// DefaultUser is the account name unless rollcall.bmcuser= says otherwise.
const DefaultUser = "commissioner"

// ErrNoFreeSlot is reported when every user slot from FirstUserID up is
// taken by another name.
var ErrNoFreeSlot = errors.New("no free user slot")

// Setup finds the LAN channel, takes the slot already named User or the
// first empty one, sets name and password, gives it ADMINISTRATOR with IPMI
// messaging on the LAN channel, enables it and its SOL payload, and reads the
// BMC's address. It always returns a report: what failed is in Errors; the
// password is only reported when the BMC accepted it.
func Setup(ctx context.Context, x Exchanger, opts Options) *inventory.BMC {
	if opts.User == "" {
		opts.User = DefaultUser
	}
	if opts.FirstUserID == 0 {
		opts.FirstUserID = 3
	}
	out := &inventory.BMC{Driver: "ipmi", Source: "in-band"}
	fail := func(format string, a ...any) { out.Errors = append(out.Errors, fmt.Sprintf(format, a...)) }

	ch, err := lanChannel(ctx, x)
	if err != nil {
		fail("%v; using channel 1", err)
		ch = 1
	}
	out.Channel = int(ch)
	readLAN(ctx, x, ch, out, fail)

	id, exists, err := pickSlot(ctx, x, ch, opts.User, opts.FirstUserID)
	if err != nil {
		fail("user slot: %v", err)
		return out
	}
	if !exists {
		if err := x.Exchange(ctx, &app.SetUsernameRequest{UserID: id, Username: opts.User}, &app.SetUsernameResponse{}); err != nil {
			fail("set user name (user %d): %v", id, err)
			return out
		}
	}
	pw := opts.Password
	if pw == "" {
		if pw, err = NewPassword(); err != nil {
			fail("password: %v", err)
			return out
		}
	}
	if err := setPassword(ctx, x, id, pw); err != nil {
		fail("set password (user %d): %v", id, err)
		return out
	}
	// The account exists with a known password from here on; what follows
	// can fail on one vendor or another without making it useless.
	out.UserID, out.User, out.Password = int(id), opts.User, pw
	if err := x.Exchange(ctx, &app.SetUserAccessRequest{
		EnableChanging: true, EnableLinkAuth: true, EnableIPMIMessaging: true,
		ChannelNumber: ch, UserID: id, MaxPrivLevel: uint8(types.PrivilegeLevelAdministrator),
	}, &app.SetUserAccessResponse{}); err != nil {
		fail("set user access (administrator on channel %d): %v", ch, err)
	}
	if err := x.Exchange(ctx, &app.SetUserPasswordRequest{UserID: id, Operation: app.PasswordOperationEnableUser}, &app.SetUserPasswordResponse{}); err != nil {
		fail("enable user %d: %v", id, err)
	}
	// Client.SetUserPayloadAccess drops its arguments in go-ipmi v0.9.1;
	// the request goes through Exchange with the fields set.
	if err := x.Exchange(ctx, &app.SetUserPayloadAccessRequest{
		ChannelNumber: ch, UserID: id, Operation: app.SetUserPayloadAccessOperationEnable, PayloadTypeSOL: true,
	}, &app.SetUserPayloadAccessResponse{}); err != nil {
		fail("enable SOL payload (user %d): %v", id, err)
	}
	return out
}

// lanChannel finds the first 802.3 LAN channel (Get Channel Info on 1–11;
// channel 0 is IPMB, 14 "this channel" and 15 the system interface).
func lanChannel(ctx context.Context, x Exchanger) (uint8, error) {
	var lastErr error
	for ch := uint8(1); ch <= 0x0b; ch++ {
		res := &app.GetChannelInfoResponse{}
		if err := x.Exchange(ctx, &app.GetChannelInfoRequest{ChannelNumber: ch}, res); err != nil {
			lastErr = err
			continue
		}
		if res.ChannelMedium == types.ChannelMediumLAN {
			return ch, nil
		}
	}
	if lastErr != nil {
		return 0, fmt.Errorf("no LAN channel found (last error: %w)", lastErr)
	}
	return 0, errors.New("no LAN channel found")
}

// pickSlot returns the slot named user, or else the first empty slot at or
// above first. Get User Name answers 0xCC for an empty slot (§22.29).
func pickSlot(ctx context.Context, x Exchanger, ch uint8, user string, first uint8) (id uint8, exists bool, err error) {
	acc := &app.GetUserAccessResponse{}
	if err := x.Exchange(ctx, &app.GetUserAccessRequest{ChannelNumber: ch, UserID: 1}, acc); err != nil {
		return 0, false, fmt.Errorf("get user access: %w", err)
	}
	max := acc.MaxUsersIDCount & 0x3f
	var free uint8
	for i := uint8(1); i <= max; i++ {
		res := &app.GetUsernameResponse{}
		err := x.Exchange(ctx, &app.GetUsernameRequest{UserID: i}, res)
		name := res.Username
		if err != nil {
			if re, ok := types.IsResponseError(err); ok && re.CompletionCode() == types.CodeRequestDataFieldInvalid {
				name = ""
			} else {
				return 0, false, fmt.Errorf("get user name %d: %w", i, err)
			}
		}
		if name == user {
			return i, true, nil
		}
		if name == "" && i >= first && free == 0 {
			free = i
		}
	}
	if free == 0 {
		return 0, false, fmt.Errorf("%w: all %d slots from %d are named", ErrNoFreeSlot, max-first+1, first)
	}
	return free, false, nil
}

// setPassword stores a 16-byte password; a BMC that wants the 20-byte form
// (it answers "request data length invalid" or "password size" errors) gets
// that instead.
func setPassword(ctx context.Context, x Exchanger, id uint8, pw string) error {
	err := x.Exchange(ctx, &app.SetUserPasswordRequest{UserID: id, Operation: app.PasswordOperationSetPassword, Password: pw}, &app.SetUserPasswordResponse{})
	if re, ok := types.IsResponseError(err); ok {
		switch re.CompletionCode() {
		case types.CodeRequestDataLengthInvalid, types.CodeSetUserPasswordWrongSize:
			return x.Exchange(ctx, &app.SetUserPasswordRequest{UserID: id, Stored20: true, Operation: app.PasswordOperationSetPassword, Password: pw}, &app.SetUserPasswordResponse{})
		}
	}
	return err
}

// readLAN reads the BMC's IPv4 address and MAC from the LAN configuration
// parameters (§23.2: 3 IP address, 5 MAC address).
func readLAN(ctx context.Context, x Exchanger, ch uint8, out *inventory.BMC, fail func(string, ...any)) {
	ip := &types.LanConfigParam_IP{}
	if err := getLANParam(ctx, x, ch, ip); err != nil {
		fail("read LAN address (channel %d): %v", ch, err)
	} else if ip.IP != nil && !ip.IP.IsUnspecified() {
		out.Address = ip.IP.String()
	}
	mac := &types.LanConfigParam_MAC{}
	if err := getLANParam(ctx, x, ch, mac); err != nil {
		fail("read LAN MAC (channel %d): %v", ch, err)
	} else if len(mac.MAC) == 6 && mac.MAC.String() != "00:00:00:00:00:00" {
		out.MAC = mac.MAC.String()
	}
}

func getLANParam(ctx context.Context, x Exchanger, ch uint8, p types.LanConfigParameter) error {
	sel, set, block := p.LanConfigParameter()
	res := &transport.GetLanConfigParamResponse{}
	if err := x.Exchange(ctx, &transport.GetLanConfigParamRequest{ChannelNumber: ch, ParamSelector: sel, SetSelector: set, BlockSelector: block}, res); err != nil {
		return err
	}
	return p.Unpack(res.ParamData)
}

// NewPassword returns 16 random characters with an upper-case letter, a
// lower-case letter, a digit and a symbol, which satisfies the password
// policies of iDRAC, iLO and XCC; the symbols avoid characters that some
// BMCs refuse (quotes, backslash, space, '&', '<').
func NewPassword() (string, error) {
	const (
		upper  = "ABCDEFGHJKLMNPQRSTUVWXYZ"
		lower  = "abcdefghijkmnopqrstuvwxyz"
		digits = "23456789"
		symbol = "-_.+="
	)
	all := upper + lower + digits
	classes := []string{upper, lower, digits, symbol}
	b := make([]byte, 16)
	for i := range b {
		set := all
		if i < len(classes) {
			set = classes[i]
		}
		c, err := pick(set)
		if err != nil {
			return "", err
		}
		b[i] = c
	}
	// Shuffle so the classes are not always at the front (Fisher–Yates).
	for i := len(b) - 1; i > 0; i-- {
		j, err := rand.Int(rand.Reader, big.NewInt(int64(i+1)))
		if err != nil {
			return "", err
		}
		b[i], b[j.Int64()] = b[j.Int64()], b[i]
	}
	return string(b), nil
}

func pick(set string) (byte, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(int64(len(set))))
	if err != nil {
		return 0, err
	}
	return set[n.Int64()], nil
}
