package counters

import "math"

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
//     the window if they are out of contact;
//   - when a member out of contact since before the window began reports
//     holding another owner's cap, the members out of contact that have
//     not reported may hold, together, what the members out of contact
//     could spend as a group, less what those that reported hold (see
//     sideBound), not only their own static shares.
//
// The rest is split among the members in contact that reported, by demand
// (max-min fair over what each is expected to need in the next NeedHorizon
// intervals, then half of what nobody needs in equal parts to those with
// demand; the other half stays unallocated for members whose demand
// appears or grows), and r gets its part as far as the caps the others
// still hold leave room. The others converge to their part at their next
// report.
//
// When nothing is free but members in contact that have not reported in
// the window carried caps beyond what their demand at their last report
// needs, r is told that much may come (Spare, at most its near-term need):
// those caps come back at the members' first reports, within an interval,
// so r's request waits for them instead of being refused at once.
func (o *Owner) grant(now int64, key Key, w *ownerWindow, r *originState) (g, spare int64) {
	period := int64(key.Period)
	prev := w.series.window(key.WindowStart - period)
	since := key.WindowStart - max(int64(o.cfg.ReserveWindows)*period, int64(o.cfg.ReserveMin))
	if o.cfg.Majority {
		since = math.MinInt64 // every member the node remembers
	}
	mw := o.members.window(since)
	view := w.aligned(mw, prev)
	gc := &o.scratch.gc
	o.grantContext(gc, now, key, w, prev, mw)
	prevOf := func(name string) *originState {
		if prev == nil {
			return nil
		}
		return prev.find(name)
	}

	// Counts of origins no longer in view: spent for good.
	var firm int64
	if view != nil {
		for _, s := range view.outside {
			if s != r {
				firm += gc.est(s, prevOf(s.name))
			}
		}
		for _, ps := range view.prevOutside {
			firm += weighted(ps.total(), gc.weight)
		}
	} else {
		for _, s := range w.origins {
			if s == r {
				continue
			}
			if _, in := mw.pos[s.name]; !in {
				firm += gc.est(s, prevOf(s.name))
			}
		}
		if prev != nil {
			for _, ps := range prev.origins {
				if w.find(ps.name) != nil {
					continue
				}
				if _, in := mw.pos[ps.name]; !in {
					firm += weighted(ps.total(), gc.weight)
				}
			}
		}
	}

	// The members' slots: what each reserves, or its demand if it is one
	// the rest is split among. r's slot is left out and r taken as it is
	// now.
	var sl *windowSlots
	kept := false // the members' slots are added up from kept sums (keepSums)
	if view != nil {
		sl = o.slotsFor(view, gc)
		if kept = len(gc.mw.names) >= keepMin && !gc.otherSide && !gc.cutSide && !o.noKeep; kept {
			o.keepSums(sl, w, gc)
		}
	}
	estR := gc.est(r, prevOf(r.name))
	needR, needSoonR := need(r, float64(gc.left)), need(r, gc.soon)
	sums, ri := o.tally(sl, kept, w, prev, gc, r, needSoonR, needR, &o.scratch)
	pool := w.threshold - w.foreignCaps
	firm += sums.firm

	hidden := w.hidden()
	ghost := w.ghost
	if prev != nil {
		hidden += weighted(prev.hidden(), gc.weight)
		ghost += weighted(prev.ghost, gc.weight)
	}
	// The silent members' reserves cover their counts, which the counts
	// known only through a previous owner (hidden) are part of, unless a
	// member left during the window: its counts may be hidden too.
	rest := max(sums.silent, hidden)
	if hidden > 0 && o.members.leftAt > key.WindowStart {
		rest = sums.silent + hidden
	}
	var held int64 // held back until the members in contact have synced (a sync interval)
	if sums.unknown && sums.settling {
		held = max(0, pool-rest)
	}
	// Members this owner never saw may spend their static shares, out of
	// the pool (what no other owner's cap holds): a pool held whole covers
	// them.
	committed := firm + rest + ghost
	if rest < pool {
		committed += o.unseen(now, since, w, mw)
	}
	// The window's excess over the threshold, if the members' known
	// estimates and reserves add up to more (see below), counts without
	// the pool held whole for caps another owner may have granted.
	known := committed
	if sums.unknown || o.grantsUnseen(now, key, w, gc, mw, hidden) {
		rest = max(rest, pool)
		committed = firm + rest + ghost
	}

	free := w.threshold - committed - sums.e - estR
	if sc := &o.scratch; len(sc.movedAt) > 0 {
		// The members whose traffic moved away need nothing while the
		// others need more than is free (see moved).
		var gone int64
		for _, i := range sc.movedAt {
			gone += sc.leftOf(i)
		}
		if sums.needs-gone > free {
			sc.lay()
			for _, i := range sc.movedAt {
				sc.needs[i], sc.left[i] = 0, 0
			}
			// Each is listed only with a need (tally): one fewer needy.
			sums.needs, sums.needy = sums.needs-gone, sums.needy-int64(len(sc.movedAt))
			needSoonR = sc.needs[ri]
		}
	}
	// Of what nobody is expected to need, the members with demand get
	// their part as if every member in view had some: the rest stays
	// unallocated, so that a member whose demand appears or grows gets it
	// at its first report, without waiting for the others to give theirs
	// back.
	spare = max(0, free-sums.needs)
	g = estR
	if free <= 0 {
		// Nothing is free. What members that have not reported here
		// carried beyond their demand comes back at their first reports,
		// within an interval: r may wait for it. Under overload nothing
		// comes back, and r is refused at once.
		spare = 0
		// On a sliding tier the estimates weigh the window before, and
		// may add up to more than the threshold (it went over). A cap is
		// on the estimate, which falls as that weight does, so a cap at
		// the estimate lets the member's count in this window grow back
		// to it: the caps would let the window itself over by the excess
		// (sim/testdata/sliding-isolate-edge, a member isolated across a
		// window's start: 1,106 admitted of 1,000, then 1,068 in the next
		// window with no fault). r's cap
		// takes its part of the excess off its estimate, by its share of
		// the estimates of the members in reach (rounded up), down to its
		// count here: the caps of those members then add up to what the
		// others' reserves leave.
		if excess := min(-free, known+sums.e+estR-w.threshold); excess > 0 && gc.weight > 0 {
			in := max(1, estR+sums.e)
			g = max(r.total(), estR-(excess*estR+in-1)/in)
		}
		if needSoonR > 0 {
			spare = min(sums.silentExcess, needSoonR)
		}
	} else {
		unallocated := spare - spare*sums.needy/max(sums.needy, int64(gc.n))
		iv := int64(o.cfg.Interval)
		largest := gc.left <= LargestFirstIntervals*iv && period >= 2*LargestFirstIntervals*iv
		fair := o.scratch.fairShare(free-unallocated, ri, gc.soon, float64(gc.left), largest)
		allowed := max(min(fair, free-sums.out), 0)
		g += allowed
		r.hadShare = r.hadShare || allowed > 0
		// What nobody needs is spare only as far as nobody holds it.
		spare = min(spare, max(0, free-sums.out-allowed))
		// r's part that others hold beyond what their demand needs comes with
		// the next answers, as they report and give it back (demand that moved
		// from one instance to another). So does all of r's part while r has had
		// no share beyond its count in this window (its demand just appeared):
		// the others' next reports tell whether their demand is still there.
		// Under overload an instance that already had a share is told that only
		// what the others hold beyond twice their parts comes (overFair): none
		// when the parts were handed out by the demand of now (a demand estimate
		// that moves makes a cap a little over its part, and an asker that waits
		// for that waits up to three intervals to be refused: with the parts
		// themselves, three times the requests waiting and two thirds more sync
		// messages on sim/testdata/skew.txt), some when a member got a large cap
		// early in a burst, before the others' demand was known here, and the
		// others' caps now hold the whole limit. Told that nothing comes, r
		// would refuse at once what it gets two of that member's reports later
		// (the lowered cap, then its acknowledgement): issue 12, explorer
		// scenario 176, a member at 5 of a limit of 140 with 18 admitted in all
		// refused until its own next report. In a window longer than the
		// horizon, all that the others hold beyond their near-term need may
		// come: a burst at r (demand this answer does not know of) gets it at
		// r's next reports, as the owner moves the parts to the new demand.
		switch {
		case !r.hadShare && !(r.heldGrant && r.held+r.base > estR):
			spare += fair - allowed
		case float64(gc.left) > gc.soon:
			spare += max(fair-allowed, sums.excess)
		case fair > allowed: // else nothing is r's that others hold
			over := sums.excess
			if over < fair-allowed { // else overFair would change nothing
				o.scratch.lay()
				over = max(over, overFair(free-unallocated, ri, &o.scratch))
			}
			spare += min(fair-allowed, over)
		}
	}
	o.scratch.unkeep()
	return g, spare + held
}

