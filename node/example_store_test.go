package node_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/node"
	"github.com/peerlimit/peerlimit/peerpb"
)

// memStore is a Store of one's own, in memory: for each window of each
// series, the largest Own per origin and incarnation. Reports are
// cumulative, so keeping the largest makes a retried or duplicated report
// harmless.
type memStore struct {
	mu      sync.Mutex
	windows map[string]map[string]int64 // window -> "origin/incarnation" -> own
}

func (s *memStore) Sync(_ context.Context, origin string, incarnation uint64, reports []*peerpb.Report) ([]*peerpb.Total, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	totals := make([]*peerpb.Total, len(reports))
	for i, r := range reports {
		w := fmt.Sprintf("%q %q %q %d %d", r.GetTenant(), r.GetEndpoint(), r.GetMethod(), r.GetPeriodMs(), r.GetWindowStartMs())
		if s.windows[w] == nil {
			s.windows[w] = map[string]int64{}
		}
		run := fmt.Sprintf("%s/%d", origin, incarnation)
		s.windows[w][run] = max(s.windows[w][run], r.GetOwn())
		var global int64
		for _, own := range s.windows[w] {
			global += own
		}
		totals[i] = &peerpb.Total{Global: global}
	}
	return totals, nil
}

// ExampleStore: two nodes that sum their counts in a store of their own
// instead of at peer owners share a limit of 4 a day.
func ExampleStore() {
	store := &memStore{windows: map[string]map[string]int64{}}
	var nodes []*node.Node
	for _, name := range []string{"a", "b"} {
		cfg := node.LocalConfig(name)
		cfg.Store = store
		cfg.Policy = node.PolicyOptimistic // decide from the store's last totals
		cfg.SyncInterval = 50 * time.Millisecond
		n, err := node.New(cfg)
		if err != nil {
			panic(err)
		}
		if err := n.Start(context.Background()); err != nil {
			panic(err)
		}
		defer n.Close(context.Background())
		nodes = append(nodes, n)
	}
	limit := counters.Limit{Tenant: "acme", Endpoint: "/reports", Method: "POST", Period: 24 * time.Hour, Threshold: 4}
	ctx := context.Background()
	a, b := nodes[0], nodes[1]
	for range 3 {
		d, _ := a.Allow(ctx, limit)
		fmt.Println("a:", d.Allowed)
	}
	a.SyncOnce(ctx) // a's 3 reach the store
	d, _ := b.Allow(ctx, limit)
	fmt.Println("b:", d.Allowed)
	b.SyncOnce(ctx) // b's 1 reaches the store, and b learns the total: 4
	d, _ = b.Allow(ctx, limit)
	fmt.Println("b:", d.Allowed, "remaining", d.Remaining)
	// Output:
	// a: true
	// a: true
	// a: true
	// b: true
	// b: false remaining 0
}
