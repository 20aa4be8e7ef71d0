package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// Error is an error whose Message is meant for the client: written where
// the error is made, never cut out of a cause's text (Tailscale's vizerror
// and tsweb.HTTPError are the model). The cause, if any, goes to the log.
type Error struct {
	Status  int
	Code    string // stable, for scripts: bad_request, not_found, conflict, …
	Message string
	// Field names the request field the error is about, when one is
	// (a form shows the message beside it).
	Field string
	// Rows are the bad rows of an uploaded file, each with its line,
	// answered beside the error (a location import).
	Rows  []wire.ImportError
	cause error
}

func (e *Error) Error() string {
	if e.cause != nil {
		return e.Message + ": " + e.cause.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.cause }

// Errorf is a public error with no cause beyond its text.
func Errorf(status int, code, format string, a ...any) error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, a...)}
}

// BadRequest is a 400 with a message for the caller.
func BadRequest(format string, a ...any) error {
	return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: fmt.Sprintf(format, a...)}
}

// FieldError is a 400 about one field of the request.
func FieldError(field, format string, a ...any) error {
	return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: fmt.Sprintf(format, a...), Field: field}
}

// Wrap gives cause a public message: the client reads msg, the log the
// cause.
func Wrap(status int, code, msg string, cause error) error {
	return &Error{Status: status, Code: code, Message: msg, cause: cause}
}

// kinds maps the store's refusals (store.Code) to their status and the
// text a bare sentinel, which carries no message of its own, stands for.
var kinds = map[string]struct {
	status int
	text   string
}{
	"not_found":  {http.StatusNotFound, "not found"},
	"conflict":   {http.StatusConflict, "conflict with the current state"},
	"invalid":    {http.StatusBadRequest, "invalid request"},
	"forbidden":  {http.StatusForbidden, "forbidden"},
	"transition": {http.StatusConflict, "state transition not allowed"},
}

// Classifier recognises errors of other packages (the cluster's "no
// leader", say) that have a status of their own; it returns nil for the
// rest.
type Classifier func(error) *Error

// classify maps any error to what the API may say about it: an *Error as
// it is; a store refusal with its public text (store.Error); whatever the
// classifiers know; anything else a 500 whose cause only the log sees.
func classify(err error, more []Classifier) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	for _, f := range more {
		if e := f(err); e != nil {
			return e
		}
	}
	if errors.Is(err, context.Canceled) {
		// The caller went away (a closed watch, a tab shut): nobody reads
		// the answer, and it is not a fault of the node's. 499 as nginx.
		return &Error{Status: 499, Code: "canceled", Message: "request canceled", cause: err}
	}
	if k, ok := kinds[store.Code(err)]; ok {
		msg := store.Public(err)
		if msg == "" {
			msg = k.text
		}
		return &Error{Status: k.status, Code: store.Code(err), Message: msg, cause: err}
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error (logged on the node)", cause: err}
}

// Request IDs tie an answer to its log lines: the caller's X-Request-ID
// when it sends a short printable one, else a fresh one; echoed back.
const (
	headerRequestID = "X-Request-ID"
	ctxRequestID    = "rollcall.request_id"
	maxRequestIDLen = 64
)

// RequestID is middleware that gives each request an ID.
func RequestID(c *gin.Context) {
	id := c.GetHeader(headerRequestID)
	if !printableID(id) {
		var b [8]byte
		rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	c.Set(ctxRequestID, id)
	c.Header(headerRequestID, id)
	c.Next()
}

func printableID(s string) bool {
	if s == "" || len(s) > maxRequestIDLen {
		return false
	}
	for _, r := range s {
		if r < '!' || r > '~' {
			return false
		}
	}
	return true
}

// Failer writes errors: one function for every handler.
type Failer struct {
	Log         *slog.Logger
	Classifiers []Classifier
}

// Fail answers {error: {code, message}} with the error's status and logs
// the cause with the route and the request ID: at Error for a server
// fault, at Debug for a refusal the caller caused. Every cause is logged,
// so a cause must never carry a request's body or a secret: wrap the
// error that describes it, not the data.
func (f *Failer) Fail(c *gin.Context, err error) {
	e := classify(err, f.Classifiers)
	level := slog.LevelDebug
	if e.Status >= 500 {
		level = slog.LevelError
	}
	f.Log.Log(c.Request.Context(), level, "request failed", "method", c.Request.Method, "route", c.FullPath(),
		"request_id", c.GetString(ctxRequestID), "status", e.Status, "err", err)
	c.AbortWithStatusJSON(e.Status, wire.ErrorReply{Error: wire.ErrorDetail{Code: e.Code, Message: e.Message, Field: e.Field}, Errors: e.Rows})
}

// Handler is an API handler: it writes its answer or returns an error for
// Fail to write.
type Handler func(*gin.Context) error

// Handle adapts h to gin.
func (f *Failer) Handle(h Handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := h(c); err != nil {
			f.Fail(c, err)
		}
	}
}
