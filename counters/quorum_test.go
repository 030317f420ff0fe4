package counters

import (
	"math"
	"testing"
	"time"
)

// TestMinorityRestrictsWindowsOfTheSpan: a lease-policy table cut off from
// its majority admits at most its safe share in the windows that begin in
// the span, whatever grant it holds; windows that began before keep their
// grant; a grant that arrives after the span ended lifts the restriction.
func TestMinorityRestrictsWindowsOfTheSpan(t *testing.T) {
	tb := newTable(t, Lease{})
	tb.SetShare(3, 0)
	l := []Limit{{Tenant: "a", Endpoint: "/e", Method: "GET", Period: 10 * time.Second, Threshold: 90}}
	grant := func(ts time.Duration, g int64) {
		e := tb.Get("a", "/e", "GET", 10*time.Second)
		e.Lock()
		s := e.Current()
		s.Granted, s.HasGrant = g, true
		s.SetGrantedAt(at(ts).UnixNano())
		e.Unlock()
	}
	take := func(ts time.Duration, n int) int {
		ok := 0
		for range n {
			if d, _ := tb.Take(at(ts), l, 1); d.Allowed {
				ok++
			} else if d.Pending && ts >= 10*time.Second && ts < 13*time.Second {
				t.Fatalf("at %v: a pending decision in a restricted window", ts)
			}
		}
		return ok
	}
	tb.Take(at(0), l, 1) // creates the series (pending: no grant yet)
	grant(0, 80)
	// The span begins at 5 s: the window at 0 keeps its grant.
	tb.SetMinority([]MinoritySpan{{From: at(5 * time.Second).UnixNano(), Until: math.MaxInt64}}, 0.5)
	if got := take(6*time.Second, 100); got != 80 {
		t.Errorf("window begun before the span: admitted %d, want its grant 80", got)
	}
	// The window at 10 s begins in the span: half its static share of 30.
	got := take(10*time.Second, 1)
	grant(10*time.Second, 80)
	if got += take(11*time.Second, 100); got != 15 {
		t.Errorf("window begun in the span with a grant of 80: admitted %d, want the safe share 15", got)
	}
	// The span ends at 12 s; a grant from before that does not count.
	tb.SetMinority([]MinoritySpan{{From: at(5 * time.Second).UnixNano(), Until: at(12 * time.Second).UnixNano()}}, 0.5)
	if got := take(12*time.Second, 100); got != 0 {
		t.Errorf("span over, grant from within it: admitted %d more, want 0", got)
	}
	// A grant 300 µs after the span ended, within the same millisecond (an
	// answer to the round that found the majority again), counts: the slot
	// holds when it arrived to the nanosecond. One a nanosecond before the
	// end does not.
	end := 12*time.Second + 300*time.Microsecond
	tb.SetMinority([]MinoritySpan{{From: at(5 * time.Second).UnixNano(), Until: at(end).UnixNano()}}, 0.5)
	grant(end-time.Nanosecond, 60)
	if got := take(end+100*time.Microsecond, 100); got != 0 {
		t.Errorf("grant a nanosecond before the span ended: admitted %d more, want 0", got)
	}
	grant(end+300*time.Microsecond, 60)
	if got := take(13*time.Second, 100); got != 45 {
		t.Errorf("grant 300 µs after the span: admitted %d more, want 60-15 = 45", got)
	}
	// Safe share 0 fails closed; no spans, no restriction.
	tb.SetMinority([]MinoritySpan{{From: at(15 * time.Second).UnixNano(), Until: math.MaxInt64}}, 0)
	take(20*time.Second, 1)
	grant(20*time.Second, 90)
	if got := take(21*time.Second, 10); got != 0 {
		t.Errorf("fail closed: admitted %d, want 0", got)
	}
	tb.SetMinority(nil, 0)
	if got := take(22*time.Second, 100); got != 90 {
		t.Errorf("no span: admitted %d, want the grant 90", got)
	}
}

// TestOwnerMajorityTakesBackLostMembers: under the majority rule an owner
// that reaches a majority reserves for a member it lost only that member's
// safe share in windows that begin Term plus Contact after the loss, and
// keeps reserving it (whatever ReserveWindows says) while it does not
// reach a majority.
func TestOwnerMajorityTakesBackLostMembers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		majority bool
		safe     float64
		want     int64 // a's grant in the window at 10 s
	}{
		{"majority, fail closed", true, 0, 90},
		{"majority, safe share 1/2", true, 0.5, 75},
		{"minority: keeps the reserve", false, 0, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOwner(OwnerConfig{Lease: true, Self: "o", Contact: time.Second, Majority: true, Term: 2 * time.Second, SafeShare: tc.safe})
			o.SetMembers(base, []string{"a", "b", "c"}, nil)
			o.SetMajority(tc.majority)
			ms := members("a", "b", "c")
			k := ownerKey()
			beat(o, 0, 600*time.Millisecond, ms["a"], ms["b"], ms["c"])
			// c is lost at 600 ms; it leaves the view at 2 s.
			beat(o, 600*time.Millisecond, 10*time.Second, ms["a"], ms["b"])
			o.SetMembers(at(2*time.Second), []string{"a", "b"}, map[string]int64{"c": at(2 * time.Second).UnixNano()})
			k.WindowStart += int64(k.Period)
			if ans := ms["a"].sync(o, at(10*time.Second), k, 90, 20); ans.Grant != tc.want {
				t.Errorf("window at 10 s: a's grant %d, want %d", ans.Grant, tc.want)
			}
			// 50 windows on, a minority owner still reserves c's share.
			k.WindowStart += 50 * int64(k.Period)
			beat(o, 10*time.Second, 511*time.Second, ms["a"], ms["b"])
			ms["a"].cap, ms["a"].has, ms["a"].own = 0, false, 0
			if ans := ms["a"].sync(o, at(511*time.Second), k, 90, 20); ans.Grant != tc.want {
				t.Errorf("50 windows on: a's grant %d, want %d", ans.Grant, tc.want)
			}
		})
	}
}
