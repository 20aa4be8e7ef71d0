package node

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/rollcall/rollcall/raftfsm/cluster"
)

// Every long-running part of a node (DHCP, TFTP, the HTTP listeners, BMC
// jobs, image sync, the export mirror, certificate renewal) is a function
// Run(ctx, log) error run by one supervisor: a part that returns before the
// node stops failed, and is started again after a backoff (1 s doubling to
// a minute), its state and last error kept for health and cluster status.
// Close cancels the context, waits for every part, and only then shuts
// Raft and the store.

// Backoff between a part's failure and its next start (vars: tests
// shorten them).
var (
	partBackoffMin = time.Second
	partBackoffMax = time.Minute
	// A part that ran this long before failing starts again at once.
	partHealthyAfter = time.Minute
)

// partError is an error with a message written for anyone who reads the
// node's health (unauthenticated): the cause goes to the log only.
type partError struct {
	msg   string
	cause error
}

func (e *partError) Error() string { return e.msg + ": " + e.cause.Error() }
func (e *partError) Unwrap() error { return e.cause }

func public(msg string, cause error) error { return &partError{msg: msg, cause: cause} }

// publicText is what health may say of a part's error.
func publicText(err error) string {
	var pe *partError
	if errors.As(err, &pe) {
		return pe.msg
	}
	return "failed; see the node's log"
}

type supervisor struct {
	ctx context.Context
	log *slog.Logger
	wg  sync.WaitGroup

	mu    sync.Mutex
	parts []*cluster.Part
}

func newSupervisor(ctx context.Context, log *slog.Logger) *supervisor {
	return &supervisor{ctx: ctx, log: log}
}

// run starts a part and keeps it running until the node stops.
func (s *supervisor) run(name string, fn func(context.Context, *slog.Logger) error) {
	p := &cluster.Part{Name: name, State: "starting", Since: time.Now().UTC()}
	s.mu.Lock()
	s.parts = append(s.parts, p)
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		log := s.log.With("part", name)
		backoff := partBackoffMin
		for {
			s.set(p, "running", "")
			began := time.Now()
			err := fn(s.ctx, log)
			if s.ctx.Err() != nil {
				s.set(p, "stopped", "")
				return
			}
			if err == nil {
				err = errors.New("stopped by itself")
			}
			if time.Since(began) > partHealthyAfter {
				backoff = partBackoffMin
			}
			log.Warn("part failed; starting it again", "err", err, "in", backoff)
			s.mu.Lock()
			p.Restarts++
			s.mu.Unlock()
			s.set(p, "failed", publicText(err))
			select {
			case <-s.ctx.Done():
				s.set(p, "stopped", "")
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, partBackoffMax)
		}
	}()
}

func (s *supervisor) set(p *cluster.Part, state, errText string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.State != state {
		p.Since = time.Now().UTC()
	}
	p.State, p.Error = state, errText
}

// status is every part's state, in start order.
func (s *supervisor) status() []cluster.Part {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]cluster.Part, len(s.parts))
	for i, p := range s.parts {
		out[i] = *p
	}
	return out
}

// wait returns once every part has returned (the context was canceled).
func (s *supervisor) wait() { s.wg.Wait() }
