package counters

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"
)

func newTable(t testing.TB, p Policy) *Table {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Policy = p
	tb, err := NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// base is a window boundary for every period used below.
var base = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return base.Add(d) }

type step struct {
	at        time.Duration
	cost      int64
	allowed   bool
	remaining int64
	reset     time.Duration
	retry     time.Duration
	tier      int
}

func runTimeline(t *testing.T, tb *Table, limits []Limit, steps []step) {
	t.Helper()
	for i, s := range steps {
		d, err := tb.Take(at(s.at), limits, s.cost)
		if err != nil {
			t.Fatalf("t%d: %v", i, err)
		}
		want := Decision{Allowed: s.allowed, Tier: s.tier, Limit: limits[s.tier].Threshold, Remaining: s.remaining, Reset: s.reset, RetryAfter: s.retry}
		if d != want {
			t.Errorf("t%d (at %v, cost %d):\n got  %+v\n want %+v", i, s.at, s.cost, d, want)
		}
	}
}

func TestFixedWindowTimeline(t *testing.T) {
	limits := []Limit{{Tenant: "org1", Endpoint: "/product/*", Method: "GET", Period: 10 * time.Second, Threshold: 3}}
	runTimeline(t, newTable(t, Optimistic{}), limits, []step{
		{at: 0, cost: 1, allowed: true, remaining: 2, reset: 10 * time.Second},
		{at: 1 * time.Second, cost: 1, allowed: true, remaining: 1, reset: 9 * time.Second},
		{at: 2 * time.Second, cost: 2, allowed: false, remaining: 0, reset: 8 * time.Second, retry: 8 * time.Second},
		{at: 3 * time.Second, cost: 1, allowed: true, remaining: 0, reset: 7 * time.Second},
		{at: 9999 * time.Millisecond, cost: 1, allowed: false, remaining: 0, reset: time.Millisecond, retry: time.Millisecond},
		// A new window begins: the key changes by itself.
		{at: 10 * time.Second, cost: 1, allowed: true, remaining: 2, reset: 10 * time.Second},
		{at: 10 * time.Second, cost: 0, allowed: true, remaining: 2, reset: 10 * time.Second}, // cost 0 peeks
		// Two windows later nothing is left over.
		{at: 35 * time.Second, cost: 3, allowed: true, remaining: 0, reset: 5 * time.Second},
	})
}

func TestSlidingWindowTimeline(t *testing.T) {
	limits := []Limit{{Tenant: "org1", Endpoint: "/p", Method: "GET", Period: 10 * time.Second, Threshold: 10, Algorithm: Sliding}}
	runTimeline(t, newTable(t, Optimistic{}), limits, []step{
		{at: 1 * time.Second, cost: 8, allowed: true, remaining: 2, reset: 9 * time.Second},
		// 25% into the next window the previous 8 weigh 75%: 6 used.
		{at: 12500 * time.Millisecond, cost: 4, allowed: true, remaining: 0, reset: 7500 * time.Millisecond},
		// 50% in: 8*0.5 + 4 = 8 used, so 3 do not fit; room for 1 more
		// once 8*(1-x) <= 10-4-3 = 3, i.e. at x = 62.5%: 1.25 s from now.
		{at: 15 * time.Second, cost: 3, allowed: false, remaining: 0, reset: 5 * time.Second, retry: 1250 * time.Millisecond},
		{at: 15 * time.Second, cost: 2, allowed: true, remaining: 0, reset: 5 * time.Second},
		// 90% in: 8*0.1 = 0.8 -> 0, plus 6 used: 4 remain.
		{at: 19 * time.Second, cost: 1, allowed: true, remaining: 3, reset: time.Second},
	})
}

