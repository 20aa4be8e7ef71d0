package store

import (
	"context"
	"time"
)

// Follow runs fn now, and again after every committed change to one of
// tables, every period (when period > 0), and whenever wake delivers, until
// ctx ends (it returns ctx.Err()) or fn returns an error (returned as it
// is). The watch is taken before each run, so a change committed while fn
// runs makes it run once more: nothing is missed. It is the one loop every
// service that follows the store uses (jobs, image sync, the DHCP network
// model).
func (d *DB) Follow(ctx context.Context, tables []string, period time.Duration, wake <-chan struct{}, fn func(context.Context) error) error {
	var tick <-chan time.Time
	if period > 0 {
		t := time.NewTicker(period)
		defer t.Stop()
		tick = t.C
	}
	for {
		changed := d.WatchTables(tables...)
		if err := fn(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-tick:
		case <-wake:
		}
	}
}
