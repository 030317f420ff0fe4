package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/peerlimit/peerlimit/internal/redistest"
	"github.com/peerlimit/peerlimit/peerpb"
)

// waitFor polls cond until it holds or timeout passes. It is for conditions
// that only time makes true (an expiry, a reconnect); each poll waits for a
// tick, never a fixed sleep between assertions.
func waitFor(t testing.TB, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", timeout)
		}
		<-tick.C
	}
}

// testConfig is DefaultConfig pointed at srv, with a Timeout roomy enough
// for -race on a shared machine.
func testConfig(srv *redistest.Server) Config {
	cfg := DefaultConfig()
	cfg.Addr = srv.Addr()
	cfg.Timeout = time.Second
	return cfg
}

func newStore(t testing.TB, cfg Config) *Store {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// rawClient is a plain go-redis client for looking at what the store wrote.
func rawClient(t testing.TB, srv *redistest.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rep builds a fixed-window report.
func rep(tenant, endpoint, method string, periodMs, startMs, own int64) *peerpb.Report {
	return &peerpb.Report{
		Tenant:        tenant,
		Endpoint:      endpoint,
		Method:        method,
		PeriodMs:      periodMs,
		WindowStartMs: startMs,
		Threshold:     1000,
		Own:           own,
	}
}

// globals extracts Total.Global and fails on any grant.
func globals(t testing.TB, totals []*peerpb.Total) []int64 {
	t.Helper()
	out := make([]int64, len(totals))
	for i, tot := range totals {
		if tot.GetHasGrant() {
			t.Fatalf("total %d has a grant: %v", i, tot)
		}
		out[i] = tot.GetGlobal()
	}
	return out
}

// mustSync calls Sync and fails the test on error.
func mustSync(t testing.TB, s *Store, origin string, inc uint64, reports ...*peerpb.Report) []int64 {
	t.Helper()
	totals, err := s.Sync(context.Background(), origin, inc, reports)
	if err != nil {
		t.Fatalf("Sync(%s/%d): %v", origin, inc, err)
	}
	if len(totals) != len(reports) {
		t.Fatalf("Sync(%s/%d) returned %d totals for %d reports", origin, inc, len(totals), len(reports))
	}
	return globals(t, totals)
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
