package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// LoadConfig configures a Generator. Start from DefaultLoadConfig.
type LoadConfig struct {
	// Workload is what to send. Required.
	Workload *Workload
	// Targets are the nodes' base URLs ("http://127.0.0.1:port"), by node
	// index. Required; loopback only.
	Targets []string
	// Up reports whether node i should get traffic (the supervisor's view:
	// a killed node gets none, as behind a load balancer with health
	// checks). Default: every node is up.
	Up func(i int) bool
	// Truth receives every outcome. Required.
	Truth *Truth
	// Workers is the number of concurrent requests (and keep-alive
	// connections per node) at most. Default 64: enough for 1000 req/s at
	// up to 60 ms per request.
	Workers int
	// Timeout bounds one request. Default 2 s.
	Timeout time.Duration
	// Seed seeds the choice of streams and product ids. Default 1.
	Seed uint64
	// Tick is how often the dispatcher releases the requests that are due.
	// Default 5 ms: smooth enough at 1000 req/s, cheap on CPU.
	Tick time.Duration
	// Clients is how the requests spread over the nodes. Default
	// ClientsRoundRobin (the seed's test).
	Clients Clients
	// MoveEvery is how long a client of ClientsMoving stays on a node.
	// Default 1.7 s (not a divisor of the windows, so that the moves fall
	// anywhere in them).
	MoveEvery time.Duration
}

// Clients is how a load's clients reach the nodes.
type Clients string

const (
	// ClientsRoundRobin sends each request to the next node that is up,
	// whatever its tenant: every tenant's traffic is spread evenly.
	ClientsRoundRobin Clients = "round-robin"
	// ClientsPinned sends every request of a tenant to one node (the
	// tenant's index modulo the nodes), or while that node is down to the
	// next one up: a keep-alive client behind a load balancer, which keeps
	// its connection, so that all of a tenant's traffic reaches one
	// instance.
	ClientsPinned Clients = "pinned"
	// ClientsMoving sends a tenant's requests to one node at a time and
	// moves them to the next node every MoveEvery, each tenant at its own
	// moment: a client that reconnects now and then.
	ClientsMoving Clients = "moving"
)

// ParseClients maps a name to a Clients ("" is ClientsRoundRobin).
func ParseClients(s string) (Clients, error) {
	switch c := Clients(s); c {
	case ClientsRoundRobin, ClientsPinned, ClientsMoving:
		return c, nil
	case "":
		return ClientsRoundRobin, nil
	}
	return "", fmt.Errorf("demo: unknown clients %q (want round-robin, pinned or moving)", s)
}

// DefaultLoadConfig returns a LoadConfig with every default filled in;
// Workload, Targets and Truth still need to be set.
func DefaultLoadConfig() LoadConfig {
	return LoadConfig{Workers: 64, Timeout: 2 * time.Second, Seed: 1, Tick: 5 * time.Millisecond,
		Clients: ClientsRoundRobin, MoveEvery: 1700 * time.Millisecond}
}

// Validate reports the first invalid field.
func (c LoadConfig) Validate() error {
	switch {
	case c.Workload == nil:
		return errors.New("demo: LoadConfig.Workload: required")
	case !(c.Workload.Rate > 0) || math.IsInf(c.Workload.Rate, 1):
		return fmt.Errorf("demo: LoadConfig.Workload.Rate: must be finite and > 0, got %v", c.Workload.Rate)
	case len(c.Targets) == 0:
		return errors.New("demo: LoadConfig.Targets: required")
	case c.Truth == nil:
		return errors.New("demo: LoadConfig.Truth: required")
	case c.Workers < 1:
		return fmt.Errorf("demo: LoadConfig.Workers: must be >= 1, got %d", c.Workers)
	case c.Timeout <= 0:
		return fmt.Errorf("demo: LoadConfig.Timeout: must be > 0, got %v", c.Timeout)
	case c.Tick <= 0:
		return fmt.Errorf("demo: LoadConfig.Tick: must be > 0, got %v", c.Tick)
	case c.Clients == ClientsMoving && c.MoveEvery <= 0:
		return fmt.Errorf("demo: LoadConfig.MoveEvery: must be > 0 with moving clients, got %v", c.MoveEvery)
	}
	if _, err := ParseClients(string(c.Clients)); err != nil {
		return fmt.Errorf("demo: LoadConfig.Clients: %w", err)
	}
	for i, t := range c.Targets {
		host, ok := strings.CutPrefix(t, "http://")
		if !ok {
			return fmt.Errorf("demo: LoadConfig.Targets[%d]: %q is not http://host:port", i, t)
		}
		if err := checkLoopback(host); err != nil {
			return fmt.Errorf("demo: LoadConfig.Targets[%d]: %w", i, err)
		}
	}
	return nil
}

