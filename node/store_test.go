package node

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/internal/redistest"
	"github.com/peerlimit/peerlimit/peerpb"
	"github.com/peerlimit/peerlimit/redisstore"
	"github.com/prometheus/client_golang/prometheus"
)

// Store mode against a real redis-server (internal/redistest): three nodes,
// each with its own redisstore.Store to the same Redis, the seed-000 design.
// redistest fails (not skips) these tests when CI is set and redis-server is
// missing.

// storeTimeout bounds each Store call and each sync call in these tests:
// roomy enough for -race on a loaded 2-core machine, short enough that a
// paused Redis is noticed within a second.
const storeTimeout = 500 * time.Millisecond

// stepClock is the real clock shifted forward by an offset that a test moves
// to the start of the next window, so that a "fresh window" starts when the
// test says so instead of when the wall clock does. It only ever moves
// forward: Redis expires a window's key at window end + grace on its own
// clock, so a node clock ahead of Redis only keeps keys longer.
type stepClock struct{ off atomic.Int64 }

func (c *stepClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

// toNextWindow moves the clock to 1 ms past the start of the next window of
// period and returns that start (Unix ns).
func (c *stepClock) toNextWindow(period time.Duration) int64 {
	now := c.Now().UnixNano()
	next := counters.WindowStart(now, int64(period)) + int64(period)
	c.off.Add(next + int64(time.Millisecond) - now)
	return next
}

type storeOpts struct {
	policy     Policy
	sync       time.Duration
	clock      func() time.Time
	failClosed bool
}

// startStoreCluster is startCluster for store mode: n nodes whose Config.Store
// is a redisstore.Store of their own, all pointed at srv.
func startStoreCluster(t testing.TB, srv *redistest.Server, n int, o storeOpts) *testCluster {
	t.Helper()
	c := &testCluster{t: t, clock: o.clock}
	for i := 0; i < n; i++ {
		rc := redisstore.DefaultConfig()
		rc.Addr = srv.Addr()
		rc.Timeout = storeTimeout
		st, err := redisstore.New(rc)
		if err != nil {
			t.Fatal(err)
		}
		// Registered before the node's cleanup, so it runs after it: the
		// node's final flush still has its store.
		t.Cleanup(func() { st.Close() })

		c.add(fmt.Sprintf("n%d", i), clusterOpts{policy: o.policy, sync: o.sync, configure: func(cfg *Config) {
			cfg.CallTimeout = storeTimeout
			cfg.Store = st
			cfg.FailClosed = o.failClosed
		}})
	}
	c.waitMembers(10*time.Second, c.nodes...)
	return c
}

// metricValue reads a gauge or counter from a node's registry: the sample
// of the family name whose labels include every given pair (0 if none).
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func storeDown(t testing.TB, n *Node) float64 {
	return metricValue(t, n.Registry(), "peerlimit_store_down")
}

func syncErrors(t testing.TB, n *Node) float64 {
	return metricValue(t, n.Registry(), "peerlimit_sync_calls_total", "result", "error")
}

// slotOf reads a node's cached global total and own count for the window of
// l that starts at start (Unix ns).
func slotOf(n *Node, l counters.Limit, start int64) (global, own int64) {
	e := n.Engine().Table().Get(l.Tenant, l.Endpoint, l.Method, l.Period)
	if e == nil {
		return 0, 0
	}
	e.Lock()
	defer e.Unlock()
	var buf counters.Slot
	s := e.Slot(start, &buf)
	if s == nil {
		return 0, 0
	}
	return s.Global, s.Own
}

// redisTotal reads the total Redis holds for one window through a Store of
// its own: a report with a cumulative count of 0 adds nothing and returns
// the total.
func redisTotal(t testing.TB, srv *redistest.Server, l counters.Limit, start int64) int64 {
	t.Helper()
	rc := redisstore.DefaultConfig()
	rc.Addr = srv.Addr()
	rc.Timeout = storeTimeout
	st, err := redisstore.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	totals, err := st.Sync(context.Background(), "test-reader", 1, []*peerpb.Report{{
		Tenant: l.Tenant, Endpoint: l.Endpoint, Method: l.Method,
		PeriodMs: l.Period.Milliseconds(), WindowStartMs: start / int64(time.Millisecond),
	}})
	if err != nil {
		t.Fatalf("reading the total from Redis: %v", err)
	}
	return totals[0].GetGlobal()
}

// offer makes each node decide perNode requests of l, and returns what each
// admitted, by node index.
func offer(c *testCluster, l counters.Limit, perNode int) []int64 {
	got := make([]int64, len(c.nodes))
	for k := 0; k < perNode; k++ {
		for i, n := range c.nodes {
			d, err := n.Allow(context.Background(), l)
			if err != nil {
				c.t.Fatal(err)
			}
			if d.Allowed {
				got[i]++
			}
		}
	}
	return got
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

// waitGlobals waits until every node's cached global for the window of l
// starting at start equals want.
func waitGlobals(c *testCluster, what string, l counters.Limit, start, want int64) {
	c.t.Helper()
	waitFor(c.t, 5*time.Second, fmt.Sprintf("%s: every node's global = %d", what, want), func() bool {
		for _, n := range c.nodes {
			if g, _ := slotOf(n, l, start); g != want {
				return false
			}
		}
		return true
	})
}

// decideUntilDown keeps every node deciding requests of a side series while
// the store is failing, until each node reports the store down and has
// failed at least two more sync calls after that, and returns the number of
// decisions made meanwhile. Decisions never touch the store, so this number
// is large: a request path that waited on the store would make a handful.
func decideUntilDown(c *testCluster, side counters.Limit) int {
	c.t.Helper()
	base := make([]float64, len(c.nodes))
	deadline := time.Now().Add(15 * time.Second)
	decisions := 0
	for {
		for range 100 {
			for _, n := range c.nodes {
				if _, err := n.Allow(context.Background(), side); err != nil {
					c.t.Fatal(err)
				}
				decisions++
			}
		}
		done := true
		for i, n := range c.nodes {
			if storeDown(c.t, n) != 1 {
				base[i] = syncErrors(c.t, n)
				done = false
			} else if syncErrors(c.t, n) < base[i]+2 {
				done = false
			}
		}
		if done {
			return decisions
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the store was not reported down on every node within 15 s (%d decisions made)", decisions)
		}
	}
}

func waitStoreUp(c *testCluster, what string) {
	c.t.Helper()
	waitFor(c.t, 10*time.Second, what+": peerlimit_store_down back to 0 on every node", func() bool {
		for _, n := range c.nodes {
			if storeDown(c.t, n) != 0 {
				return false
			}
		}
		return true
	})
}

// TestStoreRedisConvergesAndBoundsOptimistic: with Redis summing the counts,
// every node's global converges to the sum of all admitted, and a 2x
// overload stays within the optimistic rule's bound.
func TestStoreRedisConvergesAndBoundsOptimistic(t *testing.T) {
	srv := redistest.Start(t)
	const period, sync = time.Second, 100 * time.Millisecond
	// Aligned on the minute: the test starts 100 ms into a window of both
	// the 1 s and the 1 min series.
	clock := alignedClock(time.Minute)
	c := startStoreCluster(t, srv, 3, storeOpts{policy: PolicyOptimistic, sync: sync, clock: clock})

	// Convergence, on a series with a long window and a limit never reached.
	big := counters.Limit{Tenant: "acme", Endpoint: "/v1/big/*", Method: "GET", Period: time.Minute, Threshold: 1_000_000}.Prepare()
	start := counters.WindowStart(clock().UnixNano(), int64(big.Period))
	var admitted int64
	for round, each := range []int{34, 50} {
		for i := 0; i < 3*each; i++ { // round-robin
			d, err := c.nodes[i%3].Allow(context.Background(), big)
			if err != nil || !d.Allowed {
				t.Fatalf("request %d denied under a limit of a million: %+v %v", i, d, err)
			}
			admitted++
		}
		took := time.Now()
		waitGlobals(c, fmt.Sprintf("round %d", round), big, start, admitted)
		t.Logf("round %d: every node's global reached %d %v after the last request (sync %v)", round, admitted, time.Since(took), sync)
	}
	if got := redisTotal(t, srv, big, start); got != admitted {
		t.Errorf("Redis holds a total of %d, want %d", got, admitted)
	}
	for _, n := range c.nodes {
		if v := storeDown(t, n); v != 0 {
			t.Errorf("%s: peerlimit_store_down = %v with Redis up", n.Name(), v)
		}
	}

	// 2x overload, round-robin, over a few windows.
	const threshold = 200
	rate := 2.0 * threshold / period.Seconds()
	// The seed's bound: each of the N-1 other instances admits up to one
	// interval of its traffic before a sync tells it about the rest; as in
	// TestClusterPoliciesUnderOverload, (N-1) x the whole rate x the
	// interval, which also covers a Redis round trip of lag.
	seedBound := int64(2 * rate * sync.Seconds())
	l := counters.Limit{Tenant: "acme", Endpoint: "/v1/p/*", Method: "GET", Period: period, Threshold: threshold}.Prepare()
	waitFor(t, 2*period, "a window start", func() bool {
		return clock().UnixNano()%int64(period) < int64(20*time.Millisecond)
	})
	byWindow, offered := drive(c, []counters.Limit{l}, rate, 4*period)
	complete := 0
	for ws, a := range byWindow {
		if offered[ws] < threshold*3/2 { // a window cut by the start or the end
			continue
		}
		complete++
		t.Logf("window %d: offered %d admitted %d (limit %d, seed bound +%d)", ws/1e6, offered[ws], a, threshold, seedBound)
		if a > threshold+seedBound {
			t.Errorf("window %d: admitted %d, past the optimistic bound %d+%d", ws/1e6, a, threshold, seedBound)
		}
		// Optimistic denies only once its estimate, never above the true
		// count, reaches the limit.
		if a < threshold {
			t.Errorf("window %d: admitted %d of %d offered, under the limit %d", ws/1e6, a, offered[ws], threshold)
		}
	}
	if complete < 2 {
		t.Fatalf("only %d complete windows measured", complete)
	}
}

// TestStoreRedisKilledAndRestarted kills Redis mid-run, twice, in fail-open
// and fail-closed mode: decisions never wait for it, the metric and the
// admission rule follow it, and when it comes back (empty) the totals are
// rebuilt from the nodes' cumulative counts.
func TestStoreRedisKilledAndRestarted(t *testing.T) {
	for _, failClosed := range []bool{false, true} {
		name := "fail-open"
		if failClosed {
			name = "fail-closed"
		}
		t.Run(name, func(t *testing.T) {
			testStoreKilled(t, failClosed)
		})
	}
}

func testStoreKilled(t *testing.T, failClosed bool) {
	srv := redistest.Start(t)
	// A long period: windows change only when the test moves the clock.
	const period, threshold = 30 * time.Second, 300
	clk := &stepClock{}
	w0 := clk.toNextWindow(period)
	c := startStoreCluster(t, srv, 3, storeOpts{policy: PolicyOptimistic, sync: 100 * time.Millisecond, clock: clk.Now, failClosed: failClosed})
	l := counters.Limit{Tenant: "acme", Endpoint: "/v1/p/*", Method: "GET", Period: period, Threshold: threshold}.Prepare()
	side := counters.Limit{Tenant: "side", Endpoint: "/v1/p/*", Method: "GET", Period: period, Threshold: 1 << 40}.Prepare()
	shares := make([]int64, len(c.nodes))
	for i, n := range c.nodes {
		members, index := n.Engine().Table().Share()
		if members != 3 {
			t.Fatalf("%s shares limits among %d members, want 3", n.Name(), members)
		}
		shares[i] = counters.StaticShare(threshold, members, index, l.Hash())
	}
	if sum(shares) != threshold {
		t.Fatalf("static shares %v do not add up to %d", shares, threshold)
	}

	// Healthy: 10 per node, in Redis and in every node's global.
	before := offer(c, l, 10)
	if sum(before) != 30 {
		t.Fatalf("admitted %v of 10 per node with Redis up", before)
	}
	waitGlobals(c, "Redis up", l, w0, 30)

	// Redis killed: decisions go on, every node notices.
	srv.Kill()
	decisions := decideUntilDown(c, side)
	t.Logf("%d decisions made while the store went down and two more syncs failed on every node", decisions)
	if decisions < 1000 {
		t.Errorf("only %d decisions while the store was down: the request path waits for it", decisions)
	}

	// Still in the same window, down: 2x the share offered per node.
	during := offer(c, l, int(2*shares[0]))
	for i, n := range c.nodes {
		_, own := slotOf(n, l, w0)
		if failClosed {
			if during[i] != 0 {
				t.Errorf("%s: fail-closed admitted %d while Redis was down", n.Name(), during[i])
			}
		} else if own != shares[i] { // fills its share, counting what it admitted before
			t.Errorf("%s: fail-open admitted %d+%d = %d in the window, want its static share %d", n.Name(), before[i], during[i], own, shares[i])
		}
	}

	// Redis back, empty: the store is used again, and the window's total
	// is rebuilt from the nodes' cumulative counts, including those the old
	// Redis had and lost and those it never saw.
	srv.Restart()
	waitStoreUp(c, "after the first restart")
	want := sum(before) + sum(during)
	waitGlobals(c, "after the first restart", l, w0, want)
	if got := redisTotal(t, srv, l, w0); got != want {
		t.Errorf("after the first restart Redis holds %d for the window, want %d", got, want)
	}
	if counters.WindowStart(clk.Now().UnixNano(), int64(period)) != w0 {
		t.Fatalf("the first outage outlasted the %v window: the machine is too slow for this test", period)
	}
	if failClosed { // the optimistic rule is back
		after := offer(c, l, 10)
		if sum(after) != 30 {
			t.Errorf("after the restart admitted %v of 10 per node (global %d of %d)", after, want, threshold)
		}
		want += sum(after)
		waitGlobals(c, "after the first restart, more traffic", l, w0, want)
	}

	// Killed again; once every node knows, a fresh window begins.
	srv.Kill()
	decideUntilDown(c, side)
	w1 := clk.toNextWindow(period)
	fresh := offer(c, l, int(2*shares[0]))
	for i, n := range c.nodes {
		switch {
		case failClosed && fresh[i] != 0:
			t.Errorf("%s: fail-closed admitted %d in a fresh window while Redis was down", n.Name(), fresh[i])
		case !failClosed && fresh[i] != shares[i]:
			t.Errorf("%s: fail-open admitted %d of %d offered in a fresh window, want its static share %d", n.Name(), fresh[i], 2*shares[0], shares[i])
		}
	}
	srv.Restart()
	waitStoreUp(c, "after the second restart")
	want = sum(fresh)
	if failClosed {
		after := offer(c, l, 10)
		if sum(after) != 30 {
			t.Errorf("after the second restart admitted %v of 10 per node", after)
		}
		want += sum(after)
	}
	waitGlobals(c, "after the second restart", l, w1, want)
	if got := redisTotal(t, srv, l, w1); got != want {
		t.Errorf("after the second restart Redis holds %d for the window, want %d", got, want)
	}
}

// TestStoreRedisPausedNeverBlocksDecisions freezes Redis (SIGSTOP: it
// accepts connections and answers nothing, like a wedged server): sync calls
// time out, decisions go on at full speed, the nodes fall back, and they
// return to the store once it answers again.
func TestStoreRedisPausedNeverBlocksDecisions(t *testing.T) {
	srv := redistest.Start(t)
	clk := &stepClock{}
	const period = 30 * time.Second
	w0 := clk.toNextWindow(period)
	c := startStoreCluster(t, srv, 3, storeOpts{policy: PolicyOptimistic, sync: 100 * time.Millisecond, clock: clk.Now})
	l := counters.Limit{Tenant: "acme", Endpoint: "/v1/p/*", Method: "GET", Period: period, Threshold: 1_000_000}.Prepare()
	offer(c, l, 10)
	waitGlobals(c, "Redis up", l, w0, 30)

	srv.Pause()
	paused := true
	defer func() {
		if paused {
			srv.Resume()
		}
	}()
	// Every failed sync here took the whole timeout; a request path that
	// waited for Redis would decide once per timeout at best.
	decisions := decideUntilDown(c, l)
	t.Logf("%d decisions made while paused Redis made two sync calls per node time out (%v each)", decisions, storeTimeout)
	if decisions < 1000 {
		t.Errorf("only %d decisions while Redis was paused: the request path waits for it", decisions)
	}
	srv.Resume()
	paused = false
	waitStoreUp(c, "after resume")
	var own int64
	for _, n := range c.nodes {
		_, o := slotOf(n, l, w0)
		own += o
	}
	// Redis kept its data: the total is every decision admitted.
	waitGlobals(c, "after resume", l, w0, own)
}
