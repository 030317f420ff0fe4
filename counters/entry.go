package counters

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Slot is the state of one window of one counter series on this instance.
// It holds what the decision needs and what the sync protocol reports and
// learns. All counts are in cost units. Its fields are ordered so that the
// narrow ones share words: a table holds one slot per series, its current
// window's, and keeps the previous window in a shorter form (past; see
// TestStructSizes).
type Slot struct {
	// Start is the window's start in Unix nanoseconds.
	Start int64
	// Own is this instance's cumulative admitted count in the window. It only
	// grows, so an owner that keeps the largest Own per origin (a G-counter)
	// never double counts a retried or duplicated report.
	Own int64
	// Acked is the largest Own the owner has acknowledged; Own - Acked is the
	// part not yet reported.
	Acked int64
	// Global is the last global total the owner returned (it includes
	// Acked); GlobalAt says when it arrived.
	Global int64
	// Demand is the cost offered (admitted and denied) since the last report.
	Demand int64
	// Granted is the owner's lease: the value Own may reach in this window.
	// HasGrant says one arrived; GrantedAt when.
	Granted int64
	// grantedAt is when the grant arrived (see GrantedAt), in Unix
	// nanoseconds: the minority rule compares it with the end of a span,
	// which an answer may follow by less than a millisecond.
	grantedAt int64
	// Spare is the owner's last word on budget this instance may still get
	// (see Answer.Spare; only whether it is above 0 counts, and it is kept
	// in 32 bits, saturated), and Informed says the grant was made knowing
	// this instance's demand: the report it answered carried demand, or the
	// owner let it carry into this window. An owner that answered a report
	// without demand did not know this instance wanted more.
	Spare int32
	// Head is the Head of the answer that brought Global (Answer.Head),
	// saturated at 32 bits: what that owner could still admit itself
	// beyond it. It goes back with Global (Report.KnownHead), for the
	// current window only: a window that is over keeps none (past).
	Head int32
	// globalAt is when Global arrived (see GlobalAt), 4 bytes where Unix
	// nanoseconds take 8.
	globalAt stamp
	// Epoch is opaque to this package: the node records in it (the low 32
	// bits of) the ring version under which the owner last acknowledged the
	// slot, so that a new owner gets every count again after a membership
	// change.
	Epoch uint32
	// GrantFrom names the owner (and its run) that granted the lease; it is
	// reported with it, so that a later owner can tell caps another owner
	// granted from its own. Table.Peer resolves it.
	GrantFrom PeerID
	// From names the owner (and its run) that answered Global, reported
	// back so that a later owner can tell its own answers from a
	// predecessor's knowledge. Table.Peer resolves it.
	From PeerID
	// Fallback says the instance fell back to its static share in this
	// window (it held no grant and had not heard from the key's owner since
	// before the window began): the share of FallbackMembers instances at
	// FallbackIndex, as the membership stood then. It stays so until a
	// grant arrives, even if an owner comes within reach meanwhile (say a
	// new one, after a membership change), so that the instance never
	// holds less than it may already have admitted, and never more than
	// the share the owners reserved for it. A membership of more than
	// 65,535 never falls back (see Table.fallback).
	FallbackMembers, FallbackIndex uint16
	HasGrant                       bool
	// Carry says the grant stays valid into the next window (the owner said
	// so), until the owner answers there. A carried grant carries once.
	Carry    bool
	Informed bool
	Fallback bool
}

// Sat32 returns n limited to the range of an int32 (Slot.Spare, Slot.Head).
func Sat32(n int64) int32 { return int32(max(math.MinInt32, min(n, math.MaxInt32))) }

// Unreported returns Own - Acked.
func (s *Slot) Unreported() int64 { return s.Own - s.Acked }

// CountedBy records that the owner counts own of this instance's
// admissions in the window, more than it acknowledged: the owner is this
// instance itself, which reads its own count from its table (a merge that
// raised it after the answer, Owner.Merged, or an answer to another
// member, which counts this one's admissions until then). Acked and
// Global move up together, others' part of the total unchanged, so that
// the pair a report carries to the next owner if the series moves
// (Report.KnownAcked) holds all of this instance's count in that total:
// else the next owner counted the rest again. It reports whether s
// changed.
func (s *Slot) CountedBy(own int64) bool {
	if own <= s.Acked {
		return false
	}
	s.Global += own - s.Acked
	s.Acked = own
	return true
}

