package counters

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// BenchmarkTake measures the decision itself: time is an argument, as in
// rate.Limiter.AllowN, so the clock read is not part of it (time.Now costs
// about 50 ns on this machine's VM). BenchmarkTakeNow and BenchmarkXRate/Allow
// each read the clock per call, for the end-to-end comparison.

func benchLimits(tenant string, tiers int) []Limit {
	ls := []Limit{{Tenant: tenant, Endpoint: "/v1/organizations/{orgId}/product/*", Method: "GET", Period: 10 * time.Second, Threshold: 1 << 50}}
	if tiers == 2 {
		ls = append(ls, Limit{Tenant: tenant, Endpoint: ls[0].Endpoint, Method: "GET", Period: time.Second, Threshold: 1 << 50})
	}
	for i := range ls { // as the HTTP filter does: tiers prepared once at load
		ls[i] = ls[i].Prepare()
	}
	return ls
}

func benchTable(b *testing.B) *Table {
	cfg := DefaultConfig()
	cfg.MaxEntries = 1 << 20
	tb, err := NewTable(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return tb
}

func BenchmarkTake(b *testing.B) {
	for _, tiers := range []int{1, 2} {
		b.Run("hot/tiers="+strconv.Itoa(tiers), func(b *testing.B) {
			tb := benchTable(b)
			ls := benchLimits("org-1", tiers)
			now := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				tb.Take(now, ls, 1)
			}
		})
		b.Run("hot-parallel/tiers="+strconv.Itoa(tiers), func(b *testing.B) {
			tb := benchTable(b)
			ls := benchLimits("org-1", tiers)
			now := time.Now()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tb.Take(now, ls, 1)
				}
			})
		})
		b.Run("100k-keys/tiers="+strconv.Itoa(tiers), func(b *testing.B) {
			tb := benchTable(b)
			keys := keySet(tiers)
			now := time.Now()
			for _, ls := range keys { // create every series first
				tb.Take(now, ls, 1)
			}
			r := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				tb.Take(now, keys[r.IntN(len(keys))], 1)
			}
		})
		b.Run("100k-keys-parallel/tiers="+strconv.Itoa(tiers), func(b *testing.B) {
			tb := benchTable(b)
			keys := keySet(tiers)
			now := time.Now()
			for _, ls := range keys {
				tb.Take(now, ls, 1)
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				r := rand.New(rand.NewPCG(rand.Uint64(), 2))
				for pb.Next() {
					tb.Take(now, keys[r.IntN(len(keys))], 1)
				}
			})
		})
	}
}

func keySet(tiers int) [][]Limit {
	keys := make([][]Limit, 100_000)
	for i := range keys {
		keys[i] = benchLimits("org-"+strconv.Itoa(i), tiers)
	}
	return keys
}

// BenchmarkTakeNow is BenchmarkTake/hot/tiers=1 reading the clock per call.
func BenchmarkTakeNow(b *testing.B) {
	tb := benchTable(b)
	ls := benchLimits("org-1", 1)
	b.ReportAllocs()
	for b.Loop() {
		tb.Take(time.Now(), ls, 1)
	}
}

// BenchmarkXRate is the floor: golang.org/x/time/rate's Limiter.Allow, one
// local token bucket with no key lookup at all.
func BenchmarkXRate(b *testing.B) {
	// A finite rate, so that the limiter does its token arithmetic.
	newLim := func() *rate.Limiter { return rate.NewLimiter(1e12, 1<<30) }
	b.Run("AllowN", func(b *testing.B) {
		lim, now := newLim(), time.Now()
		b.ReportAllocs()
		for b.Loop() {
			lim.AllowN(now, 1)
		}
	})
	b.Run("AllowN-parallel", func(b *testing.B) {
		lim, now := newLim(), time.Now()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				lim.AllowN(now, 1)
			}
		})
	})
	b.Run("Allow", func(b *testing.B) {
		lim := newLim()
		b.ReportAllocs()
		for b.Loop() {
			lim.Allow()
		}
	})
}

func BenchmarkHash(b *testing.B) {
	b.Run("unprepared", func(b *testing.B) {
		l := Limit{Tenant: "org-1", Endpoint: "/v1/organizations/{orgId}/product/*", Method: "GET", Period: 10 * time.Second}
		b.ReportAllocs()
		for b.Loop() {
			l.Hash()
		}
	})
	b.Run("prepared", func(b *testing.B) {
		l := Limit{Tenant: "org-1", Endpoint: "/v1/organizations/{orgId}/product/*", Method: "GET", Period: 10 * time.Second}.Prepare()
		b.ReportAllocs()
		for b.Loop() {
			l.Hash()
		}
	})
}
