package httpfilter

import (
	"context"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/internal/nodetest"
	"github.com/peerlimit/peerlimit/internal/testutil"
	"github.com/prometheus/client_golang/prometheus"
)

// TestBadTenantsNeverStopSync: a real 3-node cluster (memberlist and gRPC on
// 127.0.0.1), the middleware in front of a ServeMux on each node, and
// requests for good tenants mixed with tenant ids that are not valid UTF-8
// or carry control characters. The bad ones are refused with 400 and never
// counted; no owner rejects a batch (a bad key in one would stop every
// key's sync of that batch), sync calls keep succeeding, and the good
// tenants' counts reach their owners (each node's cached global total is
// the cluster's). A call given up for its deadline is no rejection: under
// CI's parallel -race packages one call in a run was (its owner logged no
// rejection), so the test counts rejections, not failed calls.
// A daily tier: with it, 6 runs in 10 once saw a good tenant, far below its
// limit, refused at its second request on a node (the owner took demand
// projected over the day for overload; see counters.NeedHorizon).
func TestBadTenantsNeverStopSync(t *testing.T) {
	nodes := nodetest.Start(t, 3, nil)

	limits := mustParse(t, y(`
slas:
  - id: put-product
    match: {methods: [PUT], pathPattern: "/v1/organizations/{orgId}/product/{id}"}
    tenant: {fromPath: orgId}
    tiers: [{period: 24h, threshold: 1000}]
`))
	servers := putProductServers(t, nodes, limits)

	good := []string{"acme", "globex", "initech"}
	bad := []string{"%ff%fe", "a%00b", "%c3%28", "x%7f"}
	sent := map[string]int{}
	for round := range 20 {
		for i, srv := range servers {
			for _, g := range good {
				r := doReq(t, srv.Client(), "PUT", srv.URL+"/v1/organizations/"+g+"/product/1", nil)
				if r.status != 200 {
					t.Fatalf("round %d node %d tenant %s: %d", round, i, g, r.status)
				}
				sent[g]++
			}
			for _, b := range bad {
				if r := doReq(t, srv.Client(), "PUT", srv.URL+"/v1/organizations/"+b+"/product/1", nil); r.status != 400 {
					t.Fatalf("bad tenant %q: %d, want 400", b, r.status)
				}
			}
		}
	}
	// Every node learns each good tenant's cluster-wide count from its
	// owner: the counts reached the owners.
	testutil.WaitFor(t, 10*time.Second, "every node to see every good tenant's global count", func() bool {
		for _, n := range nodes {
			for _, g := range good {
				e := n.Engine().Table().Get(g, "/v1/organizations/{orgId}/product/{id}", "PUT", 24*time.Hour)
				if e == nil {
					return false
				}
				e.Lock()
				global := e.Current().Global + e.Current().Unreported()
				e.Unlock()
				if global != int64(sent[g]) {
					return false
				}
			}
		}
		return true
	})
	for i, n := range nodes {
		if rejected := metricValue(t, n.Registry(), "peerlimit_sync_inbound_rejected_total", ""); rejected != 0 {
			t.Errorf("node %d rejected %v sync batches", i, rejected)
		}
		ok, failed := syncCalls(t, n.Registry(), "ok"), syncCalls(t, n.Registry(), "error")
		if ok == 0 || 2*failed > ok {
			t.Errorf("node %d: %v sync calls succeeded, %v failed", i, ok, failed)
		}
		for _, b := range []string{"\xff\xfe", "a\x00b"} {
			if e := n.Engine().Table().Get(b, "/v1/organizations/{orgId}/product/{id}", "PUT", 24*time.Hour); e != nil {
				t.Errorf("node %d holds a series for the bad tenant %q", i, b)
			}
		}
	}
	// The Go API refuses such a key too, with an error, never a count.
	bad0 := counters.Limit{Tenant: "\xff", Endpoint: "e", Method: "GET", Period: time.Minute, Threshold: 10}
	if _, err := nodes[0].Allow(context.Background(), bad0); err == nil {
		t.Error("node.Allow with a tenant that is not UTF-8: nil error")
	}
}

func syncCalls(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	return metricValue(t, reg, "peerlimit_sync_calls_total", result)
}

// metricValue returns the counter name of reg, the one whose result label
// is result if result is not empty; the test fails if there is none.
func metricValue(t *testing.T, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if result == "" {
				return m.GetCounter().GetValue()
			}
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "result" && lp.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no counter %s{result=%q} in the registry", name, result)
	return 0
}