// GlobalAt returns when Global arrived, in Unix nanoseconds to the
// millisecond (see stamp), or 0 if it never did. SetGlobalAt records it:
// set Start first.
func (s *Slot) GlobalAt() int64 {
	if s.globalAt == 0 {
		return 0
	}
	return max(s.globalAt.at(s.Start), 1) // a time recorded never reads as never
}
func (s *Slot) SetGlobalAt(ns int64) { s.globalAt = stampAt(ns, s.Start) }

// GrantedAt returns when the grant arrived, in Unix nanoseconds, or 0 if
// none did. SetGrantedAt records it.
func (s *Slot) GrantedAt() int64      { return s.grantedAt }
func (s *Slot) SetGrantedAt(ns int64) { s.grantedAt = ns }

// A stamp is a time near a window's start, in milliseconds since it: one
// more than that for times at or after the start, so that 0 can mean
// never. It holds about 24 days either side of the start; a time beyond
// reads as the nearest it holds, and a time between milliseconds as the
// millisecond before. It suits a time only asked whether it was recorded
// (GlobalAt), not one compared with others to the nanosecond (GrantedAt).
type stamp int32

// stampAt returns the stamp of ns (Unix nanoseconds; 0 = never) in the
// window that starts at start.
func stampAt(ns, start int64) stamp {
	if ns == 0 {
		return 0
	}
	d := ns - start
	ms := d / int64(time.Millisecond)
	if d < 0 && d%int64(time.Millisecond) != 0 {
		ms-- // the millisecond before, not the one after
	}
	switch {
	case ms >= math.MaxInt32:
		return math.MaxInt32
	case ms >= 0:
		return stamp(ms + 1)
	case ms < math.MinInt32:
		return math.MinInt32
	}
	return stamp(ms)
}

// at returns the Unix nanoseconds the stamp stands for in the window that
// starts at start, 0 for never.
func (v stamp) at(start int64) int64 {
	ms := int64(v)
	switch {
	case v == 0:
		return 0
	case v > 0:
		ms--
	}
	return start + ms*int64(time.Millisecond)
}

// Entry is one counter series (tenant, endpoint, method, period) in a Table,
// with the slots of its current and previous windows. Its fields are guarded
// by its own mutex; use Lock and Unlock (or the methods that take it) around
// any access from outside a Take. A table holds a million of them: the
// fields are ordered so that the narrow ones share words, what the series
// of one tier share (endpoint, method, period) is held once, by the table,
// behind sc, and the previous window is held apart, in the short form of a
// window that is over (past), only from the time a window that held
// anything was followed by the next (see prev and TestStructSizes).
type Entry struct {
	mu sync.Mutex

	hash   uint64 // series hash; with the identity, the order Takes lock entries in (before)
	sc     *scope // endpoint, method and period, shared by the tier's series
	tenant string

	threshold int64
	expiresAt atomic.Int64 // Unix ns after which the entry is of no use; orders evictions (score)
	// wire is opaque to this package (see WireIndex).
	wire  uint32
	alg   Algorithm
	dead  bool // removed from the table; a Take that sees it retries
	quiet bool // moved into cur by the sync (AdvanceCarried), life not yet extended
	// asking says whether the entry is in the table's asking list, and
	// why.
	asking askState

	// prev is the previous window, which starts one period before cur,
	// allocated the first time the entry moves on from a window that held
	// anything to the one right after it (advance), and kept for the
	// entry's life (cleared when the window before cur held nothing). nil
	// reads as an empty slot. A series seen in one window, or in windows
	// apart, so holds 64 bytes fewer (see TestHeapPerSeries).
	prev *past
	cur  Slot
}

// past is the slot of a window that is over, as an entry keeps its
// previous window: what the sync reports for it and what a sliding tier
// weighs of it, in 64 bytes where a Slot takes 88 (a 96-byte allocation).
// Its start is implied (one period before the current window's). It keeps
// no Spare or Informed, which only decisions in the window read, no Head
// (a restarted owner holds back its earlier run's head in the windows it
// still grants in, not in those that are over), and of GlobalAt only
// whether Global arrived. A grant and a fallback exclude each
// other (a fallback begins only in a slot without a grant, and a grant ends
// it), so one word holds either the grant or the fallback's membership.
type past struct {
	own, acked, global, demand int64
	// granted is Slot.Granted, or under a fallback without a grant
	// FallbackMembers<<16 | FallbackIndex.
	granted         int64
	grantedAt       int64
	epoch           uint32
	grantFrom, from PeerID
	flags           pastFlags
}

