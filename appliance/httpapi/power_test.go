package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/nodetest"
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
	nodes := nodetest.StartCluster(t, 3, nodetest.Options{})
	token := nodes[0].Admin
	var follower *nodetest.Node
	for _, n := range nodes {
		if !n.Cluster().IsLeader() {
			follower = n
		}
	}
	id := "m-0000000000b1"
	if _, err := nodes[0].Cluster().Apply(context.Background(), &raftfsm.MachineCreate{ID: id, Name: "b1", MACs: []string{"02:00:00:00:0b:01"}, Now: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	follower.Cluster().FSM().WaitApplied(context.Background(), nodes[0].Cluster().FSM().AppliedIndex())
	var raw []byte
	// Without a BMC: a clear error, nothing queued.
	if code := follower.Call(t, token, http.MethodPost, "/api/v1/machines/b1/power", `{"action":"on"}`, &raw); code != 400 || !strings.Contains(string(raw), "no BMC") {
		t.Fatalf("power without a BMC: %d %s", code, raw)
	}
	body := fmt.Sprintf(`{"driver":"ipmi","address":%q,"user":"admin","password":"bmc-Secret-77","settings":{"cipher":"17"}}`, bmc.Address())
	if code := follower.Call(t, token, http.MethodPut, "/api/v1/machines/b1/bmc", body, &raw); code != 200 || strings.Contains(string(raw), "bmc-Secret-77") {
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
		if code := follower.Call(t, token, http.MethodPost, "/api/v1/machines/b1"+step.path, step.body, &j); code != 200 || j.Result != step.want {
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
	if code := follower.Call(t, token, http.MethodPost, "/api/v1/machines/b1/power", `{"action":"explode"}`, &raw); code != 400 || !strings.Contains(string(raw), "cycle") {
		t.Fatalf("bad action: %d %s", code, raw)
	}
	// Wrong credentials: a 502 naming the BMC and the step, and an event.
	bad := fmt.Sprintf(`{"driver":"ipmi","address":%q,"user":"admin","password":"wrong","settings":{"cipher":"17"}}`, bmc.Address())
	follower.Call(t, token, http.MethodPut, "/api/v1/machines/b1/bmc", bad, nil)
	if code := follower.Call(t, token, http.MethodPost, "/api/v1/machines/b1/power", `{"action":"status"}`, &raw); code != 502 || !strings.Contains(string(raw), bmc.Address()) {
		t.Fatalf("wrong password: %d %s", code, raw)
	}
	if strings.Contains(string(raw), "bmc-Secret-77") {
		t.Fatal("password in an answer")
	}
}
