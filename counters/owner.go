package counters

import (
	"maps"
	"sort"
	"sync"
	"time"
)

// Report is what one origin tells a key's owner about one window, once per
// sync interval.
type Report struct {
	Key       Key
	Threshold int64
	Algorithm Algorithm
	// Own is the origin's cumulative admitted count in the window.
	Own int64
	// Demand is the cost the origin was offered since its previous report.
	Demand int64
	// Cap is the own count the origin may currently reach: its grant, or
	// its static share when HasGrant is false. The owner must assume the
	// origin can spend up to Cap until the answer to this report arrives.
	Cap      int64
	HasGrant bool
	// KnownGlobal and KnownAcked are the last global total the origin
	// learnt for the window and the part of its own count that total
	// included; KnownFrom and KnownFromIncarnation the owner (and its run)
	// that answered it. They let a new owner keep the counts of origins that
	// will never report to it (they left or crashed): see Owner.
	KnownGlobal          int64
	KnownAcked           int64
	KnownFrom            string
	KnownFromIncarnation uint64
}

// Answer is the owner's reply to one Report.
type Answer struct {
	// Global is the sum of every origin's own count for the window.
	Global int64
	// Grant, when HasGrant is set, is the own count the origin may reach.
	Grant    int64
	HasGrant bool
}

// OwnerConfig configures an Owner.
type OwnerConfig struct {
	// MaxWindows bounds the windows an owner aggregates; past it, reports
	// for new windows are answered from the report alone (no aggregation)
	// and counted in Stats. Default 200,000.
	MaxWindows int
	// Grace keeps a window after its end, for late reports. Default 2 s.
	Grace time.Duration
	// Lease turns on grants (the lease policy). Without it the owner only
	// sums.
	Lease bool
	// ReserveWindows is for how many windows after it was last seen a
	// member that became unreachable is still reserved for: it may be
	// serving on the other side of a partition. Longer keeps both sides of
	// a longer partition within the limit; shorter wastes less budget after
	// a crash (a graceful leave is released at once). Default 3: a partition
	// of up to two whole windows (plus the parts of the windows where it
	// starts and heals) stays within the limit.
	ReserveWindows int
	// Self and SelfIncarnation identify this owner, so that it can tell
	// knowledge it handed out itself from a predecessor's.
	Self            string
	SelfIncarnation uint64
	// Settle is how long after a membership change this owner assumes that
	// a reachable member that has not reported yet in a window may hold a
	// cap granted by another owner: meanwhile no cap grows. A member that
	// holds a cap in a window had traffic in it, so it reports within a
	// sync interval; set Settle to a few sync intervals. Default 2 s.
	Settle time.Duration
}

// Owner aggregates, for the windows whose series this instance owns, the
// cumulative counts every origin reports, and (with Lease) hands each origin
// a share of the budget left. It is a pure state machine: time is an
// argument and it does no I/O. It is safe for concurrent use. The zero value
// is not usable; call NewOwner.
//
// Counts are a G-counter: per origin (name and incarnation) the owner keeps
// the largest cumulative count it saw, so a retried, duplicated or reordered
// report never counts twice, and an origin that restarts (a new incarnation)
// adds to what its previous run admitted.
type Owner struct {
	mu      sync.Mutex
	cfg     OwnerConfig
	windows map[Key]*ownerWindow
	members ownerMembers
	dropped uint64
}

type ownerMembers struct {
	alive map[string]bool
	// gone maps members no longer alive to when they were last seen alive
	// (Unix ns): they may still be spending their share of windows that
	// began before that, on the other side of a partition.
	gone map[string]int64
	// sorted lists every known member, alive or gone.
	sorted []string
	// changedAt is when the set of alive members last changed (Unix ns).
	changedAt int64
	// windows caches window() by its argument until the next SetMembers.
	windows map[int64]*memberWindow
}

// memberWindow is the members that may spend budget in a window, sorted,
// and the same as a set.
type memberWindow struct {
	names []string
	in    map[string]bool
}

// window returns the members that may spend budget in a window whose
// reserve horizon starts at since: those alive, and those last seen alive
// after since. The result is cached until the membership changes; the
// owner's lock must be held.
func (m *ownerMembers) window(since int64) *memberWindow {
	if w := m.windows[since]; w != nil {
		return w
	}
	w := &memberWindow{in: make(map[string]bool, len(m.sorted))}
	for _, name := range m.sorted {
		if m.alive[name] || m.gone[name] >= since {
			w.names = append(w.names, name)
			w.in[name] = true
		}
	}
	if m.windows == nil || len(m.windows) > 64 { // a few windows are live at once
		m.windows = map[int64]*memberWindow{}
	}
	m.windows[since] = w
	return w
}