// unseen is what members this owner has never seen may spend in window w
// without asking. A member counts in its static shares the members alive
// in its view and those it lost lately (PeerMembers); this owner knows
// every member it saw alive since long before (ownerMembers.sorted: a
// member that went is kept twice the longest period). If a member in reach
// counts more, the others are out of this owner's sight, on the other side
// of a partition since before it started (it restarted, say): they fall
// back to their static shares of that many members, which nobody here
// reserved (explorer scenario explore-2-165: n0 restarted after n4 was cut
// off, counted four members where the others counted five, and granted
// them n4's share; 19 admitted of 16). Only while this owner's first view
// is within the reserve horizon (since): a member out of its sight was
// lost before that view, and the others reserve a lost member only so
// long. The lock must be held.
func (o *Owner) unseen(now, since int64, w *ownerWindow, mw *memberWindow) int64 {
	if o.firstView <= since {
		// Out of sight since before the reserve horizon: the members that
		// saw it lost no longer reserve it either.
		return 0
	}
	k, n := o.mostCounted(now, mw, true), len(o.members.sorted)+len(o.left)
	if k <= n {
		return 0
	}
	// An unseen member counts in its own share the members it knew when
	// it was cut off: not this one if it is new (no earlier run of it was
	// known), since it joined after the cut (scenario join-unseen: n2,
	// cut off, counted three members and spent a third of the limit).
	counts := k
	if o.prevRun == 0 && counts > 1 {
		counts--
	}
	return int64(k-n) * ((w.threshold + int64(counts) - 1) / int64(counts))
}

// grantsUnseen reports whether another owner, or an earlier run of this
// one, may have granted budget in window w that no member reported here,
// beyond the members whose slots say so (slotSums.unknown): the owner
// then keeps the pool back for the rest of the window. hidden is the
// window's counts known only through a previous owner. The lock must be
// held.
func (o *Owner) grantsUnseen(now int64, key Key, w *ownerWindow, gc *grantContext, mw *memberWindow, hidden int64) bool {
	// An owner whose first view came after the window began (it joined,
	// or restarted, during it), in a window another owner granted caps in,
	// cannot know who was a member when the window began. If a member
	// counts more members than it knows, some are out of its sight (on
	// the other side of a partition, say), and the owner before it kept
	// their part of the limit: the members that report caps it granted
	// share those, and get nothing more in this window (explorer scenario
	// 148: n4 joined the side of one member cut off from three, took a
	// key over, and handed that side the limit; 25 admitted of 20).
	if gc.inherited && w.nForeign > 0 && o.firstView > key.WindowStart-int64(o.cfg.Settle) && o.knowsFewer(now, mw) {
		return true
	}
	// This member restarted, and its earlier run was alive in this window:
	// as an owner it may have admitted and granted itself budget that no
	// member knows of (see PreviousRun). Unless a member brings a total
	// that run answered, or totals of another owner that hold counts no
	// member reported here (hidden: an owner that took the window over
	// while this member was away learnt them from the members that had
	// that run's totals), this owner grants nothing in the window.
	return o.prevRun > key.WindowStart && key.WindowStart < o.firstView && !w.prevRunKnown && hidden == 0
}

// grantContext is what a grant derives once from the time, the key, the
// window and the membership, for every member's slot.
type grantContext struct {
	now, start       int64
	hash             uint64
	threshold        int64
	n                int // members that may spend in the window
	mw               *memberWindow
	weight           float64 // of the previous window's counts (sliding tiers)
	contactT         int64
	lostBefore       int64
	takeBack         bool
	deadOK           bool // the members found stopped stay so (SetMembersStopped, SetMajority)
	inherited, owned bool
	otherSide        bool // see sideBound
	// cutSide: a member that lost contact with this owner during the
	// window reported holding another owner's cap in it. That owner took
	// its side's budget from what its members held of this owner's
	// (Report.CapFrom), and may have given one member more than this
	// owner let it hold, out of what another gave up: the caps of the
	// members that reported less than they held here (cutShare) may be
	// held by those that have not reported yet, on top of their own
	// reserves (see cutBound; sim/testdata/heal-budget-moved: the other
	// side's owner moved budget from n3 to n4 by their demand, n3
	// reported first at the heal, and this owner handed out what n3 gave
	// up while n4 held it: 1,025 admitted of 1,000).
	cutSide bool
	// priorQuiet: the window was taken over, and the owner before this
	// one knew of counts in it and in the one before only of members that
	// reported here (see priorQuiet).
	priorQuiet bool
	snapped    bool // a member brought a total of the owner before in this window
	// sideBack: 0 not worked out yet, 1 every member out of contact when
	// the window began came back, 2 not (see Owner.sideBack).
	sideBack int8
	left     int64   // ns left in the window
	period   int64   // the window's length, ns
	soon     float64 // ns ahead the members' demand is projected first
	interval float64 // ns between a member's reports
}

// priorQuiet reports whether the owner before this one, taking window w
// and its previous window prev over, knew of counts in prev (and in w, if
// a member brought its total there) only of members that reported here
// (snapsAccounted): a member that has not reported here had none there as
// of its last answers. The lock must be held.
func priorQuiet(w, prev *ownerWindow) bool {
	return prev != nil && prev.snapsAccounted() && (w.snaps == 0 || w.snapsAccounted())
}

// snapsAccounted reports whether the totals of the owner before this one
// that the window's origins brought (their snapshots, all of one run of
// one owner) say that, when it gave the largest of them, the counts it
// knew were all counts of those origins. Totals only grow: an origin's
// count in the owner's total at that answer is at least what the owner
// acknowledged to it in its own (an earlier or the same answer, since it
// is no larger), so the largest total less those acknowledgements bounds
// what the owner knew of every other member, itself included. The lock
// must be held.
func (w *ownerWindow) snapsAccounted() bool {
	var from string
	var inc uint64
	var largest, acked int64
	for _, x := range w.origins {
		switch {
		case x.snapFrom == "":
			continue
		case x.snapHead != 0:
			return false // a total an earlier run of this owner answered
		case from == "":
			from, inc = x.snapFrom, x.snapInc
		case x.snapFrom != from || x.snapInc != inc:
			return false
		}
		largest = max(largest, x.snapOthers+x.snapOwn)
		acked += x.snapOwn
	}
	return from != "" && largest <= acked
}

// grantContext fills gc for a grant at now of key's window w (prev the
// window before, nil if none), whose members are mw. It fills it in
// place: a struct built apart and copied waits for its own writes.
func (o *Owner) grantContext(gc *grantContext, now int64, key Key, w, prev *ownerWindow, mw *memberWindow) {
	period := int64(key.Period)
	gc.now, gc.start, gc.hash, gc.threshold = now, key.WindowStart, w.series.hash, w.threshold
	gc.n, gc.mw, gc.contactT = len(mw.names), mw, int64(o.cfg.Contact)
	gc.weight = 0
	if elapsed := now - key.WindowStart; w.alg == Sliding && elapsed >= 0 && elapsed < period {
		gc.weight = float64(period-elapsed) / float64(period)
	}
	// Under the majority rule, a member out of contact since Term plus
	// Contact before the window began has been restricted to its safe
	// share since before it began (it noticed within Contact), if it is
	// not on this owner's side, which reaches a majority. Only once the
	// membership counts it gone, though: a member still in view is reached
	// by some members (memberlist probes it through others), so it may
	// reach a majority itself, and fall back to its static share for
	// this owner's keys.
	gc.takeBack = o.cfg.Majority && o.majority
	gc.deadOK = o.majority
	gc.lostBefore = key.WindowStart - int64(o.cfg.Term) - gc.contactT
	// Another owner granted caps in this window if a member reports holding
	// one: this owner took the window over (or the membership was split).
	gc.inherited, gc.owned = w.inherited, w.ownedThroughout
	if w.nForeign > 0 {
		gc.inherited, gc.owned = true, false
	}
	gc.otherSide, gc.cutSide = w.otherSide, w.cutSide
	gc.priorQuiet, gc.snapped = gc.inherited && priorQuiet(w, prev), w.snaps > 0
	gc.sideBack = 0
	// What nobody needs is judged over the time left in the window; the
	// members' parts follow their demand over the next NeedHorizon
	// intervals at most. Projected over a day-long window, any demand is
	// more than the limit, and the parts would follow nothing but the
	// number of members with demand.
	gc.left = max(0, period-(now-key.WindowStart))
	gc.period = period
	gc.soon = float64(min(gc.left, NeedHorizon*int64(o.cfg.Interval)))
	gc.interval = float64(o.cfg.Interval)
}

