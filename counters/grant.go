package counters

import (
	"math"
)

// grant computes origin r's new cap on its own estimate (its count in the
// window, plus for sliding tiers its weighted previous window), so that the
// caps of every member that may spend in the window never add up to more
// than the threshold. It returns it with the budget r may still get at its
// next reports (Answer.Spare): what no member is expected to need before
// the window ends, r's share that others hold beyond their own need, and
// what is held back while members sync after a membership change. Under
// overload nothing is spare: a request beyond its instance's grant is
// refused at once, not kept waiting.
//
// Before handing anything out, the owner reserves for every member what it
// may spend without asking:
//
//   - a member in contact (it acknowledges this owner's answers) that has
//     not reported in this window: only a cap it carried from the previous
//     window. Members in contact ask before they admit, so an idle member
//     holds nothing and a tenant whose traffic all reaches one instance gets
//     its whole limit;
//   - a member out of contact: what it holds (the larger of its cap and its
//     count), plus its static share if it lost contact before the window
//     began, since members fall back to their static share in the windows
//     that begin while they cannot reach the owner (and not before: see
//     FallbackAfter). Both sides of a partition reserving the other side's
//     static shares keeps them within the limit together; a member that is
//     cut off during a window keeps what it held, and the others keep
//     following their demand with the rest;
//   - members no longer in view (they left, or have been gone for longer
//     than the reserve horizon): their counts;
//   - in a window this owner took over from another (the membership
//     changed during it): members it has not heard from may hold caps the
//     previous owner granted. That owner's grants added up to the threshold
//     at most, and what it gave the members that reported here is known
//     (Report.CapFrom), so the rest is reserved until they report, or for
//     the window if they are out of contact.
//
// The rest is split among the members in contact that reported, by demand
// (max-min fair over what each is expected to need in the next NeedHorizon
// intervals, then half of what nobody needs in equal parts to those with
// demand; the other half stays unallocated for members whose demand
// appears or grows), and r gets its part as far as the caps the others
// still hold leave room. The others converge to their part at their next
// report.
func (o *Owner) grant(now int64, key Key, w *ownerWindow, r *originState) (g, spare int64) {
	period := int64(key.Period)
	hash := w.series.hash
	prev := w.series.window(key.WindowStart - period)
	weight := 0.0
	if elapsed := now - key.WindowStart; w.alg == Sliding && elapsed >= 0 && elapsed < period {
		weight = float64(period-elapsed) / float64(period)
	}
	// est is a member's own estimate, as the member itself computes it,
	// from its states in the window and the one before.
	est := func(s, ps *originState) int64 {
		var e int64
		if s != nil {
			e = s.total()
		}
		if ps != nil {
			e += weighted(ps.total(), weight)
		}
		return e
	}
	prevOf := func(name string) *originState {
		if prev == nil {
			return nil
		}
		return prev.find(name)
	}

	since := key.WindowStart - int64(o.cfg.ReserveWindows)*period
	if o.cfg.Majority {
		since = math.MinInt64 // every member the node remembers
	}
	mw := o.members.window(since)
	members := mw.names
	n := len(members)
	contactT := int64(o.cfg.Contact)
	view := w.aligned(mw, prev)

	// Counts of origins no longer in view: spent for good.
	var firm int64
	if view != nil {
		for _, s := range view.outside {
			if s != r {
				firm += est(s, prevOf(s.name))
			}
		}
		for _, ps := range view.prevOutside {
			firm += weighted(ps.total(), weight)
		}
	} else {
		for _, s := range w.origins {
			if _, in := mw.pos[s.name]; !in && s != r {
				firm += est(s, prevOf(s.name))
			}
		}
		if prev != nil {
			for _, ps := range prev.origins {
				if _, in := mw.pos[ps.name]; !in && w.find(ps.name) == nil {
					firm += weighted(ps.total(), weight)
				}
			}
		}
	}

	// Another owner granted caps in this window if a member reports holding
	// one: this owner took the window over (or the membership was split).
	pool := w.threshold
	inherited, owned := w.inherited, w.ownedThroughout
	for _, s := range w.origins {
		if s.hasForeign {
			pool -= s.foreignCap
			inherited, owned = true, false
		}
	}
	var silent int64  // reserves of the members in view that have not reported here
	unknown := false  // some of them may hold caps another owner granted
	settling := false // some of those only because they have not sent a batch under this view yet
	// Under the majority rule, a member out of contact since Term plus
	// Contact before the window began has been restricted to its safe
	// share since before it began (it noticed within Contact), if it is
	// not on this owner's side, which reaches a majority. Only once the
	// membership counts it gone, though: a member still in view is reached
	// by some members (memberlist probes it through others), so it may
	// reach a majority itself, and fall back to its static share for
	// this owner's keys.
	takeBack := o.cfg.Majority && o.majority
	lostBefore := key.WindowStart - int64(o.cfg.Term) - contactT
	// reach is the members in contact that reported (and r), with their
	// contact records.
	sc := &o.scratch
	reach, reachC, reachE := sc.reach[:0], sc.reachC[:0], sc.reachE[:0]
	defer func() { // kept for the next grant, without what they point to
		clear(reach)
		clear(reachC)
		sc.reach, sc.reachC, sc.reachE = reach[:0], reachC[:0], reachE[:0]
	}()
	haveR := false
	for i, m := range members {
		var s, ps *originState
		if view != nil {
			s, ps = view.cur[i], view.prv[i]
		} else {
			s, ps = w.find(m), prevOf(m)
		}
		if s == r {
			reach, reachC, reachE = append(reach, s), append(reachC, nil), append(reachE, est(s, ps))
			haveR = true
			continue
		}
		at := mw.at[i]
		cr, alive := o.members.contact[at], o.members.isAlive[at]
		e := est(s, ps)
		inContact := now-contactAt(cr, now) < contactT && alive
		c := contactBefore(cr, key.WindowStart, now)
		if takeBack && !inContact && !alive && c < lostBefore {
			safe := max(e, SafeShare(w.threshold, n, i, hash, o.cfg.SafeShare))
			if s != nil {
				firm += safe
			} else {
				silent += safe
			}
			continue
		}
		var static int64
		if c < key.WindowStart-contactT+int64(o.cfg.Interval) {
			static = StaticShare(w.threshold, n, i, hash)
		}
		var carried int64
		if ps != nil && o.carries(ps, cr) && c >= key.WindowStart-int64(CarryWithin(o.cfg.Contact))-contactT {
			carried = o.capNow(ps, cr)
		}
		switch {
		case s != nil && inContact:
			reach, reachC, reachE = append(reach, s), append(reachC, cr), append(reachE, e)
		case s != nil:
			if o.holdsGrant(s, cr) {
				static = 0 // it left its static share for this owner's grant
			}
			firm += max(o.capNow(s, cr), e, static)
		default:
			silent += max(carried, e, static)
			// Another owner may have granted it a cap in this window if it
			// lost contact during the window (unless this owner owned the
			// series in all its views since the window began), or has not
			// sent a batch under this owner's view since the membership
			// changed (its view, which may name another owner, differs).
			if inherited && ((!inContact && static == 0 && !owned) || (inContact && !o.synced(m, cr))) {
				unknown = true
				settling = settling || inContact
			}
		}
	}
	if !haveR { // r reports but is not (yet) in our view
		reach, reachC, reachE = append(reach, r), append(reachC, nil), append(reachE, est(r, prevOf(r.name)))
	}

	hidden := w.hidden()
	if prev != nil {
		hidden += weighted(prev.hidden(), weight)
	}
	// The silent members' reserves cover their counts, which the counts
	// known only through a previous owner (hidden) are part of.
	rest := max(silent, hidden)
	var held int64 // held back until the members in contact have synced (a sync interval)
	if unknown {
		if settling {
			held = max(0, pool-rest)
		}
		rest = max(rest, pool)
	}
	committed := firm + rest

	estR := est(r, prevOf(r.name))
	free := w.threshold - committed
	// What nobody needs is judged over the time left in the window; the
	// members' parts follow their demand over the next NeedHorizon
	// intervals at most. Projected over a day-long window, any demand is
	// more than the limit, and the parts would follow nothing but the
	// number of members with demand.
	left := max(0, period-(now-key.WindowStart))
	soon := float64(min(left, NeedHorizon*int64(o.cfg.Interval)))
	var othersOut, othersExcess, needs int64
	var needy int64 // reporters with demand
	for i, s := range reach {
		e := reachE[i]
		free -= e
		n := need(s, float64(left))
		if n > 0 {
			needy++
		}
		if s != r {
			out := max(0, o.capNow(s, reachC[i])-e)
			othersOut += out
			// Beyond what its current demand needs, a member gives back at
			// its next report what it holds (its smoothed need fades).
			othersExcess += max(0, out-int64(math.Ceil(s.instant*soon)))
		}
		needs += n
	}
	// Of what nobody is expected to need, the members with demand get
	// their part as if every member in view had some: the rest stays
	// unallocated, so that a member whose demand appears or grows gets it
	// at its first report, without waiting for the others to give theirs
	// back.
	spare = max(0, free-needs)
	g = estR
	if free <= 0 {
		spare = 0
	} else {
		unallocated := spare - spare*needy/max(needy, int64(n))
		fair := fairShare(free-unallocated, reach, r, soon, float64(left), sc)
		allowed := max(min(fair, free-othersOut), 0)
		g += allowed
		r.hadShare = r.hadShare || allowed > 0
		// What nobody needs is spare only as far as nobody holds it.
		spare = min(spare, max(0, free-othersOut-allowed))
		// r's part that others hold beyond what their demand needs comes
		// with the next answers, as they report and give it back (demand
		// that moved from one instance to another). So does all of r's part
		// while r has had no share beyond its count in this window (its
		// demand just appeared): the others' next reports tell whether
		// their demand is still there. Under overload an instance that
		// already had a share is told nothing more comes. In a window
		// longer than the horizon, all that the others hold beyond their
		// near-term need may come: a burst at r (demand this answer does
		// not know of) gets it at r's next reports, as the owner moves the
		// parts to the new demand.
		switch {
		case !r.hadShare && !(r.heldGrant && r.held+r.base > estR):
			spare += fair - allowed
		case float64(left) > soon:
			spare += max(fair-allowed, othersExcess)
		default:
			spare += min(fair-allowed, othersExcess)
		}
	}
	return g, spare + held
}

