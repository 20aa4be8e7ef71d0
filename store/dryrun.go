package store

import (
	"errors"

	bolt "go.etcd.io/bbolt"
)

var errDryRun = errors.New("store: dry run rolled back")

// DryRun runs fn in a read-write transaction on the local copy and always
// rolls it back: the proposer runs a command's apply this way first, so a
// command the state machine would refuse is answered at once and never
// takes a Raft entry. Nothing is written and no watcher is woken; Index is
// the next index, as the state machine would give it.
func (d *DB) DryRun(fn func(*Tx) error) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.db == nil {
		return errors.New("store is closed")
	}
	err := d.db.Update(func(btx *bolt.Tx) error {
		tx := &Tx{tx: btx, write: true}
		applied, _ := tx.Applied()
		tx.Index = applied + 1
		if err := fn(tx); err != nil {
			return err
		}
		return errDryRun
	})
	if errors.Is(err, errDryRun) {
		return nil
	}
	return err
}
