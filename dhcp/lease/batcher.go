package lease

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/rollcall/rollcall/store"
)

// BatchStats is what the batcher reports to metrics.
type BatchStats interface {
	BatchSent(entries int, d time.Duration)
	BatchFailed()
	BatchRefused()
	Pending(n int)
}

// Batcher queues lease changes and sightings and sends them through the
// Replicator, one command per batch: every Interval, or as soon as Max
// entries wait. A failed send keeps its entries (merged with newer ones) and
// is retried; serving never waits for it. Grants coalesce per address and
// sightings per MAC, so a long partition costs memory bounded by the
// addresses and clients served, not by the packets.
type Batcher struct {
	rep      Replicator
	log      *slog.Logger
	interval time.Duration
	max      int
	timeout  time.Duration
	stats    BatchStats

	mu       sync.Mutex
	grants   map[netip.Addr]Grant
	releases []pendingRelease
	seen     map[string]store.Seen
	kick     chan struct{}
	flushed  chan struct{} // closed and replaced after every successful send
}

type pendingRelease struct {
	r    Release
	done func() // runs once the release is replicated
}

// NewBatcher makes a batcher; call Run to send.
func NewBatcher(rep Replicator, log *slog.Logger, interval time.Duration, max int, stats BatchStats) *Batcher {
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	if max <= 0 {
		max = 512
	}
	return &Batcher{
		rep: rep, log: log, interval: interval, max: max, timeout: 10 * time.Second, stats: stats,
		grants: map[netip.Addr]Grant{}, seen: map[string]store.Seen{},
		kick: make(chan struct{}, 1), flushed: make(chan struct{}),
	}
}

func (b *Batcher) pendingLocked() int { return len(b.grants) + len(b.releases) + len(b.seen) }

func (b *Batcher) added() {
	n := b.pendingLocked()
	if b.stats != nil {
		b.stats.Pending(n)
	}
	if n >= b.max {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// Grant queues a grant or renewal.
func (b *Batcher) Grant(g Grant) {
	b.mu.Lock()
	b.grants[g.IP] = g
	b.added()
	b.mu.Unlock()
}

// Release queues a release or decline; done runs once it is replicated.
func (b *Batcher) Release(r Release, done func()) {
	b.mu.Lock()
	b.releases = append(b.releases, pendingRelease{r, done})
	b.added()
	b.mu.Unlock()
}

// Seen queues a sighting.
func (b *Batcher) Seen(s store.Seen) {
	b.mu.Lock()
	if old, ok := b.seen[s.MAC]; !ok || !old.Last.After(s.Last) {
		b.seen[s.MAC] = s
	}
	b.added()
	b.mu.Unlock()
}

// Discard forgets everything pending (tests: a crash).
func (b *Batcher) Discard() {
	b.mu.Lock()
	b.grants, b.releases, b.seen = map[netip.Addr]Grant{}, nil, map[string]store.Seen{}
	b.mu.Unlock()
}

// Pending returns how many entries wait.
func (b *Batcher) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pendingLocked()
}

// Flushed returns a channel closed after the next successful send.
func (b *Batcher) Flushed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushed
}

// take removes up to max entries: releases first (they free addresses),
// then grants, then sightings.
func (b *Batcher) take() ([]Grant, []pendingRelease, []store.Seen) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max
	n := min(room, len(b.releases))
	rel := b.releases[:n:n]
	b.releases = append([]pendingRelease(nil), b.releases[n:]...)
	room -= n
	var gs []Grant
	for ip, g := range b.grants {
		if room == 0 {
			break
		}
		gs = append(gs, g)
		delete(b.grants, ip)
		room--
	}
	var ss []store.Seen
	for mac, s := range b.seen {
		if room == 0 {
			break
		}
		ss = append(ss, s)
		delete(b.seen, mac)
		room--
	}
	return gs, rel, ss
}

// putBack returns entries of a failed send, unless newer ones replaced them.
func (b *Batcher) putBack(gs []Grant, rel []pendingRelease, ss []store.Seen) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, g := range gs {
		if _, newer := b.grants[g.IP]; !newer {
			b.grants[g.IP] = g
		}
	}
	b.releases = append(rel, b.releases...)
	for _, s := range ss {
		if _, newer := b.seen[s.MAC]; !newer {
			b.seen[s.MAC] = s
		}
	}
	if b.stats != nil {
		b.stats.Pending(b.pendingLocked())
	}
}

// Flush sends everything pending now; it returns the first error.
func (b *Batcher) Flush(ctx context.Context) error { return b.flush(ctx, true) }

// flush sends batches; unless all, it stops once less than a full batch
// is left (the ticker sends the rest), so a busy server sends few, full
// batches instead of many small ones.
func (b *Batcher) flush(ctx context.Context, all bool) error {
	for first := true; ; first = false {
		if !first && !all && b.Pending() < b.max {
			return nil
		}
		gs, rel, ss := b.take()
		if len(gs)+len(rel)+len(ss) == 0 {
			return nil
		}
		rs := make([]Release, len(rel))
		for i, r := range rel {
			rs[i] = r.r
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, b.timeout)
		err := b.rep.Batch(cctx, gs, rs, ss)
		cancel()
		if err != nil && !refused(err) {
			b.putBack(gs, rel, ss)
			if b.stats != nil {
				b.stats.BatchFailed()
			}
			return err
		}
		if err != nil {
			// Applied, with some entries refused by the state machine (a
			// grant from a block that expired while this node was cut off).
			b.log.Warn("lease batch partly refused", "err", err)
			if b.stats != nil {
				b.stats.BatchRefused()
			}
		}
		if b.stats != nil {
			b.stats.BatchSent(len(gs)+len(rs)+len(ss), time.Since(start))
		}
		for _, r := range rel {
			if r.done != nil {
				r.done()
			}
		}
		b.mu.Lock()
		close(b.flushed)
		b.flushed = make(chan struct{})
		if b.stats != nil {
			b.stats.Pending(b.pendingLocked())
		}
		b.mu.Unlock()
	}
}

func refused(err error) bool {
	return errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrInvalid)
}

// Run sends batches until ctx ends, then makes one last bounded attempt.
func (b *Batcher) Run(ctx context.Context) {
	t := time.NewTicker(b.interval)
	defer t.Stop()
	failures := 0
	for {
		kick := b.kick
		if failures > 0 {
			kick = nil // after a failure, retry on the ticker only
		}
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := b.Flush(fctx); err != nil && b.Pending() > 0 {
				b.log.Warn("lease batch not sent before stopping", "pending", b.Pending(), "err", err)
			}
			cancel()
			return
		case <-t.C:
		case <-kick:
		}
		if err := b.flush(ctx, false); err != nil {
			failures++
			if failures == 1 || failures%50 == 0 {
				b.log.Warn("lease batch not replicated; serving on, will retry", "pending", b.Pending(), "failures", failures, "err", err)
			}
			continue
		}
		if failures > 0 {
			b.log.Info("lease batches replicated again", "after_failures", failures)
			failures = 0
		}
	}
}
