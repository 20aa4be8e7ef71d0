package lease_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

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

// A pool handing out addresses fast keeps about two seconds of that demand
// free, not just its low water mark: with 64-address blocks and a mark of
// 128, 10,000 new clients a second emptied it between two block claims.
func TestPoolKeepsAheadOfDemand(t *testing.T) {
	ctx := context.Background()
	c, err := replica.New(t.TempDir(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	subnet := netip.MustParsePrefix("10.78.0.0/20")
	if err := c.Network(ctx,
		store.VLAN{Fabric: "f", DHCP: store.DHCPFull, MTU: 1500, Servers: []store.VLANServer{{Node: "n1", Iface: "eth0"}}},
		store.Subnet{CIDR: subnet, Fabric: "f", Purpose: "provisioning"},
		store.Range{Subnet: subnet, Kind: store.RangeDynamic, First: netip.MustParseAddr("10.78.0.1"), Last: netip.MustParseAddr("10.78.15.254")},
	); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	p := lease.NewPool(lease.PoolConfig{
		Node: "n1", Subnet: subnet, DB: c.DB(0), Rep: c.Node(0),
		BlockSize: 64, LowWater: 128, Now: func() time.Time { return now },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	p.SetReady()
	p.Maintain(ctx)
	if _, free := p.Snapshot(); free < 128 || free > 256 {
		t.Fatalf("idle pool: %d free, want its low water mark (128) to a block over", free)
	}
	for i := range 120 {
		if _, _, ok := p.Offer(fmt.Sprintf("52:54:00:00:%02x:%02x", i/256, i%256), "", netip.Addr{}); !ok {
			t.Fatalf("offer %d refused", i)
		}
	}
	now = now.Add(time.Second)
	p.Maintain(ctx)
	if _, free := p.Snapshot(); free < 240 {
		t.Errorf("after 120 new clients in a second: %d free, want at least two seconds of that (240)", free)
	}
}

// Requests a dry pool had to refuse count as demand too: a pool that only
// counted what it handed out would never learn how short it fell.
func TestDryPoolLearnsDemand(t *testing.T) {
	ctx := context.Background()
	c, err := replica.New(t.TempDir(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	subnet := netip.MustParsePrefix("10.79.0.0/20")
	if err := c.Network(ctx,
		store.VLAN{Fabric: "f", DHCP: store.DHCPFull, MTU: 1500, Servers: []store.VLANServer{{Node: "n1", Iface: "eth0"}}},
		store.Subnet{CIDR: subnet, Fabric: "f", Purpose: "provisioning"},
		store.Range{Subnet: subnet, Kind: store.RangeDynamic, First: netip.MustParseAddr("10.79.0.1"), Last: netip.MustParseAddr("10.79.15.254")},
	); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	p := lease.NewPool(lease.PoolConfig{
		Node: "n1", Subnet: subnet, DB: c.DB(0), Rep: c.Node(0),
		BlockSize: 64, LowWater: 64, Now: func() time.Time { return now },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	p.SetReady()
	p.Maintain(ctx)
	refused := 0
	for i := range 300 {
		if _, _, ok := p.Offer(fmt.Sprintf("52:54:00:01:%02x:%02x", i/256, i%256), "", netip.Addr{}); !ok {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("the pool never ran dry; the test needs it to")
	}
	now = now.Add(time.Second)
	p.Maintain(ctx)
	if _, free := p.Snapshot(); free < 600 {
		t.Errorf("after 300 requests in a second (%d refused): %d free, want two seconds of them (600)", refused, free)
	}
}
