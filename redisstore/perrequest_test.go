package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/internal/redistest"
)

func newPerRequest(t testing.TB, cfg Config) *PerRequest {
	t.Helper()
	p, err := NewPerRequest(cfg)
	if err != nil {
		t.Fatalf("NewPerRequest: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestPerRequestExactAdmission races callers at a threshold: exactly
// threshold unit-cost requests are admitted, and each sees a distinct
// remaining count.
func TestPerRequestExactAdmission(t *testing.T) {
	srv := redistest.Start(t)
	p := newPerRequest(t, testConfig(srv))
	const threshold, callers, each = 50, 8, 25 // 200 attempts
	now := time.UnixMilli(4_000_000_000_000)   // one instant (2096: the key must not expire at once)

	var mu sync.Mutex
	seen := map[int64]int{} // remaining -> admissions that saw it
	denied := 0
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			for range each {
				ok, rem, err := p.Take(context.Background(), "acme", "/p", "GET", time.Minute, threshold, 1, now)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if ok {
					seen[rem]++
				} else {
					if rem != 0 {
						errs <- fmt.Errorf("denied with remaining %d", rem)
					}
					denied++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != threshold || denied != callers*each-threshold {
		t.Fatalf("admitted %d distinct, denied %d; want %d admitted, %d denied", len(seen), denied, threshold, callers*each-threshold)
	}
	for rem := int64(0); rem < threshold; rem++ {
		if seen[rem] != 1 {
			t.Fatalf("remaining %d seen by %d admissions, want 1 (all: %v)", rem, seen[rem], seen)
		}
	}
}

// TestPerRequestTimeline replays one caller's requests over two windows.
func TestPerRequestTimeline(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	p := newPerRequest(t, cfg)
	t0 := time.UnixMilli(4_000_000_000_000) // 2096, a multiple of 10 s; keys expire at window end + grace
	steps := []struct {
		at            time.Duration // after t0
		tenant        string
		cost          int64
		wantOK        bool
		wantRemaining int64
	}{
		{0, "acme", 3, true, 2},
		{time.Second, "acme", 2, true, 0},
		{2 * time.Second, "acme", 1, false, 0}, // over: counted anyway (count 6)
		{3 * time.Second, "acme", 0, false, 0}, // cost 0 reads: 6 > 5
		{3 * time.Second, "beta", 5, true, 0},  // other tenant, own counter
		{10 * time.Second, "acme", 4, true, 1}, // next window starts from 0
		{19999 * time.Millisecond, "acme", 2, false, 0},
		{19999 * time.Millisecond, "acme", 0, false, 0}, // the denied 2 counted: 6
		{20 * time.Second, "acme", 5, true, 0},
	}
	for i, st := range steps {
		ok, rem, err := p.Take(context.Background(), st.tenant, "/p", "GET", 10*time.Second, 5, st.cost, t0.Add(st.at))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if ok != st.wantOK || rem != st.wantRemaining {
			t.Fatalf("step %d (t0+%v %s cost %d): allowed %v remaining %d, want %v %d", i, st.at, st.tenant, st.cost, ok, rem, st.wantOK, st.wantRemaining)
		}
	}
}

// TestPerRequestExpiry: the counter expires at window end + Grace.
func TestPerRequestExpiry(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	cfg.Grace = 1500 * time.Millisecond
	p := newPerRequest(t, cfg)
	now := time.Now()
	const period = time.Second
	if _, _, err := p.Take(context.Background(), "acme", "/p", "GET", period, 5, 1, now); err != nil {
		t.Fatal(err)
	}
	start := now.UnixMilli() / 1000 * 1000
	key := string(appendKey(nil, cfg.KeyPrefix, kindRequest, "acme", "/p", "GET", 1000, start))
	at, err := rawClient(t, srv).PExpireTime(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := start + 1000 + 1500; at.Milliseconds() != want {
		t.Fatalf("PEXPIRETIME %d, want window end + grace = %d", at.Milliseconds(), want)
	}
}

func TestPerRequestInvalid(t *testing.T) {
	srv := redistest.Start(t)
	p := newPerRequest(t, testConfig(srv))
	now := time.Now()
	cases := []struct {
		name             string
		tenant, endpoint string
		period           time.Duration
		threshold, cost  int64
		want             string
	}{
		{"no tenant, no endpoint", "", "", time.Second, 5, 1, "tenant and endpoint are both empty"},
		{"zero period", "t", "/e", 0, 5, 1, "period 0s is not a positive whole number of milliseconds"},
		{"sub-ms period", "t", "/e", 1500 * time.Microsecond, 5, 1, "period 1.5ms"},
		{"negative threshold", "t", "/e", time.Second, -1, 1, "threshold -1 < 0"},
		{"negative cost", "t", "/e", time.Second, 5, -1, "cost -1 < 0"},
		{"long key", strings.Repeat("t", MaxKeyLen), "/e", time.Second, 5, 1, "more than 1024"},
	}
	for _, c := range cases {
		ok, _, err := p.Take(context.Background(), c.tenant, c.endpoint, "GET", c.period, c.threshold, c.cost, now)
		if ok || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Take = %v, %v; want a denied ErrInvalidArgument containing %q", c.name, ok, err, c.want)
		}
	}
	if n := rawClient(t, srv).DBSize(context.Background()).Val(); n != 0 {
		t.Fatalf("DBSIZE %d after rejected Takes, want 0", n)
	}
}

func TestPerRequestUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	cfg.Timeout = 200 * time.Millisecond
	p := newPerRequest(t, cfg)
	now := time.Now()
	if _, _, err := p.Take(context.Background(), "t", "/e", "GET", time.Minute, 5, 1, now); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	begin := time.Now()
	ok, _, err := p.Take(context.Background(), "t", "/e", "GET", time.Minute, 5, 1, now)
	if ok || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Take with Redis killed = %v, %v; want denied, ErrUnavailable", ok, err)
	}
	if took := time.Since(begin); took > cfg.Timeout+300*time.Millisecond {
		t.Fatalf("Take took %v with Redis killed, Timeout is %v", took, cfg.Timeout)
	}
}
