package counters

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestKeptSumsMatchTheWalk drives two owners through the same random
// timeline, one adding up the members of a window from its kept sums
// (keepSums) and one walking every member at every grant (noKeep), and
// fails at the first answer that differs. Within a sync round every report
// comes at the same instant, so the kept sums are weighed at the grant's
// own time and must give the walk's answer exactly: what is tested is that
// reports, acknowledgements, silences, membership changes and windows
// that roll keep the sums up to date. The windows have more origins than
// originsScan and keepMin, so their slots and sums are kept, and at odd
// seeds more than treeMin, so their needs are in trees; fixed and
// sliding tiers, and a window longer than NeedHorizon intervals, whose
// parts are split twice (fairShare).
func TestKeptSumsMatchTheWalk(t *testing.T) {
	for seed := range uint64(12) {
		members := 40 // kept sums, needs laid out by place
		if seed%2 == 1 {
			members = treeMin + 12 // and in trees
		}
		rng := rand.New(rand.NewPCG(seed, 11))
		cfg := OwnerConfig{Lease: true, Self: "o", Contact: 600 * time.Millisecond, Interval: 200 * time.Millisecond}
		if seed%3 == 2 {
			cfg.Majority, cfg.Term, cfg.SafeShare = true, time.Second, 0.5
		}
		kept, walk := NewOwner(cfg), NewOwner(cfg)
		walk.noKeep = true
		kept.SetMajority(true)
		walk.SetMajority(true)
		names := []string{"o"}
		for i := range members - 1 {
			names = append(names, fmt.Sprintf("m%03d", i))
		}
		alive := append([]string(nil), names...)
		both := func(f func(o *Owner)) { f(kept); f(walk) }
		both(func(o *Owner) { o.SetMembers(base, alive, nil) })
		silentUntil := map[string]time.Duration{}
		held := map[string]Answer{}
		own := map[string]int64{}
		served := 0
		for step := range 120 {
			now := time.Duration(step) * 200 * time.Millisecond
			alive = churn(rng, 30, 8, names, alive, at(now), kept, walk)
			// The members report in a random order, each acknowledging
			// (or not) right after its reports, so that the others'
			// grants in the round see its record change.
			order := rng.Perm(len(alive))
			for _, j := range order {
				m := alive[j]
				if m != "m000" && rng.IntN(25) == 0 {
					silentUntil[m] = now + time.Duration(rng.IntN(3000))*time.Millisecond
				}
				if silentUntil[m] > now {
					continue
				}
				seqs := [2]uint64{kept.Hello(at(now), m), walk.Hello(at(now), m)}
				for _, tier := range []struct {
					tenant string
					alg    Algorithm
					period time.Duration
					limit  int64
				}{{"fixed", Fixed, 2 * time.Second, 400}, {"sliding", Sliding, 2 * time.Second, 400}, {"long", Fixed, time.Minute, 200_000}} {
					if rng.IntN(5) == 0 {
						continue // no traffic for this tenant at m this round
					}
					k := Key{Tenant: tier.tenant, Endpoint: "/p", Method: "GET", Period: tier.period}
					k.WindowStart = at(now).Truncate(k.Period).UnixNano()
					ix := m + tier.tenant + time.Unix(0, k.WindowStart).String()
					demand := int64(rng.IntN(6))
					h := held[m+tier.tenant]
					if h.HasGrant {
						own[ix] = min(own[ix]+demand, max(own[ix], h.Grant))
					} else {
						own[ix] += min(demand, 1)
					}
					r := Report{Key: k, Threshold: tier.limit, Algorithm: tier.alg, Own: own[ix], Demand: demand, Cap: h.Grant, HasGrant: h.HasGrant, Carry: h.Carry}
					var answers [2]Answer
					for i, o := range []*Owner{kept, walk} {
						rc := r
						answers[i] = o.Report(at(now), m, 1, &rc)
					}
					if answers[0] != answers[1] {
						t.Fatalf("seed %d step %d (%s, %s at %v): kept %+v, walked %+v", seed, step, m, tier.tenant, now, answers[0], answers[1])
					}
					if answers[0].HasGrant {
						held[m+tier.tenant] = answers[0]
					}
					if w := kept.window(k); w != nil && w.view != nil && w.view.slots.summed {
						served++
					}
				}
				if rng.IntN(4) == 0 {
					continue // its batch carried no acknowledgement (a lost answer)
				}
				for i, o := range []*Owner{kept, walk} {
					o.Acknowledge(at(now), m, seqs[i], o.view, true)
				}
			}
		}
		if kept.scratch.kept != nil {
			t.Fatalf("seed %d: a grant left r's needs in the kept trees", seed)
		}
		if served < 100 {
			t.Fatalf("seed %d: only %d grants came with kept sums; the test does not reach them", seed, served)
		}
	}
}

