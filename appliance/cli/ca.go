package cli

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
)

// cmdCA is rollcall ca: the cluster certificate authority. Only show is
// built; issue, intermediate and rotate (issue 23) are not yet.
func cmdCA(args []string, s streams) error {
	if len(args) == 0 || args[0] != "show" {
		return errors.New("usage: rollcall ca show [-json]")
	}
	return reader[wire.CAView]{name: "ca show", usage: "rollcall ca show [-json]", path: at("/api/v1/ca"), table: printCA}.run(args[1:], s.stdout)
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
