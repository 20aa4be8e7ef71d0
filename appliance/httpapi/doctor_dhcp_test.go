package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// The doctor's foreign-DHCP check over what the probe found on each
// VLAN this node serves (the probe itself, against dnsmasq and against
// Rollcall's own server in network namespaces, is dhcp's
// TestProbeFindsForeignServer): each VLAN probed once, a server leasing beside full mode fails,
// nobody leasing beside proxy mode fails, a probe that cannot run warns.
func TestDoctorForeignDHCP(t *testing.T) {
	var served []ServedNetwork
	for i, v := range []struct{ mode, iface string }{{store.DHCPFull, "full-foreign"}, {store.DHCPFull, "full-alone"}, {store.DHCPProxy, "proxy-alone"}, {store.DHCPProxy, "proxy-beside"}, {store.DHCPFull, "no-root"}} {
		served = append(served, ServedNetwork{VLAN: fmt.Sprintf("VLAN lab/%d", i+1), Iface: v.iface, Mode: v.mode})
	}
	served = append(served, served[0]) // a second subnet of the first VLAN: probed once
	foreign := ProbeOffer{Server: netip.MustParseAddr("10.78.1.254"), Offer: netip.MustParseAddr("10.78.1.77")}
	var mu sync.Mutex
	probed := map[string]int{}
	s := &Server{cfg: Config{Name: "n1", DHCPProbe: func(_ context.Context, iface string) ([]ProbeOffer, error) {
		mu.Lock()
		probed[iface]++
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
	s.doctorForeignDHCP(context.Background(), d, served)
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
		if probed[iface] != 1 {
			t.Errorf("%s was probed %d times, want once", iface, probed[iface])
		}
	}
}