// NeedHorizon is how many sync intervals ahead (at most) an owner projects
// each member's demand when it splits a limit among them first (see
// fairShare), and judges what the others hold beyond their demand. In a
// long window (an hour, a day) demand projected over the time left is more
// than any limit: every member then looked as if it needed all it held,
// the parts followed nothing but the number of members, and a member that
// spent its part was refused at once while the others held most of the
// limit unused (a tenant moving between instances got a 429 at its fourth
// request against a daily limit of 1000). 50 intervals is 10 s at the
// default 200 ms: windows up to that long are split as before. Shorter
// horizons cost accuracy there: at 5, a member cut off one way at 2x kept
// 11% of a 5 s window unspent (sim TestMemberLostNearWindowStart); at 10
// the sim's scenarios pass, with more sync messages in some.
const NeedHorizon = 50

// need is what an origin is expected to need over d nanoseconds at the
// rate of its demand: 0 for an idle origin.
func need(s *originState, d float64) int64 {
	return int64(math.Ceil(s.rate() * d))
}

// fairShare splits free among origins by demand, and returns r's part.
// First by what each is expected to need soon (max-min fair, water-filling
// on the next soon nanoseconds); if that leaves some over, every need is
// met and the rest is split the same way by what each is expected to need
// over the rest of the window (left), so that an origin with little demand
// does not hold budget it cannot spend before the window ends (and that the
// owner must reserve for it if it is cut off). What no one needs is spread
// equally among the origins with demand. Integer units: the parts add up
// to free exactly, or to less when no origin has demand. It water-fills at
// most twice, each in a few O(k) passes for k origins (see waterFill).
func fairShare(free int64, origins []*originState, r *originState, soon, left float64, sc *grantScratch) int64 {
	needs, order := sc.needs[:0], sc.order[:0]
	defer func() { sc.needs, sc.order = needs[:0], order[:0] }()
	ri := -1
	var sum int64
	for i, s := range origins {
		needs = append(needs, need(s, soon))
		sum += needs[i]
		if s == r {
			ri = i
		}
		if needs[i] > 0 {
			order = append(order, i)
		}
	}
	if len(order) == 0 || free <= 0 || ri < 0 || needs[ri] <= 0 {
		return 0 // nobody (or not r) has demand: nothing to hand out
	}
	if sum >= free || left <= soon {
		return waterFill(free, needs, order, ri)
	}
	first := needs[ri]
	for i, s := range origins {
		needs[i] = max(0, need(s, left)-needs[i])
	}
	return first + waterFill(free-sum, needs, order, ri)
}

