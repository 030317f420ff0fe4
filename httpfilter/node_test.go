package httpfilter

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/node"
)

// TestNodeEndToEnd puts the middleware in front of a handler with a real,
// started single-member node as the limiter (real gossip and gRPC on
// 127.0.0.1), and reads the filter's metrics from the node's registry.
func TestNodeEndToEnd(t *testing.T) {
	n, err := node.New(node.LocalConfig("n1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		_ = n.Close(cctx)
	})

	// A long window, so that the test cannot straddle two.
	l := mustParse(t, y(`
slas:
  - id: get-product
    match: {methods: [GET], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 1h, threshold: 5}]
`))
	f, err := New(n, l, WithRegistry(n.Registry()))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer srv.Close()
	admitted := 0
	var last resp
	for range 8 {
		last = doReq(t, srv.Client(), "GET", srv.URL+"/v1/organizations/acme/product/1", nil)
		if last.status == 200 {
			admitted++
		}
	}
	if admitted != 5 || last.status != 429 || last.h.Get("X-Ratelimit-Limit") != "5" || last.h.Get("RateLimit-Policy") != `"get-product";q=5;w=3600` {
		t.Fatalf("admitted %d, last %d %v", admitted, last.status, last.h)
	}
	if r := doReq(t, srv.Client(), "GET", srv.URL+"/v1/organizations/globex/product/1", nil); r.status != 200 {
		t.Fatalf("globex: %d", r.status)
	}

	mf, err := n.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fam := range mf {
		if fam.GetName() != "peerlimit_filter_decisions_total" {
			continue
		}
		for _, m := range fam.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			if v := m.GetCounter().GetValue(); v > 0 {
				got = append(got, strings.Join(labels, ",")+":"+itoa(int(v)))
			}
		}
	}
	want := "protocol=http,result=allowed,sla=get-product:6 protocol=http,result=denied,sla=get-product:3"
	if strings.Join(got, " ") != want {
		t.Errorf("metrics %q, want %q", strings.Join(got, " "), want)
	}
}
