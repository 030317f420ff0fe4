package node

import (
	"sync"
	"time"
)

// Giving up a sync call early.
//
// A sync call that is lost or stuck holds up its round: requests waiting
// for their owner are decided again when a call ends, and the next round
// (a kicked one, or the interval's) starts only when every call of the
// open one has. With CallTimeout alone (twice the interval by default), one
// lost message cost the waiting requests up to two intervals, and a request
// of a short tier then waited into the next window, where it needed a
// grant again. So a call is given up once it has taken clearly longer than
// calls take, as TCP gives up waiting for an acknowledgement (RFC 6298):
// the retry deadline is the smoothed duration of recent calls plus four
// times their mean deviation, at least MinCallRetry and at most
// CallTimeout, doubled after each call given up in a row. Durations are
// per unit of batch size (1 + reports/1024), so that a full round's large
// batch is allowed its longer work. A call given up is like one lost
// (Engine.Fail): its counts go in the next round, and an answer that the
// owner sent meanwhile is discarded, which the protocol allows for (an
// owner reserves the caps it granted until the member acknowledges them).

// MinCallRetry is the least time a sync call is given before it is given
// up and asked again (see callTimer).
const MinCallRetry = 20 * time.Millisecond

// callSizeUnit is the number of reports a call's duration is scaled by.
const callSizeUnit = 1024

// maxCallBackoff bounds the doublings of the retry deadline.
const maxCallBackoff = 8

// callTimer estimates how long a sync call takes and when to give it up.
// Its zero value gives every call the whole CallTimeout until one call has
// been answered.
type callTimer struct {
	mu      sync.Mutex
	seen    bool
	srtt    float64 // smoothed duration per unit of size, ns
	rttvar  float64 // smoothed mean deviation, ns
	backoff uint    // calls given up in a row
}

func callScale(reports int) float64 { return 1 + float64(reports)/callSizeUnit }

// deadline returns how long a call of reports windows may take, within
// limit (CallTimeout).
func (t *callTimer) deadline(reports int, limit time.Duration) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.seen {
		return limit
	}
	d := time.Duration((t.srtt + 4*t.rttvar) * callScale(reports))
	d = max(d, MinCallRetry)
	for range t.backoff {
		if d >= limit {
			break
		}
		d *= 2
	}
	return min(d, limit)
}

// answered records a call of reports windows answered after d.
func (t *callTimer) answered(d time.Duration, reports int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.backoff = 0
	x := float64(d) / callScale(reports)
	if !t.seen {
		t.seen, t.srtt, t.rttvar = true, x, x/2
		return
	}
	dev := t.srtt - x
	if dev < 0 {
		dev = -dev
	}
	t.rttvar += (dev - t.rttvar) / 4
	t.srtt += (x - t.srtt) / 8
}

// gaveUp records a call given up at its deadline.
func (t *callTimer) gaveUp() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.backoff < maxCallBackoff {
		t.backoff++
	}
}

// CallDeadline returns how long a sync call of the batch may take before it
// is given up (and Fail called): an estimate from the calls answered so far
// (see MinCallRetry), within EngineConfig.CallTimeout. CallAnswered and
// CallGivenUp keep the estimate.
func (e *Engine) CallDeadline(b *Batch) time.Duration {
	return e.calls.deadline(b.Len(), e.cfg.CallTimeout)
}

// CallAnswered records that a call of the batch was answered after d.
func (e *Engine) CallAnswered(b *Batch, d time.Duration) { e.calls.answered(d, b.Len()) }

// CallGivenUp records that a call reached its CallDeadline unanswered.
func (e *Engine) CallGivenUp() { e.calls.gaveUp() }
