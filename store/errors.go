package store

import (
	"errors"
	"fmt"
)

// Sentinels that callers check with errors.Is. The API maps each to one HTTP
// status; they travel between nodes by name (see Code and FromCode).
var (
	ErrNotFound   = errors.New("not found")
	ErrConflict   = errors.New("conflict")
	ErrInvalid    = errors.New("invalid")
	ErrForbidden  = errors.New("forbidden")
	ErrTransition = errors.New("transition not allowed")
)

var codes = []struct {
	code string
	err  error
}{
	{"not_found", ErrNotFound},
	{"conflict", ErrConflict},
	{"invalid", ErrInvalid},
	{"forbidden", ErrForbidden},
	{"transition", ErrTransition},
}

// Code names the sentinel err wraps, or "internal".
func Code(err error) string {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return "internal"
}

// Error is a refusal written for the operator: which record, which rule.
// Its Public text is what the API may answer (the model is Tailscale's
// vizerror: the text is chosen where the error is made, never cut out of
// an error chain later); Error adds the kind for logs, as
// fmt.Errorf("…: %w", ErrConflict) did.
type Error struct {
	kind    error  // one of the sentinels above
	msg     string // for the operator
	wrapped error  // a %w in the format, if any
}

// Errorf makes an Error of one of the sentinel kinds. The format may wrap
// another error with %w (it stays reachable by errors.Is and errors.As);
// its text becomes part of the public message, so wrap only an error
// written for the operator (ipam.ErrFull), never a cause from I/O.
func Errorf(kind error, format string, a ...any) error {
	e := fmt.Errorf(format, a...)
	return &Error{kind: kind, msg: e.Error(), wrapped: errors.Unwrap(e)}
}

func (e *Error) Error() string { return e.msg + ": " + e.kind.Error() }

// Public is the text written for the operator. A not-found message names
// the record and the kind completes it ("machine \"x\": not found"); the
// other kinds are the status code's to say.
func (e *Error) Public() string {
	if e.kind == ErrNotFound {
		return e.Error()
	}
	return e.msg
}

// Message is the text as it was written, for a node that passes the error
// on (FromCode takes it back).
func (e *Error) Message() string { return e.msg }

// Unwrap gives the kind (for errors.Is) and any wrapped error.
func (e *Error) Unwrap() []error {
	if e.wrapped != nil {
		return []error{e.kind, e.wrapped}
	}
	return []error{e.kind}
}

// Public returns the operator's text of the first Error in err's chain, or
// "" when err carries none (a bare sentinel, or an internal failure).
func Public(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Public()
	}
	return ""
}

// lookupError names the record a failed read was for: a missing record is
// a not-found refusal whose text names it ("fabric \"x\": not found"), any
// other failure (a record that does not decode) stays internal, wrapped.
func lookupError(err error, format string, a ...any) error {
	if errors.Is(err, ErrNotFound) {
		return Errorf(ErrNotFound, format, a...)
	}
	return fmt.Errorf(format+": %w", append(a, err)...)
}

// FromCode rebuilds an error that arrived from another node as a code and
// its Message, so that errors.Is and Public still work on it.
func FromCode(code, message string) error {
	for _, c := range codes {
		if c.code == code {
			return &Error{kind: c.err, msg: message}
		}
	}
	return errors.New(message)
}
