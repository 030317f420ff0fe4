package counters

import (
	"math"
	"time"
)

// Decision is the outcome of a Take.
type Decision struct {
	// Allowed says whether the request was admitted (and charged to every
	// tier) or denied (and charged to none).
	Allowed bool
	// Tier is the index, in the limits passed to Take, of the tier the
	// other fields describe: the denying tier with the longest wait when
	// denied, else the tier with the least remaining. -1 when there were no
	// limits.
	Tier int
	// Limit is that tier's threshold, Remaining what is left of it after this
	// request, Reset the time until its window ends, and RetryAfter (only
	// when denied) how long to wait before trying again.
	Limit      int64
	Remaining  int64
	Reset      time.Duration
	RetryAfter time.Duration
	// Pending says the request was denied by this instance's lease while
	// the limit itself still has room as far as it knows, and the next
	// answer of the key's owner may bring budget: the instance holds no
	// grant yet, or the owner has not answered in this window, or said that
	// budget is spare. RetryAfter is then 0: the node asks for a sync at
	// once and decides again when the answer is in (see node.Config.PendingWait).
	Pending bool
}

// Take decides one request of the given cost against all its limits at once
// and, if every limit admits it, charges every one of them. A request that any
// limit denies charges none: tiers are charged together or not at all. The
// cost offered is recorded as demand in every series either way. A limit
// with a Weight is charged (and checked against) cost times its weight.
//
// Concurrent Takes never lose or double a count: the series involved are
// locked together, in a fixed order, for the check and the charge. Two limits
// of one request that name the same series are charged once.
//
// Take does no I/O and, once its series exist, no allocation. A cost of 0
// reports the state without charging.
func (t *Table) Take(now time.Time, limits []Limit, cost int64) (Decision, error) {
	return t.take(now, limits, cost, true)
}

// TakeAgain decides again a request whose decision was pending (see
// Decision.Pending): like Take, but its cost is recorded as demand only if
// no demand was recorded since the last report, so that the next report
// still tells the owner this instance wants budget, and waiting does not
// inflate the demand the owner shares the budget by.
func (t *Table) TakeAgain(now time.Time, limits []Limit, cost int64) (Decision, error) {
	return t.take(now, limits, cost, false)
}

func (t *Table) take(now time.Time, limits []Limit, cost int64, demand bool) (Decision, error) {
	n := len(limits)
	if n == 0 {
		return Decision{Allowed: true, Tier: -1}, nil
	}
	if n > MaxLimits {
		return Decision{Tier: -1}, ErrTooManyLimits
	}
	if cost < 0 {
		return Decision{Tier: -1}, ErrBadCost
	}
	for i := range limits {
		if limits[i].Period <= 0 || limits[i].Threshold < 0 {
			return Decision{Tier: -1}, ErrBadLimit
		}
		if err := limits[i].checkWeight(cost); err != nil {
			return Decision{Tier: -1}, err
		}
	}
	nowNs := now.UnixNano()
	if n == 1 {
		return t.takeOne(nowNs, &limits[0], cost, demand)
	}

	var ents [MaxLimits]*Entry
	var order [MaxLimits]uint8
	for {
		for i := range limits {
			ents[i] = t.lookup(&limits[i], limits[i].Hash(), nowNs)
			if ents[i] == nil {
				return Decision{Tier: -1}, ErrBadKey
			}
			order[i] = uint8(i)
		}
		// Lock in a fixed order (Entry.before) so that concurrent Takes over
		// overlapping series cannot deadlock. Insertion sort: n is tiny.
		for i := 1; i < n; i++ {
			for j := i; j > 0 && ents[order[j]].before(ents[order[j-1]]); j-- {
				order[j], order[j-1] = order[j-1], order[j]
			}
		}
		if twice(&ents, &order, n) {
			continue // a series evicted and made anew between two lookups: look again
		}
		dead := false
		for j := 0; j < n; j++ {
			e := ents[order[j]]
			if j > 0 && e == ents[order[j-1]] {
				continue
			}
			e.mu.Lock()
			dead = dead || e.dead
		}
		if !dead {
			break
		}
		unlockAll(&ents, &order, n) // evicted under us: look the series up again
	}

	share := t.share.Load()
	d := Decision{Allowed: true, Tier: -1}
	for i := range limits {
		ok, di := t.check(nowNs, &limits[i], ents[i], limits[i].weighted(cost), share)
		switch {
		case !ok:
			// The denying tier with the longest wait describes the
			// decision; a pending one (RetryAfter 0) only if no other denies.
			if d.Allowed || di.RetryAfter > d.RetryAfter || (d.Pending && !di.Pending) {
				d = di
				d.Tier = i
			}
		case d.Allowed && (d.Tier < 0 || di.Remaining < d.Remaining):
			d = di
			d.Tier = i
		}
	}
	for j := 0; j < n; j++ {
		e := ents[order[j]]
		if j > 0 && e == ents[order[j-1]] {
			continue
		}
		// Limits naming one series are charged once, the largest of
		// their weighted costs.
		c := limits[order[j]].weighted(cost)
		for k := j + 1; k < n && ents[order[k]] == e; k++ {
			c = max(c, limits[order[k]].weighted(cost))
		}
		e.charge(c, d.Allowed, demand)
	}
	unlockAll(&ents, &order, n)
	return d, nil
}

