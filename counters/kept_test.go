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
			if rng.IntN(30) == 0 { // the membership changes
				alive = alive[:0]
				for _, n := range names {
					if n == "o" || rng.IntN(8) != 0 {
						alive = append(alive, n)
					}
				}
				both(func(o *Owner) { o.SetMembers(at(now), alive, nil) })
			}
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
