package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/internal/cputime"
	"github.com/peerlimit/peerlimit/node"
	"github.com/peerlimit/peerlimit/redisstore"
)

// endpoint and method of every limit in the workload: one SLA, many tenants.
const (
	endpoint = "/v1/organizations/{orgId}/product/*"
	method   = "GET"
)

// design is one way of deciding requests for several instances of a
// service. Implementations are safe for concurrent use.
type design interface {
	// decide decides one request of tenant (an index into env.tenants) on
	// instance inst.
	decide(ctx context.Context, inst, tenant int) (bool, error)
	// coordCalls returns the calls made to the coordinator so far: gRPC
	// sync calls between peers, or Redis round trips.
	coordCalls() uint64
	// coordErrors returns the calls to the coordinator that failed so far
	// (a node falls back to its static share, or a decision errs).
	coordErrors() uint64
	close()
}

// env is what every design is built from.
type env struct {
	opts      options
	tenants   []string // tenant ids; the harness uses disjoint halves per phase
	redisAddr string   // "" when Redis is not available
	redisPID  int      // 0 when Redis is not available
}

// redisCPU returns the CPU time redis-server has used (0 without it).
func (e env) redisCPU() time.Duration {
	if e.redisPID == 0 {
		return 0
	}
	return cputime.Of(e.redisPID)
}

type designSpec struct {
	key   string // the -designs name
	name  string // the table's name
	note  string // how it is set up
	redis bool   // needs redis-server
	build func(ctx context.Context, e env) (design, error)
}

func designSpecs() []designSpec {
	return []designSpec{
		{key: "rate", name: "x/time/rate (local, no coordination)",
			note:  "each instance its own rate.Limiter per tenant with the full limit (rate limit/period, burst limit), in a RWMutex-guarded map",
			build: newRateDesign},
		{key: "lease", name: "peerlimit peers, lease",
			note: "3 node.Node, memberlist + gRPC on 127.0.0.1, policy lease",
			build: func(ctx context.Context, e env) (design, error) {
				return newNodeDesign(ctx, e, node.PolicyLease, false)
			}},
		{key: "optimistic", name: "peerlimit peers, optimistic",
			note: "3 node.Node, memberlist + gRPC on 127.0.0.1, policy optimistic (the seed's rule)",
			build: func(ctx context.Context, e env) (design, error) {
				return newNodeDesign(ctx, e, node.PolicyOptimistic, false)
			}},
		{key: "redis-request", name: "Redis per request (seed 001)", redis: true,
			note:  "redisstore.PerRequest.Take per decision (INCRBY + PEXPIREAT, one round trip), one client per instance",
			build: newPerRequestDesign},
		{key: "redis-interval", name: "Redis per interval (seed 000)", redis: true,
			note: "3 node.Node with Config.Store = redisstore.Store (one per node), policy optimistic, one Redis round trip per node per interval",
			build: func(ctx context.Context, e env) (design, error) {
				return newNodeDesign(ctx, e, node.PolicyOptimistic, true)
			}},
	}
}

// --- x/time/rate -----------------------------------------------------------

// rateDesign is the naive deployment: every instance limits on its own, with
// the whole limit, and nobody coordinates.
type rateDesign struct {
	tenants []string
	inst    []*rateInstance
}

type rateInstance struct {
	r     rate.Limit
	burst int
	mu    sync.RWMutex
	m     map[string]*rate.Limiter
}

func newRateDesign(_ context.Context, e env) (design, error) {
	d := &rateDesign{tenants: e.tenants}
	perSecond := rate.Limit(float64(e.opts.Limit) / e.opts.Period.Seconds())
	for i := 0; i < e.opts.Instances; i++ {
		d.inst = append(d.inst, &rateInstance{r: perSecond, burst: int(e.opts.Limit), m: map[string]*rate.Limiter{}})
	}
	return d, nil
}

func (d *rateDesign) decide(_ context.Context, inst, tenant int) (bool, error) {
	return d.inst[inst].limiter(d.tenants[tenant]).Allow(), nil
}

// limiter returns the tenant's limiter, creating it on first use.
func (ri *rateInstance) limiter(tenant string) *rate.Limiter {
	ri.mu.RLock()
	l := ri.m[tenant]
	ri.mu.RUnlock()
	if l != nil {
		return l
	}
	ri.mu.Lock()
	defer ri.mu.Unlock()
	if l = ri.m[tenant]; l == nil {
		l = rate.NewLimiter(ri.r, ri.burst)
		ri.m[tenant] = l
	}
	return l
}

func (d *rateDesign) coordCalls() uint64  { return 0 }
func (d *rateDesign) coordErrors() uint64 { return 0 }
func (d *rateDesign) close()              {}