func TestTiersChargedTogetherOrNotAtAll(t *testing.T) {
	limits := []Limit{
		{Tenant: "org1", Endpoint: "/p", Method: "GET", Period: 10 * time.Second, Threshold: 5},
		{Tenant: "org1", Endpoint: "/p", Method: "GET", Period: time.Second, Threshold: 2},
	}
	tb := newTable(t, Optimistic{})
	runTimeline(t, tb, limits, []step{
		{at: 0, cost: 1, allowed: true, remaining: 1, reset: time.Second, tier: 1},
		{at: 100 * time.Millisecond, cost: 1, allowed: true, remaining: 0, reset: 900 * time.Millisecond, tier: 1},
		// The 1 s tier denies: the 10 s tier must not be charged.
		{at: 200 * time.Millisecond, cost: 1, allowed: false, reset: 800 * time.Millisecond, retry: 800 * time.Millisecond, tier: 1},
		{at: 300 * time.Millisecond, cost: 1, allowed: false, reset: 700 * time.Millisecond, retry: 700 * time.Millisecond, tier: 1},
		{at: 1 * time.Second, cost: 2, allowed: true, remaining: 0, reset: time.Second, tier: 1},
		// 4 of 5 used in the 10 s tier; the 1 s tier has room for 2, the 10 s
		// tier for 1 only: denied by the 10 s tier, and the 1 s tier is not
		// charged either.
		{at: 2 * time.Second, cost: 2, allowed: false, reset: 8 * time.Second, retry: 8 * time.Second, tier: 0},
		{at: 2 * time.Second, cost: 1, allowed: true, remaining: 0, reset: 8 * time.Second, tier: 0},
	})
	e := tb.Get("org1", "/p", "GET", 10*time.Second)
	if e == nil || e.cur.Own != 5 {
		t.Fatalf("10 s tier own count = %v, want 5 (denied requests must not be charged)", e.cur.Own)
	}
	e1 := tb.Get("org1", "/p", "GET", time.Second)
	if e1.cur.Own != 1 || e1.cur.Demand != 3 {
		t.Fatalf("1 s tier own=%d demand=%d, want own=1 demand=3", e1.cur.Own, e1.cur.Demand)
	}
}

