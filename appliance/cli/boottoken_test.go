package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
)

// boot-token prints the token and, on a line of its own, what it is for;
// -json the API's answer; -ttl after the MAC as before it.
func TestBootTokenCLI(t *testing.T) {
	startNode(t, nodeOptions{}).use(t)
	out := mustRun(t, "boot-token", "0C-C4-7A-00-00-01")
	if !regexp.MustCompile(`^rcb1\.0cc47a000001\.\d+\.[A-Za-z0-9_-]+\n\(for 0c:c4:7a:00:00:01, valid until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)\n$`).MatchString(out) {
		t.Errorf("boot-token: %q", out)
	}
	for _, args := range [][]string{{"boot-token", "-ttl", "1h", "-json", "0c:c4:7a:00:00:01"}, {"boot-token", "0c:c4:7a:00:00:01", "-ttl", "1h", "-json"}} {
		var r wire.BootTokenReply
		if err := json.Unmarshal([]byte(mustRun(t, args...)), &r); err != nil || r.MAC != "0c:c4:7a:00:00:01" || !strings.HasPrefix(r.Token, "rcb1.") ||
			r.Expires.After(time.Now().Add(61*time.Minute)) {
			t.Errorf("rollcall %s: %+v, %v", strings.Join(args, " "), r, err)
		}
	}
	for _, args := range [][]string{{"boot-token"}, {"boot-token", "nonsense"}, {"boot-token", "0c:c4:7a:00:00:01", "-ttl", "48h"}} {
		if code, _, errs := run(args...); code != 1 || errs == "" {
			t.Errorf("rollcall %s: exit %d, %q", strings.Join(args, " "), code, errs)
		}
	}
}
