package counters

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Table.
type Config struct {
	// MaxEntries bounds the number of counter series held: the table holds
	// exactly that many before it is full, however they spread over the
	// shards. When the table is full, a new series evicts an old one that
	// holds no count still in use (expired first, then, of a small sample
	// of such, the one whose last window in use ended first), and the
	// eviction is counted. A series whose window holds counts
	// (or, for sliding tiers, whose previous window still weighs), or counts
	// its owner has not acknowledged, is never evicted: when the sample holds
	// none that may go, the new series' requests are decided and counted on
	// the overflow series of their SLA tier (tenant OverflowTenant, the same
	// endpoint, method, period and limit), which every such newcomer shares
	// until room frees up (Stats.Overflowed). A flood of distinct tenants so
	// neither empties the limits of tenants in use nor gets more than one
	// tenant's limit per tier. Overflow series are held beyond MaxEntries:
	// one per tier in use. A series holds about 195 bytes of heap until a
	// window of it that held anything is followed by one it is used in (a
	// request, or the sync carrying a lease into it: see Entry.Previous),
	// and about 260 from then on: its entry (160 bytes, the current
	// window's slot included), its tenant's name, its place in the index
	// and, from then on, the previous window in the short form of a window
	// that is over (64 bytes). Measured by TestHeapPerSeries, 1,000,000
	// one-tier series with 15-byte tenant names, requests in one window and
	// in two in a row: 193 and 257 bytes (the same in each of 3 runs; 197
	// and 261 at 100,000). Default 100,000.
	MaxEntries int
	// Shards is the number of independently locked parts of the table, a
	// power of two. More shards mean less contention between cores and a
	// coarser eviction. Default 64.
	Shards int
	// Grace is how long a window stays after its end before its series may
	// expire (the seed's local cache kept window + 2 s), so late sync answers
	// still find it. Sliding tiers also keep the previous window for one more
	// period. Default 2 s.
	Grace time.Duration
	// Policy is the admission rule. Default Optimistic{}.
	Policy Policy
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{MaxEntries: 100_000, Shards: 64, Grace: 2 * time.Second, Policy: Optimistic{}}
}

// Validate reports the first field that is out of range.
func (c Config) Validate() error {
	switch {
	case c.MaxEntries < 1:
		return fmt.Errorf("counters: Config.MaxEntries must be >= 1, got %d", c.MaxEntries)
	case c.Shards < 1 || c.Shards&(c.Shards-1) != 0:
		return fmt.Errorf("counters: Config.Shards must be a power of two >= 1, got %d", c.Shards)
	case c.Grace < 0:
		return fmt.Errorf("counters: Config.Grace must be >= 0, got %v", c.Grace)
	case c.Policy == nil:
		return fmt.Errorf("counters: Config.Policy must be set")
	}
	return nil
}

// Table holds the counter series of one instance. It is safe for concurrent
// use: series are spread over shards, and every series has its own mutex,
// so decisions on different keys do not contend. Finding a series takes no
// lock at all: each shard is an open-addressing array of atomic pointers
// that readers probe freely, while inserts, evictions and sweeps take the
// shard's mutex. The zero value is not usable; call NewTable.
type Table struct {
	policy atomic.Pointer[Policy]
	grace  int64
	shards []shard
	mask   uint64

	share    atomic.Uint64 // members<<32 | index
	contact  atomic.Pointer[ContactFunc]
	minority atomic.Pointer[minority] // see SetMinority; nil: none

	askMu      sync.Mutex
	prompted   atomic.Bool                         // MarkPrompt was called since the last TakePrompted
	asking     []*Entry                            // series with a pending decision, or riding, since the last TakeAsking
	peers      peers                               // member runs named in slots (PeerID)
	scopeMu    sync.Mutex                          // serialises additions to scopes
	scopes     atomic.Pointer[map[scopeKey]*scope] // interned tiers (scopeOf); replaced, never changed
	max        int64                               // MaxEntries
	count      atomic.Int64                        // series held, overflow series included
	evicted    atomic.Uint64
	expired    atomic.Uint64
	overflowed atomic.Uint64 // new series sent to an overflow series
	lost       atomic.Uint64 // unreported cost dropped with evicted series
}

