package counters

import (
	"testing"
	"time"
)

func TestStaticShareIsExact(t *testing.T) {
	for _, tc := range []struct {
		threshold int64
		members   int
	}{{10, 10}, {10, 3}, {7, 3}, {1, 10}, {0, 4}, {1000, 3}, {5, 1}, {5, 0}} {
		for _, hash := range []uint64{0, 1, 7, 1<<63 + 5} {
			var sum int64
			lo, hi := int64(1<<62), int64(-1)
			n := max(tc.members, 1)
			for i := 0; i < n; i++ {
				s := StaticShare(tc.threshold, tc.members, i, hash)
				sum += s
				lo, hi = min(lo, s), max(hi, s)
			}
			if sum != tc.threshold {
				t.Errorf("StaticShare(%d over %d, hash %d): shares sum to %d", tc.threshold, tc.members, hash, sum)
			}
			if hi-lo > 1 {
				t.Errorf("StaticShare(%d over %d): shares range %d..%d, want within 1", tc.threshold, tc.members, lo, hi)
			}
		}
	}
}

// TestStaticPolicySmallLimit: 10 per second over 10 instances admits exactly
// one request per instance and 10 in all: none lost or invented by rounding.
func TestStaticPolicySmallLimit(t *testing.T) {
	l := Limit{Tenant: "a", Endpoint: "/p", Method: "GET", Period: time.Second, Threshold: 10}
	total := 0
	for i := 0; i < 10; i++ {
		tb := newTable(t, Static{})
		tb.SetShare(10, i)
		for r := 0; r < 5; r++ {
			if tb.Allow(base, l) {
				total++
			}
		}
	}
	if total != 10 {
		t.Fatalf("10 instances admitted %d, want exactly 10", total)
	}
}

func TestStaticPolicyIgnoresGlobal(t *testing.T) {
	tb := newTable(t, Static{})
	tb.SetShare(3, 0)
	l := Limit{Tenant: "a", Endpoint: "/p", Method: "GET", Period: 10 * time.Second, Threshold: 9}
	n := 0
	for tb.Allow(base, l) {
		n++
	}
	if n != 3 {
		t.Fatalf("static share of 9 over 3 admitted %d, want 3", n)
	}
}

func TestOptimisticUsesGlobal(t *testing.T) {
	tb := newTable(t, Optimistic{})
	l := Limit{Tenant: "a", Endpoint: "/p", Method: "GET", Period: 10 * time.Second, Threshold: 10}
	tb.Allow(base, l) // creates the series; own = 1
	e := tb.Get("a", "/p", "GET", 10*time.Second)
	e.Lock()
	// The owner saw our 1 plus 7 from others.
	e.cur.Acked, e.cur.Global = 1, 8
	e.Unlock()
	d, _ := tb.Take(base, []Limit{l}, 2)
	if !d.Allowed || d.Remaining != 0 {
		t.Fatalf("got %+v, want allowed with 0 remaining", d)
	}
	if tb.Allow(base, l) {
		t.Fatal("admitted past the global total")
	}
}

func TestLeasePolicy(t *testing.T) {
	tb := newTable(t, Lease{})
	tb.SetShare(4, 1)
	l := Limit{Tenant: "a", Endpoint: "/p", Method: "GET", Period: 10 * time.Second, Threshold: 100}
	// No grant yet: the static share, 25.
	n := 0
	for tb.Allow(base, l) {
		n++
	}
	if n != 25 {
		t.Fatalf("before any grant admitted %d, want the static share 25", n)
	}
	e := tb.Get("a", "/p", "GET", 10*time.Second)
	e.Lock()
	e.cur.Acked, e.cur.Global = 25, 40
	e.cur.Granted, e.cur.HasGrant = 55, true // 30 more than acked
	e.Unlock()
	for tb.Allow(base, l) {
		n++
	}
	if n != 55 {
		t.Fatalf("with a grant up to 55 admitted %d in all, want 55", n)
	}
}

// TestLeasePendingForWindowsBeforeJoin: an instance that joined mid-window
// has no budget in that window until its first answer; the denial says so,
// with no wait of its own, unless another tier really denies.
func TestLeasePendingForWindowsBeforeJoin(t *testing.T) {
	tb := newTable(t, Lease{})
	tb.SetShare(3, 1)
	tb.SetJoined(at(5 * time.Second))
	l := Limit{Tenant: "a", Endpoint: "/p", Method: "GET", Period: 10 * time.Second, Threshold: 90}
	d, _ := tb.Take(at(6*time.Second), []Limit{l}, 1)
	if d.Allowed || !d.Pending || d.RetryAfter != 0 {
		t.Fatalf("window begun before the join: %+v, want pending with no wait", d)
	}
	zero := Limit{Tenant: "a", Endpoint: "/z", Method: "GET", Period: time.Minute, Threshold: 0}
	tb.SetJoined(time.Unix(0, 0)) // joined long ago
	d, _ = tb.Take(at(6*time.Second), []Limit{zero}, 1)
	if d.Pending || d.RetryAfter == 0 {
		t.Fatalf("a real denial: %+v, want not pending, with a wait", d)
	}
	// The next window began after the join: the static share applies.
	tb.SetJoined(at(5 * time.Second))
	if d, _ := tb.Take(at(11*time.Second), []Limit{l}, 1); !d.Allowed {
		t.Fatalf("window begun after the join: %+v, want admitted from the static share", d)
	}
}
