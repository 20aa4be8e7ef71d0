package appliance

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// Boot tokens narrow an agent's authority to the machine that booted.
// Firmware cannot authenticate, so whatever a boot script hands out, every
// host on the provisioning network can have: the script therefore hands out
// a token bound to the MAC it was asked for, valid for a few hours and, by
// raftfsm.CheckAgentScope, only for the machine that owns that MAC while it
// is new or commissioning. The shared agent token (DATA/agent.token) is no
// longer handed out; it still enlists, for agents started by other means.
//
// A token is "rcb1.<mac hex>.<expiry, unix seconds>.<HMAC>", the HMAC a
// master-key derived SHA-256 over the rest: any node of the cluster mints
// and checks it without a Raft entry.
const (
	bootTokenPrefix  = "rcb1."
	bootTokenPurpose = "boot-token/v1"
	// bootTokenTTL covers a commissioning run with room to spare: a boot
	// under emulation, a long inventory on a 36-disk node, BMC setup.
	bootTokenTTL    = 6 * time.Hour
	maxBootTokenLen = 128

	ctxAgentMAC = "rollcall.agent_mac"
)

var errBootToken = errors.New("boot token is not valid")

func (n *Node) mintBootToken(mac string, now time.Time, ttl time.Duration) (string, time.Time, error) {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return "", time.Time{}, fmt.Errorf("boot token: mac %q: not an Ethernet MAC", mac)
	}
	exp := now.Add(ttl).Truncate(time.Second)
	body := bootTokenPrefix + hex.EncodeToString(hw) + "." + strconv.FormatInt(exp.Unix(), 10)
	sum, err := n.key.Sum(bootTokenPurpose, []byte(body))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("boot token: %w", err)
	}
	return body + "." + base64.RawURLEncoding.EncodeToString(sum), exp, nil
}

// parseBootToken checks a boot token and returns the MAC it is for.
func (n *Node) parseBootToken(tok string, now time.Time) (string, error) {
	if len(tok) > maxBootTokenLen || !strings.HasPrefix(tok, bootTokenPrefix) {
		return "", errBootToken
	}
	dot := strings.LastIndexByte(tok, '.')
	body, sig := tok[:dot], tok[dot+1:]
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return "", errBootToken
	}
	want, err := n.key.Sum(bootTokenPurpose, []byte(body))
	if err != nil || subtle.ConstantTimeCompare(got, want) != 1 {
		return "", errBootToken
	}
	macHex, expText, ok := strings.Cut(strings.TrimPrefix(body, bootTokenPrefix), ".")
	hw, herr := hex.DecodeString(macHex)
	exp, eerr := strconv.ParseInt(expText, 10, 64)
	if !ok || herr != nil || len(hw) != 6 || eerr != nil {
		return "", errBootToken
	}
	if now.Unix() >= exp {
		return "", fmt.Errorf("boot token expired at %s: boot the machine again", time.Unix(exp, 0).UTC().Format(time.RFC3339))
	}
	return net.HardwareAddr(hw).String(), nil
}

// agentMAC is the MAC of the boot token a request came with, "" for the
// shared agent token.
func agentMAC(c *gin.Context) string { return c.GetString(ctxAgentMAC) }

// postBootToken is POST /api/v1/boot-tokens: an operator mints the token a
// boot script would hand out, for an agent started another way (a USB
// stick, a lab script).
func (n *Node) postBootToken(c *gin.Context) {
	var req wire.BootTokenRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		n.fail(c, err)
		return
	}
	mac, err := store.NormalizeMAC(req.MAC)
	if err != nil {
		n.fail(c, err)
		return
	}
	ttl := bootTokenTTL
	if req.TTL != "" {
		if ttl, err = time.ParseDuration(req.TTL); err != nil || ttl <= 0 || ttl > 24*time.Hour {
			n.fail(c, badRequest("ttl must be a duration between 1s and 24h, such as 6h"))
			return
		}
	}
	tok, exp, err := n.mintBootToken(mac, time.Now(), ttl)
	if err != nil {
		n.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, wire.BootTokenReply{MAC: mac, Token: tok, Expires: exp})
}
