package httpfilter

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/internal/nodetest"
	"github.com/peerlimit/peerlimit/node"
	dto "github.com/prometheus/client_model/go"
)

// TestFloodKeepsTenantsInUse: a real 3-node cluster (memberlist and gRPC
// on 127.0.0.1, lease policy) whose tables hold 1000 series each, the
// middleware in front of a ServeMux on each node. A victim tenant sends
// 2x its limit round-robin in three rounds, and between them pauses while
// a bounded loop sends one request for each of 3000 distinct tenants,
// round-robin (9000 in all: 3x each node's table). The victim is admitted at most
// its limit (x 1.01 + 1) and not much less; the newcomers beyond the table
// share the overflow series, which admits one tenant's limit per node's
// view of it; every node's table stays at its bound plus the overflow
// series, and the overflow is counted in peerlimit_series_overflow_total.
func TestFloodKeepsTenantsInUse(t *testing.T) {
	const maxEntries, limit, flood = 1000, 200, 9000
	nodes := nodetest.Start(t, 3, func(c *node.Config) {
		c.Table = counters.DefaultConfig()
		c.Table.MaxEntries, c.Table.Shards = maxEntries, 8
	})
	limits := mustParse(t, y(fmt.Sprintf(`
slas:
  - id: put-product
    match: {methods: [PUT], pathPattern: "/v1/organizations/{orgId}/product/{id}"}
    tenant: {fromPath: orgId}
    tiers: [{period: 24h, threshold: %d}]
`, limit)))
	servers := putProductServers(t, nodes, limits)
	put := func(i int, tenant string) int {
		srv := servers[i%len(servers)]
		return doReq(t, srv.Client(), "PUT", srv.URL+"/v1/organizations/"+tenant+"/product/1", nil).status
	}

	var victimOK, floodOK atomic.Int64
	victim := func(from, to int) {
		for i := from; i < to; i++ {
			if put(i, "victim") == http.StatusOK {
				victimOK.Add(1)
			}
		}
	}
	floodRange := func(from, to int) {
		var wg sync.WaitGroup
		next := atomic.Int64{}
		next.Store(int64(from))
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= to {
						return
					}
					if put(i, fmt.Sprintf("flood-%d", i)) == http.StatusOK {
						floodOK.Add(1)
					}
				}
			}()
		}
		wg.Wait()
	}
	// Three rounds: the victim sends a third of 2x its limit, pauses while
	// a third of the flood arrives, and comes back in the same window.
	const rounds = 3
	for r := range rounds {
		victim(r*2*limit/rounds, (r+1)*2*limit/rounds)
		floodRange(r*flood/rounds, (r+1)*flood/rounds)
	}
	victim(0, 30) // and once more after the last flood

	got := victimOK.Load()
	if got > limit*101/100+1 || got < limit*95/100 {
		t.Errorf("victim admitted %d of %d sent, limit %d", got, 2*limit+30, limit)
	}
	var overflowed float64
	for i, n := range nodes {
		st := n.Engine().Table().Stats()
		if st.Entries > maxEntries+1 || st.EvictedUnreported != 0 {
			t.Errorf("node %d: %+v: over its bound or counts lost", i, st)
		}
		overflowed += gauge(t, n.Registry(), "peerlimit_series_overflow_total")
	}
	if overflowed == 0 {
		t.Error("no request counted on the overflow series")
	}
	// The flood got at most the places in the tables and the overflow
	// series' one limit.
	if f := floodOK.Load(); f > 3*maxEntries+limit*101/100+1 {
		t.Errorf("flood admitted %d: more than the tables' %d places and one limit of %d", f, 3*maxEntries, limit)
	}
	t.Logf("victim %d of %d admitted (limit %d); flood %d of %d admitted; %v overflowed", got, 2*limit+30, limit, floodOK.Load(), flood, overflowed)
}

// gauge reads an unlabelled gauge or counter from a registry.
func gauge(t *testing.T, reg interface {
	Gather() ([]*dto.MetricFamily, error)
}, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
