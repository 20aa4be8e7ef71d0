package ipam_test

import (
	"fmt"
	"testing"

	"github.com/rollcall/rollcall/ipam"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// BenchmarkPickAtFill is the cost of one Pick and Claim in a static range
// that already holds 1k, 10k or 50k addresses (a /12, so that the
// benchmark's own claims never fill it). It must stay flat as the subnet
// fills: the allocation hints keep Pick from walking the used addresses.
// The operations run in write transactions of 1000, so that the figure is
// mostly IPAM's own cost rather than one fsync per claim.
//
//	go test -run '^$' -bench PickAtFill ./ipam/
func BenchmarkPickAtFill(b *testing.B) {
	for _, used := range []int{1_000, 10_000, 50_000} {
		b.Run(fmt.Sprintf("used=%d", used), func(b *testing.B) {
			c := newCopy(b)
			p := pfx("10.80.0.0/12")
			c.must(
				fabric("hall-a"), vlan("hall-a", 0),
				// The gateway lies inside the static range on purpose: it
				// is skipped on every walk and must not stall the hint.
				subnet("10.80.0.0/12", "10.80.0.1"),
				rng("10.80.0.0/12", store.RangeStatic, "10.80.0.1", "10.95.255.254"),
				&raftfsm.MachineCreate{ID: machineID(1), Now: t0},
			)
			pickClaim := func(n int) {
				if err := c.DB.Update(func(tx *store.Tx) error {
					c.Index++
					tx.Index = c.Index
					for range n {
						a, err := ipam.Pick(tx, p)
						if err != nil {
							return err
						}
						if err := ipam.Claim(tx, store.Address{IP: a, How: store.HowAuto, Machine: machineID(1), Created: t0}); err != nil {
							return fmt.Errorf("claim %s: %w", a, err)
						}
					}
					return tx.SetApplied(c.Index, 1)
				}); err != nil {
					b.Fatal(err)
				}
			}
			for done := 0; done < used; done += 1000 {
				pickClaim(min(1000, used-done))
			}
			b.ResetTimer()
			for left := b.N; left > 0; left -= 1000 {
				pickClaim(min(1000, left))
			}
			b.StopTimer()
			if n := len(c.used(p)); n != used+b.N {
				b.Fatalf("%d addresses used, want %d", n, used+b.N)
			}
		})
	}
}