// inContact reports whether a member (its contact record cr, nil if it
// has none) is in contact with the owner at gc's time: alive, and it
// acknowledged an answer sent within the contact period.
func (gc *grantContext) inContact(cr *contact, alive bool) bool {
	return alive && gc.now-contactAt(cr, gc.now) < gc.contactT
}

// est is a member's own estimate, as the member itself computes it, from
// its states in the window and the one before.
func (gc *grantContext) est(s, ps *originState) int64 {
	var e int64
	if s != nil {
		e = s.total()
	}
	if ps != nil {
		e += weighted(ps.total(), gc.weight)
	}
	return e
}

// A member's slot is what a grant to another member needs to know of it,
// taken from its states and contact record: whether the owner reserves
// what it may spend without asking (firm, silent) or splits the rest with
// it (reach), and what these are made of. What depends on the time (its
// estimate on a sliding tier, its needs over the time left) is weighed at
// each grant (tally). A slot is taken again when the member reports (see
// refreshSlot), when its contact record changes (an acknowledgement), and
// when it would fall out of contact by the time alone.
type memberSlot struct {
	kind              slotKind
	unknown, settling bool   // it may hold caps another owner granted (see grant)
	inContact         bool   // silent: it is in contact, so it reports within an interval
	ver               uint64 // the count of changes of its contact record it was taken at
	flipAt            int64  // when it falls out of contact unless it acknowledges an answer
	x                 int64  // firm: the cap it holds; silent: the cap it carried
	static            int64  // the share it may fall back to (its safe share when taken back)
	cur, prev         int64  // its counts in the window and the one before
	capNow            int64  // reach: the cap it holds
	// side is its static share if it was out of contact before the window
	// began (whatever its kind: it may have come back since), foreign the
	// smallest cap another owner granted it that it reported (-1: none).
	side, foreign int64
	// cutShare is the state's (see originState), and away whether it is
	// out of contact.
	cutShare int64
	away     bool
	// back: it was out of contact when the window began and came back
	// with nothing to report here, as did the others (see sideBack).
	back bool
	// counts is how many members it said it counts (PeerMembers; 0: it
	// did not say).
	counts        int
	rate, instant float64 // reach: its demand
	moved         bool    // reach: its traffic seems to have moved away (see moved)
}

type slotKind uint8

const (
	slotFirm   slotKind = iota // it reported and is out of contact: what it may spend
	slotSilent                 // it has not reported: what it may hold
	slotReach                  // in contact and reported: it gets a part
)

// windowSlots is a window's member slots, by place in the member window. A
// window with many origins keeps them (windowView.slots) from one grant to
// the next while the membership, the previous window, the threshold and
// what the owner knows of other owners' grants stay the same, so that a
// grant reads each member's slot, a few words in one array, instead of its
// states and contact record.
type windowSlots struct {
	slots []memberSlot
	taken slotsKey     // what they were taken under: anything else takes them again
	gc    grantContext // of the last grant
	// The slots' parts in a tally (see keepSums), by place, and their sum,
	// weighed at tt; valid while summed. The needs and holds are the
	// parts' too, by place, as tally lists them: kept apart so that a
	// grant lays them out for fairShare with three copies (gathered from
	// the parts instead, a report with 100 origins took 1.2-1.5 us
	// instead of 0.58 in BenchmarkOwnerReport: three runs on a loaded
	// machine).
	summed            bool
	tt                tallyTime
	parts             []slotPart
	sum               partSum
	soon, left, holds []int64
	// soonTree and leftTree order the members' needs for fairShare (see
	// tree).
	soonTree, leftTree needTree
	treesOK            bool    // the trees hold the kept needs (buildTrees)
	over               []int64 // buildTrees': the needs beyond the first
	order              []int32 // and the trees' order
	minFlip            int64   // the earliest flipAt of the slots summed
	changes            uint64  // the contact changes applied (ownerMembers.changes)
	served             int     // the grants served since the sums were weighed
}

// tallyTime is what a slot's part in a tally depends on besides the slot:
// the time it is weighed at (gc's weight, left and soon at at), and until
// when kept sums weighed then serve (see keepSums).
type tallyTime struct {
	at, until      int64
	weight         float64
	left           int64
	soon, interval float64
}

// slotPart is what one member's slot adds to a tally (see tally).
type slotPart struct {
	firm, silent, e, out, excess, silentExcess int64
	soon, left, hold                           int64 // its needs and hold, 0 unless in reach
	unknown, settling, moved                   bool  // moved: in reach with a need, its traffic moved away
}

// partSum is slotParts added up, with the flags counted.
type partSum struct {
	firm, silent, e, out, excess, silentExcess, needs int64
	needy, unknown, settling, moved                   int
}

// add adds p to the sum, or takes it off (sign -1).
func (t *partSum) add(p *slotPart, sign int64) {
	t.firm += sign * p.firm
	t.silent += sign * p.silent
	t.e += sign * p.e
	t.out += sign * p.out
	t.excess += sign * p.excess
	t.silentExcess += sign * p.silentExcess
	t.needs += sign * p.left
	n := int(sign)
	if p.left > 0 {
		t.needy += n
	}
	if p.unknown {
		t.unknown += n
	}
	if p.settling {
		t.settling += n
	}
	if p.moved {
		t.moved += n
	}
}

// slotSums is what the sum of the other members' parts gives a grant to
// a member whose needs over the rest of the window are needLeft.
func (t *partSum) slotSums(needLeft int64) slotSums {
	s := slotSums{
		firm: t.firm, silent: t.silent, e: t.e, out: t.out, excess: t.excess, silentExcess: t.silentExcess,
		needs: t.needs + needLeft, needy: int64(t.needy), unknown: t.unknown > 0, settling: t.settling > 0,
	}
	if needLeft > 0 {
		s.needy++
	}
	return s
}

// part sets p to what slot s adds to a tally weighed at tt.
func (tt *tallyTime) part(s *memberSlot, p *slotPart) {
	*p = slotPart{unknown: s.unknown, settling: s.settling}
	e := s.cur + weighted(s.prev, tt.weight)
	switch s.kind {
	case slotFirm:
		p.firm = max(s.x, e, s.static)
	case slotSilent:
		p.silent = max(s.x, e, s.static)
		// A carried cap beyond what the member's demand at its last
		// report needs comes back at its first report here, within an
		// interval if it is in contact.
		if s.inContact {
			p.silentExcess = max(0, s.x-e-int64(math.Ceil(s.instant*tt.soon)))
		}
	case slotReach:
		out := max(0, s.capNow-e)
		p.e, p.out = e, out
		// Beyond what its current demand needs, a member gives back at
		// its next report what it holds (its smoothed need fades).
		p.excess = max(0, out-int64(math.Ceil(s.instant*tt.soon)))
		p.hold = max(0, out-int64(math.Ceil(s.instant*tt.interval)))
		p.soon, p.left = int64(math.Ceil(s.rate*tt.soon)), int64(math.Ceil(s.rate*float64(tt.left)))
		p.moved = p.left > 0 && s.moved
	}
}

// timeOf returns gc's tally time, serving kept sums for a quarter of a
// sync interval and a 64th of the window at most (keepSums), and not
// past the window's start if it is before it: the weight of the window
// before is 0 until then, and near 1 from then on.
func timeOf(gc *grantContext) tallyTime {
	until := gc.now + min(int64(gc.interval)/4, gc.period/64)
	if gc.now < gc.start {
		until = min(until, gc.start)
	}
	return tallyTime{at: gc.now, until: until, weight: gc.weight, left: gc.left, soon: gc.soon, interval: gc.interval}
}