type ownerWindow struct {
	threshold int64
	alg       Algorithm
	expires   int64
	created   int64          // when this owner first heard of the window (Unix ns)
	origins   []*originState // few: one per instance
}

type originState struct {
	name        string
	incarnation uint64
	base        int64 // own counts of earlier incarnations
	own         int64 // current incarnation's largest cumulative count
	rate        float64
	lastSeen    int64
	held        int64 // cap the origin reported holding
	given       int64 // cap the owner last granted
	hasGiven    bool
	// What the origin last knew from another owner: the others' total
	// (KnownGlobal - KnownAcked), its own part (KnownAcked), and from whom.
	snapOthers, snapOwn int64
	snapFrom            string
	snapInc             uint64
}

func (o *originState) total() int64 { return o.base + o.own }

// capNow is the most the origin may have admitted by the time it hears
// from the owner again.
func (o *originState) capNow() int64 {
	c := o.held
	if o.hasGiven && o.given > c {
		c = o.given
	}
	return c
}

// NewOwner returns an empty owner.
func NewOwner(cfg OwnerConfig) *Owner {
	if cfg.MaxWindows <= 0 {
		cfg.MaxWindows = 200_000
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 2 * time.Second
	}
	if cfg.ReserveWindows <= 0 {
		cfg.ReserveWindows = 3
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 2 * time.Second
	}
	return &Owner{cfg: cfg, windows: make(map[Key]*ownerWindow)}
}

// SetMembers tells the owner, at now, who can spend budget: alive are the
// members it can reach now, gone those it lost, with when each was last
// seen alive. A
// gone member is reserved for in the windows that began less than
// ReserveWindows periods after it was last seen (it may still be serving on
// the other side of a partition) and in none after, so scaling down does
// not leak budget for long. A member that left gracefully should not be in
// gone at all. Both are copied.
func (o *Owner) SetMembers(now time.Time, alive []string, gone map[string]int64) {
	m := ownerMembers{alive: make(map[string]bool, len(alive)), gone: make(map[string]int64, len(gone))}
	for _, a := range alive {
		m.alive[a] = true
		m.sorted = append(m.sorted, a)
	}
	for g, t := range gone {
		if !m.alive[g] {
			m.gone[g] = t
			m.sorted = append(m.sorted, g)
		}
	}
	sort.Strings(m.sorted)
	o.mu.Lock()
	m.changedAt = o.members.changedAt
	if !maps.Equal(m.alive, o.members.alive) {
		m.changedAt = now.UnixNano()
	}
	o.members = m
	o.mu.Unlock()
}

// Report records r from origin (name and incarnation) at now and returns the
// answer: the global total and, with Lease, the origin's new grant.
func (o *Owner) Report(now time.Time, origin string, incarnation uint64, r *Report) Answer {
	nowNs := now.UnixNano()
	o.mu.Lock()
	defer o.mu.Unlock()
	w := o.windows[r.Key]
	if w == nil {
		if len(o.windows) >= o.cfg.MaxWindows {
			o.dropped++
			return Answer{Global: r.Own}
		}
		w = &ownerWindow{expires: r.Key.WindowStart + 2*int64(r.Key.Period) + int64(o.cfg.Grace), created: nowNs}
		o.windows[r.Key] = w
	}
	w.threshold, w.alg = r.Threshold, r.Algorithm
	fresh := w.find(origin) == nil
	st := w.origin(origin)
	switch {
	case incarnation > st.incarnation:
		st.base += st.own
		st.incarnation, st.own = incarnation, r.Own
		st.hasGiven = false
	case incarnation == st.incarnation && r.Own > st.own:
		st.own = r.Own
	}
	stale := incarnation < st.incarnation
	if !stale {
		elapsed := nowNs - st.lastSeen
		if st.lastSeen == 0 || elapsed <= 0 {
			elapsed = max(nowNs-r.Key.WindowStart, int64(time.Millisecond))
		}
		st.rate = float64(r.Demand) / float64(elapsed)
		st.lastSeen = nowNs
		st.held = r.Cap
		// A predecessor's knowledge matters only for origins this owner had
		// no history of in this window: an owner that kept its per-origin
		// counts (say, through a partition and its heal) needs none.
		foreign := r.KnownFrom != "" && (r.KnownFrom != o.cfg.Self || r.KnownFromIncarnation != o.cfg.SelfIncarnation)
		if foreign && (fresh || st.snapFrom != "") {
			st.snapOthers, st.snapOwn = r.KnownGlobal-r.KnownAcked, r.KnownAcked
			st.snapFrom, st.snapInc = r.KnownFrom, r.KnownFromIncarnation
		}
	}
	global := w.total()
	if !o.cfg.Lease || stale {
		return Answer{Global: global}
	}
	grant := o.grant(nowNs, r.Key, w, st)
	st.given, st.hasGiven = grant, true
	// The cap is on the origin's estimate in its current incarnation.
	return Answer{Global: global, Grant: grant - st.base, HasGrant: true}
}

