// Package logevery rate-limits repeated log lines: one per key and
// interval, so that a problem that lasts is reported loudly but does not
// flood the log.
package logevery

import (
	"sync"
	"time"
)

// maxKeys bounds the keys remembered; past it they are all forgotten (a
// flood of distinct keys may then log once more each).
const maxKeys = 1024

// Limiter lets one line through per key and interval. The zero value is
// not usable; call New. It is safe for concurrent use.
type Limiter struct {
	every time.Duration
	mu    sync.Mutex
	last  map[string]time.Time
}

// New returns a limiter that lets a key through once per every.
func New(every time.Duration) *Limiter {
	return &Limiter{every: every, last: make(map[string]time.Time)}
}

// Allow reports whether the line keyed key may be logged at now, and if so
// records it.
func (l *Limiter) Allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[key]; ok && now.Sub(t) < l.every {
		return false
	}
	if len(l.last) >= maxKeys {
		clear(l.last)
	}
	l.last[key] = now
	return true
}