// shard is one part of the table: a fixed-size open-addressing array,
// sized at twice its capacity so that probe chains stay short. Readers load
// slots without locking; writers hold mu. A removed series leaves a
// tombstone; when tombstones pile up the array is rebuilt and swapped in.
type shard struct {
	mu   sync.Mutex
	tab  atomic.Pointer[slots]
	n    int // live series, under mu
	dead int // tombstones, under mu
	cap  int
	rnd  uint64 // eviction sampling start, under mu
	// noneBefore is a time no series of the shard expires before, under
	// mu: Sweep skips the shard until then. A series' expiry only moves
	// later, so the least one found by the last Sweep, lowered by the
	// series created since, stays such a time.
	noneBefore int64
	_          [16]byte
}

type slots struct {
	s    []atomic.Pointer[Entry]
	mask uint64
}

// tombstone marks a slot whose series was removed; probes continue past it.
var tombstone = new(Entry)

// minSlots is the number of series a shard's array starts sized for (or
// the shard's capacity, if smaller); it doubles as series arrive, up to
// the power of two above twice the shard's capacity, so that scans (Range,
// Sweep) cost what the table holds, not what it could hold.
const minSlots = 32

// slotsFor is the array length for capacity series: a power of two above
// twice the capacity, so that probe chains stay short.
func slotsFor(capacity int) int { return 1 << bits.Len(uint(2*capacity)) }

// lengthFor is the array length for n live series in s: slotsFor(n), but
// never below the length s started at.
func (s *shard) lengthFor(n int) int { return slotsFor(max(n, min(s.cap, minSlots))) }

// newSlots returns an empty array of length n, a power of two.
func newSlots(n int) *slots {
	return &slots{s: make([]atomic.Pointer[Entry], n), mask: uint64(n - 1)}
}

// NewTable returns an empty table.
func NewTable(cfg Config) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Shards > cfg.MaxEntries { // every shard must hold at least one series
		cfg.Shards = 1 << (bits.Len(uint(cfg.MaxEntries)) - 1)
	}
	t := &Table{
		max:    int64(cfg.MaxEntries),
		grace:  int64(cfg.Grace),
		shards: make([]shard, cfg.Shards),
		mask:   uint64(cfg.Shards - 1),
	}
	per, rem := cfg.MaxEntries/cfg.Shards, cfg.MaxEntries%cfg.Shards
	for i := range t.shards {
		sh := &t.shards[i]
		sh.cap = per
		if i < rem {
			sh.cap++
		}
		sh.tab.Store(newSlots(sh.lengthFor(0)))
		sh.rnd = uint64(i)*0x9E3779B97F4A7C15 + 1
	}
	t.share.Store(1 << 32)
	t.SetPolicy(cfg.Policy)
	return t, nil
}

// SetPolicy replaces the admission rule for the decisions that follow (the
// node falls back to Static while its store is down, for instance).
func (t *Table) SetPolicy(p Policy) {
	t.policy.Store(&p)
}

// Policy returns the admission rule in force.
func (t *Table) Policy() Policy { return *t.policy.Load() }

// SetShare tells the table how many instances share every limit and this
// instance's position among them, for static shares. members < 1 counts as 1.
func (t *Table) SetShare(members, index int) {
	if members < 1 {
		members, index = 1, 0
	}
	if index < 0 || index >= members {
		index = 0
	}
	t.share.Store(uint64(members)<<32 | uint64(index))
}

// A ContactFunc tells the lease policy how this instance stands with the
// owner of the series with the given hash, for the window that starts at
// windowStart (Unix ns): carry says a grant may carry into that window (the
// instance heard from the owner within CarryWithin before the window
// began), fallback says the instance may fall back to its static share in
// it (it has heard nothing from the owner since FallbackAfter before the
// window began). It is called with the series locked, at window starts and
// when the instance holds no grant; it must be fast and must not block.
type ContactFunc func(hash uint64, windowStart int64) (carry, fallback bool)

// SetContact installs the node's view of its contact with each owner.
// Default: grants carry and there is no fallback (an instance without a
// grant waits for its owner).
func (t *Table) SetContact(f ContactFunc) { t.contact.Store(&f) }

