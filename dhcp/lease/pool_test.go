package lease_test

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/rollcall/rollcall/dhcp/lease"
	"github.com/rollcall/rollcall/lab/bench/dhcp/replica"
	"github.com/rollcall/rollcall/store"
)

// A pool below its low water mark on a range with no block left to claim
// scans the store once, then not again on every kick (every DISCOVER kicks a
// pool that is low): the scan was a fifth of the server's CPU in
// lab/bench/dhcp once its range filled up.
func TestExhaustedRangeIsNotRescannedPerKick(t *testing.T) {
	ctx := context.Background()
	c, err := replica.New(t.TempDir(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	subnet := netip.MustParsePrefix("10.77.0.0/24")
	if err := c.Network(ctx,
		store.VLAN{Fabric: "f", DHCP: store.DHCPFull, MTU: 1500, Servers: []store.VLANServer{{Node: "n1", Iface: "eth0"}}},
		store.Subnet{CIDR: subnet, Fabric: "f", Purpose: "provisioning"},
		store.Range{Subnet: subnet, Kind: store.RangeDynamic, First: netip.MustParseAddr("10.77.0.64"), Last: netip.MustParseAddr("10.77.0.127")},
	); err != nil {
		t.Fatal(err)
	}
	p := lease.NewPool(lease.PoolConfig{
		Node: "n1", Subnet: subnet, DB: c.DB(0), Rep: c.Node(0),
		BlockSize: 64, LowWater: 128, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	p.SetReady()
	p.Maintain(ctx)
	if blocks, free := p.Snapshot(); blocks != 1 || free != 64 {
		t.Fatalf("after the first claim: %d blocks, %d free; want the range's one block", blocks, free)
	}
	scans := p.Scans()
	for range 100 {
		p.Kick()
		p.Maintain(ctx)
	}
	if got := p.Scans() - scans; got > 1 {
		t.Errorf("%d store scans for 100 kicks on an exhausted range, want at most 1", got)
	}
}