// Generator sends the workload at its rate to the nodes that are up, as
// LoadConfig.Clients says (round-robin by default), from keep-alive HTTP
// clients, and records every outcome in the Truth. Open loop: requests are
// released on schedule whatever the latency; when every worker is busy a due
// request is dropped (counted, never sent). One pass of the dispatcher
// releases at most twice Workers requests (more could not find a free worker
// anyway); when more are due (a rate no worker pool can carry, or a process
// paused for a while) the rest are dropped at once and the schedule restarts
// from that pass, so that a pass stays short and cancellation is seen within a
// Tick whatever the rate.
//
// Create it with NewGenerator; the zero value is not usable. Run may be
// called once; the other methods are safe for concurrent use.
type Generator struct {
	cfg    LoadConfig
	client *http.Client

	sent     atomic.Int64
	dropped  atomic.Int64 // due but every worker busy; written by dispatch only
	noTarget atomic.Int64 // due but no node up; written by dispatch only
	started  atomic.Int64 // unix ns, 0 until Run starts sending
	stopped  atomic.Int64 // unix ns, 0 until Run stops sending
}

type job struct {
	stream int
	node   int
	id     int
}

// NewGenerator validates cfg. It starts nothing.
func NewGenerator(cfg LoadConfig) (*Generator, error) {
	if cfg.Up == nil {
		cfg.Up = func(int) bool { return true }
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Clients, _ = ParseClients(string(cfg.Clients)) // "" is round-robin; Validate parsed it
	tr := &http.Transport{
		Proxy:               nil, // loopback only, never through a proxy
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConns:        cfg.Workers * len(cfg.Targets),
		MaxIdleConnsPerHost: cfg.Workers,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	return &Generator{cfg: cfg, client: &http.Client{Transport: tr, Timeout: cfg.Timeout}}, nil
}

// GenStats are the generator's own counters.
type GenStats struct {
	Sent     int64     `json:"sent"`
	Dropped  int64     `json:"dropped"`   // due while every worker was busy
	NoTarget int64     `json:"no_target"` // due while no node was up
	Started  time.Time `json:"started"`   // zero until sending starts
	Stopped  time.Time `json:"stopped"`   // zero until sending stops
}

// Stats returns the generator's counters.
func (g *Generator) Stats() GenStats {
	s := GenStats{Sent: g.sent.Load(), Dropped: g.dropped.Load(), NoTarget: g.noTarget.Load()}
	if ns := g.started.Load(); ns != 0 {
		s.Started = time.Unix(0, ns)
	}
	if ns := g.stopped.Load(); ns != 0 {
		s.Stopped = time.Unix(0, ns)
	}
	return s
}

// Run waits until start, then sends until ctx ends or until end (if not
// zero), then waits for the requests in flight (each bounded by Timeout)
// and returns. Requests in flight are not cancelled by ctx, so that their
// outcome is recorded.
func (g *Generator) Run(ctx context.Context, start, end time.Time) {
	if d := time.Until(start); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	jobs := make(chan job, g.cfg.Workers)
	var wg sync.WaitGroup
	for range g.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.worker(jobs)
		}()
	}
	g.dispatch(ctx, start, end, jobs)
	close(jobs)
	wg.Wait()
	g.client.CloseIdleConnections()
}

