package appliance

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/boottoken"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// ctxAgentMAC holds the MAC of the boot token a request came with.
const ctxAgentMAC = "rollcall.agent_mac"

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
	ttl := boottoken.TTL
	if req.TTL != "" {
		if ttl, err = time.ParseDuration(req.TTL); err != nil || ttl <= 0 || ttl > 24*time.Hour {
			n.fail(c, badRequest("ttl must be a duration between 1s and 24h, such as 6h"))
			return
		}
	}
	tok, exp, err := boottoken.Mint(n.key, mac, time.Now(), ttl)
	if err != nil {
		n.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, wire.BootTokenReply{MAC: mac, Token: tok, Expires: exp})
}

func cmdBootToken(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("boot-token", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	ttl := fs.String("ttl", "", "how long the token is valid (default 6h, at most 24h)")
	c, err := newClient(fs, flagsFirst(args))
	if err != nil {
		return err
	}
	mac, err := oneArg(fs, "rollcall boot-token MAC [-ttl 6h] [-json]")
	if err != nil {
		return err
	}
	return exchange(c, http.MethodPost, "/api/v1/boot-tokens", wire.BootTokenRequest{MAC: mac, TTL: *ttl}, *asJSON, stdout, func(w io.Writer, r wire.BootTokenReply) error {
		_, err := fmt.Fprintf(w, "%s\n(for %s, valid until %s)\n", r.Token, r.MAC, r.Expires.Format(time.RFC3339))
		return err
	})
}
