package sim

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkSpeed runs the speed scenario (10 instances, 10,000 requests per
// second over 50 tenants, sync 100 ms) under each policy. One op is one
// simulated decision, with its share of the sync traffic: the run lasts as
// many simulated seconds as b.N decisions need. decisions/s is simulated
// decisions per second of real time; for the scenario's 60 s (600,000
// decisions) use -benchtime=600000x, or go run ./cmd/sim -scenario speed
// -stats.
func BenchmarkSpeed(b *testing.B) {
	base, err := LoadScenario("speed")
	if err != nil {
		b.Fatal(err)
	}
	var rate float64
	for _, tr := range base.Traffic {
		rate += tr.Rate * float64(len(tr.Tenants))
	}
	for _, p := range Policies() {
		b.Run(string(p), func(b *testing.B) {
			sc := *base
			sc.Duration = max(time.Millisecond, time.Duration(float64(b.N)/rate*float64(time.Second)))
			b.ResetTimer()
			r, err := Run(&sc, p, 1)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(r.Stats.Decisions)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

// BenchmarkScale runs issue 12's scale scenario (200 tenants at twice their
// limit of 1000 per 10 s, sync 200 ms) at 10 to 100 instances under the
// static and lease policies. One op is 10 ms of simulated time: the run
// lasts b.N of them, so -benchtime=1200x is the 12 s. The lease
// policy's extra cost over static is the owners' work (every member
// reports every key it holds to its owner each interval, and the owner
// grants each one a share).
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{10, 25, 50, 100} {
		src := fmt.Sprintf(`desc scale: %d instances, 200 tenants at 2x, sync 200 ms
instances %d
sync 200ms
duration 12s
network latency=1ms jitter=exp:1ms
sla api fixed:10s:1000
traffic tenants=t[1-200] sla=api rate=2x spread=even
`, n, n)
		base, err := ParseScenario("scale", []byte(src))
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range []Policy{Static, Lease} {
			b.Run(fmt.Sprintf("instances=%d/%s", n, p), func(b *testing.B) {
				sc := *base
				sc.Duration = time.Duration(b.N) * 10 * time.Millisecond
				b.ResetTimer()
				res, err := Run(&sc, p, 1)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(res.SyncMessages)/float64(b.N), "msgs/op")
			})
		}
	}
}
