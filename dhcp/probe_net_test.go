package dhcp

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

// TestProbeFindsForeignServer: the doctor's probe, run from a namespace on
// a link where dnsmasq serves, lists dnsmasq (its server identifier and
// the address it offered); on a link where only Rollcall serves (full
// mode), it lists nobody, since Rollcall drops a probe unanswered.
func TestProbeFindsForeignServer(t *testing.T) {
	need(t, "dnsmasq")
	peer, us := newNS(t, "dmpeer"), newNS(t, "probe")
	veth(t, peer, "peer0", "10.213.3.2/24", us, "us0", "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dmOut := startDnsmasq(t, peer, "peer0", "10.213.3.100,10.213.3.150,255.255.255.0,1h")

	probe := func(ns *testNS, iface string) ([]Offer, error) {
		type result struct {
			offers []Offer
			err    error
		}
		done := make(chan result, 1)
		inNS(t, ns, func() {
			// dnsmasq pings an address for 3 s before it offers it.
			o, err := Probe(ctx, iface, 5*time.Second)
			done <- result{o, err}
		})
		r := <-done
		return r.offers, r.err
	}
	var offers []Offer
	var err error
	// dnsmasq may still be starting: the probe is asked again.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if offers, err = probe(us, "us0"); err != nil || len(offers) > 0 {
			break
		}
	}
	if err != nil {
		t.Fatalf("probe: %v\ndnsmasq:\n%s", err, dmOut.String())
	}
	want := netip.MustParseAddr("10.213.3.2")
	if len(offers) != 1 || offers[0].Server != want || !netip.MustParsePrefix("10.213.3.0/24").Contains(offers[0].Offer) {
		t.Fatalf("probe found %+v, want dnsmasq (%s) offering an address of 10.213.3.0/24\ndnsmasq:\n%s", offers, want, dmOut.String())
	}

	// Rollcall's own server in full mode: no answer to a probe.
	l := newFullLab(t, "", nil)
	offers, err = probe(l.cli, "cli0")
	if err != nil || len(offers) != 0 {
		t.Fatalf("probe beside Rollcall alone: %+v, %v (want nobody)", offers, err)
	}
}