func (g *Generator) dispatch(ctx context.Context, start, end time.Time, jobs chan<- job) {
	if start.IsZero() {
		start = time.Now()
	}
	g.started.Store(start.UnixNano())
	defer func() { g.stopped.Store(time.Now().UnixNano()) }()
	rng := rand.New(rand.NewPCG(g.cfg.Seed, 0x9e3779b97f4a7c15))
	rate := g.cfg.Workload.Rate
	n := len(g.cfg.Targets)
	tenant, tenants := tenantIndex(g.cfg.Workload.Streams)
	rr := 0
	release := func(now time.Time) {
		stream := g.cfg.Workload.Pick(rng)
		first := rr // the node tried first: the next in turn, or the tenant's
		switch t := tenant[stream]; g.cfg.Clients {
		case ClientsPinned:
			first = t
		case ClientsMoving:
			// Tenant t starts on node t and moves t/tenants of a period
			// later than tenant 0.
			every := g.cfg.MoveEvery
			first = t + int((now.Sub(start)+time.Duration(t)*every/time.Duration(tenants))/every)
		}
		node := -1
		for k := range n {
			if i := (first + k) % n; g.cfg.Up(i) {
				node = i
				break
			}
		}
		if node < 0 {
			g.noTarget.Add(1)
			return
		}
		if g.cfg.Clients == ClientsRoundRobin {
			rr = node + 1
		}
		j := job{stream: stream, node: node, id: 1 + rng.IntN(100)}
		select {
		case jobs <- j:
		default:
			g.dropped.Add(1)
		}
	}
	// batch is the most one pass releases: Workers can take a job each
	// and the channel holds Workers more; the rest would be dropped.
	batch := 2 * float64(g.cfg.Workers)
	base, done := start, int64(0) // requests released (or dropped) since base
	t := time.NewTicker(g.cfg.Tick)
	defer t.Stop()
	for {
		now := time.Now()
		if !end.IsZero() && !now.Before(end) {
			now = end
		}
		// Whole requests due and not yet released or dropped: exact
		// while done is below 2^50 (an integer subtracted from a larger
		// float).
		due := max(math.Floor(now.Sub(base).Seconds()*rate-float64(done)), 0)
		k := min(due, batch)
		for range int64(k) {
			release(now)
		}
		if skip := due - k; skip > 0 { // too far behind to catch up
			c := &g.dropped
			if !g.anyUp() {
				c = &g.noTarget
			}
			addSaturating(c, skip)
		}
		if due < 1<<50 && done < 1<<50 {
			done += int64(due)
		} else {
			// Only at an absurd rate: count from now, so that the
			// arithmetic stays exact (a fraction of a request is lost).
			base, done = now, 0
		}
		if !end.IsZero() && !now.Before(end) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tenantIndex numbers the streams' tenants in the order they first appear:
// the index of each stream's tenant, and how many there are.
func tenantIndex(streams []Stream) ([]int, int) {
	idx := make([]int, len(streams))
	seen := map[string]int{}
	for i, s := range streams {
		t, ok := seen[s.Tenant]
		if !ok {
			t = len(seen)
			seen[s.Tenant] = t
		}
		idx[i] = t
	}
	return idx, max(1, len(seen))
}

// anyUp reports whether some node should get traffic.
func (g *Generator) anyUp() bool {
	for i := range g.cfg.Targets {
		if g.cfg.Up(i) {
			return true
		}
	}
	return false
}

// addSaturating adds x >= 0 to a counter that only the caller's goroutine
// writes, stopping at math.MaxInt64 (an absurd rate drops more requests
// than an int64 counts).
func addSaturating(c *atomic.Int64, x float64) {
	v := c.Load()
	k := int64(min(x, 1<<62))
	c.Store(v + min(k, math.MaxInt64-v))
}

func (g *Generator) worker(jobs <-chan job) {
	for j := range jobs {
		g.do(j)
	}
}

func (g *Generator) do(j job) {
	s := &g.cfg.Workload.Streams[j.stream]
	url := g.cfg.Targets[j.node] + "/v1/organizations/" + s.Tenant + "/product/" + strconv.Itoa(j.id)
	var body io.Reader
	if s.Method == http.MethodPut {
		body = strings.NewReader(`{"name":"product ` + strconv.Itoa(j.id) + `","price":` + strconv.Itoa(j.id*3) + `}`)
	}
	req, err := http.NewRequest(s.Method, url, body)
	if err != nil {
		g.cfg.Truth.Record(s, j.node, time.Now(), Failed)
		return
	}
	req.Header.Set(TenantHeader, s.Tenant)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	g.sent.Add(1)
	sentAt := time.Now()
	resp, err := g.client.Do(req)
	if err != nil {
		g.cfg.Truth.Record(s, j.node, sentAt, Failed)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	at := sentAt
	if v := resp.Header.Get(HeaderAt); v != "" {
		if ns, err := strconv.ParseInt(v, 10, 64); err == nil {
			at = time.Unix(0, ns)
		}
	}
	o := Failed
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		o = Admitted
	case resp.StatusCode == http.StatusTooManyRequests:
		o = Denied
	}
	g.cfg.Truth.Record(s, j.node, at, o)
}