// slotsKey is what a window's kept slots depend on besides the members'
// states and contact records.
type slotsKey struct {
	mw                         *memberWindow
	gen                        uint64 // of the membership (ownerMembers.gen)
	prev                       *ownerWindow
	threshold                  int64
	inherited, owned, takeBack bool
	otherSide, deadOK          bool
	priorQuiet, snapped        bool
}

// slotsFor returns the member slots kept in a window's view for gc. They
// serve if they were taken under the same membership, previous window,
// threshold and knowledge of other owners' grants (tally brings them up
// to date); else they are taken again. The lock must be held.
func (o *Owner) slotsFor(view *windowView, gc *grantContext) *windowSlots {
	sl := &view.slots
	sl.gc = *gc // refreshSlot takes slots with it
	key := slotsKey{gc.mw, o.members.gen, view.prev, gc.threshold, gc.inherited, gc.owned, gc.takeBack, gc.otherSide, gc.deadOK, gc.priorQuiet, gc.snapped}
	if sl.taken == key {
		return sl
	}
	sl.taken = key
	sl.summed = false
	n := len(gc.mw.names)
	if cap(sl.slots) < n {
		sl.slots = make([]memberSlot, n)
	}
	sl.slots = sl.slots[:n]
	for i := range sl.slots {
		o.slotOf(&sl.slots[i], gc, i, view.cur[i], view.prv[i])
	}
	return sl
}

// refreshSlot takes origin s's slot again in the kept slots of its window
// w and of the window after it (where s's state in w is the previous
// window's), after a report of s changed its state. The lock must be held.
func (o *Owner) refreshSlot(w *ownerWindow, s *originState) {
	period := int64(w.series.key.Period)
	if w.view != nil {
		o.refreshIn(w, w.series.window(w.start-period), s.name)
	}
	if next := w.series.window(w.start + period); next != nil && next.view != nil {
		o.refreshIn(next, w, s.name)
	}
}

// refreshIn takes member name's slot in w's kept slots again, prev being
// the window before w.
func (o *Owner) refreshIn(w, prev *ownerWindow, name string) {
	v := w.view
	if v == nil || v.slots.taken.mw == nil || v.slots.taken.gen != o.members.gen || v.slots.taken.prev != prev {
		return // none kept, or taken under another membership
	}
	sl := &v.slots
	i, ok := sl.taken.mw.pos[name]
	if !ok {
		return
	}
	// The view's states, unless the member's is newer than the view.
	s, ps := v.cur[i], v.prv[i]
	if s == nil {
		s = w.find(name)
	}
	if ps == nil && prev != nil {
		ps = prev.find(name)
	}
	sl.gc.sideBack = 0 // members may have come back since the last grant
	o.slotOf(&sl.slots[i], &sl.gc, i, s, ps)
	if sl.summed {
		sl.setPart(i)
	}
}

// setPart weighs slot i's part in the kept sums again.
func (sl *windowSlots) setPart(i int) {
	s := &sl.slots[i]
	var p slotPart
	sl.tt.part(s, &p)
	sl.sum.add(&sl.parts[i], -1)
	sl.sum.add(&p, 1)
	sl.parts[i] = p
	sl.soon[i], sl.left[i], sl.holds[i] = p.soon, p.left, p.hold
	if sl.treesOK {
		sl.tree(i, p.soon, p.left)
	}
	sl.minFlip = min(sl.minFlip, s.flipAt)
}

// tree sets place i's needs in the kept trees: its need over the next
// soon ns in the first, and what it needs over the rest of the window
// beyond that in the second, both while it has the first (fairShare).
func (sl *windowSlots) tree(i int, soon, left int64) {
	sl.soonTree.set(i, soon, soon > 0)
	sl.leftTree.set(i, max(0, left-soon), soon > 0)
}

// keepSums brings the kept sums of a window's slots up to gc's time, for
// a grant in window w that tally serves from them, and sets gc's time
// left and near-term horizon to those they were weighed at. A grant
// then adds up the members other than the one it is for in a few
// operations, instead of walking them all. The sums are weighed again,
// every slot, once they have served as many grants as an eighth of the
// members, or a quarter of a sync interval or a 64th of the window has
// passed since they were (see timeOf), and when a slot may fall out of
// contact by the time alone, or the slots were taken again; in between,
// a slot's part is weighed again when its member reports or its contact
// record changes (setPart). The time they were weighed at is at most a
// quarter of an interval earlier than the grant's: on a sliding tier the
// members' estimates weigh the window before a little more than they do
// now, which reserves for them a little more, never less, and the needs
// are projected over a little more of the window than is left, alike for
// every member. The lock must be held.
func (o *Owner) keepSums(sl *windowSlots, w *ownerWindow, gc *grantContext) {
	m := &o.members
	end := m.changesBase + uint64(len(m.changes))
	now := gc.now
	sl.served++
	if !sl.summed || sl.served > len(sl.slots)/8 || now < sl.tt.at || now >= sl.tt.until || now >= sl.minFlip || sl.changes < m.changesBase || sl.changes > end {
		sl.sumAll(o, w, gc)
		sl.changes, sl.served = end, 1
	} else {
		place := gc.mw.placeOf(len(m.sorted))
		for _, at := range m.changes[sl.changes-m.changesBase:] {
			i := place[at]
			if i < 0 || sl.slots[i].ver == m.vers[at] {
				continue
			}
			o.slotOf(&sl.slots[i], gc, int(i), w.view.cur[i], w.view.prv[i])
			sl.setPart(int(i))
		}
		sl.changes = end
	}
	gc.left, gc.soon = sl.tt.left, sl.tt.soon
}

// treeMin is the fewest members a window with kept sums orders their
// needs in trees for (fairShare): with fewer, water-filling over the
// needs laid out by place costs less than keeping the trees (sim
// BenchmarkScale at 100 instances, where a third of the members report a
// key in an interval: the trees' upkeep took 2.3 s of the grants' 5.8 s).
const treeMin = 128

// keepMin is the fewest members a window keeps sums of their slots for
// (keepSums): with fewer, walking them at every grant costs less
// (BenchmarkOwnerReport: 340 ns a report with 10 origins walked, 500 ns
// from kept sums weighed again every other grant).
const keepMin = 32

// sumAll weighs every slot's part at gc's time, taking again those whose
// contact changed or that fall out of contact by now.
func (sl *windowSlots) sumAll(o *Owner, w *ownerWindow, gc *grantContext) {
	sl.tt = timeOf(gc)
	n := len(sl.slots)
	if cap(sl.parts) < n {
		sl.parts = make([]slotPart, n)
		sl.soon, sl.left, sl.holds = make([]int64, n), make([]int64, n), make([]int64, n)
	}
	sl.parts, sl.soon, sl.left, sl.holds = sl.parts[:n], sl.soon[:n], sl.left[:n], sl.holds[:n]
	sl.sum, sl.minFlip = partSum{}, math.MaxInt64

	vers, at := o.members.vers, gc.mw.at
	for i := range sl.slots {
		s := &sl.slots[i]
		if vers[at[i]] != s.ver || gc.now >= s.flipAt {
			o.slotOf(s, gc, i, w.view.cur[i], w.view.prv[i])
		}
		p := &sl.parts[i]
		sl.tt.part(s, p)
		sl.sum.add(p, 1)
		sl.soon[i], sl.left[i], sl.holds[i] = p.soon, p.left, p.hold
		sl.minFlip = min(sl.minFlip, s.flipAt)
	}
	sl.summed, sl.treesOK = true, false // the time moved every need: the trees anew when asked
}

// buildTrees makes the kept trees anew from the kept needs, in one pass
// each.
func (sl *windowSlots) buildTrees() {
	in := func(i int) bool { return sl.soon[i] > 0 }
	sl.order = sl.soonTree.build(sl.soon, in, sl.order)
	sl.over = sl.over[:0]
	for i := range sl.soon {
		sl.over = append(sl.over, max(0, sl.left[i]-sl.soon[i]))
	}
	sl.order = sl.leftTree.build(sl.over, in, sl.order)
	sl.treesOK = true
}

