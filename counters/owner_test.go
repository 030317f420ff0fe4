package counters

import (
	"testing"
	"time"
)

func ownerKey() Key {
	return Key{Tenant: "org1", Endpoint: "/p", Method: "GET", Period: 10 * time.Second, WindowStart: base.UnixNano()}
}

func report(own, demand, capv int64, hasGrant bool) *Report {
	return &Report{Key: ownerKey(), Threshold: 100, Own: own, Demand: demand, Cap: capv, HasGrant: hasGrant}
}

func TestOwnerGCounterNeverDoubleCounts(t *testing.T) {
	o := NewOwner(OwnerConfig{})
	o.SetMembers(base, []string{"a", "b"}, nil)
	for i, tc := range []struct {
		origin string
		inc    uint64
		own    int64
		want   int64
	}{
		{"a", 1, 5, 5},
		{"a", 1, 5, 5},   // duplicated
		{"b", 1, 3, 8},   //
		{"a", 1, 4, 8},   // reordered: an older, smaller count is ignored
		{"a", 1, 9, 12},  // grows
		{"b", 2, 1, 13},  // b restarted: its first run's 3 stay counted
		{"b", 1, 50, 13}, // a late report of b's old run is ignored
	} {
		got := o.Report(at(time.Second), tc.origin, tc.inc, report(tc.own, 1, 50, false))
		if got.Global != tc.want || got.HasGrant {
			t.Errorf("step %d: %+v, want global %d and no grant", i, got, tc.want)
		}
	}
}

// TestOwnerGrantsStayWithinThreshold: whatever the order of reports, the
// caps the owner hands out plus the reserves never exceed the threshold.
func TestOwnerGrantsStayWithinThreshold(t *testing.T) {
	o := NewOwner(OwnerConfig{Lease: true})
	all := []string{"a", "b", "c"}
	o.SetMembers(base, all, nil)
	caps := map[string]int64{}
	for i, m := range all { // before any answer, everyone holds its static share
		caps[m] = StaticShare(100, 3, i, ownerKey().SeriesHash())
	}
	own := map[string]int64{}
	// 2x overload of 100 per 10 s, 90/10: a is offered 18 a second, b and c 1.
	demand := map[string]int64{"a": 18, "b": 1, "c": 1}
	now := time.Second
	for round := 0; round < 9; round++ {
		for _, m := range all {
			own[m] = min(caps[m], own[m]+demand[m])
			ans := o.Report(at(now), m, 1, &Report{Key: ownerKey(), Threshold: 100, Own: own[m], Demand: demand[m], Cap: caps[m], HasGrant: round > 0})
			if !ans.HasGrant || ans.Grant < own[m] {
				t.Fatalf("round %d %s: answer %+v below own %d", round, m, ans, own[m])
			}
			caps[m] = ans.Grant
			var sum int64
			for _, c := range caps {
				sum += c
			}
			// The previous caps may still be spent while answers travel, so
			// check the sum of the current caps.
			if sum > 100 {
				t.Fatalf("round %d after %s: caps %v add up to %d > 100", round, m, caps, sum)
			}
		}
		now += time.Second
	}
	if caps["a"] < 80 {
		t.Errorf("hot origin's cap %d: demand-proportional share should give it most of the budget (caps %v)", caps["a"], caps)
	}
}

