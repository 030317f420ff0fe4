package rls

import (
	"context"
	"fmt"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/peerlimit/peerlimit/internal/nodetest"
)

// BenchmarkShouldRateLimit is the server's work per call, without gRPC: a
// request of one descriptor, tenant=one of 1000 values, each under its
// limit, decided by a real node (alone in its cluster).
//
//	go test -run '^$' -bench ShouldRateLimit -benchmem ./rls
func BenchmarkShouldRateLimit(b *testing.B) {
	cfg, err := Parse("bench.yaml", []byte("domain: bench\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: day, requests_per_unit: 1000000000}\n"))
	if err != nil {
		b.Fatal(err)
	}
	n := nodetest.Start(b, 1, nil)[0]
	srv := NewServer(n, cfg)
	reqs := make([]*rlsv3.RateLimitRequest, 1000)
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "tenant", Value: fmt.Sprintf("t%d", i)}},
		}}}
		if _, err := srv.ShouldRateLimit(context.Background(), reqs[i]); err != nil { // the series exist, with a lease
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		resp, err := srv.ShouldRateLimit(ctx, reqs[i%len(reqs)])
		if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
			b.Fatalf("%v %v", resp, err)
		}
		i++
	}
}
