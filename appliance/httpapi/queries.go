package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/store"
)

// Header carrying the Raft index a response reflects; a client passes it
// back as ?min_index= (or X-Rollcall-Min-Index) to read its own write on
// any node.
const (
	headerIndex    = "X-Rollcall-Index"
	headerMinIndex = "X-Rollcall-Min-Index"
	// headerConsistent asks for a linearizable read (as ?consistent=1).
	headerConsistent = "X-Rollcall-Consistent"
	maxBodyBytes     = 1 << 20
	maxWait          = 5 * time.Minute
	// maxWaiters bounds the blocking queries (?index=&wait=) one node
	// holds: the UI, consoles and -watch of a whole operations team, with
	// room; each holds a connection and, when woken, an answer.
	maxWaiters = 512
)

func setIndex(c *gin.Context, idx uint64) { c.Header(headerIndex, strconv.FormatUint(idx, 10)) }

// decodeBody reads a JSON body of at most limit bytes, rejecting unknown
// fields and trailing data. Every refusal names what is wrong in the
// caller's terms.
func decodeBody(c *gin.Context, limit int64, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return Errorf(http.StatusRequestEntityTooLarge, "too_large", "request body is larger than the %d bytes allowed", limit)
		}
		return Wrap(http.StatusBadRequest, "bad_request", "cannot read request body", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	// More() is false before a stray '}' or ']': ask for one more token.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadRequest("request body has data after the JSON object")
	}
	return nil
}

// jsonError says what encoding/json refused. Its errors are about the
// caller's own bytes (an offset, a field name, a JSON type), so they are
// the message, cut of the "json: " that names Go's package.
func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return BadRequest("request body is not valid JSON (at byte %d)", se.Offset)
	case errors.As(err, &te) && te.Field == "":
		return BadRequest("request body must be a JSON object, not %s", te.Value)
	case errors.As(err, &te):
		return BadRequest("field %q must be %s, not %s", te.Field, jsonKind(te.Type), te.Value)
	case errors.Is(err, io.EOF):
		return BadRequest("request body is empty; a JSON object is required")
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return BadRequest("%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return BadRequest("request body: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonKind names what a Go type accepts in JSON terms, for messages.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another JSON type"
}

// minIndex waits, for a read, until this node has applied the index the
// client asks for (?min_index= or X-Rollcall-Min-Index).
func (s *Server) minIndex(c *gin.Context) error {
	v := c.Query("min_index")
	if v == "" {
		v = c.GetHeader(headerMinIndex)
	}
	if v == "" {
		return nil
	}
	idx, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return BadRequest("min_index must be a non-negative integer")
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 10*time.Second)
	defer cancel()
	if err := s.cfg.Cluster.FSM().WaitApplied(ctx, idx); err != nil {
		return Wrap(http.StatusServiceUnavailable, "behind", fmt.Sprintf("this node has not reached index %d yet; retry", idx), err)
	}
	return nil
}

// blockingQuery implements ?index=N&wait=D: it returns once the table's
// change index is past N, or after D (default 30s, at most 5 min).
func (s *Server) blockingQuery(c *gin.Context, table string) error {
	v := c.Query("index")
	if v == "" {
		return nil
	}
	after, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return BadRequest("index must be a non-negative integer")
	}
	wait := 30 * time.Second
	if w := c.Query("wait"); w != "" {
		if wait, err = time.ParseDuration(w); err != nil || wait < 0 {
			return BadRequest("wait must be a duration such as 30s or 2m")
		}
	}
	wait = min(wait, maxWait)
	if s.waiters.Add(1) > maxWaiters {
		s.waiters.Add(-1)
		c.Header("Retry-After", "5")
		return Errorf(http.StatusTooManyRequests, "too_many_watchers", "this node holds %d blocking queries already; retry in a few seconds", maxWaiters)
	}
	defer s.waiters.Add(-1)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	db := s.cfg.DB
	for {
		ch := db.WatchTables(table)
		var cur uint64
		db.View(func(tx *store.Tx) error { cur = tx.TableIndex(table); return nil })
		if cur > after {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return nil
		case <-c.Request.Context().Done():
			return c.Request.Context().Err()
		}
	}
}

// consistentRead reports whether the request asks for a linearizable read:
// ?consistent=1|true|0|false, or the X-Rollcall-Consistent header.
func consistentRead(c *gin.Context) (bool, error) {
	v, ok := c.GetQuery("consistent")
	if !ok {
		v = c.GetHeader(headerConsistent)
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "":
		return ok, nil // a bare ?consistent asks for it
	case "1", "true", "yes":
		return true, nil
	case "0", "false", "no":
		return false, nil
	}
	return false, BadRequest("consistent must be 1 or 0")
}

// consistentWait makes an admin read linearizable when the client asks for
// it (?consistent=1 or X-Rollcall-Consistent: 1): before the handler reads,
// the node waits until it has applied the leader's read index
// (cluster.ReadIndex), so the answer holds every write acknowledged before
// the request, wherever it was made (cluster.ReadBarrier). requireAdmin runs it for every GET;
// docs/consistency.md describes the three read modes.
func (s *Server) consistentWait(c *gin.Context) error {
	consistent, err := consistentRead(c)
	if err != nil || !consistent {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 10*time.Second)
	defer cancel()
	if err := s.cfg.Cluster.ReadBarrier(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return Wrap(http.StatusServiceUnavailable, "behind", "this node has not reached the leader's read index yet; retry", err)
		}
		return Wrap(http.StatusServiceUnavailable, "no_leader", "a consistent read needs the leader and a quorum, which this node cannot reach now; retry, or read without consistent=1", err)
	}
	return nil
}
