package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestBenchSmall runs the whole harness, tiny, on designs 1 and 2 (and a
// Redis design with a missing binary, which must be skipped with a reason),
// and checks the figures make sense: the uncoordinated floor overshoots,
// peerlimit's lease does not, and peerlimit talks to its peers.
func TestBenchSmall(t *testing.T) {
	var out, log bytes.Buffer
	args := []string{
		"-json", "-designs", "rate,lease,redis-request", "-redis-server", "/nonexistent/redis-server",
		"-tenants", "6", "-workers", "2", "-duration", "300ms",
		"-limit", "60", "-period", "500ms", "-windows", "2", "-sync", "100ms",
	}
	if err := run(context.Background(), args, &out, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if len(rep.Results) != 3 {
		t.Fatalf("got %d results, want 3", len(rep.Results))
	}
	byKey := map[string]result{}
	for _, r := range rep.Results {
		byKey[r.Key] = r
		t.Logf("%s: %+v", r.Key, r)
	}
	for _, k := range []string{"rate", "lease"} {
		r := byKey[k]
		if r.Skipped != "" || r.Decisions == 0 || r.DecisionsPerSec <= 0 || r.P50Ns <= 0 || r.P99Ns < r.P50Ns {
			t.Errorf("%s: implausible throughput figures %+v", k, r)
		}
		if r.Errors != 0 || r.AccuracyErrors != 0 {
			t.Errorf("%s: %d + %d errors", k, r.Errors, r.AccuracyErrors)
		}
		// 2x the limit was offered per tenant-window (give or take pacing).
		if r.OfferedPerWindow < 1.5*60 || r.OfferedPerWindow > 2.2*60 {
			t.Errorf("%s: offered %.1f per tenant-window, want about 120", k, r.OfferedPerWindow)
		}
	}
	// Three instances each with the whole limit, each offered 2/3 of it:
	// everything is admitted, twice the limit.
	if r := byKey["rate"]; r.Overshoot < 0.5 || r.CoordPerSecFlat != 0 || r.CoordPerSecPaced != 0 {
		t.Errorf("rate: overshoot %.2f (want >= 0.5), coordinator calls %v/%v (want 0)", r.Overshoot, r.CoordPerSecFlat, r.CoordPerSecPaced)
	}
	if r := byKey["lease"]; r.Overshoot > 0.25 || r.Undershoot > 0.25 || r.CoordPerSecPaced <= 0 {
		t.Errorf("lease: overshoot %.2f, undershoot %.2f (want <= 0.25), coordinator calls %v/s (want > 0)", r.Overshoot, r.Undershoot, r.CoordPerSecPaced)
	}
	if r := byKey["redis-request"]; !strings.Contains(r.Skipped, "redis-server not found") {
		t.Errorf("redis-request without redis-server: skipped = %q", r.Skipped)
	}

	var md bytes.Buffer
	writeMarkdown(&md, rep)
	for _, want := range []string{"| 1. x/time/rate", "| 2. peerlimit peers, lease", "skipped: bench: redis-server not found"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-designs", "rate,nope"},
		{"-tenants", "0"},
		{"-windows", "0"},
		{"extra"},
	} {
		if err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}

func TestWindowStats(t *testing.T) {
	offered := [][]int64{{200, 200}, {200, 40}}
	admitted := [][]int64{{110, 100}, {95, 30}}
	s := windowStats(offered, admitted, 100)
	if s.overMax != 0.10 {
		t.Errorf("overshoot max %v, want 0.10", s.overMax)
	}
	if math.Abs(s.overMean-0.025) > 1e-12 {
		t.Errorf("overshoot mean %v, want 0.025", s.overMean)
	}
	// 30 of min(40, 100) = 25% short; 95 of 100 = 5% short.
	if s.underMax != 0.25 {
		t.Errorf("undershoot max %v, want 0.25", s.underMax)
	}
	if s.offered != 160 || s.admitted != 83.75 {
		t.Errorf("means %v offered, %v admitted", s.offered, s.admitted)
	}
}

func TestPercentileAndMedians(t *testing.T) {
	xs := []int64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	if p := percentile(xs, 0.5); p != 5 {
		t.Errorf("p50 = %v, want 5", p)
	}
	if p := percentile(xs, 0.99); p != 10 {
		t.Errorf("p99 = %v, want 10", p)
	}
	if p := percentile(nil, 0.5); p != 0 {
		t.Errorf("p50 of nothing = %v", p)
	}
	runs := [][]result{
		{{Key: "a", DecisionsPerSec: 3, Overshoot: 0.3, CoordErrors: 7}, {Key: "b", Skipped: "no"}},
		{{Key: "a", DecisionsPerSec: 1, Overshoot: 0.1}, {Key: "b", Skipped: "no"}},
		{{Key: "a", DecisionsPerSec: 2, Overshoot: 0.9}, {Key: "b", Skipped: "no"}},
	}
	m := medians(runs)
	// Figures are medians; error counts the worst run.
	if m[0].DecisionsPerSec != 2 || m[0].Overshoot != 0.3 || m[0].CoordErrors != 7 || m[1].Skipped != "no" {
		t.Errorf("medians = %+v", m)
	}
}

// BenchmarkRateParts splits design 1's decision into its per-tenant map
// lookup and rate.Limiter.Allow, over 200 tenants on one instance, with 4
// goroutines per CPU, to see which dominates.
func BenchmarkRateParts(b *testing.B) {
	const tenants = 200
	names := make([]string, tenants)
	for i := range names {
		names[i] = fmt.Sprintf("tp-org-%d", i)
	}
	o := defaultOptions()
	o.Instances = 1
	d, _ := newRateDesign(context.Background(), env{opts: o, tenants: names})
	ri := d.(*rateDesign).inst[0]
	lims := make([]*rate.Limiter, tenants)
	for i, n := range names {
		lims[i] = ri.limiter(n)
	}
	var seed atomic.Uint64
	parallel := func(b *testing.B, fn func(i int)) {
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(37))
			for pb.Next() {
				fn(i % tenants)
				i++
			}
		})
	}
	b.Run("lookup", func(b *testing.B) { parallel(b, func(i int) { ri.limiter(names[i]) }) })
	b.Run("allow", func(b *testing.B) { parallel(b, func(i int) { lims[i].Allow() }) })
	b.Run("lookup+allow", func(b *testing.B) { parallel(b, func(i int) { ri.limiter(names[i]).Allow() }) })
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			time.Now()
		}
	})
}
