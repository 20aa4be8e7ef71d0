package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rollcall/rollcall/appliance/console"
	"github.com/rollcall/rollcall/appliance/wire"
)

// cmdCA is rollcall ca: the cluster certificate authority.
func cmdCA(args []string, s streams) error {
	if len(args) == 0 {
		return errors.New("usage: rollcall ca show | issue NAME -host h1,h2 [-client] | intermediate NAME -permit dom,cidr -csr FILE | certs [-kind K] | revoke SERIAL | rotate -yes [-transition 720h]")
	}
	switch args[0] {
	case "show":
		return reader[wire.CAState]{name: "ca show", usage: "rollcall ca show [-json]", path: at("/api/v1/ca"), table: printCA}.run(args[1:], s.stdout)
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
		return caRotate(args[1:], s.stdout)
	}
	return fmt.Errorf("unknown ca command %q (show, issue, intermediate, certs, revoke, rotate)", args[0])
}

// caRotate asks for a new cluster root. The answer names the new
// fingerprint; a CA file this client keeps (client.json's ca_file) gets the
// new bundle, so it keeps verifying once the transition ends.
func caRotate(args []string, w io.Writer) error {
	fs := newFlags("ca rotate", "rollcall ca rotate -yes [-transition 720h] [-json]")
	yes := fs.Bool("yes", false, "confirm: every node re-issues its certificates under the new root, and clients must take the new CA before the transition ends")
	transition := fs.String("transition", "720h", "how long the replaced root stays trusted (1h to 8760h)")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 0)
	if err != nil {
		return err
	}
	if !*yes {
		return errors.New("ca rotate re-issues every node's certificates and changes the CA every client checks: run it again with -yes")
	}
	var st wire.CAState
	if err := c.do(http.MethodPost, "/api/v1/ca/rotate", wire.CARotateRequest{Yes: true, Transition: *transition}, &st); err != nil {
		return err
	}
	saved := ""
	if path, err := console.DefaultConfigPath(); err == nil {
		if cfg, err := console.LoadClientConfig(path); err == nil && cfg.CAFile != "" {
			if err := writeFile(cfg.CAFile, []byte(st.BundlePEM), 0o644); err != nil {
				return fmt.Errorf("the CA was rotated, but the client's CA file was not updated: %w", err)
			}
			saved = cfg.CAFile
		}
	}
	if *asJSON {
		return json.NewEncoder(w).Encode(st)
	}
	fmt.Fprintf(w, "cluster CA rotated: new fingerprint SHA256:%s\n", st.Fingerprint)
	for _, p := range st.Previous {
		fmt.Fprintf(w, "previous root SHA256:%s stays trusted until %s\n", p.Fingerprint, p.TrustedUntil.Format(time.RFC3339))
	}
	fmt.Fprintln(w, "every node now re-issues its certificates under the new root; clients keep verifying through the transition")
	if saved != "" {
		fmt.Fprintf(w, "this client's CA file %s holds the new bundle\n", saved)
	}
	fmt.Fprintln(w, "give other clients the new CA before the transition ends: rollcall ca show, or GET /ca.pem, checked by the fingerprint above")
	return nil
}

func printCA(w io.Writer, st wire.CAState) error {
	v := st.CAView
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
	fmt.Fprintf(w, "path length  %s\n", depth)
	if !st.Rotated.IsZero() {
		fmt.Fprintf(w, "rotated      %s by %s\n", st.Rotated.Format(time.RFC3339), st.RotatedBy)
	}
	for _, p := range st.Previous {
		fmt.Fprintf(w, "previous     SHA256:%s %s, trusted until %s\n", p.Fingerprint, p.Subject, p.TrustedUntil.Format(time.RFC3339))
	}
	fmt.Fprintln(w)
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
