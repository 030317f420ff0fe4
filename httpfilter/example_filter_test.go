package httpfilter_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/httpfilter"
	"github.com/peerlimit/peerlimit/node"
)

// The middleware in front of a ServeMux, deciding in this process only.
func ExampleFilter_Middleware() {
	limits, err := httpfilter.Parse("limits.yaml", []byte(`
slas:
  - id: get-product
    match: {methods: [GET], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers:
      - {period: 10, threshold: 1000}
      - {period: 1, threshold: 200}
`))
	if err != nil {
		log.Fatal(err)
	}
	table, err := counters.NewTable(counters.DefaultConfig())
	if err != nil {
		log.Fatal(err)
	}
	filter, err := httpfilter.New(httpfilter.Local(table), limits)
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/organizations/{orgId}/product/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "product %s of %s\n", r.PathValue("id"), r.PathValue("orgId"))
	})
	handler := filter.Middleware(mux) // or mux.Handle(pattern, filter.Middleware(h))

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/organizations/acme/product/42", nil))
	fmt.Print(rec.Body.String())
	fmt.Println(rec.Header().Get("RateLimit-Policy"))
	fmt.Println(rec.Header().Get("X-RateLimit-Limit"), rec.Header().Get("X-RateLimit-Remaining"))
	// Output:
	// product 42 of acme
	// "get-product";q=1000;w=10, "get-product-1s";q=200;w=1
	// 200 199
}

// In a service: the cluster's node decides, the limits file is reloaded on
// change or SIGHUP, and the filter's metrics join the node's.
func Example_cluster() {
	ctx := context.Background()
	cfg := node.DefaultConfig()
	cfg.Name = "api-1"
	cfg.Gossip.Seeds = []string{"10.0.0.2:7946"}
	n, err := node.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer n.Close(ctx)

	limits, err := httpfilter.NewReloader(httpfilter.DefaultReloaderConfig("limits.yaml"))
	if err != nil {
		log.Fatal(err)
	}
	if err := limits.Start(ctx); err != nil {
		log.Fatal(err)
	}
	filter, err := httpfilter.New(n, limits, httpfilter.WithRegistry(n.Registry()))
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/organizations/{orgId}/product/{id}", func(w http.ResponseWriter, r *http.Request) {})
	mux.Handle("GET /metrics", n.MetricsHandler())
	log.Fatal(http.ListenAndServe(":8080", filter.Middleware(mux)))
}