func (t *Table) contactWith(hash uint64, windowStart int64) (carry, fallback bool) {
	f := t.contact.Load()
	if f == nil || *f == nil {
		return true, false
	}
	return (*f)(hash, windowStart)
}

// askState says whether an entry is in the table's asking list, and why.
type askState uint8

const (
	askNone    askState = iota
	askPending          // a decision was pending
	askRiding           // MarkRiding
)

// markAsking records that a locked entry has a pending decision, once until
// the next TakeAsking.
func (t *Table) markAsking(e *Entry) {
	switch e.asking {
	case askPending:
		return
	case askNone:
		t.askMu.Lock()
		t.asking = append(t.asking, e)
		t.askMu.Unlock()
	}
	e.asking = askPending
}

// MarkPrompt records that a locked entry's windows are to be reported in
// the next sync asked for at once, as a pending decision's are, and that
// such a sync is wanted (TakePrompted): their owner lowered a cap while
// another member waits for budget (Answer.Prompt).
func (t *Table) MarkPrompt(e *Entry) {
	t.markAsking(e)
	t.prompted.Store(true)
}

// TakePrompted reports whether MarkPrompt was called since the last call.
func (t *Table) TakePrompted() bool { return t.prompted.Swap(false) }

// MarkRiding records that a locked entry's windows are to go with the next
// sync asked for at once if it calls on their owner anyway (TakeAsking's
// riders), once until then.
func (t *Table) MarkRiding(e *Entry) {
	if e.asking != askNone {
		return
	}
	e.asking = askRiding
	t.askMu.Lock()
	t.asking = append(t.asking, e)
	t.askMu.Unlock()
}

// TakeAsking returns the series that had a pending decision since the last
// call (a request waiting for the owner's answer), and those marked to ride
// along (MarkRiding), and forgets them: a sync asked for at once reports
// these, which costs what they are, not what the table holds.
func (t *Table) TakeAsking() (pending, riders []*Entry) {
	t.askMu.Lock()
	list := t.asking
	t.asking = nil
	t.askMu.Unlock()
	n := 0 // the pending ones go first, in place
	for i, e := range list {
		e.mu.Lock()
		if e.asking == askPending {
			list[n], list[i] = e, list[n]
			n++
		}
		e.asking = askNone
		e.mu.Unlock()
	}
	return list[:n], list[n:]
}

// AdvanceCarried moves a series into the window holding now if its current
// window ended exactly one period before and holds a lease that carries
// into the next one, without extending the series' life: the sync then
// reports the carried lease once, so that its owner stops reserving it for
// an instance whose traffic stopped. The entry must be locked.
func (t *Table) AdvanceCarried(e *Entry, now time.Time) {
	ns := now.UnixNano()
	if e.cur.HasGrant && e.cur.Carry && WindowStart(ns, e.sc.period) == e.cur.Start+e.sc.period {
		e.quiet = e.advance(ns, t)
	}
}

// Share returns what SetShare set.
func (t *Table) Share() (members, index int) {
	s := t.share.Load()
	return int(s >> 32), int(uint32(s))
}

// Stats is a snapshot of a table's size and evictions.
type Stats struct {
	Entries int
	// Evicted counts series removed to make room while still live;
	// EvictedUnreported the unreported cost they held, lost to the sync.
	Evicted           uint64
	EvictedUnreported uint64
	// Expired counts series removed by Sweep after their last window.
	Expired uint64
	// Overflowed counts the times a new series could not get a place (the
	// table full of series in use) and its request went to the overflow
	// series of its tier.
	Overflowed uint64
}

// Stats returns the current size and eviction counters.
func (t *Table) Stats() Stats {
	return Stats{Entries: t.Len(), Evicted: t.evicted.Load(), EvictedUnreported: t.lost.Load(), Expired: t.expired.Load(),
		Overflowed: t.overflowed.Load()}
}

// Len returns the number of series held.
func (t *Table) Len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += s.n
		s.mu.Unlock()
	}
	return n
}

func (t *Table) shardOf(h uint64) *shard { return &t.shards[h&t.mask] }

