// Package boottoken mints and checks boot tokens: the agent credential a
// boot script hands the one MAC it was asked for.
//
// Firmware cannot authenticate, so whatever a boot script hands out, every
// host on the provisioning network can have: the script therefore hands out
// a token bound to the MAC it was asked for, valid for a few hours and, by
// raftfsm.CheckAgentScope, only for the machine that owns that MAC while it
// is new or commissioning. The shared agent token (DATA/agent.token) is no
// longer handed out; it still enlists, for agents started by other means.
//
// A token is "rcb1.<mac hex>.<expiry, unix seconds>.<HMAC>", the HMAC a
// master-key derived SHA-256 over the rest: any node of the cluster mints
// and checks it without a Raft entry. The node mints them for boot scripts
// (bootfiles), the API checks them and mints them for operators.
package boottoken

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

const (
	// Prefix starts every boot token: the API tells them from the shared
	// agent token by it.
	Prefix  = "rcb1."
	purpose = "boot-token/v1"
	// TTL covers a commissioning run with room to spare: a boot under
	// emulation, a long inventory on a 36-disk node, BMC setup.
	TTL    = 6 * time.Hour
	maxLen = 128
)

// Key is what a token is signed with: the cluster's master key
// (pki.MasterKey), whose Sum derives a key of its own for each purpose.
type Key interface {
	Sum(purpose string, msg []byte) ([]byte, error)
}

// ErrInvalid is any token that is not one this cluster made: malformed,
// forged, or signed by another key.
var ErrInvalid = errors.New("boot token is not valid")

// ExpiredError is a token this cluster made whose time is up.
type ExpiredError struct{ At time.Time }

func (e *ExpiredError) Error() string {
	return "boot token expired at " + e.At.UTC().Format(time.RFC3339)
}

// Mint makes the token for mac (an Ethernet MAC, in any notation
// net.ParseMAC reads), valid from now for ttl, and returns it with its
// expiry (to the second).
func Mint(key Key, mac string, now time.Time, ttl time.Duration) (string, time.Time, error) {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return "", time.Time{}, fmt.Errorf("boot token: mac %q: not an Ethernet MAC", mac)
	}
	exp := now.Add(ttl).Truncate(time.Second)
	body := Prefix + hex.EncodeToString(hw) + "." + strconv.FormatInt(exp.Unix(), 10)
	sum, err := key.Sum(purpose, []byte(body))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("boot token: %w", err)
	}
	return body + "." + base64.RawURLEncoding.EncodeToString(sum), exp, nil
}

// Parse checks a token and returns the MAC it is for (colon notation). A
// token that is not this cluster's is ErrInvalid; one whose time is up an
// *ExpiredError.
func Parse(key Key, tok string, now time.Time) (string, error) {
	if len(tok) > maxLen || !strings.HasPrefix(tok, Prefix) {
		return "", ErrInvalid
	}
	dot := strings.LastIndexByte(tok, '.')
	body, sig := tok[:dot], tok[dot+1:]
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return "", ErrInvalid
	}
	want, err := key.Sum(purpose, []byte(body))
	if err != nil || subtle.ConstantTimeCompare(got, want) != 1 {
		return "", ErrInvalid
	}
	macHex, expText, ok := strings.Cut(strings.TrimPrefix(body, Prefix), ".")
	hw, herr := hex.DecodeString(macHex)
	exp, eerr := strconv.ParseInt(expText, 10, 64)
	if !ok || herr != nil || len(hw) != 6 || eerr != nil {
		return "", ErrInvalid
	}
	if now.Unix() >= exp {
		return "", &ExpiredError{At: time.Unix(exp, 0)}
	}
	return net.HardwareAddr(hw).String(), nil
}
