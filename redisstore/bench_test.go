package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/internal/redistest"
	"github.com/peerlimit/peerlimit/peerpb"
)

// benchReports returns n reports of distinct tenants in one far window.
func benchReports(n int) []*peerpb.Report {
	reports := make([]*peerpb.Report, n)
	for i := range reports {
		reports[i] = rep(fmt.Sprintf("tenant-%05d", i), "/v1/organizations/{orgId}/product/*", "GET", farPeriod, farStart, 0)
	}
	return reports
}

// benchSync measures one Sync of n reports in which every count grew, so
// every key is written (the worst case: a quiet key costs a read only).
func benchSync(b *testing.B, srv *redistest.Server, n, chunk int) {
	if err := rawClient(b, srv).FlushDB(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
	s := newStore(b, testConfig(srv))
	s.chunk = chunk
	reports := benchReports(n)
	ctx := context.Background()
	own := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		own++
		for _, r := range reports {
			r.Own = own
		}
		totals, err := s.Sync(ctx, "bench", 1, reports)
		if err != nil {
			b.Fatal(err)
		}
		if totals[n-1].GetGlobal() != own {
			b.Fatalf("total %d, want %d", totals[n-1].GetGlobal(), own)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/report")
}

// BenchmarkSync is one sync interval of one node in Redis mode: all its
// changed windows, one round trip.
func BenchmarkSync(b *testing.B) {
	srv := redistest.Start(b)
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprint("reports=", n), func(b *testing.B) {
			benchSync(b, srv, n, defaultChunk)
		})
	}
}

// BenchmarkSyncChunk compares ways to send a batch in one round trip: one
// EVALSHA per report (chunk=1) up to one EVALSHA for the whole batch.
func BenchmarkSyncChunk(b *testing.B) {
	srv := redistest.Start(b)
	for _, c := range []struct{ n, chunk int }{
		{1000, 1}, {1000, 10}, {1000, 100}, {1000, 1000},
		{10000, 1000}, {10000, 10000},
	} {
		b.Run(fmt.Sprintf("reports=%d/chunk=%d", c.n, c.chunk), func(b *testing.B) {
			benchSync(b, srv, c.n, c.chunk)
		})
	}
}

// BenchmarkPerRequestTake is the comparison design: one Redis round trip
// per decision, from one caller.
func BenchmarkPerRequestTake(b *testing.B) {
	srv := redistest.Start(b)
	p := newPerRequest(b, testConfig(srv))
	ctx := context.Background()
	now := time.UnixMilli(4_000_000_000_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := p.Take(ctx, "acme", "/v1/organizations/{orgId}/product/*", "GET", time.Minute, 1<<62, 1, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPerRequestTakeParallel is the same with GOMAXPROCS callers
// sharing one counter, pipelining through the connection pool.
func BenchmarkPerRequestTakeParallel(b *testing.B) {
	srv := redistest.Start(b)
	p := newPerRequest(b, testConfig(srv))
	now := time.UnixMilli(4_000_000_000_000)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, _, err := p.Take(ctx, "acme", "/v1/organizations/{orgId}/product/*", "GET", time.Minute, 1<<62, 1, now); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
