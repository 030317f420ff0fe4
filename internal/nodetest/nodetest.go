// Package nodetest starts real clusters of nodes on 127.0.0.1 for the tests
// of the packages built on node (node's own tests cannot import it).
package nodetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/internal/testutil"
	"github.com/peerlimit/peerlimit/node"
)

// Start starts a real cluster of n nodes on 127.0.0.1 (memberlist and
// gRPC, sync every 100 ms), each configured by configure if set, and waits
// until every node sees all of them.
func Start(t testing.TB, n int, configure func(*node.Config)) []*node.Node {
	t.Helper()
	var nodes []*node.Node
	for i := range n {
		cfg := node.LocalConfig(fmt.Sprintf("n%d", i))
		cfg.Logger = testutil.Logger(t)
		cfg.SyncInterval = 100 * time.Millisecond
		for _, n := range nodes {
			cfg.Gossip.Seeds = append(cfg.Gossip.Seeds, n.GossipAddr())
		}
		if configure != nil {
			configure(&cfg)
		}
		nd, err := node.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := nd.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = nd.Close(ctx)
		})
		nodes = append(nodes, nd)
	}
	testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("%d members everywhere", n), func() bool {
		for _, nd := range nodes {
			if len(nd.Engine().Members()) != n {
				return false
			}
		}
		return true
	})
	return nodes
}