// --- peerlimit nodes (peers, or Redis per interval) ------------------------

type nodeDesign struct {
	nodes  []*node.Node
	stores []*redisstore.Store
	limits [][]counters.Limit // per tenant, prepared once (as the HTTP filter does at load)
}

func newNodeDesign(ctx context.Context, e env, policy node.Policy, store bool) (design, error) {
	d := &nodeDesign{}
	for _, t := range e.tenants {
		l := counters.Limit{Tenant: t, Endpoint: endpoint, Method: method, Period: e.opts.Period, Threshold: e.opts.Limit}
		d.limits = append(d.limits, []counters.Limit{l.Prepare()})
	}
	for i := 0; i < e.opts.Instances; i++ {
		cfg := node.LocalConfig(fmt.Sprintf("bench-%d", i))
		cfg.Policy = policy
		cfg.SyncInterval = e.opts.Sync
		if store {
			rc := redisstore.DefaultConfig()
			rc.Addr = e.redisAddr
			rc.KeyPrefix = "bench-interval:"
			st, err := redisstore.New(rc)
			if err != nil {
				d.close()
				return nil, err
			}
			d.stores = append(d.stores, st)
			cfg.Store = st
		}
		for _, prev := range d.nodes {
			cfg.Gossip.Seeds = append(cfg.Gossip.Seeds, prev.GossipAddr())
		}
		n, err := node.New(cfg)
		if err != nil {
			d.close()
			return nil, err
		}
		if err := n.Start(ctx); err != nil {
			d.close()
			return nil, err
		}
		d.nodes = append(d.nodes, n)
	}
	// Wait until every node sees every other: shares and owners depend on it.
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		all := true
		for _, n := range d.nodes {
			if len(n.Engine().Members()) != e.opts.Instances {
				all = false
			}
		}
		if all {
			return d, nil
		}
		if time.Now().After(deadline) {
			d.close()
			return nil, fmt.Errorf("bench: %d nodes did not see each other within 15 s", e.opts.Instances)
		}
		select {
		case <-ctx.Done():
			d.close()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

func (d *nodeDesign) decide(ctx context.Context, inst, tenant int) (bool, error) {
	dec, err := d.nodes[inst].Take(ctx, d.limits[tenant], 1)
	return dec.Allowed, err
}

func (d *nodeDesign) coordCalls() uint64 {
	var sum uint64
	for _, n := range d.nodes {
		calls, _ := n.SyncStats()
		sum += calls
	}
	return sum
}

// coordErrors reads peerlimit_sync_calls_total{result="error"} from every
// node's registry.
func (d *nodeDesign) coordErrors() uint64 {
	var sum float64
	for _, n := range d.nodes {
		mfs, err := n.Registry().Gather()
		if err != nil {
			continue
		}
		for _, mf := range mfs {
			if mf.GetName() != "peerlimit_sync_calls_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "result" && lp.GetValue() == "error" {
						sum += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return uint64(sum)
}

func (d *nodeDesign) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for _, n := range d.nodes {
		n.Close(ctx)
	}
	for _, s := range d.stores {
		s.Close()
	}
}

// --- Redis per request -----------------------------------------------------

type perRequestDesign struct {
	opts    options
	tenants []string
	clients []*redisstore.PerRequest
	calls   atomic.Uint64
	errors  atomic.Uint64
}

func newPerRequestDesign(_ context.Context, e env) (design, error) {
	d := &perRequestDesign{opts: e.opts, tenants: e.tenants}
	for i := 0; i < e.opts.Instances; i++ {
		rc := redisstore.DefaultConfig()
		rc.Addr = e.redisAddr
		rc.KeyPrefix = "bench-request:"
		// Roomy: a decision that times out is an error, not a measurement of
		// the design (and at 100 ms the 2-core machine would produce some).
		rc.Timeout = time.Second
		rc.PoolSize = e.opts.Workers + 4
		c, err := redisstore.NewPerRequest(rc)
		if err != nil {
			d.close()
			return nil, err
		}
		d.clients = append(d.clients, c)
	}
	return d, nil
}

func (d *perRequestDesign) decide(ctx context.Context, inst, tenant int) (bool, error) {
	d.calls.Add(1)
	ok, _, err := d.clients[inst].Take(ctx, d.tenants[tenant], endpoint, method, d.opts.Period, d.opts.Limit, 1, time.Now())
	if err != nil {
		d.errors.Add(1)
	}
	return ok, err
}

func (d *perRequestDesign) coordErrors() uint64 { return d.errors.Load() }

func (d *perRequestDesign) coordCalls() uint64 { return d.calls.Load() }

func (d *perRequestDesign) close() {
	for _, c := range d.clients {
		c.Close()
	}
}
