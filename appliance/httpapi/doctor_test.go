package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// GET /api/v1/doctor on one node: Raft, members, services, disk and
// certificates pass; a VLAN served on an interface the node does not have
// fails with what to do, and so does a missing commissioning image.
func TestDoctor(t *testing.T) {
	n := nodetest.Start(t)
	now := time.Now().UTC()
	for _, c := range []raftfsm.Command{
		&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "lab", Kind: store.FabricEthernet, Created: now}},
		&raftfsm.VLANPut{VLAN: raftfsm.VLAN{Fabric: "lab", VID: 7, MTU: 1500, DHCP: store.DHCPFull, Servers: []raftfsm.VLANServer{{Node: n.Name(), Iface: "rcnosuch0"}}, Created: now}},
	} {
		if _, err := n.Cluster().Apply(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	var rep wire.DoctorReport
	r := n.Do(t, "GET", "/api/v1/doctor", nil, nodetest.Bearer(n.Admin)...)
	if r.Status != http.StatusOK {
		t.Fatal(r)
	}
	r.Decode(t, &rep)
	by := map[string][]wire.DoctorCheck{}
	for _, c := range rep.Checks {
		by[c.Name] = append(by[c.Name], c)
	}
	for _, name := range []string{"raft", "members", "services", "disk", "certificates"} {
		if len(by[name]) == 0 || by[name][0].Status != wire.DoctorOK {
			t.Errorf("%s: %+v", name, by[name])
		}
	}
	if c := by["interfaces"]; len(c) != 1 || c[0].Status != wire.DoctorFail || !strings.Contains(c[0].Message, "no interface rcnosuch0") || c[0].Fix == "" {
		t.Errorf("interfaces: %+v", c)
	}
	if c := by["commissioning image"]; len(c) != 1 || c[0].Status != wire.DoctorFail {
		t.Errorf("commissioning image: %+v", c)
	}
	if rep.OK || rep.Node != n.Name() {
		t.Errorf("report: ok %v, node %q", rep.OK, rep.Node)
	}
	if r := n.Do(t, "GET", "/api/v1/doctor", nil); r.Status != http.StatusUnauthorized {
		t.Errorf("doctor without a token: %s", r)
	}
}

// On a cluster every member answers and the clocks agree.
func TestDoctorCluster(t *testing.T) {
	nodes := nodetest.StartCluster(t, 3, nodetest.Options{})
	var rep wire.DoctorReport
	nodes[2].Do(t, "GET", "/api/v1/doctor", nil, nodetest.Bearer(nodes[0].Admin)...).Decode(t, &rep)
	var members, clock *wire.DoctorCheck
	for i, c := range rep.Checks {
		switch c.Name {
		case "members":
			members = &rep.Checks[i]
		case "clock":
			clock = &rep.Checks[i]
		}
	}
	if members == nil || members.Status != wire.DoctorOK || !strings.Contains(members.Message, "3 members answer") {
		t.Errorf("members: %+v", members)
	}
	if clock == nil || clock.Status != wire.DoctorOK {
		t.Errorf("clock: %+v", clock)
	}
}
