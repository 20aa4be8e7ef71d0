package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/store"
)

var errNoLeader = errors.New("no leader")

func TestFailSaysOnlyThePublicText(t *testing.T) {
	secret := errors.New("dial 10.0.0.9:623: password hunter2 refused")
	cases := map[string]struct {
		err     error
		status  int
		code    string
		message string
	}{
		"public":         {Errorf(http.StatusTooManyRequests, "too_many_watchers", "retry in %ds", 5), 429, "too_many_watchers", "retry in 5s"},
		"bad request":    {BadRequest("field %q must be a string", "mac"), 400, "bad_request", `field "mac" must be a string`},
		"wrapped cause":  {Wrap(502, "bmc", "the BMC did not answer", secret), 502, "bmc", "the BMC did not answer"},
		"store refusal":  {fmt.Errorf("commission: %w", store.Errorf(store.ErrConflict, "mac %s belongs to m-1", "52:54:00:00:00:01")), 409, "conflict", "mac 52:54:00:00:00:01 belongs to m-1"},
		"store notfound": {store.Errorf(store.ErrNotFound, "machine %q", "x"), 404, "not_found", `machine "x": not found`},
		"bare sentinel":  {fmt.Errorf("lookup %v: %w", secret, store.ErrNotFound), 404, "not_found", "not found"},
		"classifier":     {fmt.Errorf("apply: %w", errNoLeader), 503, "no_leader", "no leader; retry"},
		"internal":       {fmt.Errorf("read: %w", secret), 500, "internal", "internal error (logged on the node)"},
		"caller left":    {fmt.Errorf("watch: %w", context.Canceled), 499, "canceled", "request canceled"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			f := &Failer{Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				Classifiers: []Classifier{func(err error) *Error {
					if errors.Is(err, errNoLeader) {
						return &Error{Status: 503, Code: "no_leader", Message: "no leader; retry", cause: err}
					}
					return nil
				}}}
			gin.SetMode(gin.ReleaseMode)
			r := gin.New()
			r.Use(RequestID)
			r.GET("/x/:id", f.Handle(func(*gin.Context) error { return tc.err }))
			w := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/x/1", nil)
			req.Header.Set("X-Request-ID", "req-42")
			r.ServeHTTP(w, req)
			if w.Code != tc.status {
				t.Errorf("status %d, want %d", w.Code, tc.status)
			}
			var body struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("answer %q: %v", w.Body, err)
			}
			if body.Error.Code != tc.code || body.Error.Message != tc.message {
				t.Errorf("answer %+v, want code %q message %q", body.Error, tc.code, tc.message)
			}
			if strings.Contains(w.Body.String(), "hunter2") {
				t.Errorf("the answer leaks the cause: %s", w.Body)
			}
			if got := w.Header().Get("X-Request-ID"); got != "req-42" {
				t.Errorf("X-Request-ID %q, want the caller's", got)
			}
			log := logs.String()
			cause, _ := json.Marshal(tc.err.Error())
			if !strings.Contains(log, `"route":"/x/:id"`) || !strings.Contains(log, `"request_id":"req-42"`) || !strings.Contains(log, `"err":`+string(cause)) {
				t.Errorf("the log lacks route, request ID or cause: %s", log)
			}
		})
	}
}

func TestRequestIDIsMadeWhenMissingOrOdd(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(RequestID)
	r.GET("/", func(c *gin.Context) { c.String(200, c.GetString(ctxRequestID)) })
	for _, sent := range []string{"", "has space", strings.Repeat("a", maxRequestIDLen+1)} {
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-Request-ID", sent)
		r.ServeHTTP(w, req)
		id := w.Header().Get("X-Request-ID")
		if id == sent || len(id) != 16 || w.Body.String() != id {
			t.Errorf("sent %q: got header %q body %q, want a fresh 16-digit ID in both", sent, id, w.Body)
		}
	}
}
