package counters

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// TestHeapPerSeries measures the heap a table holds per series, filled to
// MaxEntries with one-tier series of realistic names (the figures
// Config.MaxEntries' doc states), and fails if it grows past the bounds
// below: series with requests in one window (most of a large table: a
// tenant seen once), and series with requests in two windows in a row,
// which hold the previous window too (past). -short measures 100,000
// series instead of 1,000,000. The entry's own size is TestStructSizes'.
func TestHeapPerSeries(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation sizes; .ci/run runs this without it")
	}
	// The bounds are the figures measured plus a small margin. At
	// 1,000,000, one window: 481 before the slots named owners by PeerID
	// and the entries shared their tier through a scope, 273 before the
	// previous window's slot was held apart (Entry.prev), 193 since; two
	// windows: 273, then 289 with a whole Slot apart, 257 since the
	// previous window is kept short (past, 64 bytes). At 100,000
	// (-short), 298 before a shard's array grew by doubling instead of
	// fourfold (the index is sparser there), then 197 and 293, now 197
	// and 261.
	n, one, two := 1_000_000, 198.0, 262.0
	if testing.Short() {
		n, one, two = 100_000, 202, 266
	}
	for _, tc := range []struct {
		name    string
		windows int
		bound   float64
	}{{"one window", 1, one}, {"two windows", 2, two}} {
		per := heapPerSeries(t, n, tc.windows)
		t.Logf("%d series, %s: %.0f bytes of heap per series", n, tc.name, per)
		if per > tc.bound {
			t.Errorf("%s: %.0f bytes per series at %d series, more than the %.0f recorded", tc.name, per, n, tc.bound)
		}
	}
}