// find probes a shard's array for l's series; it takes no lock. The slot
// index uses the hash's high bits: the low ones chose the shard.
func (sl *slots) find(l *Limit, h uint64) *Entry {
	for i := (h >> 32) & sl.mask; ; i = (i + 1) & sl.mask {
		e := sl.s[i].Load()
		if e == nil {
			return nil
		}
		if e != tombstone && e.hash == h && e.matches(l) {
			return e
		}
	}
}

// lookup returns the entry of l's series, creating it if needed, or nil if
// the series cannot be created: its identity is not valid UTF-8 or longer
// than MaxKeyBytes, so it could not travel to its owner. Checking only here,
// when a series is created, keeps the check off the decision's hot path.
func (t *Table) lookup(l *Limit, h uint64, now int64) *Entry {
	s := t.shardOf(h)
	if e := s.tab.Load().find(l, h); e != nil {
		return e
	}
	e, full := t.create(s, l, h, now)
	if !full {
		return e
	}
	// The table is full of series in use: the request goes to its tier's
	// overflow series, which create always makes (one per tier, beyond the
	// bound), so this recursion stops there.
	t.overflowed.Add(1)
	o := *l
	o.Tenant = OverflowTenant
	return t.lookup(&o, o.Hash(), now)
}

// OverflowTenant is the tenant of the overflow series (see
// Config.MaxEntries). It starts with a NUL byte, which no tenant the HTTP
// filter accepts can.
const OverflowTenant = "\x00overflow"

// create adds l's series to shard s, evicting a series that holds no count
// in use if the shard is full. It reports full, and adds nothing, if the
// shard is full and the sample held no such series (but an overflow series
// is always added). It returns nil for an identity that cannot travel.
func (t *Table) create(s *shard, l *Limit, h uint64, now int64) (e *Entry, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.tab.Load().find(l, h); e != nil {
		return e, false
	}
	if !validIdentity(l) {
		return nil, false
	}
	if !t.reserve() {
		// Full: take the place of an idle series of this shard, if the
		// sample holds one (the count stays: the place changes hands).
		// Only an overflow series may go beyond the bound.
		if !t.evictOne(s, now) {
			if l.Tenant != OverflowTenant {
				return nil, true
			}
			t.count.Add(1)
		}
	}
	e = &Entry{
		hash:      h,
		sc:        t.scopeOf(l),
		tenant:    strings.Clone(l.Tenant),
		threshold: l.Threshold,
		alg:       l.Algorithm,
	}
	e.roll(now, t)
	s.insert(e)
	s.noneBefore = min(s.noneBefore, e.expiresAt.Load())
	return e, false
}

// maxInterned bounds the tiers scopeOf shares: endpoint patterns and
// methods come from the limits configuration, a few dozen tiers; past the
// bound (a caller that makes up endpoints) each series gets its own copy.
const maxInterned = 4096

// scopeKey is a tier's identity, the key of Table.scopes.
type scopeKey struct {
	endpoint, method string
	period           int64
}

