package raftfsm

import "github.com/rollcall/rollcall/store"

// Precheck runs a command against the local store in a transaction that is
// rolled back, on the leader before it proposes: a command the state
// machine would refuse (a conflict, a missing record, an invalid value) is
// answered with that error and takes no Raft entry. The state machine
// checks again when it applies, since the store may change in between.
// Lease commands, the DHCP hot path, are not prechecked: their proposers
// check them. A tag's save or removal runs its checks only: every refusal
// comes before its first write, and a dry run of the writes would rewrite
// a fleet's machines under the store's write lock.
func (f *FSM) Precheck(cmd Command) error {
	switch t := cmd.Type(); {
	case t == TypeNoop, t == TypeBatch, t >= TypeLeaseBlockClaim && t <= TypeLeaseExpire:
		return nil
	}
	switch c := cmd.(type) {
	case *Audited:
		inner, err := Decode(c.Entry)
		if err != nil {
			return store.Errorf(store.ErrInvalid, "audited entry: %v", err)
		}
		if _, nested := inner.(*Audited); nested {
			return store.Errorf(store.ErrInvalid, "audited entry: already audited")
		}
		return f.Precheck(inner)
	case *TagPut:
		return f.db.DryRun(func(tx *store.Tx) error { _, err := c.check(tx); return err })
	case *TagDelete:
		return f.db.DryRun(c.check)
	}
	return f.db.DryRun(cmd.apply)
}