func TestTakeRejectsBadInput(t *testing.T) {
	tb := newTable(t, Optimistic{})
	ok := Limit{Tenant: "a", Period: time.Second, Threshold: 1}
	for _, tc := range []struct {
		name   string
		limits []Limit
		cost   int64
		want   error
	}{
		{"negative cost", []Limit{ok}, -1, ErrBadCost},
		{"zero period", []Limit{{Tenant: "a", Threshold: 1}}, 1, ErrBadLimit},
		{"negative threshold", []Limit{{Tenant: "a", Period: time.Second, Threshold: -1}}, 1, ErrBadLimit},
		{"negative weight", []Limit{ok, {Tenant: "b", Period: time.Second, Threshold: 1, Weight: -1}}, 1, ErrBadLimit},
		{"weighted cost overflows", []Limit{{Tenant: "a", Period: time.Second, Threshold: 1, Weight: 4}}, math.MaxInt64 / 3, ErrBadCost},
		{"too many", make([]Limit, MaxLimits+1), 1, ErrTooManyLimits},
	} {
		if _, err := tb.Take(base, tc.limits, tc.cost); err != tc.want {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if d, err := tb.Take(base, nil, 1); err != nil || !d.Allowed || d.Tier != -1 {
		t.Errorf("no limits: %+v, %v; want allowed", d, err)
	}
	if tb.Len() != 0 {
		t.Errorf("rejected requests created %d series", tb.Len())
	}
}

func TestDuplicateSeriesChargedOnce(t *testing.T) {
	tb := newTable(t, Optimistic{})
	l := Limit{Tenant: "a", Endpoint: "/p", Method: "GET", Period: time.Second, Threshold: 4}
	for i := 0; i < 4; i++ {
		if !tb.Allow(base, l, l) {
			t.Fatalf("request %d denied", i)
		}
	}
	if tb.Allow(base, l, l) {
		t.Fatal("fifth request admitted")
	}
}

// TestWeightsChargeEachLimitItsOwnCost: one Take, limits of different
// weights, charged cost×weight each, together or not at all.
func TestWeightsChargeEachLimitItsOwnCost(t *testing.T) {
	tb := newTable(t, Optimistic{})
	export := Limit{Tenant: "a", Endpoint: "export", Method: "POST", Period: 10 * time.Second, Threshold: 9, Weight: 3}
	perTenant := Limit{Tenant: "a", Endpoint: "all", Method: "*", Period: 10 * time.Second, Threshold: 10}
	limits := []Limit{perTenant, export}
	runTimeline(t, tb, limits, []step{
		{at: 0, cost: 1, allowed: true, remaining: 6, reset: 10 * time.Second, tier: 1},
		{at: time.Second, cost: 2, allowed: true, remaining: 0, reset: 9 * time.Second, tier: 1},
		// export has nothing left for 3: denied, perTenant not charged.
		{at: 2 * time.Second, cost: 1, allowed: false, reset: 8 * time.Second, retry: 8 * time.Second, tier: 1},
	})
	if e := tb.Get("a", "all", "*", 10*time.Second); e.cur.Own != 3 || e.cur.Demand != 4 {
		t.Errorf("per-tenant own=%d demand=%d, want 3 (1+2) and 4", e.cur.Own, e.cur.Demand)
	}
	if e := tb.Get("a", "export", "POST", 10*time.Second); e.cur.Own != 9 || e.cur.Demand != 12 {
		t.Errorf("export own=%d demand=%d, want 9 (3+6) and 12", e.cur.Own, e.cur.Demand)
	}
	// A single weighted limit takes the one-limit path.
	one := Limit{Tenant: "b", Endpoint: "export", Method: "POST", Period: 10 * time.Second, Threshold: 10, Weight: 4}
	for i, want := range []bool{true, true, false} {
		if d, err := tb.Take(base, []Limit{one}, 1); err != nil || d.Allowed != want {
			t.Fatalf("single weighted take %d: %+v, %v; want allowed=%v", i, d, err, want)
		}
	}
	// Two limits naming one series are charged once, at the larger weight.
	dup := Limit{Tenant: "c", Endpoint: "/p", Method: "GET", Period: time.Second, Threshold: 10}
	heavy := dup
	heavy.Weight = 4
	if _, err := tb.Take(base, []Limit{dup, heavy}, 1); err != nil {
		t.Fatal(err)
	}
	if e := tb.Get("c", "/p", "GET", time.Second); e.cur.Own != 4 {
		t.Errorf("duplicate series own=%d, want 4", e.cur.Own)
	}
}

func TestZeroThresholdDeniesEverything(t *testing.T) {
	tb := newTable(t, Optimistic{})
	if tb.Allow(base, Limit{Tenant: "a", Period: time.Second, Threshold: 0}) {
		t.Fatal("threshold 0 admitted a request")
	}
}

// TestConcurrentTakesExact runs many goroutines over overlapping series in
// different orders: no count may be lost or doubled, and it must not deadlock.
func TestConcurrentTakesExact(t *testing.T) {
	tb := newTable(t, Optimistic{})
	a := Limit{Tenant: "t", Endpoint: "/a", Method: "GET", Period: 10 * time.Second, Threshold: 5000}
	b := Limit{Tenant: "t", Endpoint: "/b", Method: "GET", Period: 10 * time.Second, Threshold: 3000}
	c := Limit{Tenant: "t", Endpoint: "/c", Method: "GET", Period: 10 * time.Second, Threshold: 1_000_000}
	orders := [][]Limit{{a, b}, {b, a}, {a, c}, {c, b, a}}
	const workers, each = 8, 2000
	var mu sync.Mutex
	admitted := map[string]int64{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			local := map[string]int64{}
			for i := 0; i < each; i++ {
				ls := orders[(w+i)%len(orders)]
				if d, _ := tb.Take(at(time.Second), ls, 1); d.Allowed {
					for _, l := range ls {
						local[l.Endpoint]++
					}
				}
			}
			mu.Lock()
			for k, v := range local {
				admitted[k] += v
			}
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	for _, l := range []Limit{a, b, c} {
		e := tb.Get(l.Tenant, l.Endpoint, l.Method, l.Period)
		if e.cur.Own != admitted[l.Endpoint] {
			t.Errorf("%s: table own %d != admitted %d", l.Endpoint, e.cur.Own, admitted[l.Endpoint])
		}
		if e.cur.Own > l.Threshold {
			t.Errorf("%s: own %d over threshold %d", l.Endpoint, e.cur.Own, l.Threshold)
		}
	}
	// b is the scarce tier: it must be exactly exhausted.
	if got := admitted["/b"]; got != 3000 {
		t.Errorf("/b admitted %d, want exactly 3000", got)
	}
}

// ackAll marks every count of every series acknowledged by its owner, as
// a sync round does.
func ackAll(tb *Table) {
	tb.Range(func(e *Entry) bool {
		e.Lock()
		e.cur.Acked = e.cur.Own
		if e.prev != nil {
			e.prev.acked = e.prev.own
		}
		e.Unlock()
		return true
	})
}

// TestFloodOfDistinctKeysKeepsCounts: a million distinct tenants against a
// table of 100,000 series. Every series that holds a count stays; the
// newcomers beyond the bound share their tier's overflow series, which
// admits one tenant's limit; memory stays at the bound plus that one
// series. Once the window is over and its counts acknowledged, the series
// make room again.
func TestFloodOfDistinctKeysKeepsCounts(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxEntries = 100_000
	tb, err := NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const flood = 1_000_000
	limits := []Limit{{Endpoint: "/p", Method: "GET", Period: 10 * time.Second, Threshold: 10}}
	buf := make([]byte, 0, 16)
	admitted := 0
	for i := 0; i < flood; i++ {
		buf = fmt.Appendf(buf[:0], "tenant-%d", i)
		limits[0].Tenant = string(buf)
		if tb.Allow(at(time.Second), limits...) {
			admitted++
		} else if i < cfg.MaxEntries {
			t.Fatalf("tenant %d denied: the table holds exactly MaxEntries series before it is full", i)
		}
		if i == cfg.MaxEntries-1 {
			if st := tb.Stats(); st.Entries != cfg.MaxEntries || st.Overflowed != 0 || st.Evicted != 0 {
				t.Fatalf("with MaxEntries series: %+v, want them all held, nothing overflowed or evicted", st)
			}
		}
		if i%100_000 == 0 && tb.Len() > cfg.MaxEntries+1 {
			t.Fatalf("after %d keys the table holds %d > cap %d + the overflow series", i, tb.Len(), cfg.MaxEntries)
		}
	}
	st := tb.Stats()
	if st.Entries != cfg.MaxEntries+1 || st.Evicted != 0 || st.EvictedUnreported != 0 {
		t.Errorf("stats %+v: want the cap %d plus the overflow series, nothing evicted", st, cfg.MaxEntries)
	}
	if st.Overflowed != flood-uint64(cfg.MaxEntries) || admitted != cfg.MaxEntries+10 {
		t.Errorf("overflowed %d, admitted %d: want %d overflowed and the overflow series' limit of 10 admitted beyond the %d",
			st.Overflowed, admitted, flood-cfg.MaxEntries, cfg.MaxEntries)
	}
	if e := tb.Get(OverflowTenant, "/p", "GET", 10*time.Second); e == nil || e.Current().Own != 10 {
		t.Errorf("overflow series %v: want 10 admitted on it", e)
	}
	// The next window, counts acknowledged: new tenants take idle places.
	ackAll(tb)
	for i := 0; i < 1000; i++ {
		buf = fmt.Appendf(buf[:0], "late-%d", i)
		limits[0].Tenant = string(buf)
		if !tb.Allow(at(11*time.Second), limits...) {
			t.Fatalf("late tenant %d denied once the flood's window was over", i)
		}
	}
	if st2 := tb.Stats(); st2.Overflowed != st.Overflowed || st2.Evicted != 1000 || st2.EvictedUnreported != 0 {
		t.Errorf("after the window: %+v, want 1000 idle series evicted, none overflowed, no count lost", st2)
	}
}

// TestEvictionSkipsEntriesInUse: a full table evicts an idle series to
// make room, under its shard's lock. A series whose lock is held at that
// moment (the sync reads it, and may then wait for a shard's lock: it
// sizes its dictionary with Len) is in use: the eviction must pass it by,
// not wait for it. Waiting deadlocked a node under a flood of new tenants
// (httpfilter TestFloodKeepsTenantsInUse hung for 30 minutes).
func TestEvictionSkipsEntriesInUse(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxEntries, cfg.Shards = 2, 1
	tb, err := NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := func(tenant string) Limit {
		return Limit{Tenant: tenant, Endpoint: "/p", Method: "GET", Period: time.Second, Threshold: 10}
	}
	tb.Allow(at(0), l("a"))
	tb.Allow(at(0), l("b"))
	ackAll(tb)
	// Both are idle in the next window; a's lock is held, as the sync
	// holds it, and the sync waits for the shard (Len) while it does.
	a := tb.Get("a", "/p", "GET", time.Second)
	a.mu.Lock()
	lenDone := make(chan int)
	takeDone := make(chan bool)
	go func() { takeDone <- tb.Allow(at(1500*time.Millisecond), l("c")) }()
	deadline := time.After(10 * time.Second)
	select {
	case ok := <-takeDone:
		if !ok {
			t.Errorf("c denied: b was idle and could make room")
		}
	case <-deadline:
		t.Fatal("a new series waited for a series in use to make room")
	}
	go func() { lenDone <- tb.Len() }()
	select {
	case n := <-lenDone:
		if n != 2 {
			t.Errorf("Len %d, want 2 (a kept, b evicted for c)", n)
		}
	case <-deadline:
		t.Fatal("Len waited while an entry's lock was held")
	}
	a.mu.Unlock()
	if tb.Get("a", "/p", "GET", time.Second) == nil || tb.Get("b", "/p", "GET", time.Second) != nil {
		t.Errorf("want a (in use) kept and b (idle) evicted")
	}
}

func TestEvictionPrefersExpiredThenOldest(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxEntries, cfg.Shards = 4, 1
	tb, _ := NewTable(cfg)
	l := func(tenant string) Limit {
		return Limit{Tenant: tenant, Endpoint: "/p", Method: "GET", Period: time.Second, Threshold: 10}
	}
	tb.Allow(at(0), l("old"))
	tb.Allow(at(5*time.Second), l("b"), l("c"), l("d"))
	// "old" expired at 0 + 2 periods + 2 s grace = 4 s; at 5 s a new tenant
	// takes its place even though it is not the only candidate.
	tb.Allow(at(5*time.Second), l("e"))
	if tb.Get("old", "/p", "GET", time.Second) != nil {
		t.Error("expired series was kept while a live one was evicted")
	}
	if st := tb.Stats(); st.Expired != 1 || st.Evicted != 0 || st.Entries != 4 {
		t.Errorf("stats = %+v, want 1 expired, 0 evicted, 4 entries", st)
	}
	ackAll(tb)
	tb.Allow(at(6*time.Second), l("b"), l("c"), l("e"))
	tb.Allow(at(6*time.Second), l("f")) // full, none expired: LRU "d", idle, goes
	if tb.Get("d", "/p", "GET", time.Second) != nil {
		t.Error("least recently used series was not the one evicted")
	}
	// Full of series whose counts are in use: none goes, and "g" is
	// counted on the overflow series.
	tb.Allow(at(6*time.Second), l("g"))
	if st := tb.Stats(); tb.Get("g", "/p", "GET", time.Second) != nil || st.Overflowed != 1 || st.Evicted != 1 {
		t.Errorf("stats %+v: a series in use was evicted for a newcomer", st)
	}
	if e := tb.Get(OverflowTenant, "/p", "GET", time.Second); e == nil || e.Current().Own != 1 {
		t.Errorf("overflow series %v: want g's request on it", e)
	}
}

func TestSweepRemovesExpiredWindows(t *testing.T) {
	tb := newTable(t, Optimistic{})
	fixed := Limit{Tenant: "a", Endpoint: "/p", Method: "GET", Period: 10 * time.Second, Threshold: 10}
	sliding := fixed
	sliding.Tenant, sliding.Algorithm = "b", Sliding
	tb.Allow(at(time.Second), fixed, sliding)
	// A series keeps its previous window one period after it ends (sliding
	// tiers weigh it, late sync answers land in it), then the grace: both
	// series of window 0..10 s live until 10 + 10 + 2 = 22 s.
	if n := tb.Sweep(at(22 * time.Second)); n != 0 {
		t.Fatalf("swept %d series at 22 s, want 0", n)
	}
	if n := tb.Sweep(at(22*time.Second + 1)); n != 2 {
		t.Fatalf("swept %d series after 22 s, want 2", n)
	}
	if tb.Len() != 0 || tb.Stats().Expired != 2 {
		t.Fatalf("after sweep: %+v", tb.Stats())
	}
	// A swept series starts afresh.
	if !tb.Allow(at(23*time.Second), fixed) {
		t.Fatal("request after sweep denied")
	}
}

// TestSweepSkipsNothingExpiredButSeesNewSeries: a shard is skipped while
// none of its series can have expired (shard.noneBefore), but a series
// created since with an earlier expiry (a shorter period) still goes when
// it expires, and the long one when it does.
func TestSweepSkipsNothingExpiredButSeesNewSeries(t *testing.T) {
	tb := newTable(t, Optimistic{})
	long := Limit{Tenant: "a", Endpoint: "/p", Method: "GET", Period: time.Hour, Threshold: 10}
	short := long
	short.Tenant, short.Period = "b", time.Second
	tb.Allow(at(time.Second), long)
	if n := tb.Sweep(at(2 * time.Second)); n != 0 {
		t.Fatalf("swept %d series at 2 s, want 0", n)
	}
	// b's window 3..4 s lives until 3 + 2 + 2 (the grace) = 7 s.
	tb.Allow(at(3*time.Second), short)
	if n := tb.Sweep(at(7 * time.Second)); n != 0 {
		t.Fatalf("swept %d series at 7 s, want 0", n)
	}
	if n := tb.Sweep(at(7*time.Second + 1)); n != 1 || tb.Get("b", "/p", "GET", time.Second) != nil || tb.Get("a", "/p", "GET", time.Hour) == nil {
		t.Fatalf("swept %d series after 7 s, want b's only", n)
	}
	if n := tb.Sweep(at(2*time.Hour + 2*time.Second + 1)); n != 1 || tb.Len() != 0 {
		t.Fatalf("swept %d series after a's window and the one after it, want a's (%d left)", n, tb.Len())
	}
}

func TestTakeDoesNotAllocate(t *testing.T) {
	tb := newTable(t, Optimistic{})
	limits := []Limit{
		{Tenant: "org1", Endpoint: "/v1/organizations/{orgId}/product/*", Method: "GET", Period: 10 * time.Second, Threshold: 1 << 40},
		{Tenant: "org1", Endpoint: "/v1/organizations/{orgId}/product/*", Method: "GET", Period: time.Second, Threshold: 1 << 40, Algorithm: Sliding},
	}
	now := at(time.Second)
	tb.Take(now, limits, 1)
	if n := testing.AllocsPerRun(1000, func() { tb.Take(now, limits, 1) }); n != 0 {
		t.Fatalf("Take allocates %.1f times per call, want 0", n)
	}
	// Across a window boundary a series allocates once in its life: the
	// previous window's slot (Entry.prev), the first time a window with
	// counts ends where the next one begins (here the 10 s tier's; the 1 s
	// tier's windows are 10 s apart).
	if n := mallocs(func() { tb.Take(at(11*time.Second), limits, 1) }); n != 1 {
		t.Fatalf("Take allocates %d times at the first window boundary, want 1 (the previous window's slot)", n)
	}
	// After that, nothing: series and their slots are reused, not recreated.
	i := 1
	if n := testing.AllocsPerRun(100, func() { i++; tb.Take(at(time.Duration(i)*10*time.Second), limits, 1) }); n != 0 {
		t.Fatalf("Take allocates %.1f times per call across windows, want 0", n)
	}
}

// mallocs returns how many heap allocations f makes, run once (unlike
// testing.AllocsPerRun, without a warm-up run first).
func mallocs(f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

func TestPreparedAndUnpreparedLimitsShareACounter(t *testing.T) {
	tb := newTable(t, Optimistic{})
	raw := Limit{Tenant: "a", Endpoint: "/v1/p/*", Method: "GET", Period: time.Second, Threshold: 3}
	prep := raw.Prepare()
	for i, l := range []Limit{raw, prep, raw} {
		if !tb.Allow(base, l) {
			t.Fatalf("request %d denied", i)
		}
	}
	if tb.Allow(base, prep) || tb.Len() != 1 {
		t.Fatalf("prepared and unprepared limits of one series did not share one counter (%d series)", tb.Len())
	}
}