// slotOf fills sl with the slot of member i of gc's member window, whose
// states in the window and the one before are s and ps (nil if none). The
// lock must be held.
func (o *Owner) slotOf(sl *memberSlot, gc *grantContext, i int, s, ps *originState) {
	at := gc.mw.at[i]
	cr, alive := o.members.contact[at], o.members.isAlive[at]
	sl.kind, sl.unknown, sl.settling, sl.inContact = slotSilent, false, false, false
	sl.ver, sl.flipAt = o.members.vers[at], math.MaxInt64
	sl.x, sl.static, sl.cur, sl.prev, sl.instant = 0, 0, 0, 0, 0
	sl.side, sl.foreign, sl.counts, sl.cutShare, sl.back = 0, -1, 0, 0, false
	if cr != nil {
		sl.counts = cr.members
	}
	if s != nil && s.hasForeign {
		sl.foreign, sl.cutShare = s.foreignCap, s.cutShare
	}
	if s != nil {
		sl.cur = s.total()
	}
	if ps != nil {
		sl.prev = ps.total()
	}
	inContact := gc.inContact(cr, alive)
	if inContact && cr != nil && !cr.self {
		sl.flipAt = contactAt(cr, gc.now) + gc.contactT
	}
	sl.away = !inContact
	c := contactBefore(cr, gc.start, gc.now)
	// d is when it was found stopped (SetMembersStopped), if it still is.
	d := o.members.deadAt[at]
	stopped := d > 0 && gc.deadOK && !alive
	if stopped && !inContact && d+int64(StoppedClockSlack) <= gc.start {
		// It had stopped before the window began (StoppedClockSlack
		// for the members' clocks): it holds nothing here and spends
		// nothing, so only its counts stay. On a sliding tier its
		// previous window still weighs, with what it may have admitted
		// there after its last report (stoppedSpend).
		if ps != nil && gc.weight > 0 {
			sl.static = sl.cur + weighted(max(o.stoppedSpend(ps, d, o.capNow(ps, cr)), sl.prev), gc.weight)
		}
		if s != nil {
			sl.kind = slotFirm
		}
		return
	}
	if gc.takeBack && !inContact && !alive && c < gc.lostBefore {
		sl.static = SafeShare(gc.threshold, gc.n, i, gc.hash, o.cfg.SafeShare)
		if s != nil {
			sl.kind = slotFirm
		}
		return
	}
	if o.outAtStart(c, gc.start) {
		sl.static = StaticShare(gc.threshold, gc.n, i, gc.hash)
		if cr != nil && cr.members > 0 && cr.members < gc.n {
			// It splits the limit among the members it counted when it
			// last reached this owner: members that joined since (on
			// this side of a partition) make its share no smaller.
			sl.static = max(sl.static, (gc.threshold+int64(cr.members)-1)/int64(cr.members))
		}
		sl.side = sl.static
		if s == nil && o.backSince(cr, inContact, gc.start) && o.sideBack(gc) {
			// It came back with nothing to report here, and so did every
			// member out of contact when the window began: none of them
			// spent anything in it (see backSince).
			sl.static, sl.back = 0, true
		}
	}
	switch {
	case s != nil && inContact:
		sl.kind, sl.static = slotReach, 0
		sl.capNow, sl.rate, sl.instant, sl.moved = o.capNow(s, cr), s.rate(), s.instant, s.moved
		return
	case s != nil:
		if o.holdsGrant(s, cr) {
			sl.static = 0 // it left its static share for this owner's grant
		}
		sl.kind, sl.x = slotFirm, o.capNow(s, cr)
		if stopped {
			// It stopped during the window: what it spent after its last
			// report is bounded by its demand, not only by its cap.
			sl.x = o.stoppedSpend(s, d, sl.x)
		}
		return
	}
	// A cap it may carry into the window: it carries one if it heard from
	// this owner within CarryWithin before the window began, judged from
	// the newest answer it acknowledged (plus Contact, in which it may
	// have heard later ones), and never from an answer later than the
	// last one sent to it (an interval's slack for latency and skew).
	carryFrom := gc.start - int64(CarryWithin(o.cfg.Contact))
	if ps != nil && o.carries(ps, cr) && c >= carryFrom-gc.contactT && lastSent(cr) >= carryFrom-int64(o.cfg.Interval) {
		sl.x, sl.instant, sl.inContact = o.capNow(ps, cr), ps.instant, inContact
	}
	// Another owner may have granted it a cap in this window if it lost
	// contact during the window (unless this owner owned the series in all
	// its views since the window began), or has not sent a batch under
	// this owner's view since the membership changed (its view, which may
	// name another owner, differs; this owner's own view is its own, so it
	// holds another owner's cap only in a series it took over).
	self := cr != nil && cr.self
	if gc.priorQuiet && stopped && s == nil && ps == nil && cr != nil && !cr.self && o.stoppedSoon(lastSent(cr), d) &&
		(gc.snapped || lastSent(cr) < gc.start) {
		// It was found stopped within two intervals of its last batch
		// here, and had no counts in this window or the one before that
		// the owner before this one knew of (priorQuiet): it held no cap
		// to carry, and in its last moments, with no demand, it was
		// granted none (an owner's grants follow demand, its own as the
		// owner before this one too). In this window that owner's totals
		// say so only if a member brought one (snapped); else only a
		// member whose last batch came before the window began, and that
		// lived into it two intervals at most, is taken at its demand in
		// the window before: an owner that served the window alone for a
		// while, and admitted what no member reported, is not. Held for
		// unknown, it kept the pool back for the rest of the window:
		// explorer scenario 380 (seed 1), whose owner stopped 380 ms
		// before a 10 s window began and was found stopped just after,
		// admitted 32 of its 1,978 there.
		return
	}
	if gc.inherited && ((!inContact && sl.static == 0 && !gc.owned) || (inContact && !o.synced(gc.mw.names[i], cr) && !(self && gc.owned))) {
		sl.unknown, sl.settling = true, inContact
	}
}

// backSince reports whether a member out of contact when a window began
// at start, in contact now (inContact), has since reported here every
// window it admitted anything in: a batch built under this owner's
// membership view, which reports every window the member has traffic in
// among this owner's keys (Acknowledge's view), acknowledged an answer
// this owner sent after the window began. Everything the member admitted
// in the window before that answer reached it is in that batch or an
// earlier one, and from then on it no longer falls back to its static
// share there (a member falls back in a window when it has heard nothing
// from its owner since FallbackAfter before the window began): it asks
// first. The lock must be held.
func (o *Owner) backSince(cr *contact, inContact bool, start int64) bool {
	return inContact && cr != nil && !cr.self && cr.syncedAck >= start
}

// sideBack reports whether every member of gc's window that was out of
// contact when the window began has come back (backSince). One that came
// back with no report here spent nothing in the window, but while another
// is still away, that one may have spent both shares: an owner on their
// side of a partition splits their shares by demand (see sideBound). It
// is worked out once per grant. The lock must be held.
func (o *Owner) sideBack(gc *grantContext) bool {
	if gc.sideBack == 0 {
		gc.sideBack = 1
		for _, at := range gc.mw.at {
			cr := o.members.contact[at]
			if cr != nil && cr.self {
				continue
			}
			if o.outAtStart(contactBefore(cr, gc.start, gc.now), gc.start) && !o.backSince(cr, gc.inContact(cr, o.members.isAlive[at]), gc.start) {
				gc.sideBack = 2
				break
			}
		}
	}
	return gc.sideBack == 1
}

// slotSums is what a grant adds up of the members other than the one it
// is for.
type slotSums struct {
	firm, silent      int64 // what is reserved for the members out of reach
	unknown, settling bool  // some may hold caps another owner granted (see grant)
	e                 int64 // the estimates of those in reach
	out               int64 // the caps they hold beyond their estimates
	excess            int64 // and beyond what their near-term demand needs
	silentExcess      int64 // caps carried by silent members beyond their demand's need
	needs             int64 // their needs over the rest of the window, r's included
	needy             int64 // how many have demand, r included
}

