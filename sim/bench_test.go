package sim

import (
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
