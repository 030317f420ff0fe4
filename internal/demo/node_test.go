package demo

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/httpfilter"
)

// An hour-long window: a test run never crosses its boundary in practice.
const testLimits = `
slas:
  - id: get-product
    match:
      methods: [GET]
      pathPattern: /v1/organizations/{orgId}/product/*
    tenant: {fromPath: orgId}
    tiers:
      - period: 3600
        threshold: 20
`

// newClient is an HTTP client for loopback (never through a proxy).
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 5 * time.Second}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	client := newClient()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func post(t *testing.T, url, body string) {
	t.Helper()
	client := newClient()
	resp, err := client.Post(url, "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s: %s", url, resp.Status, b)
	}
}

// startNodes runs the plan's nodes in this process (RunNode is what a node
// process runs) and stops them at cleanup.
func startNodes(t *testing.T, plan Plan, lim *httpfilter.Limits) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, a := range plan {
		cfg := DefaultNodeConfig()
		cfg.Name, cfg.Plan, cfg.Limits, cfg.SyncInterval = a.Name, plan, lim, 50*time.Millisecond
		ready := make(chan struct{})
		errc := make(chan error, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- RunNode(ctx, cfg, func() { close(ready) })
		}()
		select {
		case <-ready:
		case err := <-errc:
			t.Fatalf("node %s: %v", a.Name, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("node %s not ready", a.Name)
		}
	}
}

func members(t *testing.T, base string) string {
	var st NodeState
	getJSON(t, base+"/admin/state", &st)
	return strings.Join(st.Members, " ")
}

