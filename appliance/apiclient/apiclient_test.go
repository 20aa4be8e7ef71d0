package apiclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestDoRetriesNoLeaderAndDecodesErrors(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-1234567890abcdef" {
			w.WriteHeader(401)
			w.Write([]byte(`{"error":{"code":"unauthorized","message":"wrong admin token"}}`))
			return
		}
		switch r.URL.Path {
		case "/flaky":
			if calls.Add(1) < 3 {
				w.WriteHeader(503)
				w.Write([]byte(`{"error":{"code":"no_leader","message":"no leader; retry"}}`))
				return
			}
			w.Write([]byte(`{"ok":true}`))
		case "/conflict":
			w.WriteHeader(409)
			w.Write([]byte(`{"error":{"code":"conflict","message":"name taken"}}`))
		case "/plain":
			w.WriteHeader(502)
			w.Write([]byte("bad gateway"))
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, "tok-1234567890abcdef", "")
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ OK bool }
	if err := c.Do(context.Background(), "POST", "/flaky", map[string]int{"a": 1}, &v); err != nil || !v.OK || calls.Load() != 3 {
		t.Fatalf("no-leader retry: %v %+v after %d calls", err, v, calls.Load())
	}
	err = c.Do(context.Background(), "GET", "/conflict", nil, nil)
	var e *Error
	if !errorsAs(err, &e) || e.Status != 409 || e.Code != "conflict" || err.Error() != "name taken" {
		t.Fatalf("conflict: %#v", err)
	}
	if err := c.Do(context.Background(), "GET", "/plain", nil, nil); err == nil || !strings.Contains(err.Error(), "bad gateway") {
		t.Fatalf("plain error: %v", err)
	}
	var raw json.RawMessage
	calls.Store(10)
	if err := c.Do(context.Background(), "GET", "/flaky", nil, &raw); err != nil || string(raw) != `{"ok":true}` {
		t.Fatalf("raw: %s %v", raw, err)
	}
	bad, _ := New(srv.URL, "wrong-token", "")
	if err := bad.Do(context.Background(), "GET", "/flaky", nil, nil); !Unauthorized(err) {
		t.Fatalf("unauthorized: %v", err)
	}
	// A no-leader answer that lasts is given up after NoLeaderRetry.
	calls.Store(-1000)
	c.NoLeaderRetry = 300 * time.Millisecond
	if err := c.Do(context.Background(), "GET", "/flaky", nil, nil); !NoLeader(err) {
		t.Fatalf("lasting no leader: %v", err)
	}
	for _, u := range []string{"", "ftp://x", "http://"} {
		if _, err := New(u, "t", ""); err == nil {
			t.Errorf("url %q accepted", u)
		}
	}
}

func errorsAs(err error, e **Error) bool {
	x, ok := err.(*Error)
	*e = x
	return ok
}