// pastFlags are a past's booleans.
type pastFlags uint8

const (
	pastHasGrant pastFlags = 1 << iota
	pastCarry
	pastFallback
	pastAnswered // GlobalAt != 0
)

// keep records s in p.
func (p *past) keep(s *Slot) {
	var f pastFlags
	if s.HasGrant {
		f |= pastHasGrant
	}
	if s.Carry {
		f |= pastCarry
	}
	if s.Fallback {
		f |= pastFallback
	}
	if s.globalAt != 0 {
		f |= pastAnswered
	}
	granted := s.Granted
	if s.Fallback && !s.HasGrant {
		granted = int64(s.FallbackMembers)<<16 | int64(s.FallbackIndex)
	}
	*p = past{
		own: s.Own, acked: s.Acked, global: s.Global, demand: s.Demand,
		granted: granted, grantedAt: s.grantedAt,
		epoch: s.Epoch, grantFrom: s.GrantFrom, from: s.From,
		flags: f,
	}
}

// load fills s with the slot p keeps of the window that starts at start.
// A Global that arrived reads as having arrived at the window's start.
func (p *past) load(s *Slot, start int64) {
	f := p.flags
	*s = Slot{
		Start: start, Own: p.own, Acked: p.acked, Global: p.global, Demand: p.demand,
		Granted: p.granted, grantedAt: p.grantedAt,
		Epoch: p.epoch, GrantFrom: p.grantFrom, From: p.from,
		HasGrant: f&pastHasGrant != 0, Carry: f&pastCarry != 0, Fallback: f&pastFallback != 0,
	}
	if f&pastAnswered != 0 {
		s.globalAt = stampAt(start, start)
	}
	if s.Fallback && !s.HasGrant {
		s.Granted = 0
		s.FallbackMembers, s.FallbackIndex = uint16(p.granted>>16), uint16(p.granted)
	}
}

// unreported returns own - acked.
func (p *past) unreported() int64 { return p.own - p.acked }

// scope is what the series of one tier share: endpoint, method, period
// and the hash of the three (see Limit.Prepare). A table interns one per
// tier (Table.scopeOf); it never changes.
type scope struct {
	hash             uint64
	period           int64
	endpoint, method string
}

// before reports whether a Take locks a before b: in the order of their
// series hashes, and of their identities when the hashes are equal, so
// that concurrent Takes over overlapping series cannot deadlock.
func (a *Entry) before(b *Entry) bool {
	if a.hash != b.hash {
		return a.hash < b.hash
	}
	if a.tenant != b.tenant {
		return a.tenant < b.tenant
	}
	x, y := a.sc, b.sc
	switch {
	case x.period != y.period:
		return x.period < y.period
	case x.endpoint != y.endpoint:
		return x.endpoint < y.endpoint
	}
	return x.method < y.method
}

// matches reports whether the entry is l's series. Its series hash already
// matched. A prepared limit is compared by its scope hash (endpoint, method
// and period; 64 more bits on top of the series hash) and tenant, which
// spares comparing the long endpoint pattern on every decision.
func (e *Entry) matches(l *Limit) bool {
	if l.scope != 0 {
		return e.sc.hash == l.scope && e.tenant == l.Tenant
	}
	return e.sc.period == int64(l.Period) && e.tenant == l.Tenant &&
		e.sc.endpoint == l.Endpoint && e.sc.method == l.Method
}

// roll moves the entry to the window holding now (see advance) and, since a
// decision is using it, keeps the series alive until that window's end plus
// a period and the table's grace.
func (e *Entry) roll(now int64, t *Table) {
	if e.advance(now, t) || e.quiet {
		e.quiet = false
		e.expiresAt.Store(e.cur.Start + 2*e.sc.period + t.grace)
	}
}