func TestNodeProcess(t *testing.T) {
	lim, err := httpfilter.Parse("test.yaml", []byte(testLimits))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := NewPlan(2)
	if err != nil {
		t.Fatal(err)
	}
	startNodes(t, plan, lim)
	urls := []string{"http://" + plan[0].HTTP, "http://" + plan[1].HTTP}
	client := newClient()
	for _, u := range urls {
		waitFor(t, 10*time.Second, "both nodes see each other", func() bool { return members(t, u) == "n1 n2" })
	}

	// GETs for one tenant, alternating between the nodes, until the
	// tenant's 20 are admitted; then the cluster admits no more. (A node
	// that joined through a seed gets no budget in the window running when
	// it joined until its first sync answer, so the first requests to it
	// may be refused: that is the lease policy being safe, see
	// node.Engine.SetMembers.)
	admitted, sent := 0, 0
	get := func(i int) int {
		resp, err := client.Get(urls[i%2] + "/v1/organizations/acme/product/" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		at, err := strconv.ParseInt(resp.Header.Get(HeaderAt), 10, 64)
		if err != nil || time.Since(time.Unix(0, at)) > time.Minute {
			t.Fatalf("%s = %q: want the node's clock", HeaderAt, resp.Header.Get(HeaderAt))
		}
		if got := resp.Header.Get(HeaderNode); got != plan[i%2].Name {
			t.Fatalf("%s = %q, want %s", HeaderNode, got, plan[i%2].Name)
		}
		if resp.Header.Get("X-Ratelimit-Limit") != "20" {
			t.Fatalf("X-Ratelimit-Limit = %q, want 20 (the middleware runs)", resp.Header.Get("X-Ratelimit-Limit"))
		}
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusTooManyRequests:
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		default:
			t.Fatalf("status %s", resp.Status)
		}
		return resp.StatusCode
	}
	waitFor(t, 10*time.Second, "the tenant's 20 requests to be admitted", func() bool {
		if get(sent) == http.StatusOK {
			admitted++
		}
		sent++
		return admitted >= 20
	})
	for range 10 {
		if get(sent) == http.StatusOK {
			admitted++
		}
		sent++
	}
	if admitted != 20 {
		t.Fatalf("admitted %d of %d against a limit of 20", admitted, sent)
	}

	// PUT is not limited by this file and stores the product.
	req, _ := http.NewRequest(http.MethodPut, urls[0]+"/v1/organizations/acme/product/7", strings.NewReader(`{"price":3}`))
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT: %v %v", resp, err)
	}
	resp.Body.Close()

	// State: the latency of every API request, the responses by class.
	var st NodeState
	getJSON(t, urls[0]+"/admin/state", &st)
	n1 := uint64(sent+1)/2 + 1 // its GETs and the PUT
	if st.LatencyUs.Count != n1 || st.Served+st.Limited != n1 || st.Served < 2 {
		t.Fatalf("n1 state: %d latencies, %d served, %d limited; want %d requests", st.LatencyUs.Count, st.Served, st.Limited, n1)
	}
	if st.Policy != "lease" || st.SyncIntervalMs != 50 || st.Name != "n1" {
		t.Fatalf("state %+v", st)
	}
	waitFor(t, 5*time.Second, "sync calls (from the node that does not own acme's key)", func() bool {
		var a, b NodeState
		getJSON(t, urls[0]+"/admin/state", &a)
		getJSON(t, urls[1]+"/admin/state", &b)
		return a.SyncCalls+b.SyncCalls > 0 && a.SyncBytes+b.SyncBytes > 0
	})

	// Metrics: the node's registry, with the filter's and the demo's series.
	mresp, err := client.Get(urls[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mbody, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{"peerlimit_demo_filter_added_seconds_count " + strconv.Itoa(sent/2), `peerlimit_filter_decisions_total{protocol="http",result="allowed",sla="get-product"}`} {
		if !strings.Contains(string(mbody), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// Partition and heal.
	for _, u := range urls {
		post(t, u+"/admin/partition", "n1|n2")
	}
	waitFor(t, 10*time.Second, "the partition splits the membership", func() bool {
		return members(t, urls[0]) == "n1" && members(t, urls[1]) == "n2"
	})
	getJSON(t, urls[1]+"/admin/state", &st)
	if st.Partition != "n1|n2" {
		t.Fatalf("partition %q", st.Partition)
	}
	for _, u := range urls {
		post(t, u+"/admin/heal", "")
	}
	waitFor(t, 15*time.Second, "heal joins the nodes again", func() bool {
		return members(t, urls[0]) == "n1 n2" && members(t, urls[1]) == "n1 n2"
	})
	// A bad spec is refused.
	resp, err = client.Post(urls[0]+"/admin/partition", "text/plain", strings.NewReader("n1|n7"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad partition: %s", resp.Status)
	}
}

func TestGenerator(t *testing.T) {
	var hits [2]atomic.Int64
	var n atomic.Int64
	srv := func(i int) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			if r.Header.Get(TenantHeader) == "" || !strings.HasPrefix(r.URL.Path, "/v1/organizations/org-") {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			w.Header().Set(HeaderAt, strconv.FormatInt(time.Now().UnixNano(), 10))
			if n.Add(1)%3 == 0 {
				w.WriteHeader(http.StatusTooManyRequests)
			}
		}))
	}
	a, b := srv(0), srv(1)
	defer a.Close()
	defer b.Close()
	work, err := BuildWorkload(seedLimits(t), 5, 1000)
	if err != nil {
		t.Fatal(err)
	}
	run := func(up func(int) bool) (*Generator, *Truth) {
		cfg := DefaultLoadConfig()
		cfg.Workload, cfg.Targets, cfg.Truth, cfg.Up = work, []string{a.URL, b.URL}, NewTruth(2), up
		g, err := NewGenerator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		g.Run(context.Background(), start, start.Add(300*time.Millisecond))
		return g, cfg.Truth
	}
	// 300 ms at 1000 req/s: exactly 300 requests are due, round-robin.
	g, truth := run(nil)
	st := g.Stats()
	total, per := truth.Totals()
	if st.Sent+st.Dropped != 300 || total.Offered != st.Sent || st.NoTarget != 0 {
		t.Fatalf("stats %+v, truth %+v: want 300 due, every sent request recorded", st, total)
	}
	if total.Errors != 0 || total.Denied != total.Offered/3 {
		t.Fatalf("truth %+v: want a third denied, no errors", total)
	}
	// Round-robin over the due requests: those dropped (a loaded machine)
	// were due at one target or the other.
	if d := per[0].Offered - per[1].Offered; d < -1-int64(st.Dropped) || d > 1+int64(st.Dropped) {
		t.Fatalf("round robin split %d/%d with %d dropped", per[0].Offered, per[1].Offered, st.Dropped)
	}
	if !st.Stopped.After(st.Started) {
		t.Fatalf("started %v, stopped %v", st.Started, st.Stopped)
	}
	// Node 1 down: everything goes to node 0.
	before := hits[1].Load()
	g, truth = run(func(i int) bool { return i == 0 })
	_, per = truth.Totals()
	if per[1].Offered != 0 || hits[1].Load() != before || per[0].Offered != g.Stats().Sent {
		t.Fatalf("with node 1 down: per node %+v", per)
	}
	// Nothing up: nothing sent.
	g, _ = run(func(int) bool { return false })
	if st := g.Stats(); st.Sent != 0 || st.NoTarget != 300 {
		t.Fatalf("nothing up: %+v", st)
	}
	if _, err := NewGenerator(LoadConfig{Workload: work, Targets: []string{"http://10.1.2.3:80"}, Truth: NewTruth(1), Workers: 1, Timeout: time.Second, Tick: time.Millisecond}); err == nil {
		t.Fatal("a non-loopback target was accepted")
	}
}

// TestGeneratorClients: pinned clients send each tenant's requests to one
// node (the next one up while it is down), moving clients move each
// tenant from node to node.
func TestGeneratorClients(t *testing.T) {
	const nodes = 3
	var mu sync.Mutex
	hits := map[string][nodes]int{} // tenant -> requests by node
	var urls []string
	for i := range nodes {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tenant := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/organizations/"), "/")[0]
			mu.Lock()
			h := hits[tenant]
			h[i]++
			hits[tenant] = h
			mu.Unlock()
			w.Header().Set(HeaderAt, strconv.FormatInt(time.Now().UnixNano(), 10))
		}))
		defer srv.Close()
		urls = append(urls, srv.URL)
	}
	work, err := BuildWorkload(seedLimits(t), 5, 1000)
	if err != nil {
		t.Fatal(err)
	}
	tenant, _ := tenantIndex(work.Streams)
	index := map[string]int{}
	for i, s := range work.Streams {
		index[s.Tenant] = tenant[i]
	}
	run := func(clients Clients, up func(int) bool) map[string][nodes]int {
		clear(hits)
		cfg := DefaultLoadConfig()
		cfg.Workload, cfg.Targets, cfg.Truth, cfg.Up = work, urls, NewTruth(nodes), up
		cfg.Clients, cfg.MoveEvery = clients, 100*time.Millisecond
		g, err := NewGenerator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		g.Run(context.Background(), start, start.Add(450*time.Millisecond))
		if st := g.Stats(); st.Sent < 300 {
			t.Fatalf("%s: %+v: want about 450 requests sent", clients, st)
		}
		mu.Lock()
		defer mu.Unlock()
		out := map[string][nodes]int{}
		maps.Copy(out, hits)
		return out
	}
	if len(index) != 5 {
		t.Fatalf("tenants %v: want 5", index)
	}
	for _, down := range []int{-1, 1} {
		got := run(ClientsPinned, func(i int) bool { return i != down })
		for tn, h := range got {
			want := index[tn] % nodes
			if want == down {
				want = (want + 1) % nodes
			}
			for i, n := range h {
				if (n > 0) != (i == want) {
					t.Errorf("pinned, node %d down: tenant %s (index %d) sent %v by node, want all to node %d", down, tn, index[tn], h, want)
				}
			}
		}
	}
	got := run(ClientsMoving, nil)
	for tn, h := range got {
		on := 0
		for _, n := range h {
			if n > 0 {
				on++
			}
		}
		if on < 2 {
			t.Errorf("moving every 100 ms for 450 ms: tenant %s sent %v by node, want at least two nodes", tn, h)
		}
	}
	if _, err := ParseClients("sticky"); err == nil {
		t.Error("ParseClients accepted an unknown name")
	}
	cfg := DefaultLoadConfig()
	cfg.Workload, cfg.Targets, cfg.Truth, cfg.Clients, cfg.MoveEvery = work, urls, NewTruth(nodes), ClientsMoving, 0
	if _, err := NewGenerator(cfg); err == nil {
		t.Error("moving clients with MoveEvery 0 were accepted")
	}
}

