package cli

import (
	"strings"
	"testing"

	"github.com/rollcall/rollcall/power/ipmi/ipmitest"
)

// The BMC verbs against go-ipmi's simulated BMC: bmc (password from
// standard input), power, bootdev, bmc drivers; what they print, as a
// golden.
func TestPowerCLI(t *testing.T) {
	bmc, err := ipmitest.Start("admin", "cli-Secret-55")
	if err != nil {
		t.Fatal(err)
	}
	defer bmc.Close()
	startNode(t, nodeOptions{}).use(t)
	run := func(stdin string, args ...string) (string, int) {
		code, out, errs := runIn(stdin, args...)
		return out + errs, code
	}
	if out, code := run("", "add", "-name", "c1", "-mac", "02:00:00:00:0c:01"); code != 0 {
		t.Fatalf("add: %s", out)
	}
	if out, code := run("", "bmc", "c1", "-driver", "ipmi", "-address", bmc.Address(), "-user", "admin", "-password", "cli-Secret-55"); code == 0 || !strings.Contains(out, "standard input") {
		t.Fatalf("a password on the command line must be refused: %d %s", code, out)
	}
	out, code := run("cli-Secret-55\n", "bmc", "c1", "-driver", "ipmi", "-address", bmc.Address(), "-user", "admin", "-password", "-", "-set", "cipher=17", "-verify")
	if code != 0 {
		t.Fatalf("bmc: %s", out)
	}
	printed := "$ rollcall bmc c1 … -verify\n" + out
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
		printed += "$ rollcall " + strings.Join(c.args, " ") + "\n" + out
	}
	out, code = run("", "bmc", "clear", "c1")
	if code != 0 {
		t.Fatalf("bmc clear: %s", out)
	}
	printed += "$ rollcall bmc clear c1\n" + out
	golden(t, "power", normalize(printed))
	if out, code := run("", "show", "c1"); code != 0 || strings.Contains(out, "BMC:") {
		t.Errorf("show after bmc clear: %d %s", code, out)
	}
	if out, code := run("", "bmc", "clear", "c1"); code != 1 || !strings.Contains(out, ": not found") || !strings.Contains(out, "BMC of machine m-") {
		t.Errorf("bmc clear twice: %d %q", code, out)
	}
	if out, code := run("", "bmc", "clear"); code != 1 || !strings.Contains(out, "usage: rollcall bmc clear ID|NAME [-json]") {
		t.Errorf("bmc clear without a machine: %d %q", code, out)
	}
	if out, code := run("", "bmc", "c1", "-driver", "manual"); code != 0 || out != "c1: BMC set (manual )\n" {
		t.Errorf("bmc without -verify: %d %q", code, out)
	}
	if out, code := run("", "bmc", "clear", "c1", "-json"); code != 0 || !strings.Contains(out, `"id": "m-`) || strings.Contains(out, `"bmc"`) {
		t.Errorf("bmc clear -json: %d %s", code, out)
	}
	if out, code := run("", "power", "c1", "explode"); code != 1 || !strings.Contains(out, "cycle") {
		t.Fatalf("bad action: %d %s", code, out)
	}
}
