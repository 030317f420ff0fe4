package httpfilter

import (
	"context"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// Limiter decides requests: it charges cost to every limit or to none (see
// counters.Table.Take). *node.Node satisfies it (the cluster-wide limiter);
// [Local] adapts a bare *counters.Table (one process, no cluster).
//
// Implementations must be safe for concurrent use and must not keep limits
// after Take returns: the filter reuses the slice.
type Limiter interface {
	Take(ctx context.Context, limits []counters.Limit, cost int64) (counters.Decision, error)
}

// TimedLimiter is a [Limiter] that takes the time of the decision as an
// argument. When the limiter given to [New] implements it, the filter calls
// TakeAt with its own clock ([WithClock]) instead of Take, so tests and
// simulations run on virtual time. [LocalLimiter] implements it; a
// *node.Node does not (it reads its own Config.Clock).
type TimedLimiter interface {
	Limiter
	TakeAt(now time.Time, limits []counters.Limit, cost int64) (counters.Decision, error)
}

// LocalLimiter is a [TimedLimiter] over one *counters.Table: decisions in
// this process only, nothing shared with other instances. Use it for a
// single instance, for tests, or behind a per-instance split of the limits.
// It is safe for concurrent use (the table is). Create it with [Local]; the
// zero value is not usable.
type LocalLimiter struct {
	table *counters.Table
}

// Local returns a limiter deciding from t alone.
func Local(t *counters.Table) *LocalLimiter { return &LocalLimiter{table: t} }

// Take decides at time.Now. ctx is not used: a local decision does no I/O.
func (l *LocalLimiter) Take(_ context.Context, limits []counters.Limit, cost int64) (counters.Decision, error) {
	return l.table.Take(time.Now(), limits, cost)
}

// TakeAt decides at now.
func (l *LocalLimiter) TakeAt(now time.Time, limits []counters.Limit, cost int64) (counters.Decision, error) {
	return l.table.Take(now, limits, cost)
}

// LimitsSource gives the limits in force. [*Reloader] is one (its limits
// change when the file does); a *Limits is one too (it returns itself:
// static limits). Limits is called on every request and must be cheap (an
// atomic load) and never return nil.
type LimitsSource interface {
	Limits() *Limits
}

// Limits returns l itself, so that a *Limits is a [LimitsSource] of limits
// that never change.
func (l *Limits) Limits() *Limits { return l }
