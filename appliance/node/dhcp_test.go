package node_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/lab/testenv"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// needNet skips a test that needs a network namespace (root, ip) and the
// named tools, or fails it under CI=true (lab/testenv).
func needNet(t *testing.T, tools ...string) {
	t.Helper()
	testenv.NeedNetns(t, "veth pair, port 67", tools...)
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// A node whose network model says it serves a VLAN answers a real DHCP
// client there: the lease comes from one of its replicated blocks. The node
// side of a veth pair stays in this namespace with an address that exists
// only on that link; the client runs in a namespace the test creates.
func TestNodeServesDHCPFromTheModel(t *testing.T) {
	needNet(t, "udhcpc")
	var b [3]byte
	rand.Read(b[:])
	sfx := hex.EncodeToString(b[:])
	ns, srvIf, cliIf := "rc-cli-"+sfx, "rcs"+sfx, "rcc"+sfx
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run(); exec.Command("ip", "link", "del", srvIf).Run() })
	run(t, "ip", "link", "add", srvIf, "type", "veth", "peer", "name", cliIf)
	run(t, "ip", "link", "set", cliIf, "netns", ns)
	run(t, "ip", "addr", "add", "10.213.91.1/24", "dev", srvIf)
	run(t, "ip", "link", "set", srvIf, "up")
	run(t, "ip", "-n", ns, "link", "set", cliIf, "up")
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")

	node.SetDHCPAddrCheck(t, 200*time.Millisecond)
	n := nodetest.Start(t)
	ctx := context.Background()
	now := time.Now().UTC()
	p := netip.MustParsePrefix("10.213.91.0/24")
	for _, c := range []raftfsm.Command{
		&raftfsm.FabricPut{Fabric: raftfsm.Fabric{Name: "lab", Kind: store.FabricEthernet, Created: now}},
		&raftfsm.SubnetPut{Subnet: raftfsm.Subnet{CIDR: p, Fabric: "lab", Purpose: "provisioning", Gateway: netip.MustParseAddr("10.213.91.1"), Created: now}},
		&raftfsm.RangePut{Range: raftfsm.Range{Subnet: p, Kind: store.RangeDynamic, First: netip.MustParseAddr("10.213.91.100"), Last: netip.MustParseAddr("10.213.91.199"), Created: now}},
		// No -iface: the node finds the interface with an address in the subnet.
		&raftfsm.VLANPut{VLAN: raftfsm.VLAN{Fabric: "lab", VID: 0, DHCP: store.DHCPFull, Servers: []raftfsm.VLANServer{{Node: n.Name()}}, Created: now}},
	} {
		if _, err := n.Cluster().Apply(ctx, c); err != nil {
			t.Fatalf("%T: %v", c, err)
		}
	}
	nets, problems := n.DHCPNetworks(net.Interfaces)
	if len(nets) != 1 || nets[0].Iface != srvIf || len(problems) != 0 {
		t.Fatalf("networks %+v, problems %v", nets, problems)
	}
	// udhcpc -q prints "lease of IP obtained from SERVER"; the service
	// starts on the store change, so the first tries may find nobody.
	leaseFrom := func(server string) {
		t.Helper()
		var out []byte
		var err error
		for try := 0; try < 20; try++ {
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			out, err = exec.CommandContext(cctx, "ip", "netns", "exec", ns, "udhcpc", "-i", cliIf, "-n", "-q", "-f", "-t", "5", "-T", "1", "-s", "/bin/true").CombinedOutput()
			cancel()
			if err == nil && strings.Contains(string(out), "obtained from "+server) {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		t.Fatalf("udhcpc, want a lease from %s: %v\n%s", server, err, out)
	}
	leaseFrom("10.213.91.1")
	var mac string
	if hw, err := exec.Command("ip", "-n", ns, "-o", "link", "show", cliIf).Output(); err == nil {
		f := strings.Fields(string(hw))
		for i, w := range f {
			if w == "link/ether" && i+1 < len(f) {
				mac = f[i+1]
			}
		}
	}
	nodetest.WaitFor(t, "the lease in the store", func() bool {
		var leases []store.Lease
		n.Store().View(func(tx *store.Tx) error { leases, _ = tx.LeasesByMAC(mac); return nil })
		return len(leases) == 1 && p.Contains(leases[0].IP) && leases[0].Node == n.Name()
	})

	// The interface's address moves: the service follows (it answers from
	// the new address; from the old one its replies could not be sent).
	run(t, "ip", "addr", "del", "10.213.91.1/24", "dev", srvIf)
	run(t, "ip", "addr", "add", "10.213.91.2/24", "dev", srvIf)
	leaseFrom("10.213.91.2")
}