// tally adds up the slots of the members other than r as of gc's time:
// those kept in sl, taking again those whose contact changed since, or,
// without kept slots (sl nil: a window with few origins), each member's
// taken from its states in w and prev as it goes. It lists every member's
// needs by place in sc for fairShare (its needs over the next soon ns and
// over the rest of the window), with r's (needSoon, needLeft) at r's
// place, which it returns (the last place, len(gc.mw.names), if r is not a
// member). With kept, keepSums brought sl's kept sums up to date for this
// grant: tallyKept adds them up instead. The lock must be held.
func (o *Owner) tally(sl *windowSlots, kept bool, w, prev *ownerWindow, gc *grantContext, r *originState, needSoon, needLeft int64, sc *grantScratch) (slotSums, int) {
	soonNeeds, leftNeeds, holds := sc.needs[:0], sc.left[:0], sc.holds[:0]
	sc.movedAt = sc.movedAt[:0]
	var sum partSum // of the others' parts
	if sl == nil && o.othersQuiet(w, prev, gc, r) {
		// No other member has a state here or in the window before, and
		// each is one whose slot would say so: nothing reserved, nothing
		// held, no demand (see othersQuiet). Their places get zero needs.
		n := len(gc.mw.names)
		q := &o.quiet
		if !q.rKnown || q.rName != r.name {
			q.rPos, q.rIn = gc.mw.pos[r.name]
			q.rName, q.rKnown = r.name, true
		}
		ri := q.rPos
		if !q.rIn {
			ri = n
		}
		m := max(n, ri+1)
		soonNeeds, leftNeeds, holds = zeros(soonNeeds, m), zeros(leftNeeds, m), zeros(holds, m)
		soonNeeds[ri], leftNeeds[ri] = needSoon, needLeft
		if needLeft > 0 && r.moved {
			sc.movedAt = append(sc.movedAt, ri)
		}
		sc.needs, sc.left, sc.holds = soonNeeds, leftNeeds, holds
		return sum.slotSums(needLeft), ri
	}
	if kept {
		return o.tallyKept(sl, w, gc, r, needSoon, needLeft, sc)
	}
	if sl != nil {
		sl.summed = false // the loop below may take slots again without their parts
	}
	tt := timeOf(gc)
	vers, at := o.members.vers, gc.mw.at
	ri := len(gc.mw.names)
	var taken memberSlot
	var p slotPart
	var side sideBound
	var cut cutBound
	for i, m := range gc.mw.names {
		// The member's states: the view's with kept slots, else looked up.
		var cur, ps *originState
		if sl != nil {
			cur, ps = w.view.cur[i], w.view.prv[i]
		} else {
			cur = w.find(m)
			if prev != nil && cur != r {
				ps = prev.find(m)
			}
		}
		if cur == r {
			ri = i
			soonNeeds, leftNeeds, holds = append(soonNeeds, 0), append(leftNeeds, 0), append(holds, 0)
			if gc.otherSide || gc.cutSide {
				o.slotOf(&taken, gc, i, cur, ps)
			}
			if gc.otherSide {
				side.add(&taken, taken.cur+weighted(taken.prev, gc.weight))
			}
			if gc.cutSide {
				cut.add(&taken, false)
			}
			continue
		}
		s := &taken
		if sl != nil {
			s = &sl.slots[i]
			if vers[at[i]] != s.ver || gc.now >= s.flipAt {
				o.slotOf(s, gc, i, cur, ps)
			}
		} else {
			o.slotOf(s, gc, i, cur, ps)
		}
		e := s.cur + weighted(s.prev, gc.weight)
		if gc.otherSide {
			side.add(s, e)
		}
		if gc.cutSide {
			cut.add(s, true)
		}
		tt.part(s, &p)
		sum.add(&p, 1)
		if p.moved {
			sc.movedAt = append(sc.movedAt, i)
		}
		soonNeeds, leftNeeds, holds = append(soonNeeds, p.soon), append(leftNeeds, p.left), append(holds, p.hold)
	}
	t := sum.slotSums(needLeft)
	t.silent += side.extra() - side.cut(gc.threshold, gc.n)
	t.firm += cut.extra()
	if ri == len(gc.mw.names) {
		soonNeeds, leftNeeds, holds = append(soonNeeds, 0), append(leftNeeds, 0), append(holds, 0)
	}
	soonNeeds[ri], leftNeeds[ri] = needSoon, needLeft
	if needLeft > 0 && r.moved {
		sc.movedAt = append(sc.movedAt, ri)
	}
	sc.needs, sc.left, sc.holds = soonNeeds, leftNeeds, holds
	return t, ri
}

// tallyKept is tally from a window's kept sums (see keepSums): the sum
// of every member's part less r's own, and the needs and holds by place
// as kept, with r's in its place. The lock must be held.
func (o *Owner) tallyKept(sl *windowSlots, w *ownerWindow, gc *grantContext, r *originState, needSoon, needLeft int64, sc *grantScratch) (slotSums, int) {
	n := len(sl.slots)
	ri := n
	if i := int(r.vpos); i < n && w.view.cur[i] == r {
		ri = i
	} else if i, ok := gc.mw.pos[r.name]; ok && w.view.cur[i] == r {
		ri = i
	}
	sum := sl.sum
	if ri < n {
		sum.add(&sl.parts[ri], -1)
	}
	t := sum.slotSums(needLeft)
	sc.kept, sc.ri, sc.rSoon, sc.rLeft, sc.inTrees = sl, ri, needSoon, needLeft, false
	if ri == n || n < treeMin {
		sc.lay() // r has no place in the trees, or the walks cost less
	}
	sc.movedAt = sc.movedAt[:0]
	if sum.moved > 0 {
		for i := range sl.parts {
			if i != ri && sl.parts[i].moved {
				sc.movedAt = append(sc.movedAt, i)
			}
		}
	}
	if needLeft > 0 && r.moved {
		sc.movedAt = append(sc.movedAt, ri)
	}
	return t, ri
}

// zeros returns s resliced (grown if need be) to n zeros.
func zeros(s []int64, n int) []int64 {
	if cap(s) < n {
		return make([]int64, n)
	}
	s = s[:n]
	for i := range s {
		s[i] = 0
	}
	return s
}

// quietCache is what othersQuiet found of a member window at a window
// start: which members were out of contact when the window began
// (outAtStart), the only thing of a member without states in a window and
// the one before that adds to a grant there (see othersQuiet). It is taken
// again when the membership or a contact record changes (ownerMembers.gen,
// records), for another member window or start (the zero value's window
// is nil, which no grant's is), and when the time crosses
// the start less Contact plus an interval (from, until), before which this
// owner and a member without a record count as out of contact at the
// start.
type quietCache struct {
	mw           *memberWindow
	start        int64
	gen, records uint64
	from, until  int64 // it holds for grants at now in [from, until)
	// loud is how many members were out of contact at the start, and one
	// of them (its place in the member window): a grant to that one's own
	// state is quiet too, since tally takes no slot of the member a grant
	// is for.
	loud, one int
	// rName is the origin of the last grant that used the cache, and rPos
	// its place in the member window (rIn: it has one): a batch's grants
	// are all for one origin.
	rName       string
	rPos        int
	rIn, rKnown bool
}

// othersQuiet reports whether the members of gc's member window other than
// r's would each add nothing to a grant to r in window w (tally): r is the
// only origin of w, no other member has a state in the window before
// (prev), the window was neither taken over from another owner nor split
// from one (inherited, otherSide, cutSide), and no member other than r's
// was out of contact when the window began. The slot (slotOf) of a member
// without states is then silent and holds nothing: no static share (it
// was not out of contact at the start; a member the majority rule takes
// back was, since lostBefore comes before that), no carried cap (it has no
// state in the window before), no other owner's cap (the window is not
// inherited), and its contact now changes only what cutSide reads. The
// members' part is kept (quietCache), so that a grant to the only origin
// of a window costs no walk of the members. The lock must be held.
func (o *Owner) othersQuiet(w, prev *ownerWindow, gc *grantContext, r *originState) bool {
	if o.noQuiet || gc.inherited || gc.otherSide || gc.cutSide || len(w.origins) != 1 || w.origins[0] != r {
		return false
	}
	if prev != nil {
		for _, ps := range prev.origins {
			if ps.name != r.name {
				return false
			}
		}
	}
	q := &o.quiet
	m := &o.members
	if q.mw != gc.mw || q.start != gc.start || q.gen != m.gen || q.records != m.records || gc.now < q.from || gc.now >= q.until {
		o.takeQuiet(gc)
	}
	return q.loud == 0 || (q.loud == 1 && gc.mw.names[q.one] == r.name)
}

