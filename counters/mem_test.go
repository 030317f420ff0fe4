package counters

import (
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// TestHeapPerSeries measures the heap a table holds per series, filled to
// MaxEntries with one-tier series of realistic names (the figure
// Config.MaxEntries' doc states), and fails if it grows past the bound
// below. -short measures 100,000 series instead of 1,000,000. The entry's
// own size is TestStructSizes'.
func TestHeapPerSeries(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation sizes; .ci/run runs this without it")
	}
	// The bounds are the figures measured (at 1,000,000: 481 before the
	// slots named owners by PeerID and the entries shared their tier
	// through a scope, 273 after) plus a small margin.
	n, bound := 1_000_000, 285.0
	if testing.Short() {
		n, bound = 100_000, 310 // 298 measured: the index is sparser
	}
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
	for i := 0; i < n; i++ {
		buf = fmt.Appendf(buf[:0], "tenant-%08d", i)
		l.Tenant = string(buf)
		if !tb.Allow(at(time.Second), l) {
			t.Fatalf("series %d denied", i)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	t.Logf("%d series: %.0f bytes of heap per series", tb.Len(), per)
	if per > bound {
		t.Errorf("%.0f bytes per series at %d series, more than the %.0f recorded", per, n, bound)
	}
	runtime.KeepAlive(tb)
}

// TestStructSizes holds the structs a table keeps per series to the sizes
// their layout was chosen for: a field that breaks a packed word, or one
// more, shows here before it shows in TestHeapPerSeries.
func TestStructSizes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want uintptr
	}{
		{"Slot", unsafe.Sizeof(Slot{}), 88},
		{"Entry", unsafe.Sizeof(Entry{}), 240},
	} {
		if tc.got != tc.want {
			t.Errorf("unsafe.Sizeof(%s) = %d, want %d", tc.name, tc.got, tc.want)
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
