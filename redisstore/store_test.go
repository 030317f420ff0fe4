package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/internal/redistest"
	"github.com/peerlimit/peerlimit/peerpb"
)

// A window far from now, so nothing expires during a test: expiry is tested
// on its own.
const (
	farPeriod = 60_000
	farStart  = 1 << 50 / (2 * farPeriod) * (2 * farPeriod) // year ~37,600; also a multiple of 2*farPeriod
)

// TestSyncTimeline replays a sequence of batches from several origin runs
// against two windows and checks every total the store returns.
func TestSyncTimeline(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, testConfig(srv))

	k1 := func(own int64) *peerpb.Report { return rep("acme", "/product/*", "GET", farPeriod, farStart, own) }
	k2 := func(own int64) *peerpb.Report { return rep("acme", "/product/*", "PUT", farPeriod, farStart, own) }

	steps := []struct {
		what    string
		origin  string
		inc     uint64
		reports []*peerpb.Report
		want    []int64
	}{
		{"a reports", "a", 1, []*peerpb.Report{k1(5), k2(1)}, []int64{5, 1}},
		{"b reports: totals are the sum", "b", 1, []*peerpb.Report{k1(7)}, []int64{12}},
		{"a's batch retried: no double count", "a", 1, []*peerpb.Report{k1(5), k2(1)}, []int64{12, 1}},
		{"a's batch retried again", "a", 1, []*peerpb.Report{k1(5), k2(1)}, []int64{12, 1}},
		{"a stale (lower) own is ignored", "a", 1, []*peerpb.Report{k1(3), k2(0)}, []int64{12, 1}},
		{"a grows: adds the difference", "a", 1, []*peerpb.Report{k1(6)}, []int64{13}},
		{"a restarted (new incarnation): adds", "a", 2, []*peerpb.Report{k1(4)}, []int64{17}},
		{"a's new run retried", "a", 2, []*peerpb.Report{k1(4)}, []int64{17}},
		{"old run of a reports late and higher", "a", 1, []*peerpb.Report{k1(8)}, []int64{19}},
		{"same key twice in one batch", "b", 1, []*peerpb.Report{k1(9), k1(10)}, []int64{21, 22}},
		{"same key twice, decreasing", "b", 1, []*peerpb.Report{k1(11), k1(10)}, []int64{23, 23}},
		{"zero own reads the total", "c", 1, []*peerpb.Report{k1(0), k2(0)}, []int64{23, 1}},
		{"origin with a slash", "c/x", 7, []*peerpb.Report{k2(2)}, []int64{3}},
		{"origin c, incarnation 7: not c/x's field", "c", 7, []*peerpb.Report{k2(2)}, []int64{5}},
	}
	for i, st := range steps {
		got := mustSync(t, s, st.origin, st.inc, st.reports...)
		if !equal(got, st.want) {
			t.Fatalf("step %d (%s): totals %v, want %v", i, st.what, got, st.want)
		}
	}

	// The hash holds one field per run and a total that is their sum.
	raw := rawClient(t, srv)
	key := string(appendKey(nil, s.cfg.KeyPrefix, kindWindow, "acme", "/product/*", "GET", farPeriod, farStart))
	h, err := raw.HGetAll(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a/1": "8", "a/2": "4", "b/1": "11", "t": "23", "x": fmt.Sprint(farStart + farPeriod + 2000)}
	if fmt.Sprint(h) != fmt.Sprint(want) {
		t.Fatalf("hash %s = %v, want %v", key, h, want)
	}
}

// TestSyncUnknownKeyZero checks that a zero report for a window nobody has
// counted in returns 0 and creates nothing.
func TestSyncUnknownKeyZero(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, testConfig(srv))
	if got := mustSync(t, s, "a", 1, rep("t", "e", "GET", farPeriod, farStart, 0)); got[0] != 0 {
		t.Fatalf("total %d, want 0", got[0])
	}
	if n := rawClient(t, srv).DBSize(context.Background()).Val(); n != 0 {
		t.Fatalf("DBSIZE %d after a zero report, want 0", n)
	}
}

