package httpapi

import (
	"sync"
	"time"
)

// windowLimiter allows n events per key in each period (a fixed window),
// for endpoints an unauthenticated or barely authenticated client could
// otherwise drive as fast as it likes. It holds at most maxKeys keys; when
// full, windows that have ended are dropped, and if none has, the caller is
// refused (a flood of keys must not grow memory or open the gate).
type windowLimiter struct {
	n       int
	period  time.Duration
	maxKeys int

	mu   sync.Mutex
	keys map[string]*window
}

type window struct {
	start time.Time
	count int
}

func newWindowLimiter(n int, period time.Duration, maxKeys int) *windowLimiter {
	return &windowLimiter{n: n, period: period, maxKeys: maxKeys, keys: map[string]*window{}}
}

// allow counts one event for key at now and says whether it is within the limit.
func (l *windowLimiter) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.keys[key]
	if !ok {
		if len(l.keys) >= l.maxKeys {
			for k, o := range l.keys {
				if now.Sub(o.start) >= l.period {
					delete(l.keys, k)
				}
			}
			if len(l.keys) >= l.maxKeys {
				return false
			}
		}
		w = &window{start: now}
		l.keys[key] = w
	}
	if now.Sub(w.start) >= l.period {
		w.start, w.count = now, 0
	}
	w.count++
	return w.count <= l.n
}
