package httpapi

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
)

// The doctor's foreign-DHCP check over what the probe found on each
// VLAN this node serves (the probe itself, against dnsmasq and against
// Rollcall's own server in network namespaces, is dhcp's
// TestProbeFindsForeignServer): a server leasing beside full mode fails,
// nobody leasing beside proxy mode fails, a probe that cannot run warns.
func TestDoctorForeignDHCP(t *testing.T) {
	log := fsmtest.Open(t)
	now := time.Now().UTC()
	log.Must(t, &raftfsm.NodePut{Node: raftfsm.Node{Name: "n1", RaftAddr: "127.0.0.1:8300", Joined: now}},
		&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "lab", Kind: store.FabricEthernet, Created: now}})
	vlans := []struct {
		vid   int
		mode  string
		iface string
	}{{1, store.DHCPFull, "full-foreign"}, {2, store.DHCPFull, "full-alone"}, {3, store.DHCPProxy, "proxy-alone"}, {4, store.DHCPProxy, "proxy-beside"}, {5, store.DHCPFull, "no-root"}}
	for _, v := range vlans {
		log.Must(t,
			&raftfsm.VLANPut{VLAN: raftfsm.VLAN{Fabric: "lab", VID: v.vid, MTU: 1500, DHCP: v.mode, Servers: []raftfsm.VLANServer{{Node: "n1", Iface: v.iface}}, Created: now}},
			&raftfsm.SubnetPut{Subnet: raftfsm.Subnet{CIDR: netip.MustParsePrefix("10.78." + string(rune('0'+v.vid)) + ".0/24"), Fabric: "lab", VID: v.vid, Purpose: "provisioning", Created: now}})
	}
	foreign := ProbeOffer{Server: netip.MustParseAddr("10.78.1.254"), Offer: netip.MustParseAddr("10.78.1.77")}
	var mu sync.Mutex
	probed := map[string]bool{}
	s := &Server{cfg: Config{Name: "n1", DB: log.DB, DHCPProbe: func(_ context.Context, iface string) ([]ProbeOffer, error) {
		mu.Lock()
		probed[iface] = true
		mu.Unlock()
		switch iface {
		case "full-foreign":
			return []ProbeOffer{foreign}, nil
		case "proxy-beside":
			return []ProbeOffer{{Server: netip.MustParseAddr("10.78.4.1"), Offer: netip.MustParseAddr("10.78.4.9")}}, nil
		case "no-root":
			return nil, errors.New("listen udp4 :68: permission denied")
		}
		return nil, nil
	}}}
	d := &doctor{}
	s.doctorForeignDHCP(context.Background(), d)
	want := map[string]struct{ status, text string }{
		"full-foreign": {wire.DoctorFail, "another DHCP server hands out addresses beside Rollcall: 10.78.1.254 (offered 10.78.1.77)"},
		"full-alone":   {wire.DoctorOK, "no other DHCP server answers"},
		"proxy-alone":  {wire.DoctorFail, "no DHCP server hands out addresses there"},
		"proxy-beside": {wire.DoctorOK, "proxy mode beside 10.78.4.1"},
		"no-root":      {wire.DoctorWarn, "cannot probe: listen udp4 :68: permission denied"},
	}
	if len(d.checks) != len(want) {
		t.Fatalf("%d checks, want %d: %+v", len(d.checks), len(want), d.checks)
	}
	for _, c := range d.checks {
		var iface string
		for k := range want {
			if strings.Contains(c.Message, " on "+k+":") || strings.Contains(c.Message, " on "+k+" ") {
				iface = k
			}
		}
		w, ok := want[iface]
		if !ok || c.Name != "foreign-dhcp" || c.Status != w.status || !strings.Contains(c.Message, w.text) || (c.Status != wire.DoctorOK && c.Fix == "") {
			t.Errorf("check %+v, want %s with %q and a fix", c, w.status, w.text)
		}
		if !probed[iface] {
			t.Errorf("%s was not probed", iface)
		}
	}
}
