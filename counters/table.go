package counters

import (
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Table.
type Config struct {
	// MaxEntries bounds the number of counter series held. When the table is
	// full, a new series evicts an old one (expired first, then the least
	// recently used of a small sample), and the eviction is counted. A
	// series costs about 300 bytes. Default 100,000.
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
// use: series are spread over shards, each with its own lock, and every
// series has its own mutex, so decisions on different keys do not contend.
// The zero value is not usable; call NewTable.
type Table struct {
	policy atomic.Pointer[Policy]
	grace  int64
	shards []shard
	mask   uint64

	share   atomic.Uint64 // members<<32 | index
	evicted atomic.Uint64
	expired atomic.Uint64
	lost    atomic.Uint64 // unreported cost dropped with evicted series
}

type shard struct {
	mu  sync.RWMutex
	m   map[uint64]*Entry
	cap int
	_   [40]byte // keep shard locks on separate cache lines
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
		grace:  int64(cfg.Grace),
		shards: make([]shard, cfg.Shards),
		mask:   uint64(cfg.Shards - 1),
	}
	per, rem := cfg.MaxEntries/cfg.Shards, cfg.MaxEntries%cfg.Shards
	for i := range t.shards {
		t.shards[i].m = make(map[uint64]*Entry)
		t.shards[i].cap = per
		if i < rem {
			t.shards[i].cap++
		}
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
}

// Stats returns the current size and eviction counters.
func (t *Table) Stats() Stats {
	return Stats{Entries: t.Len(), Evicted: t.evicted.Load(), EvictedUnreported: t.lost.Load(), Expired: t.expired.Load()}
}

// Len returns the number of series held.
func (t *Table) Len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}

// lookup returns the entry of l's series, creating it if needed.
func (t *Table) lookup(l *Limit, h uint64, now int64) *Entry {
	s := &t.shards[h&t.mask]
	s.mu.RLock()
	for k := h; ; k++ { // linear probing on a 64-bit hash collision
		e := s.m[k]
		if e == nil {
			break
		}
		if e.matches(l) {
			s.mu.RUnlock()
			return e
		}
	}
	s.mu.RUnlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	k := h
	for ; ; k++ {
		e := s.m[k]
		if e == nil {
			break
		}
		if e.matches(l) {
			return e
		}
	}
	if len(s.m) >= s.cap {
		t.evictOne(s, now)
	}
	e := &Entry{
		key:       k,
		hash:      h,
		tenant:    strings.Clone(l.Tenant),
		endpoint:  strings.Clone(l.Endpoint),
		method:    strings.Clone(l.Method),
		period:    int64(l.Period),
		threshold: l.Threshold,
		alg:       l.Algorithm,
	}
	e.roll(now, t.grace)
	e.lastUsed.Store(now)
	s.m[k] = e
	return e
}

// evictSample is how many series an eviction looks at to pick a victim.
const evictSample = 8

// evictOne removes one series from a full shard: an expired one if the
// sample holds one, else the least recently used of the sample. s must be
// write-locked.
func (t *Table) evictOne(s *shard, now int64) {
	var victim *Entry
	n := 0
	for _, e := range s.m { // map iteration starts at a random place
		if victim == nil || score(e, now) < score(victim, now) {
			victim = e
		}
		if n++; n >= evictSample {
			break
		}
	}
	if victim == nil {
		return
	}
	victim.mu.Lock()
	victim.dead = true
	expired := victim.expiresAt.Load() < now
	lost := victim.cur.Unreported() + victim.prev.Unreported()
	victim.mu.Unlock()
	delete(s.m, victim.key)
	if expired {
		t.expired.Add(1)
		return
	}
	t.evicted.Add(1)
	if lost > 0 {
		t.lost.Add(uint64(lost))
	}
}

// score orders eviction candidates: expired series first, then by last use.
func score(e *Entry, now int64) int64 {
	if e.expiresAt.Load() < now {
		return -1 << 62
	}
	return e.lastUsed.Load()
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
		for k, e := range s.m {
			if e.expiresAt.Load() >= nowNs {
				continue
			}
			e.mu.Lock()
			e.dead = true
			e.mu.Unlock()
			delete(s.m, k)
			removed++
		}
		s.mu.Unlock()
	}
	t.expired.Add(uint64(removed))
	return removed
}

// Range calls fn for every series in the table, until fn returns false. fn
// runs with the series' shard read-locked: it may lock the entry, but must not
// call back into the table.
func (t *Table) Range(fn func(e *Entry) bool) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		for _, e := range s.m {
			if !fn(e) {
				s.mu.RUnlock()
				return
			}
		}
		s.mu.RUnlock()
	}
}

// Get returns the entry of a series, or nil if the table does not hold it.
func (t *Table) Get(tenant, endpoint, method string, period time.Duration) *Entry {
	l := Limit{Tenant: tenant, Endpoint: endpoint, Method: method, Period: period}
	h := l.Hash()
	s := &t.shards[h&t.mask]
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k := h; ; k++ {
		e := s.m[k]
		if e == nil {
			return nil
		}
		if e.matches(&l) {
			return e
		}
	}
}

// GetOrCreate returns the entry of l's series, creating it (rolled to now)
// if needed. Owners use it to hold the series they aggregate for others.
func (t *Table) GetOrCreate(now time.Time, l Limit) *Entry {
	return t.lookup(&l, l.Hash(), now.UnixNano())
}
