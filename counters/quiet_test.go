package counters

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestQuietGrantsMatchTheWalk drives two owners through the same random
// timeline, one taking the members of a window without states from its
// cache (othersQuiet) and one walking them all (noQuiet), and fails at the
// first answer that differs. The timeline has members that report, fall
// silent for seconds (out of contact, out at a window's start), come back,
// leave the membership and return, single-origin and shared windows,
// windows that roll, and reports of a window before it began.
func TestQuietGrantsMatchTheWalk(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		cfg := OwnerConfig{Lease: true, Self: "o", Contact: 600 * time.Millisecond, Interval: 200 * time.Millisecond}
		if seed%2 == 1 { // the majority rule, whose lost members keep a safe share
			cfg.Majority, cfg.Term, cfg.SafeShare = true, time.Second, 0.5
		}
		fast, walk := NewOwner(cfg), NewOwner(cfg)
		walk.noQuiet = true
		fast.SetMajority(true)
		walk.SetMajority(true)
		names := []string{"o", "a", "b", "c", "d"}
		alive := append([]string(nil), names...)
		both := func(f func(o *Owner)) { f(fast); f(walk) }
		both(func(o *Owner) { o.SetMembers(base, alive, nil) })
		silentUntil := map[string]time.Duration{}
		held := map[string]Answer{}
		own := map[string]int64{} // by member, tenant and window start
		quiet := 0
		for step := range 300 {
			now := time.Duration(step) * 200 * time.Millisecond
			alive = churn(rng, 40, 5, names, alive, at(now), fast, walk)
			for _, m := range alive { // a sync round: every member not silent
				if m != "a" && rng.IntN(20) == 0 {
					silentUntil[m] = now + time.Duration(rng.IntN(4000))*time.Millisecond
				}
				if silentUntil[m] > now {
					continue
				}
				// Tenant t1's traffic is on "a" alone (one origin), t2's
				// on anyone now and then.
				tenants := []string{}
				if m == "a" {
					tenants = append(tenants, "t1")
				}
				if rng.IntN(4) == 0 {
					tenants = append(tenants, "t2")
				}
				seqs := [2]uint64{fast.Hello(at(now), m), walk.Hello(at(now), m)}
				for _, tenant := range tenants {
					k := Key{Tenant: tenant, Endpoint: "/p", Method: "GET", Period: 2 * time.Second}
					k.WindowStart = at(now).Truncate(k.Period).UnixNano()
					if rng.IntN(25) == 0 { // early, as from a clock ahead
						k.WindowStart += int64(k.Period)
					}
					ix := m + tenant + time.Unix(0, k.WindowStart).String()
					own[ix] += int64(rng.IntN(4))
					h := held[m+tenant]
					r := Report{Key: k, Threshold: 50, Own: own[ix], Demand: int64(rng.IntN(3)), Cap: h.Grant, HasGrant: h.HasGrant, Carry: h.Carry}
					var answers [2]Answer
					for i, o := range []*Owner{fast, walk} {
						rc := r
						answers[i] = o.Report(at(now), m, 1, &rc)
					}
					if answers[0] != answers[1] {
						t.Fatalf("seed %d step %d (%s, %s at %v): cached %+v, walked %+v", seed, step, m, tenant, now, answers[0], answers[1])
					}
					if answers[0].HasGrant {
						held[m+tenant] = answers[0]
					}
					if fast.quiet.mw != nil && fast.quiet.loud == 0 {
						quiet++
					}
				}
				if rng.IntN(3) == 0 {
					continue // its batch carried no acknowledgement (a lost answer)
				}
				for i, o := range []*Owner{fast, walk} {
					o.Acknowledge(at(now), m, seqs[i], o.view, true)
				}
			}
		}
		if quiet == 0 {
			t.Fatalf("seed %d: no grant found every member quiet; the test does not reach the cache", seed)
		}
	}
}
