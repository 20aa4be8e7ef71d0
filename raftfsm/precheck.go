package raftfsm

// Precheck runs a command against the local store in a transaction that is
// rolled back, on the leader before it proposes: a command the state
// machine would refuse (a conflict, a missing record, an invalid value) is
// answered with that error and takes no Raft entry. The state machine
// checks again when it applies, since the store may change in between.
// Lease commands, the DHCP hot path, are not prechecked: their proposers
// check them.
func (f *FSM) Precheck(cmd Command) error {
	switch t := cmd.Type(); {
	case t == TypeNoop, t == TypeBatch, t >= TypeLeaseBlockClaim && t <= TypeLeaseExpire:
		return nil
	}
	return f.db.DryRun(cmd.apply)
}
