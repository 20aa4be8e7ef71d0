package store

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorKeepsItsPublicText(t *testing.T) {
	inner := errors.New("pool exhausted")
	cases := map[string]struct {
		err        error
		kind       error
		code       string
		public     string
		full       string
		wrapsInner bool
	}{
		"conflict": {err: Errorf(ErrConflict, "name %q is taken by %s", "n1", "m-1"), kind: ErrConflict, code: "conflict",
			public: `name "n1" is taken by m-1`, full: `name "n1" is taken by m-1: conflict`},
		"not found names the record": {err: Errorf(ErrNotFound, "machine %q", "x"), kind: ErrNotFound, code: "not_found",
			public: `machine "x": not found`, full: `machine "x": not found`},
		"wrapped by context": {err: fmt.Errorf("commission m-1: %w", Errorf(ErrForbidden, "wrong MAC")), kind: ErrForbidden, code: "forbidden",
			public: "wrong MAC", full: "commission m-1: wrong MAC: forbidden"},
		"wraps another error": {err: Errorf(ErrConflict, "subnet s: %w", inner), kind: ErrConflict, code: "conflict",
			public: "subnet s: pool exhausted", full: "subnet s: pool exhausted: conflict", wrapsInner: true},
		"from another node": {err: FromCode("transition", "cannot move from new to ready"), kind: ErrTransition, code: "transition",
			public: "cannot move from new to ready", full: "cannot move from new to ready: transition not allowed"},
		"bare sentinel has no public text": {err: ErrNotFound, kind: ErrNotFound, code: "not_found", full: "not found"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if !errors.Is(c.err, c.kind) {
				t.Errorf("errors.Is(%v, %v) = false", c.err, c.kind)
			}
			if got := Code(c.err); got != c.code {
				t.Errorf("Code = %q, want %q", got, c.code)
			}
			if got := Public(c.err); got != c.public {
				t.Errorf("Public = %q, want %q", got, c.public)
			}
			if got := c.err.Error(); got != c.full {
				t.Errorf("Error = %q, want %q", got, c.full)
			}
			if got := errors.Is(c.err, inner); got != c.wrapsInner {
				t.Errorf("errors.Is(inner) = %v, want %v", got, c.wrapsInner)
			}
		})
	}
}
