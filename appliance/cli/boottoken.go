package cli

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
)

// cmdBootToken is `rollcall boot-token MAC [-ttl 6h] [-json]`: the agent
// token a boot script would hand that MAC, for an agent started another way
// (a USB stick, a lab script).
func cmdBootToken(args []string, s streams) error {
	fs := newFlags("boot-token", "rollcall boot-token MAC [-ttl 6h] [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	ttl := fs.String("ttl", "", "how long the token is valid (default 6h, at most 24h)")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	req := wire.BootTokenRequest{MAC: fs.Arg(0), TTL: *ttl}
	return fetch(c, http.MethodPost, "/api/v1/boot-tokens", req, *asJSON, s.stdout, func(w io.Writer, r wire.BootTokenReply) error {
		_, err := fmt.Fprintf(w, "%s\n(for %s, valid until %s)\n", r.Token, r.MAC, r.Expires.Format(time.RFC3339))
		return err
	})
}
