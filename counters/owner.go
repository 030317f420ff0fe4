package counters

import (
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
	// learnt for the window (from whichever owner) and the part of its own
	// count that total included. KnownGlobal - KnownAcked + Own is a lower
	// bound of the true total, which lets a new owner keep the counts of
	// origins that will never report to it (they left or crashed).
	KnownGlobal int64
	KnownAcked  int64
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
	// a crash (a graceful leave is released at once). Default 2.
	ReserveWindows int
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
}

// window returns, sorted, the members that may spend budget in the window
// starting at start: those alive, and those last seen alive after it began.
func (m *ownerMembers) window(start int64) []string {
	out := make([]string, 0, len(m.sorted))
	for _, name := range m.sorted {
		if m.alive[name] || m.gone[name] >= start {
			out = append(out, name)
		}
	}
	return out
}

type ownerWindow struct {
	threshold int64
	alg       Algorithm
	expires   int64
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
	view        int64 // the origin's lower bound of the total (KnownGlobal - KnownAcked + Own)
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
		cfg.ReserveWindows = 2
	}
	return &Owner{cfg: cfg, windows: make(map[Key]*ownerWindow)}
}

// SetMembers tells the owner who can spend budget: alive are the members it
// can reach now, gone those it lost, with when each was last seen alive. A
// gone member is reserved for in the windows that began less than
// ReserveWindows periods after it was last seen (it may still be serving on
// the other side of a partition) and in none after, so scaling down does
// not leak budget for long. A member that left gracefully should not be in
// gone at all. Both are copied.
func (o *Owner) SetMembers(alive []string, gone map[string]int64) {
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
		w = &ownerWindow{expires: r.Key.WindowStart + 2*int64(r.Key.Period) + int64(o.cfg.Grace)}
		o.windows[r.Key] = w
	}
	w.threshold, w.alg = r.Threshold, r.Algorithm
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
		if v := r.KnownGlobal - r.KnownAcked + r.Own + st.base; v > st.view {
			st.view = v
		}
	}
	global := w.total()
	if !o.cfg.Lease || stale {
		return Answer{Global: global}
	}
	grant := o.grant(nowNs, r.Key, w, st)
	st.given, st.hasGiven = grant, true
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
// counts, or more if some origin knows of counts this owner never saw (they
// were reported to a previous owner by members that are gone). Both are
// lower bounds of the truth, so their maximum never double counts.
func (w *ownerWindow) total() int64 {
	var sum, view int64
	for _, s := range w.origins {
		sum += s.total()
		view = max(view, s.view)
	}
	return max(sum, view)
}

// grant computes origin r's new cap (in its total own count, all
// incarnations) so that the caps of every member that may spend in the
// window never add up to more than the threshold:
//
//   - the budget is the threshold minus the weighted previous window
//     (sliding tiers) minus what every origin admitted;
//   - reserved first: for every window member the owner cannot reach, what
//     it may still admit (the larger of its cap and its static share, its
//     fallback when it cannot reach its owner); for every member that never
//     reported, its static share, which it may spend before its first
//     answer. If an unreachable member never reported here at all (the key
//     changed owner while it was cut off), nobody's cap grows: it may hold a
//     grant this owner cannot know;
//   - the rest is split among the reachable origins that reported, by
//     demand (max-min fair: everyone gets up to an equal share, the rest by
//     extra demand), and r gets its part as far as the caps still held by
//     the others leave room. The others converge to their part at their
//     next report.
func (o *Owner) grant(now int64, key Key, w *ownerWindow, r *originState) int64 {
	period := int64(key.Period)
	hash := key.SeriesHash()
	budget := w.threshold - w.total() - o.prevWeighted(now, key, w)
	// Members that may spend in this window: alive, or gone for less than
	// ReserveWindows periods before it began (they may be serving behind a
	// partition).
	members := o.members.window(key.WindowStart - int64(o.cfg.ReserveWindows)*period)
	n := len(members)
	var reserved, rStatic int64
	frozen := false
	var reach []*originState
	for i, m := range members {
		s := w.find(m)
		share := StaticShare(w.threshold, n, i, hash)
		if s == r {
			rStatic = share
		}
		switch {
		case s == r || (s != nil && o.members.alive[m]):
			reach = append(reach, s)
		case o.members.alive[m]:
			// Reachable but silent: it may spend its static share before
			// its first answer.
			reserved += share
		case s != nil:
			// Unreachable: it keeps what it holds, or falls back to its
			// static share, whichever is larger.
			reserved += max(0, max(s.capNow(), share)-s.total())
		default:
			// Unreachable and never heard of in this window here. If it
			// went missing during the window, it may hold a grant from a
			// previous owner that this one cannot know: reserve its static
			// share and grow nobody's cap. If it was gone before the window
			// began, the only owner it can have heard from is on its own
			// side, which limits it to its static share by this same rule.
			reserved += share
			if o.members.gone[m] >= key.WindowStart {
				frozen = true
			}
		}
	}
	if !contains(reach, r) { // r reports but is not (yet) in our view
		reach = append(reach, r)
		rStatic = StaticShare(w.threshold, max(n, 1), 0, hash)
	}
	free := budget - reserved
	var g int64
	if free <= 0 {
		g = r.total()
	} else {
		// Others' outstanding caps limit what r can have right now.
		var othersOut int64
		for _, s := range reach {
			if s != r {
				othersOut += max(0, s.capNow()-s.total())
			}
		}
		left := max(0, period-(now-key.WindowStart))
		fair := fairShare(free, reach, r, float64(left))
		g = r.total() + max(min(fair, free-othersOut), 0)
	}
	if frozen {
		g = min(g, max(r.held, rStatic, r.total()))
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
	need := make([]int64, k)
	ri := 0
	for i, s := range origins {
		need[i] = int64(s.rate*left) + 1
		if s == r {
			ri = i
		}
	}
	alloc := make([]int64, k)
	remaining := free
	active := k
	done := make([]bool, k)
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

// prevWeighted is the previous window's total weighted by its share still
// inside the sliding period, for sliding tiers the owner also holds.
func (o *Owner) prevWeighted(now int64, key Key, w *ownerWindow) int64 {
	if w.alg != Sliding {
		return 0
	}
	pk := key
	pk.WindowStart -= int64(key.Period)
	pw := o.windows[pk]
	if pw == nil {
		return 0
	}
	elapsed := now - key.WindowStart
	if elapsed < 0 || elapsed >= int64(key.Period) {
		return 0
	}
	// Round up: the owner must not under-count what still weighs.
	p := float64(pw.total()) * float64(int64(key.Period)-elapsed) / float64(key.Period)
	c := int64(p)
	if float64(c) < p {
		c++
	}
	return c
}

// Global returns the owner's current total for a window (0 if unknown).
func (o *Owner) Global(k Key) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if w := o.windows[k]; w != nil {
		return w.total()
	}
	return 0
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