// scopeOf returns l's tier (endpoint, method, period and their hash),
// shared by every series of the tier, so that a million series of one SLA
// hold its pattern once and each a pointer to it. Lookups take no lock:
// the map is replaced whole when a tier is added, which happens a few
// dozen times in a table's life.
func (t *Table) scopeOf(l *Limit) *scope {
	k := scopeKey{l.Endpoint, l.Method, int64(l.Period)}
	if m := t.scopes.Load(); m != nil {
		if sc := (*m)[k]; sc != nil {
			return sc
		}
	}
	// The hash is computed, not taken from a prepared l: every series of
	// the tier shares it.
	sc := &scope{hash: scopeHash(l.Endpoint, l.Method, l.Period), period: k.period,
		endpoint: strings.Clone(k.endpoint), method: strings.Clone(k.method)}
	t.scopeMu.Lock()
	defer t.scopeMu.Unlock()
	var old map[scopeKey]*scope
	if m := t.scopes.Load(); m != nil {
		old = *m
	}
	if have := old[k]; have != nil {
		return have
	}
	if len(old) >= maxInterned {
		return sc
	}
	m := make(map[scopeKey]*scope, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[scopeKey{sc.endpoint, sc.method, sc.period}] = sc
	t.scopes.Store(&m)
	return sc
}

// reserve counts a new series in if the table holds fewer than
// MaxEntries, and reports whether it did.
func (t *Table) reserve() bool {
	for {
		c := t.count.Load()
		if c >= t.max {
			return false
		}
		if t.count.CompareAndSwap(c, c+1) {
			return true
		}
	}
}

// insert places e in the first free or tombstoned slot of its probe chain,
// rebuilding the array first if its series and tombstones would fill more
// than half of it: at twice the length if the live series need it (a shard
// may hold more than its share of MaxEntries), else at the length they
// need, without the tombstones. An array so never grows past what its live
// series need, however many series come and go (TestIndexUnderChurn).
// s.mu must be held.
func (s *shard) insert(e *Entry) {
	if sl := s.tab.Load(); 2*(s.n+s.dead+1) > len(sl.s) {
		s.rebuild(s.lengthFor(s.n + 1))
	}
	sl := s.tab.Load()
	for i := (e.hash >> 32) & sl.mask; ; i = (i + 1) & sl.mask {
		old := sl.s[i].Load()
		if old == nil || old == tombstone {
			if old == tombstone {
				s.dead--
			}
			sl.s[i].Store(e)
			s.n++
			return
		}
	}
}

// remove tombstones the slot holding e and marks e dead, so that a Take
// holding it looks the series up again. s.mu must be held.
func (s *shard) remove(e *Entry) {
	sl := s.tab.Load()
	for i := (e.hash >> 32) & sl.mask; ; i = (i + 1) & sl.mask {
		cur := sl.s[i].Load()
		if cur == nil {
			return
		}
		if cur == e {
			sl.s[i].Store(tombstone)
			s.n--
			s.dead++
			break
		}
	}
	// Tombstones lengthen probes: past a quarter of the array, rebuild it
	// with the live series only, at the length they need.
	if s.dead > len(sl.s)/4 {
		s.rebuild(s.lengthFor(s.n))
	}
}

// rebuild copies the live series into a fresh array of length n (a power
// of two, more than twice the live series) and swaps it in. Readers still
// probing the old array find what they look for or miss it and take the
// lock. s.mu must be held.
func (s *shard) rebuild(n int) {
	sl := s.tab.Load()
	fresh := newSlots(n)
	for i := range sl.s {
		if x := sl.s[i].Load(); x != nil && x != tombstone {
			for j := (x.hash >> 32) & fresh.mask; ; j = (j + 1) & fresh.mask {
				if fresh.s[j].Load() == nil {
					fresh.s[j].Store(x)
					break
				}
			}
		}
	}
	s.tab.Store(fresh)
	s.dead = 0
}

// evictSample is how many series an eviction looks at to pick a victim.
const evictSample = 8

// evictOne removes one series from a full shard: an expired one if the
// sample holds one, else the least recently used (score) of the sample's
// series that hold no count in use (Entry.idle). The sample starts at a
// pseudo-random slot. It reports whether it removed one; the caller takes
// its place in the table's count. s.mu must be held.
func (t *Table) evictOne(s *shard, now int64) bool {
	sl := s.tab.Load()
	s.rnd ^= s.rnd << 13
	s.rnd ^= s.rnd >> 7
	s.rnd ^= s.rnd << 17
	var victim *Entry
	n := 0
	for i, k := s.rnd&sl.mask, 0; k < len(sl.s) && n < evictSample; i, k = (i+1)&sl.mask, k+1 {
		e := sl.s[i].Load()
		if e == nil || e == tombstone {
			continue
		}
		n++
		if (victim == nil || score(e, now) < score(victim, now)) && e.idle(now) {
			victim = e
		}
	}
	if victim == nil || !victim.mu.TryLock() {
		return false // none idle, or the victim is in use right now
	}
	if !victim.idleLocked(now) { // it came into use since
		victim.mu.Unlock()
		return false
	}
	victim.dead = true
	expired := victim.expiresAt.Load() < now
	lost := victim.unreported()
	victim.mu.Unlock()
	s.remove(victim) // its place in t.count goes to the series that evicted it
	if expired {
		t.expired.Add(1)
		return true
	}
	t.evicted.Add(1)
	if lost > 0 {
		t.lost.Add(uint64(lost))
	}
	return true
}

// idle reports whether the series holds no count that still matters at
// now: it expired, or its owner acknowledged all its counts and none of
// them weighs in a decision any more (the current window's for fixed
// tiers; for sliding ones the previous window's too). An overflow series is
// idle only once it expired.
func (e *Entry) idle(now int64) bool {
	if e.expiresAt.Load() < now {
		return true
	}
	// The caller holds a shard's lock, and whoever holds an entry's lock
	// may wait for a shard's (the sync, sizing its dictionary with Len):
	// an entry in use right now is not idle, and waiting for it could
	// deadlock (TestEvictionSkipsEntriesInUse).
	if !e.mu.TryLock() {
		return false
	}
	defer e.mu.Unlock()
	return e.idleLocked(now)
}

// idleLocked is idle with the entry's lock held.
func (e *Entry) idleLocked(now int64) bool {
	if e.expiresAt.Load() < now {
		return true
	}
	if e.tenant == OverflowTenant {
		return false // held beyond the bound already: evicting it would add one more
	}
	if e.cur.Unreported() > 0 || (e.prev != nil && e.prev.unreported() > 0) {
		return false
	}
	weighs := e.sc.period // how long after its start a window's count counts
	if e.alg == Sliding {
		weighs *= 2
	}
	return !(e.cur.Own > 0 && now < e.cur.Start+weighs) && !(e.prev != nil && e.prev.own > 0 && now < e.cur.Start-e.sc.period+weighs)
}

// score orders eviction candidates: expired series first, then the one
// whose last window in use ends first (its expiry): the least recently
// used, to within a window, without a clock per series that every
// decision would write.
func score(e *Entry, now int64) int64 {
	if exp := e.expiresAt.Load(); exp >= now {
		return exp
	}
	return -1 << 62
}

// Sweep removes every series whose last window ended more than the grace
// (plus one period for sliding tiers) before now, and returns how many it
// removed. The node calls it once per sync interval.
func (t *Table) Sweep(now time.Time) int {
	nowNs := now.UnixNano()
	removed := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		if nowNs <= s.noneBefore {
			s.mu.Unlock()
			continue // nothing expired: no need to read every series
		}
		var expired []*Entry
		least := int64(math.MaxInt64)
		sl := s.tab.Load()
		for j := range sl.s {
			if e := sl.s[j].Load(); e != nil && e != tombstone {
				if exp := e.expiresAt.Load(); exp < nowNs {
					expired = append(expired, e)
				} else {
					least = min(least, exp)
				}
			}
		}
		s.noneBefore = least
		for _, e := range expired {
			e.mu.Lock()
			e.dead = true
			e.mu.Unlock()
			s.remove(e)
		}
		removed += len(expired)
		t.count.Add(-int64(len(expired)))
		s.mu.Unlock()
	}
	t.expired.Add(uint64(removed))
	return removed
}

// Range calls fn for every series in the table, until fn returns false. It
// takes no table lock: fn may lock the entry (and should check Dead, since a
// series may be removed meanwhile) but must not call back into the table.
func (t *Table) Range(fn func(e *Entry) bool) { t.RangeFrom(0, fn) }

// RangeFrom is Range starting with the shard of the series hash from (see
// Entry.Hash) and wrapping around, so that a caller that stops early (a
// batch that is full) can go on from where it stopped the next time.
func (t *Table) RangeFrom(from uint64, fn func(e *Entry) bool) {
	first := int(from & t.mask)
	for k := range t.shards {
		sl := t.shards[(first+k)&int(t.mask)].tab.Load()
		for j := range sl.s {
			if e := sl.s[j].Load(); e != nil && e != tombstone && !fn(e) {
				return
			}
		}
	}
}

// Get returns the entry of a series, or nil if the table does not hold it.
func (t *Table) Get(tenant, endpoint, method string, period time.Duration) *Entry {
	l := Limit{Tenant: tenant, Endpoint: endpoint, Method: method, Period: period}
	h := l.Hash()
	return t.shardOf(h).tab.Load().find(&l, h)
}
