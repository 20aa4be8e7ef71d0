package dhcp

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/net/ipv4"

	"github.com/rollcall/rollcall/dhcp/wire"
	"github.com/rollcall/rollcall/lab/bench/dhcp/replica"
	"github.com/rollcall/rollcall/store"
)

// TestProxyBesideDnsmasq: dnsmasq hands out addresses on a LAN (a bridge
// in its own namespace), this server runs proxy DHCP on the same LAN, and a
// UEFI PXE client gets its address from dnsmasq and its boot file from us,
// both on port 67 (the proxy OFFER) and on 4011 (the boot-server ACK).
func TestProxyBesideDnsmasq(t *testing.T) {
	need(t, "dnsmasq")
	sw, cli, peer, us := newNS(t, "sw"), newNS(t, "pcli"), newNS(t, "peer"), newNS(t, "us")
	sw.ip(t, "link", "add", "br0", "type", "bridge")
	sw.ip(t, "link", "set", "br0", "up")
	for _, x := range []struct {
		ns         *testNS
		name, addr string
	}{{cli, "cli0", ""}, {peer, "peer0", "10.213.2.2/24"}, {us, "us0", "10.213.2.3/24"}} {
		port := "p-" + x.name
		veth(t, x.ns, x.name, x.addr, sw, port, "")
		sw.ip(t, "link", "set", port, "master", "br0")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dmOut := startDnsmasq(t, peer, "peer0", "10.213.2.100,10.213.2.150,255.255.255.0,1h")

	c, err := replica.New(t.TempDir(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	subnet := netip.MustParsePrefix("10.213.2.0/24")
	if err := c.Network(ctx, store.VLAN{Fabric: "lan", VID: 0, DHCP: store.DHCPProxy, Servers: []store.VLANServer{{Node: "n1", Iface: "us0"}}},
		store.Subnet{CIDR: subnet, Fabric: "lan", Purpose: "provisioning"}); err != nil {
		t.Fatal(err)
	}
	serveIn(t, us, Config{Node: "n1", DB: c.DB(0), Replicator: c.Node(0)}, testLog(t))

	type result struct {
		replies []*dhcpv4.DHCPv4
		err     error
	}
	mac := mustMAC(t, cli)
	uefi := pxeClients()["uefi-x64"]
	uefi.ClientHWAddr = mac
	results := make(chan result, 1)
	inNS(t, cli, func() {
		var res result
		defer func() { results <- res }()
		pc, err := listenClient("cli0", 68)
		if err != nil {
			res.err = err
			return
		}
		defer pc.Close()
		bcast := &net.UDPAddr{IP: net.IPv4bcast, Port: 67}
		collect := func(xid dhcpv4.TransactionID, d time.Duration) []*dhcpv4.DHCPv4 {
			var out []*dhcpv4.DHCPv4
			buf := make([]byte, 1500)
			end := time.Now().Add(d)
			for time.Now().Before(end) {
				_ = pc.SetReadDeadline(end)
				n, _, _, err := pc.ReadFrom(buf)
				if err != nil {
					break
				}
				if p, err := dhcpv4.FromBytes(buf[:n]); err == nil && p.TransactionID == xid && p.OpCode == dhcpv4.OpcodeBootReply {
					out = append(out, p)
				}
			}
			return out
		}
		// DISCOVER: two OFFERs, the address from dnsmasq, the boot file from us.
		var offers []*dhcpv4.DHCPv4
		for try := 0; try < 5 && len(offers) < 2; try++ {
			if _, err := pc.WriteTo(uefi.ToBytes(), nil, bcast); err != nil {
				res.err = err
				return
			}
			offers = collect(uefi.TransactionID, 2*time.Second)
		}
		res.replies = append(res.replies, offers...)
		var fromDnsmasq *dhcpv4.DHCPv4
		for _, o := range offers {
			if wire.Addr(o.YourIPAddr).IsValid() {
				fromDnsmasq = o
			}
		}
		if fromDnsmasq == nil {
			return
		}
		req := requestFor(fromDnsmasq, uefi.TransactionID)
		req.ClientHWAddr = mac
		req.Flags = 0x8000
		for k, v := range uefi.Options {
			if k != 53 && k != 50 && k != 54 {
				req.Options[k] = v
			}
		}
		if _, err := pc.WriteTo(req.ToBytes(), nil, bcast); err != nil {
			res.err = err
			return
		}
		acks := collect(uefi.TransactionID, 2*time.Second)
		res.replies = append(res.replies, acks...)
		if len(acks) == 0 || acks[0].MessageType() != dhcpv4.MessageTypeAck {
			return
		}
		ip := wire.Addr(acks[0].YourIPAddr)
		if out, err := exec.Command("ip", "addr", "add", ip.String()+"/24", "dev", "cli0").CombinedOutput(); err != nil {
			res.err = &net.AddrError{Err: string(out), Addr: ip.String()}
			return
		}
		// The boot-server REQUEST to the proxy on 4011, from the new address.
		bs := withType(req, dhcpv4.MessageTypeRequest)
		bs.ClientIPAddr = wire.IP(ip)
		bs.Flags = 0
		delete(bs.Options, 50)
		delete(bs.Options, 54)
		var xid dhcpv4.TransactionID
		copy(xid[:], "rc40")
		bs.TransactionID = xid
		time.Sleep(100 * time.Millisecond) // address settles (no DAD for IPv4, but routes)
		if _, err := pc.WriteTo(bs.ToBytes(), &ipv4.ControlMessage{}, &net.UDPAddr{IP: net.IP{10, 213, 2, 3}, Port: 4011}); err != nil {
			res.err = err
			return
		}
		res.replies = append(res.replies, collect(xid, 2*time.Second)...)
	})
	res := <-results
	if res.err != nil {
		t.Fatal(res.err)
	}
	var dnsOffer, proxyOffer, dnsAck, proxyAck *dhcpv4.DHCPv4
	for _, p := range res.replies {
		sid := wire.Addr(p.ServerIdentifier()).String()
		switch {
		case p.MessageType() == dhcpv4.MessageTypeOffer && sid == "10.213.2.2":
			dnsOffer = p
		case p.MessageType() == dhcpv4.MessageTypeOffer && sid == "10.213.2.3":
			proxyOffer = p
		case p.MessageType() == dhcpv4.MessageTypeAck && sid == "10.213.2.2":
			dnsAck = p
		case p.MessageType() == dhcpv4.MessageTypeAck && sid == "10.213.2.3":
			proxyAck = p
		}
	}
	if dnsOffer == nil || dnsAck == nil {
		t.Fatalf("no address from dnsmasq (offer %v, ack %v)\n%s", dnsOffer, dnsAck, dmOut.String())
	}
	if !subnet.Contains(wire.Addr(dnsAck.YourIPAddr)) {
		t.Errorf("dnsmasq gave %s", dnsAck.YourIPAddr)
	}
	for what, p := range map[string]*dhcpv4.DHCPv4{"proxy OFFER on 67": proxyOffer, "proxy ACK on 4011": proxyAck} {
		if p == nil {
			t.Errorf("no %s", what)
			continue
		}
		if !p.YourIPAddr.IsUnspecified() || p.BootFileName != "ipxe.efi" || !p.ServerIPAddr.Equal(net.IP{10, 213, 2, 3}) ||
			string(p.Options[60]) != "PXEClient" || string(p.Options[43]) != "\x06\x01\x08\xff" || string(p.Options[97]) != string(uefi.Options[97]) {
			t.Errorf("%s is not a proxy boot answer: %s", what, p.Summary())
		}
	}
	// The sighting is recorded with the interface and VLAN it came through.
	eventually(t, 5*time.Second, "the client's sighting replicated", func() bool {
		var s store.Seen
		_ = c.DB(0).View(func(tx *store.Tx) error { s, _ = tx.SeenMAC(mac.String()); return nil })
		return s.Node == "n1" && s.Interface == "us0" && s.VLAN == "lan/0" && s.Arch == 7
	})
}

func mustMAC(t *testing.T, ns *testNS) net.HardwareAddr {
	out := ns.ip(t, "-o", "link", "show", "cli0")
	i := strings.Index(out, "link/ether ")
	if i < 0 {
		t.Fatalf("no MAC in %q", out)
	}
	hw, err := net.ParseMAC(out[i+11 : i+28])
	if err != nil {
		t.Fatal(err)
	}
	return hw
}