// TestKeptSumsStayWithinThreshold: with kept sums weighed up to a quarter
// interval before a grant (members reporting one after another as the
// time moves, some a little before the window begins, as from a clock
// ahead), the caps an owner hands out in a window never add up to more
// than the limit, and a member with demand gets a share.
func TestKeptSumsStayWithinThreshold(t *testing.T) {
	const n, limit = 60, 600
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 13))
		o := NewOwner(OwnerConfig{Lease: true, Self: "o", Contact: 600 * time.Millisecond, Interval: 200 * time.Millisecond})
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("m%02d", i)
		}
		o.SetMembers(base, names, nil)
		type state struct {
			start, own, cap int64
			has, carry      bool
			ack             uint64
		}
		states := make([]state, n)
		demand := make([]int64, n)
		for i := range demand {
			demand[i] = int64(rng.IntN(12)) // some idle
		}
		granted := false
		var maxSum int64
		for step := range 40 * n {
			i := step % n
			now := time.Duration(step) * 200 * time.Millisecond / n
			if rng.IntN(8) == 0 { // ahead of the owner's clock
				now += time.Duration(rng.IntN(150)) * time.Millisecond
			}
			k := Key{Tenant: "t", Endpoint: "/p", Method: "GET", Period: 2 * time.Second}
			k.WindowStart = at(now).Truncate(k.Period).UnixNano()
			st := &states[i]
			if st.start != k.WindowStart {
				// A grant that carries holds in the new window; else the
				// member asks first.
				*st = state{start: k.WindowStart, ack: st.ack, cap: st.cap, has: st.has && st.carry}
				if !st.has {
					st.cap = 0
				}
			}
			if st.has {
				st.own = max(st.own, min(st.own+demand[i], st.cap))
			}
			seq := o.Hello(at(now), names[i])
			a := o.Report(at(now), names[i], 1, &Report{Key: k, Threshold: limit, Own: st.own, Demand: demand[i], Cap: st.cap, HasGrant: st.has})
			if rng.IntN(4) > 0 { // else its batch carried no acknowledgement
				o.Acknowledge(at(now), names[i], st.ack, o.view, true)
			}
			st.ack = seq
			if a.HasGrant {
				st.cap, st.has, st.carry = a.Grant, true, a.Carry
				granted = granted || (demand[i] > 0 && a.Grant > st.own)
			}
			// What every member may spend in the window: its cap or count
			// there, or the cap it carries into it from the one before.
			var sum int64
			for j := range states {
				switch x := &states[j]; {
				case x.start == k.WindowStart:
					sum += max(x.cap, x.own)
				case x.start < k.WindowStart && x.has && x.carry:
					sum += x.cap
				}
			}
			maxSum = max(maxSum, sum)
			if sum > limit {
				t.Fatalf("seed %d step %d (%s at %v): the caps in the window add up to %d > %d", seed, step, names[i], now, sum, limit)
			}
		}
		if !granted {
			t.Fatalf("seed %d: no member with demand was granted a share", seed)
		}
		t.Logf("seed %d: at most %d of %d held", seed, maxSum, limit)
	}
}

// churn changes the membership one time in every, at random, and returns
// it: the owner "o" and each other name but one in dropOneIn, set on the
// owners at now (in alive's storage). Else it returns alive as it is.
func churn(rng *rand.Rand, every, dropOneIn int, names, alive []string, now time.Time, owners ...*Owner) []string {
	if rng.IntN(every) != 0 {
		return alive
	}
	alive = alive[:0]
	for _, n := range names {
		if n == "o" || rng.IntN(dropOneIn) != 0 {
			alive = append(alive, n)
		}
	}
	for _, o := range owners {
		o.SetMembers(now, alive, nil)
	}
	return alive
}