// takeQuiet fills o.quiet for gc's member window, window start and time
// (see quietCache), judging each member as slotOf does. The lock must be
// held.
func (o *Owner) takeQuiet(gc *grantContext) {
	q := &o.quiet
	m := &o.members
	*q = quietCache{mw: gc.mw, start: gc.start, gen: m.gen, records: m.records, from: math.MinInt64, until: math.MaxInt64}
	edge := gc.start - int64(o.cfg.Contact) + int64(o.cfg.Interval)
	if gc.now < edge {
		// This owner itself and a member without a record were last in
		// contact now (contactAt), which is before edge: out at the start.
		q.until, q.loud = edge, len(gc.mw.at)+1 // quiet for no grant
		return
	}
	q.from = edge
	for i, at := range gc.mw.at {
		// A record's contact before the start does not move with the
		// time (contactBefore): only an acknowledgement changes it.
		if cr := m.contact[at]; cr != nil && !cr.self && o.outAtStart(contactBefore(cr, gc.start, gc.now), gc.start) {
			q.loud, q.one = q.loud+1, i
		}
	}
}

// sideBound bounds what the members out of contact since before a window
// began may hold as a group, once one of them reported holding another
// owner's cap there (grantContext.otherSide). Each is reserved its static
// share, the share it falls back to when it cannot reach an owner. But on
// the other side of a partition an owner of their own splits those shares
// among them by demand: there one member may spend most of its side's
// shares and the others little. When the partition heals, those that
// report first free their unspent shares here while the busy one, which
// has not reported yet, holds far more than its own share (issue 12's 50
// instances with a 30|20 partition: the whole view's owner took the window
// over at the heal and admitted 1,022 of 1,000, sim/testdata
// heal-owner-moves). The other owner gave that side at most its members'
// shares together, so the members that have not reported may hold that
// much less what those that reported were given there (their smallest
// cap from another owner, or their count up to their share without one).
type sideBound struct {
	shares, known, silent, silentN int64
	n, counts                      int // the group's members, and the most members one of them counts
}

// add counts a member's slot (e its estimate) if it is in the group.
func (b *sideBound) add(sl *memberSlot, e int64) {
	if sl.side == 0 {
		return
	}
	b.shares += sl.side
	b.n++
	b.counts = max(b.counts, sl.counts)
	switch {
	case sl.kind == slotSilent && !sl.back:
		b.silent += max(sl.x, e, sl.static)
		b.silentN++
	case sl.foreign >= 0:
		b.known += sl.foreign
	default:
		b.known += min(e, sl.side)
	}
}

// cutBound bounds what the members that lost contact with this owner
// during the window may hold (grantContext.cutSide): those that reported
// another owner's cap there hold less than this owner let them hold by
// their cutShare less that cap, and the others out of contact may hold
// that much more than their reserves. Members out of contact since before
// the window began are sideBound's.
type cutBound struct {
	given int64 // by those that reported another owner's cap, less that cap
	away  bool  // some member out of contact has not reported one
}

// add counts a member's slot; other says it is another member than the
// one the grant is for.
func (b *cutBound) add(sl *memberSlot, other bool) {
	switch {
	case sl.side != 0:
	case sl.foreign >= 0:
		b.given += sl.cutShare - sl.foreign
	case other && sl.away:
		b.away = true
	}
}

// extra is what the members out of contact that have not reported
// another owner's cap may hold beyond their reserves.
func (b *cutBound) extra() int64 {
	if !b.away {
		return 0
	}
	return max(0, b.given)
}

// extra is what the group's silent members may hold beyond the reserves
// of each: 0 if none is silent.
func (b *sideBound) extra() int64 {
	if b.silentN == 0 {
		return 0
	}
	return max(0, b.shares-b.known-b.silent)
}

// cut is how much the group's silent members' reserves (each the most it
// may hold on its own) exceed what the other side's owner can have given
// them all: that owner kept for each of the members outside the group,
// cut off from it, at least its static share of the most members anyone
// in the group counts (members of the window, members), and gave its side
// the rest, of which the members that reported hold known.
func (b *sideBound) cut(threshold int64, members int) int64 {
	if b.silentN == 0 {
		return 0
	}
	given := threshold - int64(members-b.n)*(threshold/int64(max(members, b.counts)))
	return max(0, b.silent-max(0, given-b.known))
}

// LargestFirstIntervals is how many sync intervals before a window's end
// an owner gives the units a water level leaves over to the members with
// the largest needs first instead of the smallest (see waterFill), in
// windows at least twice that long. There a member's part is a unit or
// two, and a unit is spent before the window ends only where requests
// come often. Explorer seed 1 (go run ./cmd/sim -explore 500 -seed 1
// -policy lease): 8,758 windows under the partition-safe reference
// became 8,398 and the windows wrongly denying more than 1% 12,302 became
// 12,034; in every grant, 8,037 and 11,619, but five golden scenarios
// lost (cut-then-join 1% -> 4.3% under, short-tier-lossy's 1 s tier with a
// 1 s sync 11.6% -> 18.2%). So a window of fewer than four intervals, whose
// last two are half of it or more, keeps the smallest needs first
// throughout: short-tier-lossy lost 1,253 -> 1,371 requests over seeds
// 1-5 without that exception.
const LargestFirstIntervals = 2

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

// movedDemand is the demand per sync interval (in cost units) from which
// an origin that reports none is taken for one whose traffic moved away,
// when budget is short (see moved).
const movedDemand = 2

// moved reports whether an origin whose demand rate is rate (per ns) and
// that was offered nothing since its last report seems to be one whose
// traffic moved to another instance (a client that reconnected
// elsewhere): its rate was at least movedDemand per sync interval (of
// interval ns), at which Poisson arrivals leave an interval empty one time
// in seven at most. It stays so while its reports have no demand
// (originState.moved). When the other members need more than is free, the
// grants take its need as gone rather than let it fade over the five
// intervals its rate decays in: its cap comes down to its count at that
// report, the others' parts no longer leave room for it, and what it held
// reaches the instance the traffic went to once it has acknowledged the
// lower cap, an interval later. Fading, the cap held that budget for a
// second or so while the new instance's requests waited for it
// (node.Config.PendingWait), most of them to be refused in the end: with
// the demo's clients moving every 1.7 s the limiter's p99 was about
// PendingWait (cmd/demo-cluster/README.md, "Clients, measured"). An origin
// whose traffic comes back asks at its next request.
func moved(rate, interval float64) bool { return rate*interval >= movedDemand }

// need is what an origin is expected to need over d nanoseconds at the
// rate of its demand: 0 for an idle origin.
func need(s *originState, d float64) int64 {
	return int64(math.Ceil(s.rate() * d))
}

// fairShare splits free among the members by demand, and returns the part
// of the member at place ri; their needs over the next soon ns and over
// the rest of the window (left ns) are in sc, by place (see reach). First
// by what each is expected to need soon (max-min fair, water-filling on
// the next soon nanoseconds); if that leaves some over, every need is met
// and the rest is split the same way by what each is expected to need
// over the rest of the window, so that an origin with little demand does
// not hold budget it cannot spend before the window ends (and that the
// owner must reserve for it if it is cut off). What no one needs is spread
// equally among the origins with demand. Integer units: the parts add up
// to free exactly, or to less when no origin has demand. It water-fills at
// most twice, each in a few O(k) passes for k members with demand (see
// waterFill, which largest is passed to).
func fairShare(free int64, ri int, soon, left float64, largest bool, sc *grantScratch) int64 {
	needs, order := sc.needs, sc.order[:0]
	defer func() { sc.order = order[:0] }()
	if free <= 0 || needs[ri] <= 0 {
		return 0 // nobody (or not r) has demand: nothing to hand out
	}
	var sum int64
	for i, n := range needs {
		sum += n
		if n > 0 {
			order = append(order, i)
		}
	}
	if sum >= free || left <= soon {
		return waterFill(free, needs, order, ri, largest)
	}
	first := needs[ri]
	for _, i := range order {
		needs[i] = max(0, sc.left[i]-needs[i])
	}
	return first + waterFill(free-sum, needs, order, ri, largest)
}

// waterFill splits free among the origins in order (those with demand, in
// ascending place) by their needs, max-min fair, then what no one needs in
// equal parts, and returns the part of origin ri. Max-min fair: each origin
// gets its need or the water level, whichever is smaller, the level being
// what is left over equally among those whose need is above it; the units
// left over from the division go one each to those origins in order of
// need, then place, or with largest the largest needs first (see
// LargestFirstIntervals). When every need is met, the units left over go in
// ascending order of need. Without sorting (see waterLevel); r's turn for
// a left-over unit is a count.
func waterFill(free int64, needs []int64, order []int, ri int, largest bool) int64 {
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
	f := waterLevel(free, needs, order)
	if needs[ri] <= f.level {
		return needs[ri]
	}
	rest := free - f.metSum - f.level*(k-f.met)
	var turn int64
	if largest {
		before = func(a, b int) bool { return needs[a] > needs[b] || needs[a] == needs[b] && a < b }
	}
	for _, i := range order {
		if needs[i] > f.level && before(i, ri) {
			turn++
		}
	}
	if turn < rest {
		return f.level + 1
	}
	return f.level
}

