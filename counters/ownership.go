package counters

import (
	"slices"
	"time"
)

// What an owner remembers of the series it owned in its recent membership
// views (SetOwnership), to tell whether another owner can have granted
// caps in a window it holds.

// ownView is one membership view an owner held from a time on, and what it
// owned in it.
type ownView struct {
	from int64
	owns func(seriesHash uint64) bool
}

// ownViews bounds the views an owner remembers for ownedSince. A window
// whose start (less Settle) is older than the oldest is treated as not
// kept, as if there were no history.
const ownViews = 32

// SetOwnership tells the owner, at now, which series it owns from now on
// in its membership view (owns takes a series hash, Key.SeriesHash). Call
// it after each SetMembers. An owner that owned a series in every view it
// held through a membership change in a window knows that no other owner
// granted caps in that window, so a member it lost contact with during the
// window holds no more than what this owner gave it (see grant). Without
// it, every window that a membership change overlaps counts as taken over.
func (o *Owner) SetOwnership(now time.Time, owns func(seriesHash uint64) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.ownership) >= ownViews {
		o.ownership = slices.Delete(o.ownership, 0, len(o.ownership)-ownViews+1)
	}
	o.ownership = append(o.ownership, ownView{from: now.UnixNano(), owns: owns})
}

// ownedSince reports whether this owner owned the series in every view it
// held at some time from since (Unix ns) until now. The lock must be held.
func (o *Owner) ownedSince(hash uint64, since int64) bool {
	for i := len(o.ownership) - 1; i >= 0; i-- {
		v := o.ownership[i]
		if !v.owns(hash) {
			return false
		}
		if v.from <= since {
			return true // this view held at since: nothing older matters
		}
	}
	return false // no view known at since
}

// regainedSince reports whether this owner owns the series now but did not
// in some view it held from since (Unix ns) on: it lost the series to
// another owner and got it back. Without the history, it reports false.
// The lock must be held.
func (o *Owner) regainedSince(hash uint64, since int64) bool {
	n := len(o.ownership)
	if n == 0 || o.ownership[n-1].from <= since || !o.ownership[n-1].owns(hash) {
		return false // no view since, or not the owner now
	}
	for i := n - 2; i >= 0; i-- {
		v := o.ownership[i]
		if !v.owns(hash) {
			return true
		}
		if v.from <= since {
			return false
		}
	}
	return false
}
