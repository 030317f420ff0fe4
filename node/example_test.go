package node_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/node"
)

// Embed a node in a service: start it, decide requests locally, close it.
// Other instances join by listing this one's gossip address in
// Config.Gossip.Seeds.
func Example() {
	cfg := node.LocalConfig("api-1") // node.DefaultConfig() in production
	cfg.Policy = node.PolicyLease
	n, err := node.New(cfg)
	if err != nil {
		panic(err)
	}
	if err := n.Start(context.Background()); err != nil {
		panic(err)
	}
	defer n.Close(context.Background())

	// 3 GETs per 10 s for tenant org-42 on this endpoint.
	limit := counters.Limit{Tenant: "org-42", Endpoint: "/v1/organizations/{orgId}/product/*", Method: "GET", Period: 10 * time.Second, Threshold: 3}
	for i := 0; i < 4; i++ {
		d, _ := n.Allow(context.Background(), limit)
		fmt.Println(d.Allowed, d.Remaining)
	}
	// Output:
	// true 2
	// true 1
	// true 0
	// false 0
}

// A service on several hosts. DefaultConfig listens on every interface
// (gossip 7946, gRPC 7947) and publishes the host's private address, so
// naming one seed is enough; set cfg.Addr on a host with several networks.
// Set cfg.Gossip.JoinTimeout on instances that must not run alone (Start
// then fails when no seed answers in time).
func Example_multiHost() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	host, _ := os.Hostname()
	cfg := node.DefaultConfig()
	cfg.Name = host                                               // unique per instance: Start refuses a taken name
	cfg.Gossip.Seeds = []string{"10.0.0.5:7946", "10.0.0.6:7946"} // this host's own address may be listed
	n, err := node.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		log.Fatal(err) // says what to change: a taken name, unreachable seeds, a loopback gRPC address
	}
	defer n.Close(ctx) // flushes and leaves even though ctx is cancelled by then

	http.Handle("GET /metrics", n.MetricsHandler()) // peerlimit_*, go_*, process_*
	http.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := n.Health(); err != nil { // a name conflict, no seed, an unreachable peer...
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
	srv := &http.Server{Addr: ":8080", ReadHeaderTimeout: 5 * time.Second}
	go srv.ListenAndServe()
	<-ctx.Done()
	srv.Shutdown(context.Background())
}