// advance moves the entry to the window holding now and reports whether it
// moved. A window that ended one period ago becomes the previous one; older
// ones are dropped. A clock that runs backwards (skew between callers) never
// moves an entry back: such a request is counted in the newest window.
//
// A lease carries into the next window when the owner said so (Slot.Carry)
// and this instance heard from the owner shortly before the window began
// (the table's ContactFunc): the grant caps the instance's own estimate
// there too (its own count, plus for sliding tiers its weighted previous
// window), and the owner reserves it until the instance reports in the new
// window. It carries once; whatever owner the ring names then learns of it
// with the first report.
func (e *Entry) advance(now int64, t *Table) bool {
	period := e.sc.period
	if now-e.cur.Start < period { // still in the current window (or skewed behind it): no division
		return false
	}
	start := WindowStart(now, period)
	if start <= e.cur.Start {
		return false
	}
	next := Slot{Start: start}
	if start == e.cur.Start+period {
		e.keepPrev()
		if p := &e.cur; p.HasGrant && p.Carry {
			if carry, _ := t.contactWith(e.hash, start); carry {
				next.Granted, next.HasGrant, next.grantedAt = p.Granted, true, p.grantedAt
				// The owner let it carry knowing this instance's demand; what
				// it said may still come in the window that ended (Spare)
				// says whether more may come in this one too: under overload
				// nothing does, and a request beyond the grant is refused at
				// once; otherwise it asks (it is pending).
				next.Informed, next.Spare = true, p.Spare
				next.GrantFrom = p.GrantFrom
				next.Epoch = p.Epoch
			}
		}
	} else if e.prev != nil {
		*e.prev = past{}
	}
	e.cur = next
	return true
}

// keepPrev makes the current window's slot the previous window's, when the
// next window begins where it ends.
func (e *Entry) keepPrev() { e.keep(&e.cur) }

// keep records s as the previous window's slot: into prev, which it
// allocates if s holds anything prev keeps (an empty slot needs no place:
// nil reads as one).
func (e *Entry) keep(s *Slot) {
	var p past
	p.keep(s)
	if e.prev == nil {
		if p == (past{}) {
			return
		}
		e.prev = new(past)
	}
	*e.prev = p
}

// weight returns the share of the previous window still inside the sliding
// period at now, in [0, 1]; 0 for fixed windows.
func (e *Entry) weight(now int64) float64 {
	if e.alg != Sliding {
		return 0
	}
	elapsed, period := now-e.cur.Start, e.sc.period
	if elapsed < 0 || elapsed >= period {
		return 0
	}
	return float64(period-elapsed) / float64(period)
}

// PrevWeighted returns what the window before weighs at now in the window
// that starts at start, when that is the current window of a sliding tier:
// this instance's own count there, weighted by the share of it still
// inside the sliding period (View.PrevOwn); 0 otherwise. A sliding tier's
// cap bounds the count plus this (see Lease). The entry must be locked.
func (e *Entry) PrevWeighted(start, now int64) int64 {
	if e.prev == nil || start != e.cur.Start {
		return 0
	}
	return weighted(e.prev.own, e.weight(now))
}

func weighted(n int64, w float64) int64 {
	if n <= 0 || w == 0 {
		return 0
	}
	return int64(float64(n) * w)
}

// view builds the policy view of the entry at now. The entry must be locked
// and rolled.
func (e *Entry) view(now int64, cost int64, members, index int) View {
	var prevGlobal, prevOwn int64
	if w := e.weight(now); w > 0 && e.prev != nil {
		prevGlobal, prevOwn = weighted(e.prev.global+e.prev.unreported(), w), weighted(e.prev.own, w)
	}
	return View{
		Threshold:  e.threshold,
		Cost:       cost,
		Members:    members,
		Index:      index,
		Hash:       e.hash,
		Own:        e.cur.Own,
		Acked:      e.cur.Acked,
		Global:     e.cur.Global,
		PrevGlobal: prevGlobal,
		PrevOwn:    prevOwn,
		Granted:    e.cur.Granted,
		HasGrant:   e.cur.HasGrant,
		Informed:   e.cur.Informed,
		Spare:      int64(e.cur.Spare),
	}
}

// retryAfter estimates how long a denied request should wait for room in
// this tier: for a fixed window, until the window ends; for a sliding one,
// until enough of the previous window has slid out, if that happens before
// the window ends.
func (e *Entry) retryAfter(now int64, v *View) time.Duration {
	period := e.sc.period
	reset := e.cur.Start + period - now
	if e.alg == Sliding && v.PrevGlobal > 0 && e.prev != nil { // a weighted PrevGlobal comes from prev
		curUsed := v.Global + v.Own - v.Acked
		room := v.Threshold - curUsed - v.Cost
		prevTotal := e.prev.global + e.prev.unreported()
		if room >= 0 && prevTotal > 0 {
			// prevTotal * (period - elapsed') / period <= room
			need := int64(float64(period) * (1 - float64(room)/float64(prevTotal)))
			if wait := e.cur.Start + need - now; wait < reset {
				return time.Duration(max(wait, 0))
			}
		}
	}
	return time.Duration(reset)
}

