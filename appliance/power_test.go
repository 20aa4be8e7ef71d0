package appliance_test

import (
	"strings"
	"testing"

	"github.com/rollcall/rollcall/appliance"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/power/ipmi/ipmitest"
)

// The CLI forms of the same: bmc (password from standard input), power,
// bootdev, bmc drivers.
func TestPowerCLI(t *testing.T) {
	bmc, err := ipmitest.Start("admin", "cli-Secret-55")
	if err != nil {
		t.Fatal(err)
	}
	defer bmc.Close()
	n := nodetest.Start(t)

	admin := n.Admin
	t.Setenv("ROLLCALL_URL", "http://"+n.HTTPAddr())
	t.Setenv("ROLLCALL_TOKEN", admin)
	run := func(stdin string, args ...string) (string, int) {
		var out, errOut strings.Builder
		appliance.SetStdin(t, strings.NewReader(stdin))
		code := appliance.Main(args, &out, &errOut)
		return out.String() + errOut.String(), code
	}
	if out, code := run("", "add", "-name", "c1", "-mac", "02:00:00:00:0c:01"); code != 0 {
		t.Fatalf("add: %s", out)
	}
	if out, code := run("", "bmc", "c1", "-driver", "ipmi", "-address", bmc.Address(), "-user", "admin", "-password", "cli-Secret-55"); code == 0 || !strings.Contains(out, "standard input") {
		t.Fatalf("a password on the command line must be refused: %d %s", code, out)
	}
	if out, code := run("cli-Secret-55\n", "bmc", "c1", "-driver", "ipmi", "-address", bmc.Address(), "-user", "admin", "-password", "-", "-set", "cipher=17", "-verify"); code != 0 {
		t.Fatalf("bmc: %s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"power", "c1", "on"}, "ok"},
		{[]string{"power", "c1", "status"}, ": on"},
		{[]string{"bootdev", "c1", "disk", "-persistent"}, "ok"},
		{[]string{"bmc", "drivers"}, "idrac"},
	} {
		out, code := run("", c.args...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Fatalf("%v: %d %s", c.args, code, out)
		}
	}
	if out, code := run("", "power", "c1", "explode"); code != 1 || !strings.Contains(out, "cycle") {
		t.Fatalf("bad action: %d %s", code, out)
	}
}
