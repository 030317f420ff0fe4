package sim

import "testing"

// BenchmarkSpeed runs the speed scenario (10 instances, 60 simulated
// seconds, 10,000 requests per second: 600,000 decisions) under each policy
// and reports simulated decisions per second of real time.
func BenchmarkSpeed(b *testing.B) {
	sc, err := LoadScenario("speed")
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range Policies() {
		b.Run(string(p), func(b *testing.B) {
			var decisions int64
			for i := 0; i < b.N; i++ {
				r, err := Run(sc, p, 1)
				if err != nil {
					b.Fatal(err)
				}
				decisions += r.Stats.Decisions
			}
			b.ReportMetric(float64(decisions)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