func (w *ownerWindow) origin(name string) *originState {
	for _, s := range w.origins {
		if s.name == name {
			return s
		}
	}
	s := &originState{name: name}
	w.origins = append(w.origins, s)
	return s
}

// total is the window's global count: the sum of the origins' cumulative
// counts, plus the counts only a predecessor owner saw.
func (w *ownerWindow) total() int64 { return w.sum() + w.hidden() }

// hidden estimates the counts of origins that reported to a previous owner
// and will never report here (they left or crashed). An origin o that last
// heard from a previous owner knew the others' total there; every other
// origin that reports here accounts for its part of it (what its own
// previous owner had acknowledged of it: after a partition heals, the two
// sides' owners each knew part of the other side, and the origins of both
// sides report here); the rest is hidden. The largest such estimate is
// kept. Only knowledge from another owner is used, so this owner's own
// answers never feed back into it.
func (w *ownerWindow) hidden() int64 {
	var h int64
	for _, o := range w.origins {
		if o.snapFrom == "" {
			continue
		}
		est := o.snapOthers
		for _, x := range w.origins {
			if x != o {
				est -= x.snapOwn
			}
		}
		h = max(h, est)
	}
	return h
}

// sum adds up the origins' cumulative counts.
func (w *ownerWindow) sum() int64 {
	var sum int64
	for _, s := range w.origins {
		sum += s.total()
	}
	return sum
}

// grant computes origin r's new cap on its own estimate (its count in the
// window, plus for sliding tiers its weighted previous window) so that the
// caps of every member that may spend in the window never add up to more
// than the threshold:
//
//   - committed first, for every member but the reachable reporters: what
//     it has admitted and may still admit. A reachable member silent in this
//     window may spend the cap it carried from the previous window, or its
//     static share before its first answer. An unreachable one keeps the
//     larger of its cap and its static share (its fallback when it cannot
//     reach its owner). Counts of members no longer in the cluster, and
//     counts this owner only knows of through origins' reports, are
//     committed as they are;
//   - if an unreachable member went missing during the window without ever
//     reporting here (the key changed owner while it was cut off), or the
//     membership changed moments ago and a reachable member has not
//     reported yet, nobody's cap grows: it may hold a grant this owner
//     cannot know;
//   - the rest is split among the reachable reporters by demand (max-min
//     fair: everyone gets up to an equal share, the rest by extra demand),
//     and r gets its part as far as the caps the others still hold leave
//     room. The others converge to their part at their next report.
func (o *Owner) grant(now int64, key Key, w *ownerWindow, r *originState) int64 {
	period := int64(key.Period)
	hash := key.SeriesHash()
	pk := key
	pk.WindowStart -= period
	prev := o.windows[pk]
	weight := 0.0
	if elapsed := now - key.WindowStart; w.alg == Sliding && elapsed >= 0 && elapsed < period {
		weight = float64(period-elapsed) / float64(period)
	}
	prevOf := func(name string) *originState {
		if prev == nil {
			return nil
		}
		return prev.find(name)
	}
	// est is a member's own estimate, as the member itself computes it.
	est := func(s *originState, name string) int64 {
		var e int64
		if s != nil {
			e = s.total()
		}
		if ps := prevOf(name); ps != nil {
			e += weighted(ps.total(), weight)
		}
		return e
	}

	mw := o.members.window(key.WindowStart - int64(o.cfg.ReserveWindows)*period)
	members, inView := mw.names, mw.in
	n := len(members)
	// Counts no member in view accounts for: gone members' own counts, and
	// those only a previous owner saw.
	committed := w.hidden()
	if prev != nil {
		committed += weighted(prev.hidden(), weight)
	}
	for _, s := range w.origins {
		if !inView[s.name] && s != r {
			committed += est(s, s.name)
		}
	}
	if prev != nil {
		for _, ps := range prev.origins {
			if !inView[ps.name] && w.find(ps.name) == nil {
				committed += weighted(ps.total(), weight)
			}
		}
	}

	frozen := false
	var reachBuf [16]*originState
	reach := reachBuf[:0]
	// Settling: the membership changed moments ago and this owner may be new
	// to the window (it first heard of it since). An owner that held the
	// window before the change owned the key then, and every member with
	// traffic in the window has reported to it.
	settling := now-o.members.changedAt < int64(o.cfg.Settle) && w.created >= o.members.changedAt
	for i, m := range members {
		s := w.find(m)
		share := StaticShare(w.threshold, n, i, hash)
		e := est(s, m)
		carried := share
		if ps := prevOf(m); ps != nil && ps.hasGiven {
			carried = ps.capNow()
		}
		switch {
		case s == r || (s != nil && o.members.alive[m]):
			reach = append(reach, s)
		case o.members.alive[m]:
			// Silent so far in this window: it may spend its carried cap or
			// its static share before it reports. Just after a membership
			// change it may also hold a cap from the key's previous owner,
			// which it will report within a sync interval: until then, grow
			// nobody's cap.
			committed += max(carried, e)
			if settling {
				frozen = true
			}
		case s != nil:
			committed += max(s.capNow(), share, e)
		default:
			// Unreachable and silent here: at least its static share — both
			// sides of a partition reserving the other side's static shares
			// is what keeps them within the limit together. If it went
			// missing during this window it may also have carried its cap
			// into it, or hold a grant from a previous owner this one
			// cannot know: reserve the carried cap too and grow nobody's
			// cap. If it was gone before the window began, its ring had
			// changed by then, so it carried nothing.
			if o.members.gone[m] >= key.WindowStart {
				committed += max(carried, share, e)
				frozen = true
			} else {
				committed += max(share, e)
			}
		}
	}
	if !contains(reach, r) { // r reports but is not (yet) in our view
		reach = append(reach, r)
	}
	estR := est(r, r.name)
	free := w.threshold - committed
	var othersOut int64
	for _, s := range reach {
		e := est(s, s.name)
		free -= e
		if s != r {
			othersOut += max(0, s.capNow()-e)
		}
	}
	g := estR
	if free > 0 {
		left := max(0, period-(now-key.WindowStart))
		fair := fairShare(free, reach, r, float64(left))
		g += max(min(fair, free-othersOut), 0)
	}
	if frozen {
		g = min(g, max(r.held, estR))
	}
	return g
}

