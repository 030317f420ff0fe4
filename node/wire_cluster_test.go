package node

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// TestClusterWireResynchronises runs the packed encoding on real nodes
// (gRPC on 127.0.0.1, signed with a gossip key) through a new peer, a
// peer that loses its dictionaries of the others, and a peer that is
// killed and restarts under the same name, and wants every live node's
// global of every tenant to be exactly what the cluster admitted after
// each: no count lost, none doubled.
func TestClusterWireResynchronises(t *testing.T) {
	const period = time.Minute
	key := bytes.Repeat([]byte{7}, 32)
	opts := clusterOpts{policy: PolicyLease, clock: alignedClock(period), configure: func(c *Config) {
		c.Gossip.SecretKeys = [][]byte{key}
	}}
	c := startCluster(t, 3, opts)
	limits := make([]counters.Limit, 40)
	for i := range limits {
		limits[i] = counters.Limit{Tenant: fmt.Sprintf("tenant-%d", i), Endpoint: "/v1/p/*", Method: "GET", Period: period, Threshold: 1_000_000}
	}
	admitted := make([]int64, len(limits))
	// load has every node admit each requests of every tenant; a request
	// pending a first lease is retried.
	load := func(ns []*Node, each int) {
		for _, n := range ns {
			for i, l := range limits {
				got := 0
				waitFor(t, 10*time.Second, n.Name()+" to admit "+l.Tenant, func() bool {
					for got < each {
						d, err := n.Allow(context.Background(), l)
						if err != nil || !d.Allowed {
							return false
						}
						got++
						admitted[i]++
					}
					return true
				})
			}
		}
	}
	converged := func(step string, ns []*Node) {
		var diag string
		defer func() {
			if t.Failed() {
				t.Logf("%s: last seen: %s", step, diag)
			}
		}()
		waitFor(t, 10*time.Second, step+": every global exact", func() bool {
			for _, n := range ns {
				for i, l := range limits {
					if g, own := globalOf(n, l); g != admitted[i] {
						o, _ := n.Engine().Ring().Owner(l.Hash())
						diag = fmt.Sprintf("%s sees %s global %d (own %d, owner %s), admitted %d", n.Name(), l.Tenant, g, own, o, admitted[i])
						return false
					}
				}
			}
			return true
		})
		for _, n := range ns {
			for i, l := range limits {
				if g, _ := globalOf(n, l); g != admitted[i] {
					t.Fatalf("%s: %s sees %s global %d, admitted %d", step, n.Name(), l.Tenant, g, admitted[i])
				}
			}
		}
	}
	live := slices.Clone(c.nodes)
	load(live, 2)
	converged("three nodes", live)

	live = append(live, c.add("n3", opts))
	c.waitMembers(10*time.Second, live...)
	load(live, 1)
	converged("a new peer", live)

	var resyncs uint64
	for _, n := range live {
		resyncs += n.Engine().Resyncs()
	}
	e := live[1].Engine()
	e.recvMu.Lock()
	clear(e.recv)
	e.recvMu.Unlock()
	load(live, 1)
	converged("a lost dictionary", live)
	after := uint64(0)
	for _, n := range live {
		after += n.Engine().Resyncs()
	}
	if after == resyncs {
		t.Errorf("a lost dictionary: no batch was refused for resync")
	}

	victim := live[2]
	victim.Kill()
	live = slices.Delete(live, 2, 3)
	c.waitMembers(10*time.Second, live...)
	// The engines leave the victim out as soon as a call to it is refused
	// (Engine.Refused); the gossip takes longer, and a new run under the
	// same name is refused until it has declared the old one dead.
	waitFor(t, 10*time.Second, "the gossip to forget "+victim.Name(), func() bool {
		for _, n := range live {
			for _, m := range n.Members() {
				if m.Name == victim.Name() {
					return false
				}
			}
		}
		return true
	})
	live = append(live, c.add(victim.Name(), opts))
	slices.SortFunc(live, func(a, b *Node) int { return strings.Compare(a.Name(), b.Name()) })
	c.waitMembers(20*time.Second, live...)
	load(live, 1)
	// The owners that get back series they owned before the membership
	// changed (the ring moves some series between the survivors while the
	// member is away, and back when it returns) keep what they counted
	// then; the totals the reports bring from the owner in between include
	// those counts too, and must not add them again.
	converged("a restarted peer", live)
}