// overFair returns what the members other than the one at place ri hold
// beyond twice their parts of free, split as fairShare splits it when it
// water-fills once (by the needs over the next soon ns), and beyond what
// their demand spends in an interval: at least what they give back at
// their next reports, when the owner sizes their caps to their parts
// again. Twice: a cap granted before the others' demand was known, not
// one that its member's moving demand estimate left a little over its
// part (see grant). sc holds the needs and holds by place as tally left
// them: grant calls it only when the window has no more than soon ns left,
// where fairShare water-fills once and does not rewrite the needs. It
// finds the level fairShare's waterFill found again, which keeps that
// common path in line (routing it through waterLevel cost 4.7%).
func overFair(free int64, ri int, sc *grantScratch) int64 {
	order := sc.order[:0]
	defer func() { sc.order = order[:0] }()
	for i, n := range sc.needs {
		if n > 0 {
			order = append(order, i)
		}
	}
	f := waterLevel(free, sc.needs, order)
	var over int64
	for i, h := range sc.holds {
		if i != ri {
			over += max(0, h-2*f.part(sc.needs[i]))
		}
	}
	return over
}

// fill is how water-filling splits a budget among origins by their needs
// (see waterFill), but for the units left over from the divisions.
type fill struct {
	sum         int64 // the needs
	full        bool  // every need met: sum <= the budget
	spread      int64 // if full, what each origin with demand gets on top of its need
	level       int64 // if not, what each origin whose need is above it gets
	met, metSum int64 // and how many needs are at or under it, and their sum
}

// part is an origin's part of the budget for its need, less the units
// left over.
func (f *fill) part(need int64) int64 {
	switch {
	case need <= 0:
		return 0
	case f.full:
		return need + f.spread
	}
	return min(need, f.level)
}

// waterLevel splits free among the origins in order (those with demand)
// by their needs, max-min fair. The level: every need at or under it is
// met, the rest share what is left equally. It is found by raising it
// from free / len(order) until no more needs fall under it (a few passes;
// it gives the level of a walk through the needs in increasing order,
// which TestWaterFillMatchesSortedWalk checks).
func waterLevel(free int64, needs []int64, order []int) fill {
	var f fill
	k := int64(len(order))
	for _, i := range order {
		f.sum += needs[i]
	}
	if f.sum <= free {
		f.full = true
		if k > 0 {
			f.spread = (free - f.sum) / k
		}
		return f
	}
	// Some need is above the level, since the needs add up to more than
	// free.
	f.level = free / k
	for {
		f.met, f.metSum = 0, 0
		for _, i := range order {
			if needs[i] <= f.level {
				f.met++
				f.metSum += needs[i]
			}
		}
		next := (free - f.metSum) / (k - f.met)
		if next == f.level {
			return f
		}
		f.level = next
	}
}

// grantScratch is the slices a grant works in, kept by the owner (under
// its lock) from one grant to the next so that a grant allocates nothing.
type grantScratch struct {
	gc    grantContext
	needs []int64 // by place: needs over the next soon ns (see reach)
	left  []int64 // and over the rest of the window
	holds []int64 // what each holds beyond its estimate and an interval's demand
	order []int
	// movedAt lists the places of the members whose traffic seems to have
	// moved away (see moved), r's included.
	movedAt []int
	// kept is the window's kept slots when tally added them up from their
	// kept sums (tallyKept): the needs and holds are theirs, by place, with
	// r's (at ri: rSoon, rLeft, no hold) in their trees instead of its
	// slot's, until lay lays them out here.
	kept         *windowSlots
	ri           int
	rSoon, rLeft int64
	inTrees      bool // r's needs are in the kept trees (fairShare)
}

// leftOf is the need over the rest of the window of the member at place
// i.
func (sc *grantScratch) leftOf(i int) int64 {
	switch {
	case sc.kept == nil:
		return sc.left[i]
	case i == sc.ri:
		return sc.rLeft
	}
	return sc.kept.left[i]
}

// lay lays the kept needs and holds out in sc's slices, r's in its
// place, and takes r's needs back out of the kept trees, for the walks
// that need them by place (overFair, and a grant that takes moved
// members' needs away). Nothing if they are laid out already.
func (sc *grantScratch) lay() {
	sl := sc.kept
	if sl == nil {
		return
	}
	sc.needs, sc.left, sc.holds = append(sc.needs[:0], sl.soon...), append(sc.left[:0], sl.left...), append(sc.holds[:0], sl.holds...)
	if sc.ri == len(sl.soon) {
		sc.needs, sc.left, sc.holds = append(sc.needs, 0), append(sc.left, 0), append(sc.holds, 0)
	}
	sc.needs[sc.ri], sc.left[sc.ri], sc.holds[sc.ri] = sc.rSoon, sc.rLeft, 0
	sc.unkeep()
}

// unkeep takes r's needs back out of the kept trees (its slot's in their
// place), at the end of a grant or when lay laid them out.
func (sc *grantScratch) unkeep() {
	sl := sc.kept
	if sl == nil {
		return
	}
	sc.kept = nil
	if sc.inTrees {
		sl.tree(sc.ri, sl.soon[sc.ri], sl.left[sc.ri])
		sc.inTrees = false
	}
}

// fairShare is fairShare over the kept trees while the needs are kept
// there (lay not called), else over sc's slices.
func (sc *grantScratch) fairShare(free int64, ri int, soon, left float64, largest bool) int64 {
	sl := sc.kept
	if sl == nil {
		return fairShare(free, ri, soon, left, largest, sc)
	}
	if !sl.treesOK {
		sl.buildTrees()
	}
	sl.tree(ri, sc.rSoon, sc.rLeft) // unkeep takes them back out
	sc.inTrees = true
	v, in := sl.soonTree.has(ri)
	if free <= 0 || !in || v <= 0 {
		return 0
	}
	sum := sl.soonTree.sumOf(sl.soonTree.root)
	if sum >= free || left <= soon {
		return sl.soonTree.waterFill(free, ri, largest)
	}
	return v + sl.leftTree.waterFill(free-sum, ri, largest)
}

// StoppedDemandFactor is how many times its measured demand a member
// found stopped is taken to have admitted between its last report and the
// moment it was found stopped (stoppedSpend).
const StoppedDemandFactor = 2

// stoppedSoon reports whether a member last heard from at last, found
// stopped at d, stopped within two sync intervals of that: it sends a
// batch every interval, so it stopped within about one, and what it had
// said last is close to what it ended with (stoppedSpend, slotOf).
func (o *Owner) stoppedSoon(last, d int64) bool {
	gap := d - last
	return gap >= 0 && gap <= 2*int64(o.cfg.Interval)
}

// stoppedSpend bounds what a member found stopped at d (SetMembersStopped)
// admitted in a window it reported in, s being its state there and x the
// cap it held: its count at its last report, plus what its demand brought
// from then until d, at StoppedDemandFactor times the larger of its rate
// (its moving average or the decaying peak of its bursts) and its last
// interval's demand, and never more than x. Only for a member whose last
// report came within two sync intervals of d: a member reports every
// interval while it admits, so it stopped within about one of its last
// report; an older report says too little of its last moments, and the
// cap stays. Without the bound the survivors of a process crash lose, in
// the window it happened in, all the cap the dead member had not spent:
// `go run ./cmd/demo-cluster -duration 40s -report json -http off
// -view=false -faults "12s kill n3"` admitted 6,472 of the 6,966
// requests its window could take, 6,687 with it. A burst that reached
// the member in its last interval, beyond twice what it had seen, is
// what the bound may miss.
func (o *Owner) stoppedSpend(s *originState, d, x int64) int64 {
	if !o.stoppedSoon(s.lastSeen, d) {
		return x
	}
	r := max(s.rate(), s.instant)
	return min(x, s.total()+int64(math.Ceil(StoppedDemandFactor*r*float64(d-s.lastSeen)))+1)
}