// takeOne is Take for a single limit, without the ordering machinery.
func (t *Table) takeOne(nowNs int64, l *Limit, cost int64, demand bool) (Decision, error) {
	h := l.Hash()
	cost = l.weighted(cost)
	for {
		e := t.lookup(l, h, nowNs)
		if e == nil {
			return Decision{Tier: -1}, ErrBadKey
		}
		e.mu.Lock()
		if e.dead {
			e.mu.Unlock()
			continue
		}
		ok, d := t.check(nowNs, l, e, cost, t.share.Load())
		e.charge(cost, ok, demand)
		e.mu.Unlock()
		return d, nil
	}
}

// check rolls a locked entry to now and asks the policy about one limit.
// The returned decision has Tier 0.
func (t *Table) check(nowNs int64, l *Limit, e *Entry, cost int64, share uint64) (bool, Decision) {
	e.roll(nowNs, t)
	e.threshold, e.alg = l.Threshold, l.Algorithm
	v := e.view(nowNs, cost, int(share>>32), int(uint32(share)))
	p := *t.policy.Load()
	_, lease := p.(Lease)
	if lease && !v.HasGrant {
		v.Fallback, v.Members, v.Index = t.fallback(e, v.Members, v.Index)
	}
	if m := t.minority.Load(); lease && m != nil && m.restricted(&e.cur) {
		v.Restricted, v.Safe = true, SafeShare(v.Threshold, v.Members, v.Index, v.Hash, m.safe)
	}
	ok, rem := admit(p, &v)
	reset := time.Duration(e.cur.Start + e.sc.period - nowNs)
	if !ok {
		if lease && leasePending(&v) {
			t.markAsking(e)
			return false, Decision{Limit: l.Threshold, Reset: reset, Pending: true}
		}
		return false, Decision{Limit: l.Threshold, Reset: reset, RetryAfter: e.retryAfter(nowNs, &v)}
	}
	return true, Decision{Allowed: true, Limit: l.Threshold, Remaining: rem, Reset: reset}
}

// fallback reports whether a locked entry without a grant admits its
// static share in its current window, and the membership (count and index)
// that share is of: the one of the window's first fallback, which sticks
// until a grant arrives (Slot.Fallback).
func (t *Table) fallback(e *Entry, members, index int) (bool, int, int) {
	s := &e.cur
	if !s.Fallback {
		if _, fb := t.contactWith(e.hash, s.Start); !fb || !s.fallBack(members, index) {
			return false, members, index
		}
	}
	return true, int(s.FallbackMembers), int(s.FallbackIndex)
}

// Declined records in a locked entry's slot that the key's owner, as this
// instance sees it, answered a report without a grant: in the owner's own
// view of the membership the key is another member's (the two views
// differ until both have seen a change), or the owner holds all the
// windows it may. No grant comes from there, so under the lease policy a
// slot that holds none falls back to its static share, as the membership
// stands now, as if the owner were out of reach: waiting, every request
// was denied while the views differed, which after a partition's heal
// lasts until every member has seen it (seconds with memberlist's LAN
// profile). A grant ends the fallback.
func (t *Table) Declined(s *Slot) {
	if s.HasGrant || s.Fallback {
		return
	}
	if _, lease := (*t.policy.Load()).(Lease); !lease {
		return
	}
	s.fallBack(t.Share())
}

// fallBack makes s fall back to the static share of index among members,
// and reports whether it did: a slot holds no membership larger than
// 65,535.
func (s *Slot) fallBack(members, index int) bool {
	if members > math.MaxUint16 {
		return false
	}
	s.Fallback, s.FallbackMembers, s.FallbackIndex = true, uint16(members), uint16(index)
	return true
}

// admit asks a policy about v. The built-in policies are called directly,
// with a pointer, which spares an interface call that copies the View.
func admit(p Policy, v *View) (bool, int64) {
	switch p.(type) {
	case Lease:
		return leaseAdmit(v)
	case Optimistic:
		return optimisticAdmit(v)
	case Static:
		return staticAdmit(v)
	}
	return p.Admit(*v)
}

// charge records the outcome of a decision in a locked entry: the cost is
// demand either way (unless it was already, by the first decision of a
// request decided again), and admitted cost is added to the own count.
func (e *Entry) charge(cost int64, admitted, demand bool) {
	if admitted {
		e.cur.Own += cost
	}
	if demand || e.cur.Demand == 0 {
		e.cur.Demand += cost
	}
}

// twice reports whether two of the sorted entries are the same series
// as two entries (neither is before the other): one was evicted and the
// other made in its place between the lookups. Their order would then
// depend on the order of the limits, and two Takes could lock them in
// opposite orders.
func twice(ents *[MaxLimits]*Entry, order *[MaxLimits]uint8, n int) bool {
	for j := 1; j < n; j++ {
		a, b := ents[order[j-1]], ents[order[j]]
		if a != b && !a.before(b) {
			return true
		}
	}
	return false
}

func unlockAll(ents *[MaxLimits]*Entry, order *[MaxLimits]uint8, n int) {
	for j := 0; j < n; j++ {
		e := ents[order[j]]
		if j > 0 && e == ents[order[j-1]] {
			continue
		}
		e.mu.Unlock()
	}
}

// Allow is shorthand for Take(now, limits, 1) that reports only whether the
// request was admitted.
func (t *Table) Allow(now time.Time, limits ...Limit) bool {
	d, err := t.Take(now, limits, 1)
	return err == nil && d.Allowed
}
