package lease

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/rollcall/rollcall/store"
)

// Recover gives up every block node still holds from before this start.
// Leases it granted then may never have been replicated, so nobody may lease
// from those blocks until every such lease has ended: the quarantine is the
// earlier of the block's expiry and now + the longest lease time (a lease
// never outlives either), plus the skew margin.
//
// It first writes a no-op release as a barrier, so the local store has
// caught up with the cluster before it is read.
func Recover(ctx context.Context, rep Replicator, db *store.DB, node string, maxLease, margin time.Duration, now time.Time) (int, error) {
	if err := rep.ReleaseBlocks(ctx, nil, now); err != nil && !refused(err) {
		return 0, fmt.Errorf("recover lease blocks: catch up: %w", err)
	}
	groups := map[time.Time][]netip.Addr{}
	n := 0
	err := db.View(func(tx *store.Tx) error {
		blocks, err := tx.LeaseBlocks(netip.Prefix{})
		if err != nil {
			return err
		}
		for _, b := range blocks {
			if b.Node != node {
				continue
			}
			q := b.Expires
			if limit := now.Add(maxLease); limit.Before(q) {
				q = limit
			}
			q = q.Add(margin).Truncate(time.Second).Add(time.Second)
			groups[q] = append(groups[q], b.First)
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("recover lease blocks: %w", err)
	}
	for q, firsts := range groups {
		if err := rep.ReleaseBlocks(ctx, firsts, q); err != nil && !refused(err) {
			return 0, fmt.Errorf("recover lease blocks: release %d: %w", len(firsts), err)
		}
	}
	return n, nil
}

// Housekeep is the leader's round: remove ended leases, and release the
// blocks of nodes that stopped renewing them (expired more than margin
// ago). Every lease from such a block ended with it, so no quarantine is
// needed.
func Housekeep(ctx context.Context, hk Housekeeper, db *store.DB, margin time.Duration, now time.Time) (expired, reclaimed int, err error) {
	type span struct{ first, last netip.Addr }
	var spans []span
	dead := map[string][]netip.Addr{}
	err = db.View(func(tx *store.Tx) error {
		ranges, err := tx.Ranges(netip.Prefix{})
		if err != nil {
			return err
		}
		for _, r := range ranges {
			if r.Kind != store.RangeDynamic {
				continue
			}
			ended := 0
			if err := tx.Leases(r.First, r.Last, func(l store.Lease) bool {
				if !now.Before(l.Expires) {
					ended++
				}
				return true
			}); err != nil {
				return err
			}
			if ended > 0 {
				spans = append(spans, span{r.First, r.Last})
				expired += ended
			}
		}
		blocks, err := tx.LeaseBlocks(netip.Prefix{})
		if err != nil {
			return err
		}
		for _, b := range blocks {
			if b.Node != "" && !now.Before(b.Expires.Add(margin)) {
				dead[b.Node] = append(dead[b.Node], b.First)
				reclaimed++
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	for _, s := range spans {
		if e := hk.ExpireLeases(ctx, s.first, s.last); e != nil && !refused(e) {
			err = e
		}
	}
	for node, firsts := range dead {
		if e := hk.ReclaimBlocks(ctx, node, firsts, time.Time{}); e != nil && !refused(e) {
			err = e
		}
	}
	return expired, reclaimed, err
}
