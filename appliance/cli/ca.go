package cli

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
)

// cmdCA is rollcall ca: the cluster certificate authority. rotate is not
// built yet (issue 23).
func cmdCA(args []string, s streams) error {
	if len(args) == 0 {
		return errors.New("usage: rollcall ca show | issue NAME -host h1,h2 [-client] | intermediate NAME -permit dom,cidr -csr FILE | certs [-kind K] | revoke SERIAL")
	}
	switch args[0] {
	case "show":
		return reader[wire.CAView]{name: "ca show", usage: "rollcall ca show [-json]", path: at("/api/v1/ca"), table: printCA}.run(args[1:], s.stdout)
	case "issue":
		return caIssue(args[1:], s.stdout)
	case "intermediate":
		return caIntermediate(args[1:], s.stdout)
	case "certs":
		return reader[wire.CertList]{name: "ca certs", usage: "rollcall ca certs [-json] [-kind node|admin|service|intermediate]", path: at("/api/v1/ca/certificates"),
			filter: "kind", filterHelp: "only certificates of this kind: node, admin, service, intermediate", table: printCerts}.run(args[1:], s.stdout)
	case "revoke":
		fs := newFlags("ca revoke", "rollcall ca revoke SERIAL [-json]")
		asJSON := fs.Bool("json", false, "print JSON")
		c, err := fs.client(args[1:], 1)
		if err != nil {
			return err
		}
		return revokeAndPrint(c, "/api/v1/ca/certificates/"+url.PathEscape(strings.ToLower(fs.Arg(0))), *asJSON, s.stdout)
	case "rotate":
		return errors.New("ca rotate is not built yet: the root cannot be rotated in place (issue 23)")
	}
	return fmt.Errorf("unknown ca command %q (show, issue, intermediate, certs, revoke)", args[0])
}

func printCA(w io.Writer, v wire.CAView) error {
	depth := "not limited"
	switch {
	case v.MaxPathLen == 0:
		depth = "0 (signs node and client certificates only)"
	case v.MaxPathLen > 0:
		depth = fmt.Sprintf("%d (intermediate CAs allowed below it, %d level(s))", v.MaxPathLen, v.MaxPathLen)
	}
	fmt.Fprintf(w, "fingerprint  SHA256:%s\n", v.Fingerprint)
	fmt.Fprintf(w, "subject      %s\n", v.Subject)
	fmt.Fprintf(w, "serial       %s\n", v.Serial)
	fmt.Fprintf(w, "valid        %s to %s (%s left)\n", v.NotBefore.Format(time.RFC3339), v.NotAfter.Format(time.RFC3339), left(time.Until(v.NotAfter)))
	fmt.Fprintf(w, "path length  %s\n\n", depth)
	_, err := io.WriteString(w, v.PEM)
	return err
}

// left is a remaining validity in days, or "none" once it is past.
func left(d time.Duration) string {
	if d <= 0 {
		return "none: expired"
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}