// At an absurd rate the dispatcher cannot catch up: it must drop what one
// pass cannot release and still see the cancellation (it used to loop over
// every due request, billions per tick, and never return).
func TestGeneratorAbsurdRateStops(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	for _, rate := range []float64{1e12, 1e300} {
		work, err := BuildWorkload(seedLimits(t), 5, rate)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultLoadConfig()
		cfg.Workload, cfg.Targets, cfg.Truth = work, []string{srv.URL}, NewTruth(1)
		cfg.Workers, cfg.Tick, cfg.Timeout = 4, time.Millisecond, time.Second
		g, err := NewGenerator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			g.Run(ctx, time.Time{}, time.Time{})
		}()
		waitFor(t, 5*time.Second, "requests sent and dropped", func() bool {
			st := g.Stats()
			return st.Sent > 0 && st.Dropped > 0
		})
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("rate %v: Run still running 10 s after its context was cancelled", rate)
		}
		if st := g.Stats(); st.Dropped < 0 || st.NoTarget != 0 || st.Stopped.IsZero() {
			t.Errorf("rate %v: stats %+v", rate, st)
		}
	}
}

func TestLoadConfigRejectsRate(t *testing.T) {
	for _, rate := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		cfg := DefaultLoadConfig()
		cfg.Workload, cfg.Targets, cfg.Truth = &Workload{Rate: rate}, []string{"http://127.0.0.1:1"}, NewTruth(1)
		if _, err := NewGenerator(cfg); err == nil || !strings.Contains(err.Error(), "Workload.Rate") {
			t.Errorf("rate %v: err %v, want one naming Workload.Rate", rate, err)
		}
	}
}
