package dhcp

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/rollcall/rollcall/dhcp/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

func TestFullLifecycle(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.ready(0)

	offer, to, err := r.send(0, discover(macOf(1), xidOf(1)), clientSrc, netip.Addr{})
	if offer == nil {
		t.Fatalf("no offer: %v", err)
	}
	if offer.MessageType() != dhcpv4.MessageTypeOffer {
		t.Fatalf("got %s, want OFFER", offer.MessageType())
	}
	ip := wire.Addr(offer.YourIPAddr)
	if !netip.MustParsePrefix("10.213.1.0/24").Contains(ip) {
		t.Fatalf("offered %s, outside the dynamic range", ip)
	}
	if to != netip.AddrPortFrom(ip, 68) {
		t.Errorf("offer sent to %s, want unicast to %s:68 (no broadcast flag; TestReplyDestinations has the rest)", to, ip)
	}
	checks := map[string]bool{
		"server id":  wire.Addr(offer.ServerIdentifier()) == r.nodes[0].addr,
		"router":     len(offer.Router()) == 1 && wire.Addr(offer.Router()[0]) == testGW,
		"mask /16":   offer.SubnetMask().String() == "ffff0000",
		"dns":        len(offer.DNS()) == 1 && offer.DNS()[0].String() == "10.213.0.2",
		"domain":     offer.DomainName() == "lab.example",
		"lease time": offer.IPAddressLeaseTime(0) == time.Hour,
		"mtu":        string(offer.Options[26]) == "\x05\xdc",
		"no boot":    offer.BootFileName == "",
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("offer: %s wrong: %s", what, offer.Summary())
		}
	}

	ack, _, err := r.send(0, requestFor(offer, xidOf(1)), clientSrc, netip.Addr{})
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
		t.Fatalf("no ACK: %v %v", ack, err)
	}
	if wire.Addr(ack.YourIPAddr) != ip {
		t.Fatalf("ACK for %s, offered %s", ack.YourIPAddr, ip)
	}
	if err := r.flush(0); err != nil {
		t.Fatal(err)
	}
	l, err := r.storeLease(0, ip)
	if err != nil || l.MAC != macOf(1).String() || l.Node != "n1" {
		t.Fatalf("replicated lease = %+v, %v", l, err)
	}
	if !l.Expires.After(r.clock.Now().Add(50 * time.Minute)) {
		t.Errorf("lease expires %s, want about an hour", l.Expires)
	}
	var seen store.Seen
	_ = r.c.DB(0).View(func(tx *store.Tx) error { seen, err = tx.SeenMAC(macOf(1).String()); return err })
	if seen.Node != "n1" || seen.VLAN != "f1/0" || seen.Interface != "eth0" {
		t.Errorf("sighting = %+v, %v", seen, err)
	}

	// Renewing (unicast, ciaddr set): ACK to ciaddr:68.
	r.clock.Advance(30 * time.Minute)
	ack, to, _ = r.send(0, renewal(wire.IP(ip), macOf(1), xidOf(2)), netip.AddrPortFrom(ip, 68), r.nodes[0].addr)
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck || wire.Addr(ack.YourIPAddr) != ip {
		t.Fatalf("renewal: %v", ack)
	}
	if to != netip.AddrPortFrom(ip, 68) {
		t.Errorf("renewal ACK to %s, want %s:68", to, ip)
	}
	if err := r.flush(0); err != nil {
		t.Fatal(err)
	}
	l2, _ := r.storeLease(0, ip)
	if !l2.Expires.After(l.Expires) {
		t.Errorf("renewal not replicated: %s then %s", l.Expires, l2.Expires)
	}

	// Another client asking for that address is refused.
	other := renewal(wire.IP(ip), macOf(2), xidOf(3))
	nak, to, _ := r.send(0, other, clientSrc, netip.Addr{})
	if nak == nil || nak.MessageType() != dhcpv4.MessageTypeNak || to.Addr() != broadcastAddr {
		t.Fatalf("request for a leased address by another client: %v to %s", nak, to)
	}

	// RELEASE: the lease goes, through the log, then the address is free.
	rel := renewal(wire.IP(ip), macOf(1), xidOf(4))
	rel = withType(rel, dhcpv4.MessageTypeRelease)
	if out, _, err := r.send(0, rel, netip.AddrPortFrom(ip, 68), r.nodes[0].addr); out != nil || err != nil {
		t.Fatalf("release: %v %v", out, err)
	}
	if err := r.flush(0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.storeLease(0, ip); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("released lease still in the store: %v", err)
	}
}