// Identity returns the entry's series: tenant, endpoint, method and period.
// It needs no lock: these never change.
func (e *Entry) Identity() (tenant, endpoint, method string, period time.Duration) {
	return e.tenant, e.sc.endpoint, e.sc.method, time.Duration(e.sc.period)
}

// PeriodOf returns the series' period. It needs no lock.
func (e *Entry) PeriodOf() time.Duration { return time.Duration(e.sc.period) }

// Hash returns the entry's series hash (the ring places the series by it).
func (e *Entry) Hash() uint64 { return e.hash }

// Lock locks the entry. Hold it only briefly: Takes wait on it.
func (e *Entry) Lock() { e.mu.Lock() }

// Unlock unlocks the entry.
func (e *Entry) Unlock() { e.mu.Unlock() }

// Current returns the slot of the current window. The entry must be
// locked.
func (e *Entry) Current() *Slot { return &e.cur }

// Previous fills buf with the slot of the previous window and returns it,
// or returns nil if the entry holds none: no window of the series that held
// anything has yet been followed by the next, and its previous window, one
// period before the current one, is as empty as a slot never written. The
// slot is a copy (see past for what it keeps): Store keeps what the caller
// records in it. The entry must be locked.
func (e *Entry) Previous(buf *Slot) *Slot {
	if e.prev == nil {
		return nil
	}
	e.prev.load(buf, e.cur.Start-e.sc.period)
	return buf
}

// Slot returns the slot of the window starting at start, or nil if the
// entry no longer (or not yet) holds it: the current window's own, or for
// the previous window a copy in buf (an empty one if the entry holds none,
// see Previous), whose changes Store keeps. The entry must be locked.
func (e *Entry) Slot(start int64, buf *Slot) *Slot {
	switch {
	case start == e.cur.Start:
		return &e.cur
	case start == e.cur.Start-e.sc.period:
		if e.prev == nil {
			*buf = Slot{Start: start}
		} else {
			e.prev.load(buf, start)
		}
		return buf
	}
	return nil
}

// Store keeps what the caller recorded in a slot that Slot or Previous
// returned: nothing to do for the current window's, which is the entry's
// own; a copy of the previous window's is recorded there (allocating its
// place if the entry held none and the slot holds anything it keeps). A
// slot of any other window is ignored. The entry must be locked, since
// before Slot or Previous returned s.
func (e *Entry) Store(s *Slot) {
	if s != &e.cur && s.Start == e.cur.Start-e.sc.period {
		e.keep(s)
	}
}

// AddDemand adds d to the demand of the window starting at start, if the
// entry still holds it: the demand of a report whose call failed, put back
// for the next one. The entry must be locked.
func (e *Entry) AddDemand(start, d int64) {
	var buf Slot
	if s := e.Slot(start, &buf); s != nil {
		s.Demand += d
		e.Store(s)
	}
}

// unreported returns the counts of both windows not yet reported.
func (e *Entry) unreported() int64 {
	n := e.cur.Unreported()
	if e.prev != nil {
		n += e.prev.unreported()
	}
	return n
}

// WireIndex and SetWireIndex hold a number opaque to this package: the node
// records in it where the series stands in the dictionary of keys it
// shares with the series' owner, which spares a map lookup per series and
// interval. Call them with the entry locked. Zero until set. It fills what
// would be padding next to the entry's flags.
func (e *Entry) WireIndex() uint32 { return e.wire }

// SetWireIndex sets what WireIndex returns.
func (e *Entry) SetWireIndex(i uint32) { e.wire = i }

// Threshold and Algorithm return the tier settings last seen by a Take. The
// entry must be locked.
func (e *Entry) Threshold() int64     { return e.threshold }
func (e *Entry) Algorithm() Algorithm { return e.alg }

// Dead reports whether the entry was removed from its table. The entry must
// be locked.
func (e *Entry) Dead() bool { return e.dead }
