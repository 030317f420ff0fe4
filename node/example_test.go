package node_test

import (
	"context"
	"fmt"
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