func TestDeclineQuarantines(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.ready(0)
	ack, err := r.dora(0, 1)
	if ack == nil {
		t.Fatal(err)
	}
	ip := wire.Addr(ack.YourIPAddr)
	dec := discover(macOf(1), xidOf(9), dhcpv4.OptRequestedIPAddress(wire.IP(ip)))
	dec = withType(dec, dhcpv4.MessageTypeDecline)
	if _, _, err := r.send(0, dec, clientSrc, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if err := r.flush(0); err != nil {
		t.Fatal(err)
	}
	l, err := r.storeLease(0, ip)
	if err != nil || !l.Declined {
		t.Fatalf("declined address in the store: %+v %v", l, err)
	}
	// Nobody gets it while quarantined, here or anywhere.
	for i := 2; i < 100; i++ {
		a, _ := r.dora(0, i)
		if a != nil && wire.Addr(a.YourIPAddr) == ip {
			t.Fatalf("client %d got declined address %s", i, ip)
		}
	}
}

func TestKnownMachineGetsItsAddress(t *testing.T) {
	r := newRig(t, rigOpts{})
	ctx := t.Context()
	mac := macOf(77).String()
	if err := r.c.Apply0(ctx, &raftfsm.MachineCreate{ID: "m-0000000000aa", Name: "web1", MACs: []string{mac}, Now: r.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	fixed := netip.MustParseAddr("10.213.7.7")
	if err := r.c.Apply0(ctx, &raftfsm.AddressClaim{Address: raftfsm.Address{IP: fixed, How: store.HowStatic, Machine: "m-0000000000aa"}}); err != nil {
		t.Fatal(err)
	}
	r.ready(0)
	ack, err := r.dora(0, 77)
	if ack == nil {
		t.Fatal(err)
	}
	if wire.Addr(ack.YourIPAddr) != fixed || ack.HostName() != "web1" {
		t.Fatalf("known machine got %s (%q), want %s web1", ack.YourIPAddr, ack.HostName(), fixed)
	}
	// Cut off from the quorum, the node still serves it.
	r.c.Cut(0, true)
	r.stop(0, false)
	r.start(0, Config{Node: "n1", DB: r.c.DB(0), Replicator: r.c.Node(0), Now: r.clock.Now, BlockSize: 32})
	ack, err = r.dora(0, 77)
	if ack == nil || wire.Addr(ack.YourIPAddr) != fixed {
		t.Fatalf("cut-off node did not serve a known machine: %v %v", ack, err)
	}
	// A dynamic client gets nothing until the node can recover its blocks.
	if a, err := r.dora(0, 5); a != nil || wire.DropReason(err) != wire.ReasonNoAddress {
		t.Fatalf("cut-off restarted node leased %v (%v)", a, err)
	}
}

// A stateless node's address (claimed by its assign) comes with its node
// name as the host name.
func TestStatelessNodeGetsItsAddressAndName(t *testing.T) {
	r := newRig(t, rigOpts{})
	ctx := t.Context()
	mac := macOf(79).String()
	const id = "m-0000000000ac"
	if err := r.c.Apply0(ctx, &raftfsm.MachineCreate{ID: id, Name: "rack3-u12", MACs: []string{mac}, Now: r.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr("10.213.9.9")
	if err := r.c.Apply0(ctx, &raftfsm.AddressClaim{Address: raftfsm.Address{IP: ip, How: store.HowStateless, Machine: id, Name: "cn007"}}); err != nil {
		t.Fatal(err)
	}
	// The node record as an assign writes it (the state machine's assign
	// wants a commissioned machine; the DHCP answer reads only the record).
	if err := r.c.DB(0).Update(func(tx *store.Tx) error {
		return tx.PutStatelessNode(store.StatelessNode{Machine: id, Profile: "compute", Name: "cn007", Number: 7, Addresses: []string{"10.213.9.9/16"}, Generation: 1})
	}); err != nil {
		t.Fatal(err)
	}
	r.ready(0)
	ack, err := r.dora(0, 79)
	if ack == nil {
		t.Fatal(err)
	}
	if wire.Addr(ack.YourIPAddr) != ip || ack.HostName() != "cn007" {
		t.Fatalf("stateless node got %s (%q), want %s cn007", ack.YourIPAddr, ack.HostName(), ip)
	}
}

// The server keeps each MAC's known-machine answer in memory (a store read
// per packet was a twentieth of its CPU): the answer must follow the store
// the moment a change is applied, both ways.
func TestMachineAnswersFollowTheStore(t *testing.T) {
	r := newRig(t, rigOpts{})
	ctx := t.Context()
	r.ready(0)
	const client = 78
	offer := func() netip.Addr {
		t.Helper()
		o, _, err := r.send(0, discover(macOf(client), xidOf(client)), clientSrc, netip.Addr{})
		if o == nil {
			t.Fatalf("no offer: %v", err)
		}
		return wire.Addr(o.YourIPAddr)
	}
	dynamic := offer()
	if dynamic == (netip.Addr{}) {
		t.Fatal("no address offered to an unknown client")
	}
	if err := r.c.Apply0(ctx, &raftfsm.MachineCreate{ID: "m-0000000000ab", Name: "db1", MACs: []string{macOf(client).String()}, Now: r.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	fixed := netip.MustParseAddr("10.213.8.8")
	if err := r.c.Apply0(ctx, &raftfsm.AddressClaim{Address: raftfsm.Address{IP: fixed, How: store.HowStatic, Machine: "m-0000000000ab"}}); err != nil {
		t.Fatal(err)
	}
	if got := offer(); got != fixed {
		t.Fatalf("after its machine got %s: offered %s", fixed, got)
	}
	if err := r.c.Apply0(ctx, &raftfsm.AddressRelease{IP: fixed}); err != nil {
		t.Fatal(err)
	}
	if got := offer(); got == fixed {
		t.Fatalf("after %s was released: still offered it", fixed)
	}
}

func TestRelayedRequest(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.ready(0)
	relay := netip.MustParseAddr("10.213.0.254")
	d := discover(macOf(5), xidOf(5))
	d.GatewayIPAddr = wire.IP(relay)
	d.HopCount = 1
	opt82 := []byte{1, 4, 'p', 'o', 'r', 't', 2, 3, 's', 'w', '1'}
	d.Options[82] = opt82
	offer, to, err := r.send(0, d, netip.AddrPortFrom(relay, 67), r.nodes[0].addr)
	if offer == nil {
		t.Fatal(err)
	}
	if to != netip.AddrPortFrom(relay, 67) {
		t.Errorf("relayed offer to %s, want %s:67", to, relay)
	}
	if string(offer.Options[82]) != string(opt82) || !offer.GatewayIPAddr.Equal(wire.IP(relay)) {
		t.Errorf("option 82 / giaddr not echoed: %s", offer.Summary())
	}
	// A relay from a network we do not serve is dropped with a reason.
	d.GatewayIPAddr = wire.IP(netip.MustParseAddr("192.0.2.1"))
	if out, _, err := r.send(0, d, netip.MustParseAddrPort("192.0.2.1:67"), r.nodes[0].addr); out != nil || wire.DropReason(err) != wire.ReasonOtherSubnet {
		t.Fatalf("foreign relay: %v %v", out, err)
	}
	// The same relay naming our subnet with link selection (option 82
	// suboption 5, RFC 3527) or the client with subnet selection (option
	// 118, RFC 3011) is served from that subnet; the reply still goes to
	// the relay.
	foreign := netip.MustParseAddrPort("192.0.2.1:67")
	for i, sel := range []func(*dhcpv4.DHCPv4){
		func(p *dhcpv4.DHCPv4) { p.Options[82] = append([]byte{1, 2, 'p', '1', 5, 4}, relay.AsSlice()...) },
		func(p *dhcpv4.DHCPv4) { delete(p.Options, 82); p.Options[118] = relay.AsSlice() },
	} {
		d := discover(macOf(6+i), xidOf(6+i))
		d.GatewayIPAddr = wire.IP(foreign.Addr())
		sel(d)
		offer, to, err := r.send(0, d, foreign, r.nodes[0].addr)
		if offer == nil {
			t.Fatalf("selection %d: %v", i, err)
		}
		if !testSubnet.Contains(wire.Addr(offer.YourIPAddr)) || to != foreign {
			t.Errorf("selection %d: offered %s to %s, want an address of %s to %s", i, offer.YourIPAddr, to, testSubnet, foreign)
		}
	}
	// Link selection wins over giaddr: a relay in our subnet naming another
	// link is not served from ours.
	d = discover(macOf(8), xidOf(8))
	d.GatewayIPAddr = wire.IP(relay)
	d.Options[82] = []byte{5, 4, 198, 51, 100, 1}
	if out, _, err := r.send(0, d, netip.AddrPortFrom(relay, 67), r.nodes[0].addr); out != nil || wire.DropReason(err) != wire.ReasonOtherSubnet {
		t.Fatalf("link selection of a foreign link: %v %v", out, err)
	}
	// A truncated option 82 is no selection: giaddr decides.
	d.Options[82] = []byte{5, 4, 198, 51}
	if out, _, err := r.send(0, d, netip.AddrPortFrom(relay, 67), r.nodes[0].addr); out == nil {
		t.Fatalf("truncated option 82: %v", err)
	}
}

// Replies go where RFC 2131 §4.1 says: to a client without an address that
// did not ask for broadcast, unicast to its new address and MAC; with the
// broadcast flag, broadcast; relayed, to the relay; NAKs broadcast.
func TestReplyDestinations(t *testing.T) {
	r := newRig(t, rigOpts{})
	r.ready(0)
	feed := func(p *dhcpv4.DHCPv4, src netip.AddrPort) reply {
		t.Helper()
		rep, err := r.process(0, p, src, netip.Addr{}, wire.ServerPort)
		if rep.data == nil {
			t.Fatalf("no reply: %v", err)
		}
		return rep
	}
	d := discover(macOf(20), xidOf(20))
	rep := feed(d, clientSrc)
	offer := mustParse(t, rep.data)
	if want := netip.AddrPortFrom(wire.Addr(offer.YourIPAddr), wire.ClientPort); rep.to != want || rep.hw.String() != macOf(20).String() {
		t.Errorf("offer without the broadcast flag went to %s (MAC %s), want %s at %s", rep.to, rep.hw, want, macOf(20))
	}
	d = discover(macOf(21), xidOf(21))
	d.SetBroadcast()
	if rep := feed(d, clientSrc); rep.to.Addr() != broadcastAddr || rep.hw != nil {
		t.Errorf("offer with the broadcast flag went to %s (MAC %v), want broadcast", rep.to, rep.hw)
	}
	relay := netip.MustParseAddr("10.213.0.254")
	d = discover(macOf(22), xidOf(22))
	d.GatewayIPAddr = wire.IP(relay)
	if rep := feed(d, netip.AddrPortFrom(relay, 67)); rep.to != netip.AddrPortFrom(relay, wire.ServerPort) || rep.hw != nil {
		t.Errorf("relayed offer went to %s (MAC %v), want the relay", rep.to, rep.hw)
	}
	req := discover(macOf(23), xidOf(23))
	req.Options[53] = []byte{byte(dhcpv4.MessageTypeRequest)}
	req.Options[50] = netip.MustParseAddr("192.0.2.9").AsSlice()
	if rep := feed(req, clientSrc); wire.MessageType(mustParse(t, rep.data)) != dhcpv4.MessageTypeNak || rep.to.Addr() != broadcastAddr || rep.hw != nil {
		t.Errorf("NAK went to %s (MAC %v), want broadcast", rep.to, rep.hw)
	}
}

func mustParse(t *testing.T, b []byte) *dhcpv4.DHCPv4 {
	t.Helper()
	p, err := dhcpv4.FromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A service restarted in the same process after a clean stop (the
// appliance restarts it when the network model or an interface address
// changes) takes its lease blocks over: bound clients renew, new ones are
// served from the same block. After a crash the block is quarantined as
// before (it may hold grants never replicated).
func TestHandoffAcrossRestart(t *testing.T) {
	h := &Handoff{}
	// One block: the range is exactly BlockSize (32) addresses.
	r := newRig(t, rigOpts{first: "10.213.1.0", last: "10.213.1.31", tweak: func(c *Config) { c.Handoff = h }})
	r.ready(0)
	cfg := r.nodes[0].srv.cfg
	ack, err := r.dora(0, 1)
	if ack == nil {
		t.Fatalf("first client: %v", err)
	}
	ip := wire.Addr(ack.YourIPAddr)

	r.stop(0, false)
	r.start(0, cfg)
	r.ready(0)
	ren, _, err := r.send(0, renewal(wire.IP(ip), macOf(1), xidOf(100)), netip.AddrPortFrom(ip, 68), r.nodes[0].addr)
	if ren == nil || ren.MessageType() != dhcpv4.MessageTypeAck || wire.Addr(ren.YourIPAddr) != ip {
		t.Fatalf("renewal after a clean restart: %v %v", ren, err)
	}
	if a, err := r.dora(0, 2); a == nil || wire.Addr(a.YourIPAddr) == ip {
		t.Fatalf("new client after a clean restart: %v %v", a, err)
	}

	r.stop(0, true)
	r.start(0, cfg)
	eventually(t, 5*time.Second, "the crashed service's block quarantined", func() bool {
		a, err := r.dora(0, 3)
		return a == nil && wire.DropReason(err) == wire.ReasonNoAddress
	})
}
