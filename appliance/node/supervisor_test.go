package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A part that fails is started again with backoff, its state and public
// error kept; the cause never reaches the status.
func TestSupervisorRestartsFailedParts(t *testing.T) {
	saved := partBackoffMin
	partBackoffMin = 10 * time.Millisecond
	t.Cleanup(func() { partBackoffMin = saved })
	ctx, cancel := context.WithCancel(context.Background())
	s := newSupervisor(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var runs atomic.Int32
	s.run("flaky", func(ctx context.Context, _ *slog.Logger) error {
		if runs.Add(1) < 3 {
			return public("cannot bind port 67", errors.New("secret-cause: address already in use"))
		}
		<-ctx.Done()
		return ctx.Err()
	})
	for deadline := time.Now().Add(30 * time.Second); runs.Load() < 3 || s.status()[0].State != "running"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the part was not running after a third start: %d starts, %+v", runs.Load(), s.status()[0])
		}
	}
	st := s.status()[0]
	if st.Restarts != 2 || st.Error != "" {
		t.Errorf("status %+v, want 2 restarts and no error while running", st)
	}
	cancel()
	s.wait()
	if st := s.status()[0]; st.State != "stopped" {
		t.Errorf("after stop: %+v", st)
	}
	if got := publicText(errors.New("secret-cause")); strings.Contains(got, "secret") {
		t.Errorf("an error without a public message showed its cause: %q", got)
	}
}
