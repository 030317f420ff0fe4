package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// Hourly and daily quotas under the lease policy, on a real 3-node cluster
// with the default 200 ms sync. Demand projected over the time left in a
// day-long window is larger than any limit, and an owner that took that
// for overload refused a request at once whenever its instance's grant
// ran out, while the other instances held most of the limit unused: a
// tenant moving between instances got a 429 at its fourth request.

func longLimits(tenant string, hour, day int64) []counters.Limit {
	return []counters.Limit{
		{Tenant: tenant, Endpoint: "/v1/reports", Method: "POST", Period: time.Hour, Threshold: hour},
		{Tenant: tenant, Endpoint: "/v1/reports", Method: "POST", Period: 24 * time.Hour, Threshold: day},
	}
}

// longClient sends n requests one after the other (a keep-alive client),
// one every gap, the i-th to node pick(i), and returns how many were
// admitted and the first denials.
func longClient(c *testCluster, limits []counters.Limit, n int, gap time.Duration, pick func(i int) int) (admitted int, denials []string) {
	tk := time.NewTicker(gap)
	defer tk.Stop()
	for i := range n {
		<-tk.C
		nd := c.nodes[pick(i)]
		dec, err := nd.Allow(context.Background(), limits...)
		switch {
		case err != nil:
			denials = append(denials, fmt.Sprintf("request %d at %s: %v", i, nd.Name(), err))
		case dec.Allowed:
			admitted++
		case len(denials) < 5:
			denials = append(denials, fmt.Sprintf("request %d at %s: denied, retry after %v, pending %v", i, nd.Name(), dec.RetryAfter, dec.Pending))
		}
	}
	return admitted, denials
}

// TestLeaseLongWindowsUnderTheLimit: pinned, round-robin, moving and sparse
// clients far below their hourly and daily limits: every request passes.
func TestLeaseLongWindowsUnderTheLimit(t *testing.T) {
	c := startCluster(t, 3, clusterOpts{policy: PolicyLease, sync: 200 * time.Millisecond})
	type client struct {
		tenant string
		n      int
		gap    time.Duration
		pick   func(i int) int
	}
	clients := []client{
		{"pinned", 120, 25 * time.Millisecond, func(int) int { return 1 }},
		{"round-robin", 120, 25 * time.Millisecond, func(i int) int { return i % 3 }},
		{"moving", 120, 25 * time.Millisecond, func(i int) int { return i / 30 % 3 }},
		{"fast-round-robin", 60, 2 * time.Millisecond, func(i int) int { return i % 3 }},
		{"sparse", 12, 250 * time.Millisecond, func(i int) int { return (i * 2) % 3 }},
	}
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Go(func() {
			admitted, denials := longClient(c, longLimits(cl.tenant, 1000, 5000), cl.n, cl.gap, cl.pick)
			if admitted != cl.n {
				t.Errorf("%s: %d of %d admitted, far below the limits; first denials: %v", cl.tenant, admitted, cl.n, denials)
			}
		})
	}
	wg.Wait()
}

// TestLeaseLongWindowAtTwiceTheLimit: a round-robin client sends twice a
// daily limit of 100: at least 95 of its first 100 requests pass, and it
// gets the limit, within 1% or one request.
func TestLeaseLongWindowAtTwiceTheLimit(t *testing.T) {
	c := startCluster(t, 3, clusterOpts{policy: PolicyLease, sync: 200 * time.Millisecond})
	limits := longLimits("twice", 1000, 100)
	admitted, denials := longClient(c, limits, 100, 20*time.Millisecond, func(i int) int { return i % 3 })
	if admitted < 95 {
		t.Errorf("first 100 requests: %d admitted; denials %v", admitted, denials)
	}
	more, _ := longClient(c, limits, 100, 20*time.Millisecond, func(i int) int { return i % 3 })
	t.Logf("first 100 requests: %d admitted; next 100: %d", admitted, more)
	if got := admitted + more; got < 99 || got > 101 {
		t.Errorf("200 requests against a daily limit of 100: %d admitted, want 99..101", got)
	}
}

// TestLeaseLongWindowBurst: a tenant's trickle reaches every node, then a
// burst of 400 requests at once reaches one of them: with 1000 a day, they
// pass (at most 1% denied, for a slow machine). The bursting node spends
// its part of the limit and waits for the others to give back what their
// trickle does not need. Before, its last answer (made for the trickle)
// said nothing more would come, and 80 to 100 of the 400 were refused
// until midnight with 540 of the 1000 unused.
func TestLeaseLongWindowBurst(t *testing.T) {
	c := startCluster(t, 3, clusterOpts{policy: PolicyLease, sync: 200 * time.Millisecond})
	limits := []counters.Limit{{Tenant: "bursty", Endpoint: "/v1/reports", Method: "PUT", Period: 24 * time.Hour, Threshold: 1000}}
	admitted, denials := longClient(c, limits, 60, 20*time.Millisecond, func(i int) int { return i % 3 })
	if admitted != 60 {
		t.Fatalf("trickle: %d of 60 admitted: %v", admitted, denials)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var denied []string
	for i := range 400 {
		wg.Go(func() {
			dec, err := c.nodes[0].Allow(context.Background(), limits...)
			if err != nil || !dec.Allowed {
				mu.Lock()
				denied = append(denied, fmt.Sprintf("%d: retry after %v, err %v", i, dec.RetryAfter, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(denied) > 4 {
		t.Errorf("burst of 400 after 60 of 1000: %d denied, e.g. %v", len(denied), denied[:3])
	}
}
