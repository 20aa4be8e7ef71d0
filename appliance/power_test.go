package appliance

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/power/ipmi/ipmitest"
	"github.com/rollcall/rollcall/raftfsm"
)

// Power and boot-device control through the API of a follower, against
// go-ipmi's simulated BMC; the password never appears in answers.
func TestPowerThroughFollower(t *testing.T) {
	bmc, err := ipmitest.Start("admin", "bmc-Secret-77")
	if err != nil {
		t.Fatal(err)
	}
	defer bmc.Close()
	nodes, token := startCluster(t, 3)
	var follower *Node
	for _, n := range nodes {
		if !n.cluster.IsLeader() {
			follower = n.Node
		}
	}
	id := "m-0000000000b1"
	if _, err := nodes[0].cluster.Apply(context.Background(), &raftfsm.MachineCreate{ID: id, Name: "b1", MACs: []string{"02:00:00:00:0b:01"}, Now: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	follower.cluster.FSM().WaitApplied(context.Background(), nodes[0].cluster.FSM().AppliedIndex())
	var raw []byte
	// Without a BMC: a clear error, nothing queued.
	if code := call(t, follower, token, http.MethodPost, "/api/v1/machines/b1/power", `{"action":"on"}`, &raw); code != 400 || !strings.Contains(string(raw), "no BMC") {
		t.Fatalf("power without a BMC: %d %s", code, raw)
	}
	body := fmt.Sprintf(`{"driver":"ipmi","address":%q,"user":"admin","password":"bmc-Secret-77","settings":{"cipher":"17"}}`, bmc.Address())
	if code := call(t, follower, token, http.MethodPut, "/api/v1/machines/b1/bmc", body, &raw); code != 200 || strings.Contains(string(raw), "bmc-Secret-77") {
		t.Fatalf("set bmc: %d %s", code, raw)
	}
	for _, step := range []struct{ path, body, want string }{
		{"/power", `{"action":"on"}`, "ok"},
		{"/power", `{"action":"status"}`, "on"},
		{"/bootdev", `{"device":"pxe","persistent":true,"uefi":true}`, "ok"},
		{"/power", `{"action":"off"}`, "ok"},
		{"/power", `{"action":"status"}`, "off"},
	} {
		var j wire.Job
		if code := call(t, follower, token, http.MethodPost, "/api/v1/machines/b1"+step.path, step.body, &j); code != 200 || j.Result != step.want {
			t.Fatalf("%s %s: %d %+v", step.path, step.body, code, j)
		}
	}
	if bmc.PowerOn() {
		t.Fatal("the simulated chassis is still on")
	}
	if f := bmc.BootFlags(); f == nil || !f.Persist || !bool(f.BIOSBootType) {
		t.Fatalf("boot flags on the BMC: %+v", f)
	}
	// Bad input: an unknown action lists the allowed ones; nothing queued.
	if code := call(t, follower, token, http.MethodPost, "/api/v1/machines/b1/power", `{"action":"explode"}`, &raw); code != 400 || !strings.Contains(string(raw), "cycle") {
		t.Fatalf("bad action: %d %s", code, raw)
	}
	// Wrong credentials: a 502 naming the BMC and the step, and an event.
	bad := fmt.Sprintf(`{"driver":"ipmi","address":%q,"user":"admin","password":"wrong","settings":{"cipher":"17"}}`, bmc.Address())
	call(t, follower, token, http.MethodPut, "/api/v1/machines/b1/bmc", bad, nil)
	if code := call(t, follower, token, http.MethodPost, "/api/v1/machines/b1/power", `{"action":"status"}`, &raw); code != 502 || !strings.Contains(string(raw), bmc.Address()) {
		t.Fatalf("wrong password: %d %s", code, raw)
	}
	if strings.Contains(string(raw), "bmc-Secret-77") {
		t.Fatal("password in an answer")
	}
}

// The CLI forms of the same: bmc (password from standard input), power,
// bootdev, bmc drivers.
func TestPowerCLI(t *testing.T) {
	bmc, err := ipmitest.Start("admin", "cli-Secret-55")
	if err != nil {
		t.Fatal(err)
	}
	defer bmc.Close()
	n, admin, _ := startTestNode(t)
	t.Setenv("ROLLCALL_URL", "http://"+n.HTTPAddr())
	t.Setenv("ROLLCALL_TOKEN", admin)
	run := func(stdin string, args ...string) (string, int) {
		var out, errOut strings.Builder
		stdinReader = strings.NewReader(stdin)
		code := Main(args, &out, &errOut)
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
