package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/rollcall/rollcall/appliance/wire"
)

// errDoctorFailed makes rollcall doctor exit non-zero once it has printed
// its checks.
var errDoctorFailed = errors.New("a check failed")

// cmdDoctor is `rollcall doctor [-json]`: the node's checks (GET
// /api/v1/doctor), one line each, what to do under a failure; the exit
// status is 1 when one failed.
func cmdDoctor(args []string, s streams) error {
	fs := newFlags("doctor", "rollcall doctor [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 0)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.do(http.MethodGet, "/api/v1/doctor", nil, &raw); err != nil {
		return err
	}
	var rep wire.DoctorReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		return err
	}
	if *asJSON {
		if err := printJSON(s.stdout, raw); err != nil {
			return err
		}
	} else {
		tw := newTable(s.stdout)
		for _, ch := range rep.Checks {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", strings.ToUpper(ch.Status), ch.Name, ch.Message)
			if ch.Fix != "" && ch.Status != wire.DoctorOK {
				fmt.Fprintf(tw, "\t\t→ %s\n", ch.Fix)
			}
		}
		tw.Flush()
	}
	if !rep.OK {
		return errDoctorFailed
	}
	return nil
}
