package node

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// The node keeps every machine's inventory facts decoded (tagrule's
// FactsCache), for the tag rules its API evaluates when a tag is saved:
// filled for all machines when the node starts, then for the machines
// whose reports the change log names after each commission (a re-commission changes the
// machine's Commissioned time, which the cache keys on). Passes are paced,
// so a burst of commissions costs one pass, and chunked, so no read
// transaction stays open long.
const (
	factsPace  = time.Second
	factsChunk = 256
)

func (n *Node) warmTagFacts(ctx context.Context, log *slog.Logger) error {
	var last uint64
	first := true
	return n.db.Follow(ctx, []string{store.TableMachines}, 0, nil, func(ctx context.Context) error {
		var ids []string
		err := n.db.View(func(tx *store.Tx) error {
			cur := tx.TableIndex(store.TableMachines)
			if !first {
				changes, err := tx.Changes(last, 0)
				if err == nil {
					seen := map[string]bool{}
					for _, ch := range changes {
						// Only a new report changes a machine's facts: a
						// tag save that rewrote 10,000 machines is not a
						// reason to read them all again.
						if ch.Table == store.ChangesInventory && !seen[ch.Key] {
							seen[ch.Key] = true
							ids = append(ids, ch.Key)
						}
					}
					last = cur
					return nil
				}
				if !errors.Is(err, store.ErrChangesTruncated) {
					return err
				}
			}
			ms, err := tx.Machines(store.MachineFilter{})
			if err != nil {
				return err
			}
			for _, m := range ms {
				ids = append(ids, m.ID)
			}
			first, last = false, cur
			return nil
		})
		for len(ids) > 0 && err == nil && ctx.Err() == nil {
			chunk := ids[:min(len(ids), factsChunk)]
			ids = ids[len(chunk):]
			err = n.db.View(func(tx *store.Tx) error { return raftfsm.WarmFacts(tx, chunk, n.facts) })
		}
		if err != nil && ctx.Err() == nil {
			// The cache fills on first use too: a pass that fails costs a
			// slower tag save, nothing more.
			log.Warn("tag facts cache", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(factsPace):
		}
		return nil
	})
}
