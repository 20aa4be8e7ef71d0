package oscatalog

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
)

// Error is a failure of a catalog operation with a message written for the
// operator (the API answers it); the cause goes to the log only.
type Error struct {
	// Kind is what the API makes of it: "invalid" (the input is wrong:
	// a bad image, a checksum mismatch), "conflict" (a sync is running),
	// "upstream" (the mirror or URL failed), "internal".
	Kind    string
	Message string
	cause   error
}

func (e *Error) Error() string {
	if e.cause != nil {
		return e.Message + ": " + e.cause.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.cause }

func invalid(msg string, cause error) error {
	return &Error{Kind: "invalid", Message: msg, cause: cause}
}
func upstream(msg string, cause error) error {
	return &Error{Kind: "upstream", Message: msg, cause: cause}
}
func internal(msg string, cause error) error {
	return &Error{Kind: "internal", Message: msg, cause: cause}
}

// fetchFailure words a download's failure for the operator, from what
// this package and net/http say, never from the cause's own text.
func fetchFailure(what string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	var ne net.Error
	reason := "failed (the node's log says why)"
	switch {
	case errors.Is(err, context.Canceled):
		reason = "cancelled"
	case errors.Is(err, io.ErrUnexpectedEOF):
		reason = "ended before the whole file arrived"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		reason = "timed out"
	case strings.HasPrefix(err.Error(), "HTTP "):
		reason = "answered " + strings.TrimPrefix(err.Error(), "HTTP ")
	case strings.Contains(err.Error(), "bytes allowed") || strings.Contains(err.Error(), "more than the"):
		reason = "is larger than allowed"
	case strings.Contains(err.Error(), "stalled"):
		reason = "stalled (no data for a minute)"
	case strings.Contains(err.Error(), "connection refused"):
		reason = "failed: connection refused"
	case strings.Contains(err.Error(), "no such host"):
		reason = "failed: unknown host"
	}
	return upstream(what+" "+reason, err)
}
