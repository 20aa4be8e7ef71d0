package appliance

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
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
	waitFor(t, "the third start", func() bool { return runs.Load() >= 3 })
	waitFor(t, "running", func() bool { return s.status()[0].State == "running" })
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

// Health lists the parts; a failed DHCP or TFTP makes the node unhealthy
// and says why, without the cause.
func TestHealthListsParts(t *testing.T) {
	n, _, _ := startTestNode(t)
	n.sup.run("tftp", func(ctx context.Context, _ *slog.Logger) error {
		return public("cannot listen for TFTP on 10.9.9.9:69", errors.New("bind: cannot assign requested address"))
	})
	waitFor(t, "the part to fail", func() bool {
		r := do(t, n, "GET", "/api/v1/health", nil)
		return r.status == http.StatusServiceUnavailable && strings.Contains(string(r.body), "cannot listen for TFTP")
	})
	r := do(t, n, "GET", "/api/v1/health", nil)
	if strings.Contains(string(r.body), "cannot assign") {
		t.Errorf("health shows a cause: %s", r)
	}
	for _, part := range []string{`"name":"dhcp"`, `"name":"bmc-jobs"`, `"name":"image-sync"`, `"name":"api"`} {
		if !strings.Contains(string(r.body), part) {
			t.Errorf("health lists no %s: %s", part, r)
		}
	}
}

// Close waits for every part before it closes the store under them.
func TestCloseWaitsForParts(t *testing.T) {
	n, _, _ := startTestNode(t)
	var finished atomic.Bool
	n.sup.run("slow", func(ctx context.Context, _ *slog.Logger) error {
		<-ctx.Done()
		time.Sleep(200 * time.Millisecond)
		// The store is still open here.
		if _, _, err := n.db.Applied(); err != nil {
			t.Errorf("the store closed under a running part: %v", err)
		}
		finished.Store(true)
		return ctx.Err()
	})
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if !finished.Load() {
		t.Fatal("Close returned before a part finished")
	}
}
