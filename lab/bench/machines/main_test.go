package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// scripted is a stand-in for the API (named as such: the retry rule is
// about the answers, which a real node gives only during an election it
// cannot be told to hold): it answers each request with the next of its
// answers, then 200 {"index": 9}.
func scripted(t *testing.T, answers ...string) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		w.Header().Set("Content-Type", "application/json")
		if i < len(answers) {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"code":"` + answers[i] + `","message":"` + answers[i] + `"}}`))
			return
		}
		w.Write([]byte(`{"index": 9}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestCallRetriesNoLeader(t *testing.T) {
	for name, tc := range map[string]struct {
		answers  []string
		wait     time.Duration
		requests int32
		code     string // the error's code, "" for success
	}{
		"an election":            {[]string{"no_leader", "no_leader", "no_leader"}, time.Minute, 4, ""},
		"no election":            {nil, time.Minute, 1, ""},
		"an unknown outcome":     {[]string{"unknown_outcome"}, time.Minute, 1, "unknown_outcome"},
		"no leader for too long": {[]string{"no_leader", "no_leader", "no_leader", "no_leader", "no_leader", "no_leader"}, 0, 1, "no_leader"},
	} {
		t.Run(name, func(t *testing.T) {
			defer func(w time.Duration) { noLeaderWait = w }(noLeaderWait)
			noLeaderWait = tc.wait
			srv, n := scripted(t, tc.answers...)
			c := &cluster{admin: "tok", httpClient: srv.Client()}
			var out struct{ Index uint64 }
			status, err := c.call(context.Background(), "POST", srv.URL+"/api/v1/tags", "admin", []byte(`{}`), &out)
			var ae *apiErr
			switch {
			case tc.code == "" && (err != nil || status != http.StatusOK || out.Index != 9):
				t.Errorf("= %d %v, index %d; want 200 with index 9", status, err, out.Index)
			case tc.code != "" && (!errors.As(err, &ae) || ae.code != tc.code || status != http.StatusServiceUnavailable):
				t.Errorf("= %d %v, want the 503 %s", status, err, tc.code)
			}
			if got := n.Load(); got != tc.requests {
				t.Errorf("%d requests, want %d", got, tc.requests)
			}
		})
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	for attempt, lim := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond} {
		for range 50 {
			if d := backoff(attempt); d < lim/2 || d > lim {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", attempt, d, lim/2, lim)
			}
		}
	}
	for _, attempt := range []int{6, 10, 63, 1000} {
		if d := backoff(attempt); d > 2*time.Second || d < time.Second {
			t.Errorf("backoff(%d) = %v, want within [1s, 2s]", attempt, d)
		}
	}
}

// A cancelled context stops the waiting at once.
func TestCallStopsWithItsContext(t *testing.T) {
	srv, n := scripted(t, "no_leader", "no_leader", "no_leader", "no_leader")
	c := &cluster{admin: "tok", httpClient: srv.Client()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.call(ctx, "GET", srv.URL, "admin", nil, nil); err == nil {
		t.Error("a cancelled call succeeded")
	}
	if got := n.Load(); got > 1 {
		t.Errorf("%d requests after the context ended", got)
	}
}