// heapPerSeries fills a table of n series, each with one request in each
// of windows windows in a row, and returns the heap it holds per series.
func heapPerSeries(t *testing.T, n, windows int) float64 {
	cfg := DefaultConfig()
	cfg.MaxEntries = n
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tb, err := NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := Limit{Endpoint: "/v1/organizations/{orgId}/product/{id}", Method: "PUT", Period: 10 * time.Second, Threshold: 100}
	buf := make([]byte, 0, 32)
	for w := range windows {
		now := at(time.Second + time.Duration(w)*l.Period)
		for i := 0; i < n; i++ {
			buf = fmt.Appendf(buf[:0], "tenant-%08d", i)
			l.Tenant = string(buf)
			if !tb.Allow(now, l) {
				t.Fatalf("series %d denied in window %d", i, w)
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := tb.Len(); got != n {
		t.Fatalf("the table holds %d series, want %d", got, n)
	}
	runtime.KeepAlive(tb)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// TestStructSizes holds the structs a table keeps per series to the sizes
// their layout was chosen for: a field that breaks a packed word, or one
// more, shows here before it shows in TestHeapPerSeries. An entry of 160
// bytes fills its allocation size class exactly, as does the previous
// window's past (Entry.prev) one of 64; a whole Slot would take 96.
func TestStructSizes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want uintptr
	}{
		{"Slot", unsafe.Sizeof(Slot{}), 88},
		{"Entry", unsafe.Sizeof(Entry{}), 160},
		{"past", unsafe.Sizeof(past{}), 64},
	} {
		if tc.got != tc.want {
			t.Errorf("unsafe.Sizeof(%s) = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

// TestIndexUnderChurn checks that a table's index stays the size its live
// series need while series come and go: rounds of new tenants that each
// take the place of an expired series, then a Sweep that removes them all.
// (Before, every rebuild at least doubled a shard's array, so a table under
// a flood of new tenants held an index of 42, then 84, then 168 bytes per
// series at 100,000.)
func TestIndexUnderChurn(t *testing.T) {
	const n = 20_000
	cfg := DefaultConfig()
	cfg.MaxEntries = n
	tb, err := NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	length := func() (total int) {
		for i := range tb.shards {
			total += len(tb.shards[i].tab.Load().s)
		}
		return total
	}
	start := length()
	l := Limit{Endpoint: "/v1/{id}", Method: "GET", Period: time.Second, Threshold: 10}
	full, k := 0, 0
	for round := range 6 {
		now := at(time.Duration(round) * 10 * time.Second) // the rounds before have expired
		for range n {
			k++
			l.Tenant = fmt.Sprintf("tenant-%08d", k)
			tb.Allow(now, l)
		}
		if round == 0 {
			full = length()
			if st := tb.Stats(); st.Entries != n {
				t.Fatalf("after the first round: %+v, want %d series", st, n)
			}
			continue
		}
		if st := tb.Stats(); st.Expired == 0 || st.Entries != n {
			t.Fatalf("round %d: %+v, want %d series, some having taken an expired one's place", round, st, n)
		}
		if got := length(); got > full {
			t.Errorf("round %d: the index is %d slots long, more than the %d of the first round", round, got, full)
		}
	}
	if got := tb.Sweep(at(time.Hour)); got != n {
		t.Errorf("Sweep removed %d series, want %d", got, n)
	}
	// A shard rebuilds once its tombstones pass a quarter of its array, so
	// it may end a length above where it started.
	if got := length(); got > 2*start {
		t.Errorf("after a Sweep that emptied the table: the index is %d slots long, more than twice the %d it started at", got, start)
	}
}

// TestPreviousHeldApart follows one series' previous-window slot: none
// while no window with counts has been followed by the next (Previous
// nil), one brought into being by Slot (what is recorded there stays),
// then the slot of a window with counts once the next begins, which stays
// the series' own and is cleared after a gap.
func TestPreviousHeldApart(t *testing.T) {
	tb, err := NewTable(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	l := Limit{Tenant: "a", Endpoint: "/v1/{id}", Method: "GET", Period: 10 * time.Second, Threshold: 100}
	type prev struct {
		held        bool // Previous(&buf) != nil
		start       time.Duration
		own, demand int64
	}
	var kept *past
	for i, step := range []struct {
		take   time.Duration // a request at this time, if not 0
		demand int64         // else recorded as demand in the window 10 s
		want   prev
	}{
		{take: 1 * time.Second},  // window 0 s
		{take: 25 * time.Second}, // window 20 s: 10 s came between
		{demand: 3, want: prev{true, 10 * time.Second, 0, 3}},
		{take: 31 * time.Second, want: prev{true, 20 * time.Second, 1, 1}},
		{take: 55 * time.Second, want: prev{true, 40 * time.Second, 0, 0}}, // a gap: cleared
	} {
		if step.take != 0 && !tb.Allow(at(step.take), l) {
			t.Fatalf("step %d: request denied", i)
		}
		e := tb.Get(l.Tenant, l.Endpoint, l.Method, l.Period)
		e.Lock()
		var buf Slot
		if step.demand != 0 {
			s := e.Slot(at(10*time.Second).UnixNano(), &buf)
			s.Demand += step.demand
			e.Store(s)
		}
		var got prev
		if p := e.Previous(&buf); p != nil {
			got = prev{true, time.Duration(p.Start - base.UnixNano()), p.Own, p.Demand}
		}
		p := e.prev
		e.Unlock()
		if got != step.want {
			t.Errorf("step %d: previous slot %+v, want %+v", i, got, step.want)
		}
		switch {
		case kept == nil:
			kept = p
		case p != kept:
			t.Errorf("step %d: the previous slot was made anew, want the one the series holds", i)
		}
	}
}

// TestPeerID checks that a table names every member run by one id, tells
// runs of one member apart, and resolves ids back.
func TestPeerID(t *testing.T) {
	tb, err := NewTable(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if id := tb.PeerID("", 0); id != 0 {
		t.Errorf(`PeerID("", 0) = %d, want 0`, id)
	}
	a1, a2, b1 := tb.PeerID("a", 1), tb.PeerID("a", 2), tb.PeerID("b", 1)
	if a1 == 0 || a1 == a2 || a1 == b1 || a2 == b1 {
		t.Fatalf("ids a/1 %d, a/2 %d, b/1 %d: want distinct and non-zero", a1, a2, b1)
	}
	if id := tb.PeerID(string([]byte("a")), 1); id != a1 {
		t.Errorf("a/1 again: id %d, want %d", id, a1)
	}
	for _, tc := range []struct {
		id   PeerID
		name string
		inc  uint64
	}{{0, "", 0}, {a1, "a", 1}, {a2, "a", 2}, {b1, "b", 1}, {b1 + 1, "", 0}} {
		if name, inc := tb.Peer(tc.id); name != tc.name || inc != tc.inc {
			t.Errorf("Peer(%d) = %q/%d, want %q/%d", tc.id, name, inc, tc.name, tc.inc)
		}
	}
}

// TestScopeShared checks that the series of one tier share one scope (its
// endpoint and method held once), prepared or not, and that tiers differing
// in endpoint, method or period do not.
func TestScopeShared(t *testing.T) {
	tb, err := NewTable(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	base := Limit{Endpoint: "/v1/{id}", Method: "GET", Period: time.Second, Threshold: 10}
	get := func(l Limit, tenant string) *Entry {
		l.Tenant = tenant
		if !tb.Allow(at(0), l) {
			t.Fatalf("%+v denied", l)
		}
		return tb.Get(l.Tenant, l.Endpoint, l.Method, l.Period)
	}
	a := get(base, "a")
	if b := get(base.Prepare(), "b"); b.sc != a.sc {
		t.Error("two series of one tier, one limit prepared: scopes differ")
	}
	if c := get(Limit{Endpoint: "/v1/{id}", Method: "GET", Period: time.Second, Threshold: 99}, "c"); c.sc != a.sc {
		t.Error("a tier's threshold changed the scope: it is not part of the identity")
	}
	for _, l := range []Limit{
		{Endpoint: "/v2/{id}", Method: "GET", Period: time.Second, Threshold: 10},
		{Endpoint: "/v1/{id}", Method: "PUT", Period: time.Second, Threshold: 10},
		{Endpoint: "/v1/{id}", Method: "GET", Period: 2 * time.Second, Threshold: 10},
	} {
		if e := get(l, "a"); e.sc == a.sc {
			t.Errorf("%+v shares the scope of %+v", l, base)
		} else if tenant, ep, m, p := e.Identity(); tenant != "a" || ep != l.Endpoint || m != l.Method || p != l.Period {
			t.Errorf("Identity() = %q %q %q %v, want %+v", tenant, ep, m, p, l)
		}
	}
}

// TestLockOrder checks that Entry.before is a strict total order over
// distinct series, hash collisions included: two Takes lock any two
// series in the same order.
func TestLockOrder(t *testing.T) {
	sc1 := &scope{period: 1, endpoint: "/a", method: "GET"}
	ents := []*Entry{
		{hash: 1, tenant: "x", sc: sc1},
		{hash: 1, tenant: "y", sc: sc1},
		{hash: 1, tenant: "x", sc: &scope{period: 2, endpoint: "/a", method: "GET"}},
		{hash: 1, tenant: "x", sc: &scope{period: 1, endpoint: "/b", method: "GET"}},
		{hash: 1, tenant: "x", sc: &scope{period: 1, endpoint: "/a", method: "PUT"}},
		{hash: 0, tenant: "z", sc: sc1},
		{hash: 2, tenant: "a", sc: sc1},
	}
	for i, a := range ents {
		if a.before(a) {
			t.Errorf("entry %d before itself", i)
		}
		for j, b := range ents {
			if i != j && a.before(b) == b.before(a) {
				t.Errorf("entries %d and %d: before %v both ways", i, j, a.before(b))
			}
			for k, c := range ents {
				if a.before(b) && b.before(c) && !a.before(c) {
					t.Errorf("entries %d < %d < %d but not %d < %d", i, j, k, i, k)
				}
			}
		}
	}
	// One series as two entries (evicted and made anew between a Take's
	// lookups) has no order: the Take looks again.
	again := &Entry{hash: 1, tenant: "x", sc: &scope{period: 1, endpoint: "/a", method: "GET"}}
	for _, tc := range []struct {
		ents []*Entry
		want bool
	}{
		{[]*Entry{ents[0], ents[1], ents[6]}, false},
		{[]*Entry{ents[0], ents[0], ents[1]}, false},
		{[]*Entry{ents[5], ents[0], again}, true},
		{[]*Entry{again, ents[0]}, true},
	} {
		var es [MaxLimits]*Entry
		var order [MaxLimits]uint8
		for i, e := range tc.ents {
			es[i], order[i] = e, uint8(i)
		}
		if got := twice(&es, &order, len(tc.ents)); got != tc.want {
			t.Errorf("twice(%v) = %v, want %v", tc.ents, got, tc.want)
		}
	}
}

// TestPastKeepsWhatIsRead checks, over slots generated from a seed, that
// the previous window's short form (past) gives back every field that is
// read of a window that is over: what the sync reports (the counts, the
// grant or the fallback's membership, who answered and granted, the
// epoch, whether a carried lease was answered) and what the minority rule
// compares (GrantedAt). What it drops is what only decisions in the
// window read (Spare, Informed), the answer's head (Head, which only a
// restarted owner granting in the window reads) and when Global arrived,
// beyond whether it did; a grant's word also holds a fallback's membership, which is read
// only without one.
func TestPastKeepsWhatIsRead(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	count := func() int64 {
		switch rnd.IntN(4) {
		case 0:
			return 0
		case 1:
			return rnd.Int64N(100)
		case 2:
			return rnd.Int64() // beyond 32 bits
		}
		return math.MaxInt64 - rnd.Int64N(3)
	}
	const start = int64(1_700_000_000_000_000_000)
	for i := range 10_000 {
		s := Slot{
			Start: start, Own: count(), Acked: count(), Global: count(), Demand: count(),
			Granted: count(), grantedAt: start + rnd.Int64N(int64(time.Hour)) - int64(time.Minute),
			Spare: Sat32(count()), Head: Sat32(count()), Epoch: rnd.Uint32(), GrantFrom: PeerID(rnd.Uint32()), From: PeerID(rnd.Uint32()),
			FallbackMembers: uint16(rnd.Uint32()), FallbackIndex: uint16(rnd.Uint32()),
			HasGrant: rnd.IntN(2) == 0, Carry: rnd.IntN(2) == 0, Informed: rnd.IntN(2) == 0, Fallback: rnd.IntN(2) == 0,
		}
		if rnd.IntN(2) == 0 {
			s.SetGlobalAt(start + rnd.Int64N(int64(time.Hour)) - int64(time.Minute))
		}
		var p past
		p.keep(&s)
		var got Slot
		p.load(&got, s.Start)
		want := s
		want.Spare, want.Informed, want.Head = 0, false, 0
		if s.GlobalAt() != 0 {
			want.SetGlobalAt(s.Start)
		}
		if s.HasGrant || !s.Fallback {
			want.FallbackMembers, want.FallbackIndex = 0, 0
		} else {
			want.Granted = 0
		}
		if got != want {
			t.Fatalf("case %d: kept\n%+v\nreads\n%+v, want\n%+v", i, s, got, want)
		}
		if got.GlobalAt() == 0 != (s.GlobalAt() == 0) || got.GrantedAt() != s.GrantedAt() {
			t.Fatalf("case %d: GlobalAt %d, GrantedAt %d read as %d and %d", i, s.GlobalAt(), s.GrantedAt(), got.GlobalAt(), got.GrantedAt())
		}
	}
}

// TestOwnerHeapPerWindow holds what an owner keeps per window of a series
// whose traffic reaches one instance (every window has one origin, of
// three members): its series, its window with the origin's state in it
// (ownerWindow.first: 448 bytes, where a window of 208 and a slab sized
// for every member, three states of 224 in a 704-byte size class, took
// 912), and its place in the owner's maps. 100,000 series, one window
// each, measured 633 bytes of heap per window; the bound is that plus a
// margin.
func TestOwnerHeapPerWindow(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation sizes; .ci/run runs this without it")
	}
	if got := unsafe.Sizeof(ownerWindow{}); got > 448 {
		t.Errorf("unsafe.Sizeof(ownerWindow) = %d, more than its 448-byte size class", got)
	}
	const n = 100_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	o := NewOwner(OwnerConfig{MaxWindows: n, Lease: true})
	o.SetMembers(at(0), []string{"a", "b", "c"}, nil)
	k := Key{Endpoint: "/p", Method: "GET", Period: 10 * time.Second, WindowStart: at(0).UnixNano()}
	buf := make([]byte, 0, 32)
	for i := range n {
		buf = fmt.Appendf(buf[:0], "tenant-%08d", i)
		k.Tenant = string(buf)
		o.Report(at(time.Second), "a", 1, &Report{Key: k, Threshold: 100, Own: 1, Demand: 1})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if st := o.Stats(); st.Windows != n {
		t.Fatalf("the owner holds %d windows, want %d", st.Windows, n)
	}
	runtime.KeepAlive(o)
	// The tenants' strings (16 bytes each) are the reports', kept by the
	// series: counted too.
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%d single-origin windows: %.0f bytes of heap per window", n, per)
	if per > 720 {
		t.Errorf("%.0f bytes of heap per window, more than the 720 recorded", per)
	}
}
