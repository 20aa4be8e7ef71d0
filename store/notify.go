package store

import "sync"

// Notifier wakes every waiter at once: Watch returns a channel that Notify
// closes. Take the channel before checking the condition, so a change that
// lands in between is not missed.
type Notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// Watch returns the channel the next Notify closes.
func (n *Notifier) Watch() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// Notify wakes everyone waiting on the current channel.
func (n *Notifier) Notify() {
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}

// tableBit is a table's bit in a change mask; tables without a bit of their
// own share the last one.
func tableBit(table string) uint32 {
	switch table {
	case TableCluster:
		return 1 << 0
	case TableImages:
		return 1 << 1
	case TableJobs:
		return 1 << 2
	case TableLeases:
		return 1 << 3
	case TableMachines:
		return 1 << 4
	case TableNetwork:
		return 1 << 5
	case TableTags:
		return 1 << 6
	case TableRacks:
		return 1 << 7
	case TableOSImages:
		return 1 << 8
	case TableDeployJobs:
		return 1 << 9
	case TableProfiles:
		return 1 << 10
	case TableOverlays:
		return 1 << 11
	case TableStatelessNodes:
		return 1 << 12
	case TableClusterVars:
		return 1 << 13
	}
	return 1 << 31
}

// tableNotifier wakes the waiters on some tables when a commit changed one
// of them. Waiters on the same set of tables share a channel, so a loop
// that stops waiting (a timeout) leaves nothing behind but that channel.
type tableNotifier struct {
	mu  sync.Mutex
	chs map[uint32]chan struct{}
}

func (n *tableNotifier) watch(mask uint32) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.chs == nil {
		n.chs = map[uint32]chan struct{}{}
	}
	ch := n.chs[mask]
	if ch == nil {
		ch = make(chan struct{})
		n.chs[mask] = ch
	}
	return ch
}

func (n *tableNotifier) notify(changed uint32) {
	if changed == 0 {
		return
	}
	n.mu.Lock()
	for mask, ch := range n.chs {
		if mask&changed != 0 {
			close(ch)
			delete(n.chs, mask)
		}
	}
	n.mu.Unlock()
}