// waterFill splits free among the origins in order (those with demand, in
// ascending place) by their needs, max-min fair, then what no one needs in
// equal parts, and returns the part of origin ri. Max-min fair: each origin
// gets its need or the water level, whichever is smaller, the level being
// what is left over equally among those whose need is above it; the units
// left over from the division go one each to those origins in order of
// need, then place. Without sorting: the level is found by raising it from
// free / len(order) until no more needs fall under it (a few passes; it
// gives the level of a walk through the needs in increasing order, which
// TestWaterFillMatchesSortedWalk checks), and r's turn for a left-over unit
// is a count.
func waterFill(free int64, needs []int64, order []int, ri int) int64 {
	k := int64(len(order))
	// before reports whether origin a comes before b: by need, then place.
	before := func(a, b int) bool { return needs[a] < needs[b] || needs[a] == needs[b] && a < b }
	var sum int64
	for _, i := range order {
		sum += needs[i]
	}
	if sum <= free {
		// Every need met: what is left goes to the origins with demand, in
		// equal parts, the units left over one each in order.
		part, rest := (free-sum)/k, (free-sum)%k
		var turn int64
		for _, i := range order {
			if before(i, ri) {
				turn++
			}
		}
		if turn < rest {
			return needs[ri] + part + 1
		}
		return needs[ri] + part
	}
	// The level: every need at or under it is met, the rest share what is
	// left equally. Some need is above it, since the needs add up to more
	// than free.
	level := free / k
	var met, metSum int64
	for {
		met, metSum = 0, 0
		for _, i := range order {
			if needs[i] <= level {
				met++
				metSum += needs[i]
			}
		}
		next := (free - metSum) / (k - met)
		if next == level {
			break
		}
		level = next
	}
	if needs[ri] <= level {
		return needs[ri]
	}
	rest := free - metSum - level*(k-met)
	var turn int64
	for _, i := range order {
		if needs[i] > level && before(i, ri) {
			turn++
		}
	}
	if turn < rest {
		return level + 1
	}
	return level
}

// grantScratch is the slices a grant works in, kept by the owner (under
// its lock) from one grant to the next so that a grant allocates nothing.
type grantScratch struct {
	reach  []*originState
	reachC []*contact
	reachE []int64
	needs  []int64
	order  []int
}