func (w *ownerWindow) find(name string) *originState {
	for _, s := range w.origins {
		if s.name == name {
			return s
		}
	}
	return nil
}

func contains(ss []*originState, s *originState) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// fairShare splits free among origins by their expected need over the time
// left (max-min fair, water-filling), then spreads what no one needs equally,
// and returns r's part. Integer units: the parts add up to free exactly.
func fairShare(free int64, origins []*originState, r *originState, left float64) int64 {
	k := len(origins)
	var needBuf, allocBuf [16]int64
	var doneBuf [16]bool
	need, alloc, done := needBuf[:0], allocBuf[:0], doneBuf[:0]
	if k > len(needBuf) {
		need, alloc, done = make([]int64, 0, k), make([]int64, 0, k), make([]bool, 0, k)
	}
	need, alloc, done = need[:k], alloc[:k], done[:k]
	ri := 0
	for i, s := range origins {
		need[i] = int64(s.rate*left) + 1
		if s == r {
			ri = i
		}
	}
	remaining := free
	active := k
	for remaining > 0 && active > 0 {
		each := remaining / int64(active)
		if each == 0 {
			break
		}
		for i := range origins {
			if done[i] {
				continue
			}
			add := min(each, need[i]-alloc[i])
			alloc[i] += add
			remaining -= add
			if alloc[i] >= need[i] {
				done[i] = true
				active--
			}
		}
	}
	// What is left (no one needs it, or less than one unit each) goes one
	// unit at a time in order, everyone's equal share of the spare first.
	if remaining > 0 {
		each := remaining / int64(k)
		for i := range alloc {
			alloc[i] += each
		}
		remaining -= each * int64(k)
		for i := 0; remaining > 0; i++ {
			alloc[i%k]++
			remaining--
		}
	}
	return alloc[ri]
}

// Sweep drops windows that ended more than a period plus the grace ago,
// and returns how many it dropped.
func (o *Owner) Sweep(now time.Time) int {
	nowNs := now.UnixNano()
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for k, w := range o.windows {
		if w.expires < nowNs {
			delete(o.windows, k)
			n++
		}
	}
	return n
}

// OwnerStats reports an owner's size.
type OwnerStats struct {
	Windows int
	// Dropped counts reports for new windows refused because MaxWindows
	// was reached.
	Dropped uint64
}

// Stats returns the owner's size and drops.
func (o *Owner) Stats() OwnerStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return OwnerStats{Windows: len(o.windows), Dropped: o.dropped}
}
