package appliance

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
)

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
