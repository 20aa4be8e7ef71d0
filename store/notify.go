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