// TestOwnerReservesForUnreachableMembers: a member the owner cannot hear
// keeps what it holds; one that never reported keeps its static share.
func TestOwnerReservesForUnreachableMembers(t *testing.T) {
	o := NewOwner(OwnerConfig{Lease: true})
	o.SetMembers(base, []string{"a", "b", "c"}, nil)
	k := ownerKey()
	o.Report(at(time.Second), "c", 1, &Report{Key: k, Threshold: 90, Own: 10, Demand: 10, Cap: 30})
	// c is cut off holding a cap of 30 (10 spent): 20 stay reserved.
	o.SetMembers(at(1500*time.Millisecond), []string{"a", "b"}, map[string]int64{"c": at(1500 * time.Millisecond).UnixNano()})
	// b never reported: its static share (30) stays reserved too.
	ans := o.Report(at(2*time.Second), "a", 1, &Report{Key: k, Threshold: 90, Own: 0, Demand: 100, Cap: 30})
	if want := int64(90 - 10 - 20 - 30); ans.Grant != want {
		t.Fatalf("grant = %d, want %d (threshold 90 - c's 10 - c's 20 reserved - b's 30 static)", ans.Grant, want)
	}
	// In the next window c, gone less than a whole period before it began,
	// is still reserved for: its static share, since it never reported in
	// that window here (b's static share too).
	k.WindowStart += int64(k.Period)
	ans = o.Report(at(11*time.Second), "a", 1, &Report{Key: k, Threshold: 90, Own: 0, Demand: 100, Cap: 30})
	if want := int64(90 - 30 - 30); ans.Grant != want {
		t.Fatalf("next window: grant = %d, want %d (b's and c's static shares reserved)", ans.Grant, want)
	}
	// Three windows later (ReserveWindows, default 3) c stops being reserved
	// for: scaling down does not leak budget for long.
	k.WindowStart += 3 * int64(k.Period)
	ans = o.Report(at(41*time.Second), "a", 1, &Report{Key: k, Threshold: 90, Own: 0, Demand: 100, Cap: 45})
	if want := int64(90 - 45); ans.Grant != want {
		t.Fatalf("two windows on: grant = %d, want %d (only b's static share, now 45, reserved)", ans.Grant, want)
	}
}

// TestOwnerFreezesWhenAMemberVanishesMidWindow: a member cut off during
// the window that never reported to this owner may hold a grant from the
// previous owner; nobody's cap may grow past its static share then.
func TestOwnerFreezesWhenAMemberVanishesMidWindow(t *testing.T) {
	o := NewOwner(OwnerConfig{Lease: true})
	k := ownerKey()
	o.SetMembers(at(5*time.Second), []string{"a", "b"}, map[string]int64{"c": at(5 * time.Second).UnixNano()})
	ans := o.Report(at(6*time.Second), "a", 1, &Report{Key: k, Threshold: 90, Own: 10, Demand: 100, Cap: 30})
	if ans.Grant != 30 {
		t.Fatalf("grant = %d, want a's cap frozen at its static share 30", ans.Grant)
	}
}

func TestFairShareIsExact(t *testing.T) {
	mk := func(rates ...float64) []*originState {
		var ss []*originState
		for _, r := range rates {
			ss = append(ss, &originState{rate: r})
		}
		return ss
	}
	for _, tc := range []struct {
		free  int64
		rates []float64
		want  []int64
	}{
		{10, []float64{1, 1}, []int64{5, 5}},
		{10, []float64{0, 0, 0}, []int64{4, 3, 3}},
		// Needs 1+1 and 100+1: the small one gets its need, the spare splits.
		{100, []float64{1, 100}, []int64{2 + 0, 98}},
		{7, []float64{5, 5, 5}, []int64{3, 2, 2}},
	} {
		os := mk(tc.rates...)
		var sum int64
		for i := range os {
			got := fairShare(tc.free, os, os[i], 1)
			sum += got
			if got != tc.want[i] {
				t.Errorf("fairShare(%d, %v)[%d] = %d, want %d", tc.free, tc.rates, i, got, tc.want[i])
			}
		}
		if sum != tc.free {
			t.Errorf("fairShare(%d, %v) parts add to %d", tc.free, tc.rates, sum)
		}
	}
}

func TestOwnerBoundedAndSwept(t *testing.T) {
	o := NewOwner(OwnerConfig{MaxWindows: 2})
	for i := 0; i < 5; i++ {
		k := ownerKey()
		k.Tenant = string(rune('a' + i))
		o.Report(at(time.Second), "x", 1, &Report{Key: k, Threshold: 10, Own: 1})
	}
	if st := o.Stats(); st.Windows != 2 || st.Dropped != 3 {
		t.Fatalf("stats %+v, want 2 windows and 3 dropped", st)
	}
	if n := o.Sweep(at(22*time.Second + 1)); n != 2 {
		t.Fatalf("swept %d, want 2", n)
	}
}