// TestSyncSeriesApart checks that series differing in any key part, or only
// in where a separator falls, are counted apart.
func TestSyncSeriesApart(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, testConfig(srv))
	reports := []*peerpb.Report{
		rep("acme", "/p", "GET", farPeriod, farStart, 1),
		rep("acme", "/p", "GET", farPeriod, farStart+farPeriod, 2), // next window
		rep("acme", "/p", "GET", farPeriod*2, farStart, 3),         // other period
		rep("acme", "/p", "PUT", farPeriod, farStart, 4),
		rep("acme", "/q", "GET", farPeriod, farStart, 5),
		rep("beta", "/p", "GET", farPeriod, farStart, 6),
		rep("a|b", "c", "GET", farPeriod, farStart, 7),
		rep("a", "b|c", "GET", farPeriod, farStart, 8),
		rep(`a\`, "|c", "GET", farPeriod, farStart, 9),
		rep(`a\|`, "c", "GET", farPeriod, farStart, 10),
		rep("", "/p", "GET", farPeriod, farStart, 11), // the shared no-tenant bucket
		rep("acme", "", "GET", farPeriod, farStart, 12),
		rep("acme", "/p", "", farPeriod, farStart, 13),
	}
	got := mustSync(t, s, "a", 1, reports...)
	for i, g := range got {
		if g != int64(i+1) {
			t.Fatalf("report %d: total %d, want %d (all totals %v)", i, g, i+1, got)
		}
	}
	if n := rawClient(t, srv).DBSize(context.Background()).Val(); n != int64(len(reports)) {
		t.Fatalf("DBSIZE %d, want %d", n, len(reports))
	}
}

// TestSyncChunks runs batches split over several script calls (and so
// several EVALSHAs in one pipeline).
func TestSyncChunks(t *testing.T) {
	srv := redistest.Start(t)
	for _, chunk := range []int{1, 3, 10, 1000} {
		t.Run(fmt.Sprint("chunk=", chunk), func(t *testing.T) {
			s := newStore(t, testConfig(srv))
			s.chunk = chunk
			var reports []*peerpb.Report
			for i := range 10 {
				reports = append(reports, rep(fmt.Sprint("chunk", chunk), fmt.Sprint("/e", i), "GET", farPeriod, farStart, int64(i+1)))
			}
			got := mustSync(t, s, "a", 1, reports...)
			got2 := mustSync(t, s, "b", 1, reports...)
			for i := range reports {
				if got[i] != int64(i+1) || got2[i] != 2*int64(i+1) {
					t.Fatalf("report %d: totals %d then %d, want %d then %d", i, got[i], got2[i], i+1, 2*(i+1))
				}
			}
		})
	}
}

// TestSyncLargeCounts checks counts the Lua doubles still hold exactly.
func TestSyncLargeCounts(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, testConfig(srv))
	r := func(own int64) *peerpb.Report { return rep("big", "/e", "GET", farPeriod, farStart, own) }
	if got := mustSync(t, s, "a", 1, r(1e15)); got[0] != 1e15 {
		t.Fatalf("total %d, want %d", got[0], int64(1e15))
	}
	if got := mustSync(t, s, "a", 1, r(MaxOwn)); got[0] != MaxOwn {
		t.Fatalf("total %d, want %d", got[0], int64(MaxOwn))
	}
	if got := mustSync(t, s, "b", 1, r(3)); got[0] != MaxOwn+3 {
		t.Fatalf("total %d, want %d", got[0], int64(MaxOwn+3))
	}

	// Totals saturate at 2^62 rather than wrap (here the total is forced
	// near it; honest origins would need ~512 runs at MaxOwn).
	key := string(appendKey(nil, s.cfg.KeyPrefix, kindWindow, "big", "/e", "GET", farPeriod, farStart))
	if err := rawClient(t, srv).HSet(context.Background(), key, "t", int64(1<<62-10)).Err(); err != nil {
		t.Fatal(err)
	}
	if got := mustSync(t, s, "c", 1, r(MaxOwn)); got[0] != 1<<62 {
		t.Fatalf("total %d, want saturation at %d", got[0], int64(1<<62))
	}
}

// TestSyncConcurrentOrigins has several origins sync concurrently, each
// with growing cumulative counts and retries; the final total is the sum of
// their last counts.
func TestSyncConcurrentOrigins(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, testConfig(srv))
	const origins, rounds = 4, 20
	var wg sync.WaitGroup
	errs := make(chan error, origins)
	for o := range origins {
		wg.Go(func() {
			for i := 1; i <= rounds; i++ {
				r := rep("acme", "/p", "GET", farPeriod, farStart, int64(i*(o+1)))
				for range 2 { // every batch twice: a retry
					if _, err := s.Sync(context.Background(), fmt.Sprint("o", o), 1, []*peerpb.Report{r}); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := mustSync(t, s, "reader", 1, rep("acme", "/p", "GET", farPeriod, farStart, 0))
	if want := int64(rounds * (1 + 2 + 3 + 4)); got[0] != want {
		t.Fatalf("total %d, want %d", got[0], want)
	}
}

// TestSyncExpiry checks each key's expiry: window end + Grace for fixed
// windows, one period more for sliding ones, set on the first write and
// never moved back.
func TestSyncExpiry(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	cfg.Grace = 1500 * time.Millisecond
	s := newStore(t, cfg)
	raw := rawClient(t, srv)
	ctx := context.Background()

	const period = 1000
	now := time.Now()
	start := now.UnixMilli() / period * period
	fixed := rep("exp", "/fixed", "GET", period, start, 1)
	sliding := rep("exp", "/sliding", "GET", period, start, 1)
	sliding.Algorithm = peerpb.Algorithm_ALGORITHM_SLIDING
	mustSync(t, s, "a", 1, fixed, sliding)

	keyOf := func(r *peerpb.Report) string {
		return string(appendKey(nil, cfg.KeyPrefix, kindWindow, r.Tenant, r.Endpoint, r.Method, r.PeriodMs, r.WindowStartMs))
	}
	for _, c := range []struct {
		r    *peerpb.Report
		want int64 // expiry, Unix ms
	}{
		{fixed, start + period + 1500},
		{sliding, start + 2*period + 1500},
	} {
		key := keyOf(c.r)
		at, err := raw.PExpireTime(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if at.Milliseconds() != c.want {
			t.Errorf("%s: PEXPIRETIME %d, want window end + grace = %d", key, at.Milliseconds(), c.want)
		}
		// PTTL as an operator sees it: about expiry - now.
		pttl, err := raw.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		want := time.Duration(c.want-now.UnixMilli()) * time.Millisecond
		if d := pttl - want; d > 50*time.Millisecond || d < -500*time.Millisecond {
			t.Errorf("%s: PTTL %v, want about %v", key, pttl, want)
		}
	}

	// A later write by another origin leaves the expiry alone; a sliding
	// report for the fixed key extends it.
	fixed.Own = 2
	mustSync(t, s, "b", 1, fixed)
	if at := raw.PExpireTime(ctx, keyOf(fixed)).Val().Milliseconds(); at != start+period+1500 {
		t.Errorf("expiry moved to %d by a second origin, want %d", at, start+period+1500)
	}
	fixed.Own = 3
	fixed.Algorithm = peerpb.Algorithm_ALGORITHM_SLIDING
	mustSync(t, s, "b", 1, fixed)
	if at := raw.PExpireTime(ctx, keyOf(fixed)).Val().Milliseconds(); at != start+2*period+1500 {
		t.Errorf("sliding report did not extend expiry: %d, want %d", at, start+2*period+1500)
	}
}

// TestSyncExpires waits for a real expiry: a 1 s window with no grace is
// gone from Redis within about a second.
func TestSyncExpires(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	cfg.Grace = 0
	s := newStore(t, cfg)
	raw := rawClient(t, srv)
	const period = 1000
	start := time.Now().UnixMilli() / period * period
	r := rep("exp", "/e", "GET", period, start, 5)
	mustSync(t, s, "a", 1, r)
	key := string(appendKey(nil, cfg.KeyPrefix, kindWindow, "exp", "/e", "GET", period, start))
	exists := raw.Exists(context.Background(), key).Val() == 1
	if !exists && time.Now().Before(time.UnixMilli(start+period)) {
		t.Fatalf("key %s missing before its window ended", key)
	}
	waitFor(t, 3*time.Second, func() bool { return raw.Exists(context.Background(), key).Val() == 0 })
	if !time.Now().After(time.UnixMilli(start + period)) {
		t.Fatalf("key gone before its window ended")
	}
}

// TestSyncPastWindow: a report for a window whose expiry has passed leaves
// no key behind (PEXPIREAT in the past deletes it at once).
func TestSyncPastWindow(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	s := newStore(t, cfg)
	const period = 1000
	start := time.Now().Add(-time.Minute).UnixMilli() / period * period
	got := mustSync(t, s, "a", 1, rep("old", "/e", "GET", period, start, 5))
	if got[0] != 5 {
		t.Fatalf("total %d, want 5 (the report itself)", got[0])
	}
	if n := rawClient(t, srv).DBSize(context.Background()).Val(); n != 0 {
		t.Fatalf("DBSIZE %d after a report for an expired window, want 0", n)
	}
}

// TestSyncInvalid checks every rejected input: the error names the report,
// wraps ErrInvalidReport, and nothing reaches Redis.
func TestSyncInvalid(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, testConfig(srv))
	good := func() *peerpb.Report { return rep("t", "/e", "GET", 1000, 5000, 1) }
	with := func(f func(r *peerpb.Report)) *peerpb.Report { r := good(); f(r); return r }
	long := strings.Repeat("x", MaxKeyLen)
	cases := []struct {
		name   string
		origin string
		bad    *peerpb.Report
		want   string
	}{
		{"nil report", "a", nil, "report 1: nil"},
		{"no tenant, no endpoint", "a", with(func(r *peerpb.Report) { r.Tenant, r.Endpoint = "", "" }), "report 1: tenant and endpoint are both empty"},
		{"zero period", "a", with(func(r *peerpb.Report) { r.PeriodMs = 0 }), "report 1: period_ms 0 <= 0"},
		{"negative period", "a", with(func(r *peerpb.Report) { r.PeriodMs = -1000 }), "report 1: period_ms -1000 <= 0"},
		{"misaligned window", "a", with(func(r *peerpb.Report) { r.WindowStartMs = 5001 }), "report 1: window_start_ms 5001 is not a multiple of period_ms 1000"},
		{"negative own", "a", with(func(r *peerpb.Report) { r.Own = -1 }), "report 1: own -1 out of range"},
		{"own too large", "a", with(func(r *peerpb.Report) { r.Own = MaxOwn + 1 }), "report 1: own 9007199254740992 out of range"},
		{"tenant too long", "a", with(func(r *peerpb.Report) { r.Tenant = long }), "report 1: key is 1053 bytes, more than 1024"},
		{"escaping counts", "a", with(func(r *peerpb.Report) { r.Method = strings.Repeat("|", 500) }), "report 1: key is 1027 bytes"},
		{"huge period", "a", with(func(r *peerpb.Report) { r.PeriodMs = math.MaxInt64 / 2; r.WindowStartMs = 0 }), "report 1: period_ms 4611686018427387903 too large"},
		{"window at the end of time", "a", with(func(r *peerpb.Report) { r.WindowStartMs = math.MaxInt64 / 1000 * 1000 }), "report 1: window_start_ms 9223372036854775000 too large"},
		{"empty origin", "", good(), "origin is empty"},
		{"origin too long", strings.Repeat("o", 257), good(), "origin is 257 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Sync(context.Background(), c.origin, 1, []*peerpb.Report{good(), c.bad, good()})
			if !errors.Is(err, ErrInvalidReport) {
				t.Fatalf("err = %v, want ErrInvalidReport", err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "redisstore: sync: ") {
				t.Fatalf("err = %q, want it to contain %q", err, c.want)
			}
		})
	}
	if n := rawClient(t, srv).DBSize(context.Background()).Val(); n != 0 {
		t.Fatalf("DBSIZE %d after rejected batches, want 0", n)
	}
	// The boundary itself is accepted.
	r := good()
	r.Tenant = ""
	r.Tenant = strings.Repeat("x", MaxKeyLen-keyLen(s.cfg.KeyPrefix, kindWindow, "", r.Endpoint, r.Method, r.PeriodMs, r.WindowStartMs))
	mustSync(t, s, "a", 1, r)
	if n := len(appendKey(nil, s.cfg.KeyPrefix, kindWindow, r.Tenant, r.Endpoint, r.Method, r.PeriodMs, r.WindowStartMs)); n != MaxKeyLen {
		t.Fatalf("boundary key is %d bytes, want %d", n, MaxKeyLen)
	}
}

// TestSyncEmpty: an empty batch does no I/O (it works against a dead
// address) and returns nothing.
func TestSyncEmpty(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:1" // nothing listens there
	s := newStore(t, cfg)
	totals, err := s.Sync(context.Background(), "a", 1, nil)
	if err != nil || totals != nil {
		t.Fatalf("Sync(empty) = %v, %v; want nil, nil", totals, err)
	}
}

// TestSyncNoScript: Redis forgets its scripts (SCRIPT FLUSH, as after a
// restart); Sync answers the NOSCRIPT with EVAL, then loads the script again.
func TestSyncNoScript(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, testConfig(srv))
	s.chunk = 2 // NOSCRIPT on several commands of one pipeline
	raw := rawClient(t, srv)
	ctx := context.Background()
	reports := []*peerpb.Report{
		rep("ns", "/a", "GET", farPeriod, farStart, 1),
		rep("ns", "/b", "GET", farPeriod, farStart, 2),
		rep("ns", "/c", "GET", farPeriod, farStart, 3),
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if !raw.ScriptExists(ctx, s.script.Hash()).Val()[0] {
		t.Fatal("script not loaded after Ping")
	}
	mustSync(t, s, "a", 1, reports...)

	if err := raw.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range reports {
		r.Own *= 10
	}
	if got := mustSync(t, s, "a", 1, reports...); !equal(got, []int64{10, 20, 30}) {
		t.Fatalf("after SCRIPT FLUSH: totals %v, want [10 20 30]", got)
	}
	if s.loaded.Load() {
		t.Fatal("loaded still set after NOSCRIPT")
	}
	if got := mustSync(t, s, "b", 1, reports...); !equal(got, []int64{20, 40, 60}) {
		t.Fatalf("next sync: totals %v, want [20 40 60]", got)
	}
	if !s.loaded.Load() || !raw.ScriptExists(ctx, s.script.Hash()).Val()[0] {
		t.Fatal("script not loaded again by the next Sync")
	}
}

// TestSyncRedisKilled kills Redis mid-run: Sync fails fast with
// ErrUnavailable; after a restart it works again (script reloaded), and the
// totals, lost with the process, come back from the origins' next
// cumulative reports.
func TestSyncRedisKilled(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	cfg.Timeout = 200 * time.Millisecond
	s := newStore(t, cfg)
	k := func(own int64) *peerpb.Report { return rep("acme", "/p", "GET", farPeriod, farStart, own) }

	mustSync(t, s, "a", 1, k(5))
	if got := mustSync(t, s, "b", 1, k(7)); got[0] != 12 {
		t.Fatalf("total %d, want 12", got[0])
	}

	srv.Kill()
	for i := range 3 { // pooled connections are dead, then dials are refused
		begin := time.Now()
		_, err := s.Sync(context.Background(), "a", 1, []*peerpb.Report{k(6)})
		took := time.Since(begin)
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Sync %d with Redis killed: err = %v, want ErrUnavailable", i, err)
		}
		if !strings.HasPrefix(err.Error(), "redisstore: sync: redis unavailable: ") {
			t.Fatalf("error %q lacks the package and cause prefix", err)
		}
		if took > cfg.Timeout+300*time.Millisecond {
			t.Fatalf("Sync %d took %v with Redis killed, Timeout is %v", i, took, cfg.Timeout)
		}
	}

	srv.Restart() // empty: persistence is off
	// go-redis may hold off dialing for a moment after failed dials.
	var got []int64
	waitFor(t, 5*time.Second, func() bool {
		totals, err := s.Sync(context.Background(), "a", 1, []*peerpb.Report{k(6)})
		if err != nil {
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Sync after restart: %v", err)
			}
			return false
		}
		got = globals(t, totals)
		return true
	})
	if got[0] != 6 {
		t.Fatalf("first total after restart %d, want 6 (a's cumulative count; b's is lost until b reports)", got[0])
	}
	if got := mustSync(t, s, "b", 1, k(7)); got[0] != 13 {
		t.Fatalf("total after b reports again %d, want 13", got[0])
	}
	if got := mustSync(t, s, "a", 1, k(6)); got[0] != 13 {
		t.Fatalf("total after a retries %d, want 13", got[0])
	}
}

// TestSyncRedisFrozen: a Redis that accepts connections but never answers
// (SIGSTOP) costs one Timeout, then ErrUnavailable.
func TestSyncRedisFrozen(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig(srv)
	cfg.Timeout = 150 * time.Millisecond
	s := newStore(t, cfg)
	k := rep("acme", "/p", "GET", farPeriod, farStart, 1)
	mustSync(t, s, "a", 1, k)

	srv.Pause()
	begin := time.Now()
	_, err := s.Sync(context.Background(), "a", 1, []*peerpb.Report{k})
	took := time.Since(begin)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Sync with Redis frozen: err = %v, want ErrUnavailable", err)
	}
	if took < cfg.Timeout-10*time.Millisecond || took > cfg.Timeout+300*time.Millisecond {
		t.Fatalf("Sync took %v with Redis frozen, want about Timeout = %v", took, cfg.Timeout)
	}
	if err := s.Ping(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Ping with Redis frozen: err = %v, want ErrUnavailable", err)
	}
	srv.Resume()
	waitFor(t, 5*time.Second, func() bool {
		_, err := s.Sync(context.Background(), "a", 1, []*peerpb.Report{k})
		return err == nil
	})
}

// TestSyncCanceled: a caller's cancellation is reported as such, not as
// Redis being unavailable.
func TestSyncCanceled(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, testConfig(srv))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Sync(ctx, "a", 1, []*peerpb.Report{rep("acme", "/p", "GET", farPeriod, farStart, 1)})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want context.Canceled and not ErrUnavailable", err)
	}
}

// TestNewDoesNoIO: New succeeds with nothing listening; the first call
// fails with ErrUnavailable, fast.
func TestNewDoesNoIO(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:1"
	s := newStore(t, cfg)
	begin := time.Now()
	if err := s.Ping(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Ping: err = %v, want ErrUnavailable", err)
	}
	_, err := s.Sync(context.Background(), "a", 1, []*peerpb.Report{rep("acme", "/p", "GET", farPeriod, farStart, 1)})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Sync: err = %v, want ErrUnavailable", err)
	}
	if took := time.Since(begin); took > 2*cfg.Timeout+300*time.Millisecond {
		t.Fatalf("two calls took %v, Timeout is %v", took, cfg.Timeout)
	}
}

// TestErrorReply: a Redis error reply (here, a key of the wrong type) is not
// ErrUnavailable.
func TestErrorReply(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, testConfig(srv))
	r := rep("acme", "/p", "GET", farPeriod, farStart, 1)
	key := string(appendKey(nil, s.cfg.KeyPrefix, kindWindow, r.Tenant, r.Endpoint, r.Method, r.PeriodMs, r.WindowStartMs))
	if err := rawClient(t, srv).Set(context.Background(), key, "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Sync(context.Background(), "a", 1, []*peerpb.Report{r})
	if err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("err = %v, want a WRONGTYPE error that is not ErrUnavailable", err)
	}
}

// TestClose: calls after Close fail, and not with ErrUnavailable.
func TestClose(t *testing.T) {
	srv := redistest.Start(t)
	s, err := New(testConfig(srv))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = s.Sync(context.Background(), "a", 1, []*peerpb.Report{rep("acme", "/p", "GET", farPeriod, farStart, 1)})
	if err == nil || errors.Is(err, ErrUnavailable) {
		t.Fatalf("Sync after Close: err = %v, want a non-ErrUnavailable error", err)
	}
}
