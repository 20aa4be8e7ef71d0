package store

import "errors"

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

// FromCode rebuilds an error that arrived from another node as a code and a
// message, so that errors.Is still works on it.
func FromCode(code, message string) error {
	for _, c := range codes {
		if c.code == code {
			return &remoteError{msg: message, sentinel: c.err}
		}
	}
	return errors.New(message)
}

type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }
