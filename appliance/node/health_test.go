package node_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/nodetest"
)

// Health lists the parts; a failed DHCP or TFTP makes the node unhealthy
// and says why, without the cause.
func TestHealthListsParts(t *testing.T) {
	n := nodetest.Start(t)
	n.RunPart("tftp", func(ctx context.Context, _ *slog.Logger) error {
		return node.PublicError("cannot listen for TFTP on 10.9.9.9:69", errors.New("bind: cannot assign requested address"))
	})
	nodetest.WaitFor(t, "the part to fail", func() bool {
		r := n.Do(t, "GET", "/api/v1/health", nil)
		return r.Status == http.StatusServiceUnavailable && strings.Contains(string(r.Body), "cannot listen for TFTP")
	})
	r := n.Do(t, "GET", "/api/v1/health", nil)
	if strings.Contains(string(r.Body), "cannot assign") {
		t.Errorf("health shows a cause: %s", r)
	}
	for _, part := range []string{`"name":"dhcp"`, `"name":"bmc-jobs"`, `"name":"image-sync"`, `"name":"api"`} {
		if !strings.Contains(string(r.Body), part) {
			t.Errorf("health lists no %s: %s", part, r)
		}
	}
}

// Close waits for every part before it closes the store under them.
func TestCloseWaitsForParts(t *testing.T) {
	n := nodetest.Start(t)
	var finished atomic.Bool
	n.RunPart("slow", func(ctx context.Context, _ *slog.Logger) error {
		<-ctx.Done()
		time.Sleep(200 * time.Millisecond)
		// The store is still open here.
		if _, _, err := n.Store().Applied(); err != nil {
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
