package httpfilter

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// t0 starts a 10 s (and 1 s) window: windows are aligned on the Unix clock.
var t0 = time.Unix(1_700_000_000, 0)

// fakeClock is a virtual clock for a Local limiter.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// counterValue reads a counter (prometheus/testutil would need a module
// not in go.sum).
func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func newTable(t testing.TB) *counters.Table {
	t.Helper()
	tb, err := counters.NewTable(counters.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// env is a filter on a Local table with a virtual clock, in front of a
// handler that counts its calls, served by a real HTTP server.
type env struct {
	t     *testing.T
	clock *fakeClock
	table *counters.Table
	reg   *prometheus.Registry
	f     *Filter
	srv   *httptest.Server
	mu    sync.Mutex
	hits  int
}

func newEnv(t *testing.T, src LimitsSource, opts ...FilterOption) *env {
	t.Helper()
	e := &env{t: t, clock: newFakeClock(), table: newTable(t), reg: prometheus.NewRegistry()}
	opts = append([]FilterOption{WithClock(e.clock.Now), WithRegistry(e.reg)}, opts...)
	f, err := New(Local(e.table), src, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.f = f
	e.srv = httptest.NewServer(f.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.hits++
		e.mu.Unlock()
		w.Header().Set("X-Handler", "yes")
		_, _ = io.WriteString(w, "ok")
	})))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) handlerHits() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hits
}

type resp struct {
	status int
	h      http.Header
	body   string
}

func doReq(t *testing.T, client *http.Client, method, u string, hdr map[string]string) resp {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp{res.StatusCode, res.Header, string(b)}
}

func (e *env) get(path string, hdr map[string]string) resp {
	e.t.Helper()
	return doReq(e.t, e.srv.Client(), http.MethodGet, e.srv.URL+path, hdr)
}

// rl is the rate-limit headers of a response.
type rl struct{ limit, remaining, reset, policy, rateLimit, retryAfter string }

func rlOf(h http.Header) rl {
	return rl{h.Get("X-Ratelimit-Limit"), h.Get("X-Ratelimit-Remaining"), h.Get("X-Ratelimit-Reset"),
		h.Get("RateLimit-Policy"), h.Get("RateLimit"), h.Get("Retry-After")}
}

var rlHeaders = []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "RateLimit-Policy", "RateLimit", "Retry-After"}

func assertNoRateLimitHeaders(t *testing.T, h http.Header) {
	t.Helper()
	for _, k := range rlHeaders {
		if v, ok := h[http.CanonicalHeaderKey(k)]; ok {
			t.Errorf("header %s: %q, want none", k, v)
		}
	}
}

// problemBody is the 429 body.
type problemBody struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail"`
	SLA      string   `json:"sla"`
	Violated []string `json:"violated-policies"`
	Tier     struct {
		PeriodS   float64 `json:"period_s"`
		Threshold int64   `json:"threshold"`
	} `json:"tier"`
	RetryAfterS int64 `json:"retry_after_s"`
}

const twoTiers = `
slas:
  - id: get-product
    match: {methods: [GET], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers:
      - {period: 10, threshold: 5}
      - {period: 1, threshold: 3}
`

// TestHeadersTimeline replays one tenant's requests against a 10 s and a
// 1 s tier on virtual time: every response, allowed or denied, carries the
// headers of the tier closest to its limit.
func TestHeadersTimeline(t *testing.T) {
	e := newEnv(t, mustParse(t, y(twoTiers)))
	const policy = `"get-product";q=5;w=10, "get-product-1s";q=3;w=1`
	steps := []struct {
		advance time.Duration // before the request
		status  int
		want    rl
	}{
		// 1 s tier is the closest: 3-1 left vs 5-1.
		0: {0, 200, rl{"3", "2", "1", policy, `"get-product-1s";r=2;t=1`, ""}},
		1: {0, 200, rl{"3", "1", "1", policy, `"get-product-1s";r=1;t=1`, ""}},
		// Reset rounds up: 0.5 s left in the 1 s window reads 1.
		2: {500 * time.Millisecond, 200, rl{"3", "0", "1", policy, `"get-product-1s";r=0;t=1`, ""}},
		// 1 s tier exhausted: 429 with Retry-After for its window.
		3: {0, 429, rl{"3", "0", "1", policy, `"get-product-1s";r=0;t=1`, "1"}},
		// Next second: the 10 s tier (5-3-1 = 1 left) is now the closest.
		4: {500 * time.Millisecond, 200, rl{"5", "1", "9", policy, `"get-product";r=1;t=9`, ""}},
		5: {0, 200, rl{"5", "0", "9", policy, `"get-product";r=0;t=9`, ""}},
		// 10 s tier exhausted: wait for the 10 s window, 9 s.
		6: {0, 429, rl{"5", "0", "9", policy, `"get-product";r=0;t=9`, "9"}},
		// 8.25 s later: 0.75 s left, rounded up to 1; still denied.
		7: {8250 * time.Millisecond, 429, rl{"5", "0", "1", policy, `"get-product";r=0;t=1`, "1"}},
		// New 10 s window: everything fresh.
		8: {750 * time.Millisecond, 200, rl{"3", "2", "1", policy, `"get-product-1s";r=2;t=1`, ""}},
	}
	hits := 0
	for i, st := range steps {
		e.clock.Advance(st.advance)
		r := e.get("/v1/organizations/acme/product/42", nil)
		if r.status != st.status {
			t.Fatalf("step %d: status %d, want %d (body %s)", i, r.status, st.status, r.body)
		}
		if got := rlOf(r.h); got != st.want {
			t.Errorf("step %d: headers\n got %+v\nwant %+v", i, got, st.want)
		}
		if st.status == 200 {
			hits++
			if r.h.Get("X-Handler") != "yes" || r.body != "ok" {
				t.Errorf("step %d: handler response not passed through: %v %q", i, r.h, r.body)
			}
		}
		if e.handlerHits() != hits {
			t.Fatalf("step %d: handler called %d times, want %d", i, e.handlerHits(), hits)
		}
	}
}

func TestDeniedProblemJSON(t *testing.T) {
	e := newEnv(t, mustParse(t, y(twoTiers)))
	for range 3 {
		e.get("/v1/organizations/acme/product/1", nil)
	}
	e.clock.Advance(250 * time.Millisecond)
	r := e.get("/v1/organizations/acme/product/2", nil)
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429", r.status)
	}
	if ct := r.h.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q", ct)
	}
	if r.h.Get("Retry-After") != "1" {
		t.Errorf("Retry-After %q, want 1 (0.75 s rounded up)", r.h.Get("Retry-After"))
	}
	var p problemBody
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, r.body)
	}
	if p.Type != ProblemQuotaExceeded || p.Title != "Too Many Requests" || p.Status != 429 || p.SLA != "get-product" ||
		p.Tier.PeriodS != 1 || p.Tier.Threshold != 3 || p.RetryAfterS != 1 ||
		len(p.Violated) != 1 || p.Violated[0] != "get-product-1s" || !strings.Contains(p.Detail, "3 per 1s") {
		t.Errorf("body %+v\n%s", p, r.body)
	}
	if got := counterValue(t, e.f.m.decisions.WithLabelValues("http", "get-product", "denied")); got != 1 {
		t.Errorf("denied metric %v, want 1", got)
	}
	if got := counterValue(t, e.f.m.decisions.WithLabelValues("http", "get-product", "allowed")); got != 3 {
		t.Errorf("allowed metric %v, want 3", got)
	}
	// HEAD is charged as GET (ServeMux serves it with the GET handler):
	// refused too, with the headers and no body.
	r = doReq(t, e.srv.Client(), http.MethodHead, e.srv.URL+"/v1/organizations/acme/product/2", nil)
	if r.status != 429 || r.h.Get("Retry-After") != "1" || r.body != "" {
		t.Errorf("HEAD: %d Retry-After %q body %q", r.status, r.h.Get("Retry-After"), r.body)
	}
}

// TestSubSecondTier: a 500 ms tier has no w in its policy item (the draft
// has whole seconds only) and a name with its period in ms.
func TestSubSecondTier(t *testing.T) {
	e := newEnv(t, mustParse(t, y(`
slas:
  - id: burst
    match: {pathPattern: "/v1/{tenant}/**"}
    tiers:
      - {period: 1m, threshold: 100}
      - {period: 500ms, threshold: 1}
`)))
	r := e.get("/v1/acme/x", nil)
	want := rl{"1", "0", "1", `"burst";q=100;w=60, "burst-500ms";q=1`, `"burst-500ms";r=0;t=1`, ""}
	if got := rlOf(r.h); r.status != 200 || got != want {
		t.Fatalf("%d %+v, want %+v", r.status, got, want)
	}
	r = e.get("/v1/acme/y", nil)
	var p problemBody
	if err := json.Unmarshal([]byte(r.body), &p); err != nil || r.status != 429 || p.Tier.PeriodS != 0.5 || r.h.Get("Retry-After") != "1" {
		t.Fatalf("%d %v %+v Retry-After %q", r.status, err, p, r.h.Get("Retry-After"))
	}
}

func TestUnmatchedRequestsUntouched(t *testing.T) {
	e := newEnv(t, mustParse(t, y(twoTiers)))
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/organizations/acme"},
		{"GET", "/v1/organizations/acme/product"},
		{"GET", "/v1/organizations/acme/product/1/extra"},
		{"POST", "/v1/organizations/acme/product/1"},
		{"GET", "/healthz"},
	} {
		r := doReq(t, e.srv.Client(), c.method, e.srv.URL+c.path, nil)
		if r.status != 200 || r.body != "ok" || r.h.Get("X-Handler") != "yes" {
			t.Errorf("%s %s: %d %q", c.method, c.path, r.status, r.body)
		}
		assertNoRateLimitHeaders(t, r.h)
	}
	if e.handlerHits() != 5 {
		t.Errorf("handler hits %d, want 5", e.handlerHits())
	}
	// Limits with no HTTP SLA at all: the fast path.
	e2 := newEnv(t, mustParse(t, y(`
slas:
  - id: g
    match: {grpcMethods: ["*"]}
    tenant: {metadata: x-tenant-id}
    tiers: [{period: 1, threshold: 1}]
`)))
	r := e2.get("/v1/organizations/acme/product/1", nil)
	if r.status != 200 {
		t.Fatal(r.status)
	}
	assertNoRateLimitHeaders(t, r.h)
}

// TestUncleanPathsAreRedirected: a path ServeMux would redirect ("//",
// "." or ".." segments) is never charged; when it matches an SLA, as it is
// or cleaned, the filter answers with the mux's redirect itself, so that
// even a handler that ignores the path (as here) never serves it
// uncharged. The clean path it redirects to is charged as usual.
func TestUncleanPathsAreRedirected(t *testing.T) {
	e := newEnv(t, mustParse(t, y(`
slas:
  - id: p
    match: {pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 10, threshold: 2}]
`)))
	client := *e.srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	send := func(p string) *http.Response {
		t.Helper()
		req := &http.Request{Method: "GET", URL: &url.URL{Scheme: "http", Host: strings.TrimPrefix(e.srv.URL, "http://"), Opaque: p, RawQuery: "q=1"}, Header: http.Header{}}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	for _, c := range []struct{ path, location string }{
		{"/v1/organizations/acme/./product/1", "/v1/organizations/acme/product/1?q=1"},    // cleaned matches
		{"/v1//organizations/acme/product/1", "/v1/organizations/acme/product/1?q=1"},     // cleaned matches
		{"/v1/organizations/x/../acme/product/1", "/v1/organizations/acme/product/1?q=1"}, // cleaned matches
		{"/v1/organizations/./product/1", "/v1/organizations/product/1?q=1"},              // as it is, {orgId} = "."
		{"/v1/organizations//product/1", "/v1/organizations/product/1?q=1"},               // as it is, {orgId} = ""
	} {
		res := send(c.path)
		if res.StatusCode != http.StatusTemporaryRedirect || res.Header.Get("Location") != c.location || res.Header.Get("X-Handler") != "" {
			t.Errorf("%s: %d Location %q handler %q, want 307 to %s", c.path, res.StatusCode, res.Header.Get("Location"), res.Header.Get("X-Handler"), c.location)
		}
		assertNoRateLimitHeaders(t, res.Header)
	}
	// Unclean paths that match no SLA, even cleaned, pass untouched.
	for _, p := range []string{"/v1/organizations/acme/product/1/./", "/healthz/../x", "/v1//organizations/acme/product/1/"} {
		if res := send(p); res.StatusCode != 200 || res.Header.Get("X-Handler") != "yes" {
			t.Errorf("%s: %d", p, res.StatusCode)
		} else {
			assertNoRateLimitHeaders(t, res.Header)
		}
	}
	if e.handlerHits() != 3 {
		t.Errorf("handler hits %d, want 3", e.handlerHits())
	}
	// Nothing was charged: acme's two requests are still there.
	for i, want := range []int{200, 200, 429} {
		if res := send("/v1/organizations/acme/product/1"); res.StatusCode != want {
			t.Errorf("clean %d: %d, want %d", i, res.StatusCode, want)
		}
	}
}

func TestOverridesPremiumTenant(t *testing.T) {
	e := newEnv(t, mustParse(t, y(`
slas:
  - id: get-product
    match: {methods: [GET], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 10, threshold: 2}]
    overrides:
      - tenants: [acme, globex]
        tiers: [{period: 10, threshold: 4}, {period: 1, threshold: 3}]
`)))
	count := func(org string) (n int, last resp) {
		for i := 0; i < 10; i++ {
			r := e.get("/v1/organizations/"+org+"/product/1", nil)
			if r.status != 200 {
				return n, r
			}
			n++
			last = r
		}
		return n, last
	}
	if n, r := count("initech"); n != 2 || r.h.Get("RateLimit-Policy") != `"get-product";q=2;w=10` {
		t.Errorf("initech: %d admitted, policy %q; want 2 and the base tier", n, r.h.Get("RateLimit-Policy"))
	}
	n, r := count("acme")
	if n != 3 {
		t.Errorf("acme: %d admitted in one second, want 3 (override 1 s tier)", n)
	}
	if got := r.h.Get("RateLimit-Policy"); got != `"get-product";q=4;w=10, "get-product-1s";q=3;w=1` {
		t.Errorf("acme policy %q", got)
	}
	if got := r.h.Get("RateLimit"); got != `"get-product-1s";r=0;t=1` {
		t.Errorf("acme RateLimit %q", got)
	}
	e.clock.Advance(time.Second)
	if n, _ := count("acme"); n != 1 {
		t.Errorf("acme second second: %d admitted, want 1 (10 s override tier: 4)", n)
	}
	// globex shares the override's tiers, not acme's counters.
	if n, _ := count("globex"); n != 3 {
		t.Errorf("globex: %d admitted, want 3", n)
	}
}

// TestSeveralSLAsChargedTogether: a request matching two SLAs is one Take
// over both SLAs' tiers: when one refuses, the other is not charged.
func TestSeveralSLAsChargedTogether(t *testing.T) {
	l := mustParse(t, y(`
slas:
  - id: org-wide
    match: {pathPattern: "/v1/organizations/{orgId}/**"}
    tiers: [{period: 10, threshold: 4}]
  - id: get-product
    match: {methods: [GET], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 10, threshold: 2}]
`))
	e := newEnv(t, l)
	remaining := func(id, tenant string) int64 {
		s := l.SLA(id)
		lim := counters.Limit{Tenant: tenant, Endpoint: s.Endpoint, Method: s.KeyMethod, Period: s.Tiers[0].Period, Threshold: s.Tiers[0].Threshold}
		d, err := e.table.Take(e.clock.Now(), []counters.Limit{lim}, 0) // cost 0: look, do not charge
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining
	}
	const both = `"org-wide";q=4;w=10, "get-product";q=2;w=10`
	steps := []struct {
		path        string
		status      int
		policy      string
		limit       string
		org, getPrd int64 // remaining after the request
	}{
		// Both SLAs charged; get-product is the closest to its limit.
		{"/v1/organizations/acme/product/1", 200, both, "2", 3, 1},
		{"/v1/organizations/acme/product/2", 200, both, "2", 2, 0},
		// get-product refuses: org-wide is not charged either.
		{"/v1/organizations/acme/product/3", 429, both, "2", 2, 0},
		// Other paths only match org-wide.
		{"/v1/organizations/acme/orders", 200, `"org-wide";q=4;w=10`, "4", 1, 0},
		{"/v1/organizations/acme/orders", 200, `"org-wide";q=4;w=10`, "4", 0, 0},
		// Now org-wide refuses a product read.
		{"/v1/organizations/acme/product/1", 429, both, "4", 0, 0},
	}
	for i, st := range steps {
		r := e.get(st.path, nil)
		if r.status != st.status || r.h.Get("RateLimit-Policy") != st.policy || r.h.Get("X-Ratelimit-Limit") != st.limit {
			t.Errorf("step %d: %d policy %q limit %q, want %d %q %q", i, r.status, r.h.Get("RateLimit-Policy"), r.h.Get("X-Ratelimit-Limit"), st.status, st.policy, st.limit)
		}
		if o, g := remaining("org-wide", "acme"), remaining("get-product", "acme"); o != st.org || g != st.getPrd {
			t.Errorf("step %d: remaining org-wide %d get-product %d, want %d %d", i, o, g, st.org, st.getPrd)
		}
	}
	// The other way round for another tenant: org-wide exhausted first
	// leaves get-product uncharged.
	for range 4 {
		e.get("/v1/organizations/initech/orders", nil)
	}
	if r := e.get("/v1/organizations/initech/product/1", nil); r.status != 429 || r.h.Get("X-Ratelimit-Limit") != "4" {
		t.Errorf("initech product: %d limit %q", r.status, r.h.Get("X-Ratelimit-Limit"))
	}
	if g := remaining("get-product", "initech"); g != 2 {
		t.Errorf("initech get-product remaining %d, want 2 (not charged)", g)
	}
}

// TestSeveralSLAsDifferentCosts: each SLA's tiers are charged its own cost,
// in one Take: all of them or none.
func TestSeveralSLAsDifferentCosts(t *testing.T) {
	e := newEnv(t, mustParse(t, y(`
slas:
  - id: cheap
    match: {pathPattern: "/v1/{t}/**"}
    tiers: [{period: 10, threshold: 10}]
  - id: export
    cost: 3
    match: {methods: [POST], pathPattern: "/v1/{t}/export"}
    tiers: [{period: 10, threshold: 9}]
`)))
	export := func() resp { return doReq(t, e.srv.Client(), "POST", e.srv.URL+"/v1/acme/export", nil) }
	r := export()
	if r.status != 200 || r.h.Get("RateLimit") != `"export";r=6;t=10` {
		t.Fatalf("%d %q", r.status, r.h.Get("RateLimit"))
	}
	r = e.get("/v1/acme/x", nil)
	if r.h.Get("RateLimit") != `"cheap";r=8;t=10` {
		t.Errorf("cheap after an export: %q, want r=8 (10-1-1: the export costs cheap 1)", r.h.Get("RateLimit"))
	}
	// Two more exports spend export's 9; cheap is at 10-1-1-2 = 6.
	for i := range 2 {
		if r := export(); r.status != 200 {
			t.Fatalf("export %d: %d", i+2, r.status)
		}
	}
	// The fourth is denied by export and charges cheap nothing.
	if r := export(); r.status != http.StatusTooManyRequests || r.h.Get("RateLimit") != `"export";r=0;t=10` {
		t.Fatalf("fourth export: %d %q", r.status, r.h.Get("RateLimit"))
	}
	if r := e.get("/v1/acme/x", nil); r.h.Get("RateLimit") != `"cheap";r=5;t=10` {
		t.Errorf("cheap after a denied export: %q, want r=5", r.h.Get("RateLimit"))
	}
}

func TestShadowOnly(t *testing.T) {
	e := newEnv(t, mustParse(t, y(`
slas:
  - id: trial
    shadow: true
    match: {pathPattern: "/v1/{org}/exports/**"}
    tiers: [{period: 10, threshold: 2}]
`)))
	for i := range 5 {
		r := e.get("/v1/acme/exports/x", nil)
		if r.status != 200 {
			t.Fatalf("request %d: %d: a shadow SLA never denies", i, r.status)
		}
		// Headers report the shadow SLA (nothing else matches).
		want := max(int64(1-i), 0)
		if r.h.Get("X-Ratelimit-Remaining") != itoa(int(want)) || r.h.Get("Retry-After") != "" {
			t.Errorf("request %d: remaining %q retry %q", i, r.h.Get("X-Ratelimit-Remaining"), r.h.Get("Retry-After"))
		}
	}
	if got := counterValue(t, e.f.m.wouldDeny.WithLabelValues("http", "trial")); got != 3 {
		t.Errorf("would-deny %v, want 3", got)
	}
	if e.handlerHits() != 5 {
		t.Errorf("handler hits %d", e.handlerHits())
	}
}

// TestShadowWithEnforcing: shadow SLAs are counted apart and only for
// admitted requests; headers come from the enforcing SLA.
func TestShadowWithEnforcing(t *testing.T) {
	e := newEnv(t, mustParse(t, y(`
slas:
  - id: enforced
    match: {pathPattern: "/v1/{org}/**"}
    tiers: [{period: 10, threshold: 3}]
  - id: trial
    shadow: true
    match: {pathPattern: "/v1/{org}/exports/*"}
    tiers: [{period: 10, threshold: 1}]
`)))
	want := []int{200, 200, 200, 429, 429}
	for i, st := range want {
		r := e.get("/v1/acme/exports/x", nil)
		if r.status != st {
			t.Fatalf("request %d: %d, want %d", i, r.status, st)
		}
		if p := r.h.Get("RateLimit-Policy"); p != `"enforced";q=3;w=10` {
			t.Errorf("request %d: policy %q: shadow SLAs are not advertised next to enforcing ones", i, p)
		}
	}
	if got := counterValue(t, e.f.m.wouldDeny.WithLabelValues("http", "trial")); got != 2 {
		t.Errorf("would-deny %v, want 2 (requests 2 and 3; denied requests are not shadow-counted)", got)
	}
	if got := counterValue(t, e.f.m.decisions.WithLabelValues("http", "trial", "allowed")); got != 3 {
		t.Errorf("trial counted %v, want 3", got)
	}
}

const headerTenant = `
slas:
  - id: api
    match: {pathPattern: "/api/**"}
    tenant: {header: X-Tenant-ID}
    tiers: [{period: 10, threshold: 2}]
  - id: public
    match: {pathPattern: "/public/**"}
    tenant: {header: X-Tenant-ID}
    noTenant: shared
    tiers: [{period: 10, threshold: 3}]
  - id: global
    match: {pathPattern: "/global"}
    tenant: none
    noTenant: shared
    tiers: [{period: 10, threshold: 1}]
  - id: shadow-needs-tenant
    shadow: true
    match: {pathPattern: "/api/**"}
    tenant: {header: X-Account}
    tiers: [{period: 20, threshold: 1}]
`

func TestNoTenant(t *testing.T) {
	e := newEnv(t, mustParse(t, y(headerTenant)))
	// reject: 400, handler not called, nothing charged.
	r := e.get("/api/x", nil)
	if r.status != 400 || r.h.Get("Content-Type") != "application/problem+json" || !strings.Contains(r.body, `"sla":"api"`) || !strings.Contains(r.body, "X-Tenant-Id") {
		t.Fatalf("no tenant: %d %q %s", r.status, r.h.Get("Content-Type"), r.body)
	}
	assertNoRateLimitHeaders(t, r.h)
	if e.handlerHits() != 0 {
		t.Fatal("handler called for a rejected request")
	}
	// Too long is not missing but refused, also with 400 (see
	// TestInvalidTenantRefused).
	if r := e.get("/api/x", map[string]string{"X-Tenant-ID": strings.Repeat("a", MaxTenantLen+1)}); r.status != 400 || !strings.Contains(r.body, "longer than 256 bytes") {
		t.Errorf("overlong tenant: %d %s", r.status, r.body)
	}
	for i := range 2 {
		if r := e.get("/api/x", map[string]string{"X-Tenant-ID": "acme"}); r.status != 200 || r.h.Get("X-Ratelimit-Remaining") != itoa(1-i) {
			t.Fatalf("acme %d: %d remaining %q", i, r.status, r.h.Get("X-Ratelimit-Remaining"))
		}
	}
	// The shadow SLA without its tenant (X-Account) was skipped, not
	// rejected: the two acme requests. (The rejected requests stopped at
	// "api", first in the file.)
	if got := counterValue(t, e.f.m.decisions.WithLabelValues("http", "shadow-needs-tenant", "no_tenant")); got != 2 {
		t.Errorf("shadow no_tenant %v, want 2", got)
	}
	if got := counterValue(t, e.f.m.decisions.WithLabelValues("http", "api", "no_tenant")); got != 1 {
		t.Errorf("api no_tenant %v, want 1", got)
	}
	if got := counterValue(t, e.f.m.decisions.WithLabelValues("http", "api", "invalid_tenant")); got != 1 {
		t.Errorf("api invalid_tenant %v, want 1", got)
	}

	// shared: callers without a tenant share one bucket, apart from tenants.
	for i, want := range []int{200, 200, 200, 429} {
		if r := e.get("/public/x", nil); r.status != want {
			t.Errorf("shared %d: %d, want %d", i, r.status, want)
		}
	}
	if r := e.get("/public/x", map[string]string{"X-Tenant-ID": "acme"}); r.status != 200 || r.h.Get("X-Ratelimit-Remaining") != "2" {
		t.Errorf("acme next to the shared bucket: %d remaining %q", r.status, r.h.Get("X-Ratelimit-Remaining"))
	}
	// tenant: none is one global bucket whatever the caller says.
	if r := e.get("/global", map[string]string{"X-Tenant-ID": "acme"}); r.status != 200 {
		t.Error(r.status)
	}
	if r := e.get("/global", map[string]string{"X-Tenant-ID": "globex"}); r.status != 429 {
		t.Error(r.status)
	}
}

// TestReservedTenantCannotCollide: a path variable decoding to the shared
// bucket's name is refused (it starts with NUL, a control character), so
// no request can reach the shared bucket's counters through its tenant.
func TestReservedTenantCannotCollide(t *testing.T) {
	e := newEnv(t, mustParse(t, y(`
slas:
  - id: p
    match: {pathPattern: "/t/{org}/x"}
    noTenant: shared
    tiers: [{period: 10, threshold: 2}]
`)))
	nul := "/t/" + url.PathEscape(SharedTenant) + "/x"
	if !strings.Contains(nul, "%00") {
		t.Fatalf("escaped path %q", nul)
	}
	if checkTenant(SharedTenant) == tenantOK {
		t.Fatal("SharedTenant is a valid tenant")
	}
	for i := range 3 {
		if r := e.get(nul, nil); r.status != 400 || !strings.Contains(r.body, "control character") {
			t.Errorf("%d: %d %s", i, r.status, r.body)
		}
	}
	if e.handlerHits() != 0 {
		t.Errorf("handler hits %d", e.handlerHits())
	}
}

func TestTenantFunc(t *testing.T) {
	l := mustParse(t, y(`
slas:
  - id: search
    match: {pathPattern: "/v1/search"}
    tenant: {func: fromToken}
    tiers: [{period: 10, threshold: 1}]
`))
	_, err := New(Local(newTable(t)), l)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.SLA != "search" || fe.Field != "tenant.func" || !errors.Is(err, ErrInvalidLimits) {
		t.Fatalf("New without the func: %v", err)
	}
	if _, err := New(Local(newTable(t)), l, WithGRPCTenantFunc("fromToken", func(context.Context, string) (string, bool) { return "", false })); err == nil {
		t.Fatal("a gRPC func does not serve an HTTP SLA")
	}
	if _, err := New(Local(newTable(t)), l, WithTenantFunc("", nil)); err == nil {
		t.Fatal("nil func accepted")
	}
	e := newEnv(t, l, WithTenantFunc("fromToken", func(r *http.Request) (string, bool) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		return tok, ok
	}))
	if r := e.get("/v1/search", map[string]string{"Authorization": "Bearer acme"}); r.status != 200 {
		t.Fatal(r.status)
	}
	if r := e.get("/v1/search", map[string]string{"Authorization": "Bearer acme"}); r.status != 429 {
		t.Fatal(r.status)
	}
	if r := e.get("/v1/search", map[string]string{"Authorization": "Bearer globex"}); r.status != 200 {
		t.Fatal(r.status)
	}
	if r := e.get("/v1/search", nil); r.status != 400 {
		t.Fatal(r.status)
	}
}

// TestServeMuxPatterns: the middleware works around one handler registered
// with a Go 1.22 pattern (PathValue still works) and around a whole mux.
func TestServeMuxPatterns(t *testing.T) {
	l := mustParse(t, y(twoTiers))
	f, err := New(Local(newTable(t)), l)
	if err != nil {
		t.Fatal(err)
	}
	product := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.PathValue("orgId")+"/"+r.PathValue("id"))
	})
	mux := http.NewServeMux()
	mux.Handle("GET /v1/organizations/{orgId}/product/{id}", f.Middleware(product))
	mux.HandleFunc("GET /v1/other", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "other") })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := srv.Client()
	r := doReq(t, c, "GET", srv.URL+"/v1/organizations/acme/product/42", nil)
	if r.status != 200 || r.body != "acme/42" || r.h.Get("X-Ratelimit-Limit") != "3" {
		t.Fatalf("%d %q %v", r.status, r.body, r.h)
	}
	if r := doReq(t, c, "GET", srv.URL+"/v1/other", nil); r.status != 200 || r.body != "other" {
		t.Fatal(r.status)
	} else {
		assertNoRateLimitHeaders(t, r.h)
	}

	// The whole mux behind the middleware: its 404 and 405 answers pass
	// untouched when no SLA matches, and the SLA shares one budget.
	mux2 := http.NewServeMux()
	mux2.Handle("GET /v1/organizations/{orgId}/product/{id}", product)
	srv2 := httptest.NewServer(f.Middleware(mux2))
	defer srv2.Close()
	c2 := srv2.Client()
	r = doReq(t, c2, "GET", srv2.URL+"/v1/organizations/acme/product/7", nil)
	if r.status != 200 || r.body != "acme/7" || r.h.Get("X-Ratelimit-Remaining") != "1" {
		t.Fatalf("%d %q remaining %q (the two muxes share the filter's counters)", r.status, r.body, r.h.Get("X-Ratelimit-Remaining"))
	}
	r = doReq(t, c2, "GET", srv2.URL+"/nope", nil)
	if r.status != 404 {
		t.Fatal(r.status)
	}
	assertNoRateLimitHeaders(t, r.h)
	r = doReq(t, c2, "DELETE", srv2.URL+"/v1/organizations/acme/product/7", nil)
	if r.status != 405 {
		t.Fatal(r.status)
	}
	assertNoRateLimitHeaders(t, r.h)
}

const reloadV1 = `
slas:
  - id: get-product
    match: {methods: [GET], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 10, threshold: 3}]
`

// TestReloadKeepsCounts: a new threshold applies to the counts already
// made; a bad file keeps the limits in force; limits naming an unknown
// tenant func are not enforced.
func TestReloadKeepsCounts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	writeFile(t, path, reloadV1)
	cfg := DefaultReloaderConfig(path)
	cfg.Interval, cfg.Signals = 0, nil
	rl, _ := newTestReloader(t, cfg)
	e := newEnv(t, rl)
	u := "/v1/organizations/acme/product/1"
	for i := range 2 {
		if r := e.get(u, nil); r.status != 200 {
			t.Fatalf("request %d: %d", i, r.status)
		}
	}
	// A changed file, picked up by one step of the polling loop.
	writeFile(t, path, strings.Replace(reloadV1, "threshold: 3", "threshold: 5", 1))
	if swapped, err := rl.Poll(); !swapped || err != nil {
		t.Fatalf("Poll: swapped %v, %v", swapped, err)
	}
	// 2 counted under the old limits: 3 more under the new threshold.
	for i, want := range []int{200, 200, 200, 429} {
		r := e.get(u, nil)
		if r.status != want || r.h.Get("X-Ratelimit-Limit") != "5" {
			t.Fatalf("after reload %d: %d limit %q, want %d limit 5", i, r.status, r.h.Get("X-Ratelimit-Limit"), want)
		}
	}
	before := rl.Limits()
	writeFile(t, path, strings.Replace(reloadV1, "period: 10", "period: 0", 1))
	if err := rl.Reload(); !errors.Is(err, ErrInvalidLimits) {
		t.Fatalf("bad file: %v", err)
	}
	if rl.Limits() != before {
		t.Fatal("a bad file replaced the limits")
	}
	if r := e.get(u, nil); r.status != 429 || r.h.Get("X-Ratelimit-Limit") != "5" {
		t.Fatalf("after a bad file: %d limit %q", r.status, r.h.Get("X-Ratelimit-Limit"))
	}
	// Valid for the loader, unusable for this filter: previous limits kept.
	writeFile(t, path, reloadV1+"    tenant: {func: nope}\n")
	if err := rl.Reload(); err != nil {
		t.Fatal(err)
	}
	if r := e.get(u, nil); r.status != 429 || r.h.Get("X-Ratelimit-Limit") != "5" {
		t.Fatalf("after limits with an unknown func: %d limit %q", r.status, r.h.Get("X-Ratelimit-Limit"))
	}
	if e.f.Limits() != before {
		t.Error("filter enforces limits it cannot use")
	}
	if got := counterValue(t, e.f.m.reloads.WithLabelValues("rejected")); got != 1 {
		t.Errorf("rejected %v", got)
	}
	// Lowering the threshold below the count denies at once.
	writeFile(t, path, strings.Replace(reloadV1, "threshold: 3", "threshold: 1", 1))
	if err := rl.Reload(); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(9 * time.Second)
	if r := e.get(u, nil); r.status != 429 || r.h.Get("X-Ratelimit-Limit") != "1" || r.h.Get("Retry-After") != "1" {
		t.Fatalf("lowered: %d limit %q retry %q", r.status, r.h.Get("X-Ratelimit-Limit"), r.h.Get("Retry-After"))
	}
	e.clock.Advance(time.Second)
	if r := e.get(u, nil); r.status != 200 {
		t.Fatalf("new window: %d", r.status)
	}
}

// TestTooManyLimits: more than counters.MaxLimits tiers for one request is
// a limiter error: fail open by default, 503 when closed.
func TestTooManyLimits(t *testing.T) {
	var b strings.Builder
	b.WriteString("slas:\n")
	for i := range 3 {
		b.WriteString("  - id: s" + itoa(i) + "\n    match: {pathPattern: \"/x/{t}/" + strings.Repeat("*/", i) + "**\"}\n    tiers:\n")
		for p := 1; p <= 12; p++ {
			b.WriteString("      - {period: " + itoa(p) + ", threshold: 100}\n")
		}
	}
	l := mustParse(t, []byte(b.String()))
	e := newEnv(t, l)
	r := e.get("/x/acme/a/b/c", nil)
	if r.status != 200 || e.handlerHits() != 1 {
		t.Fatalf("fail open: %d", r.status)
	}
	assertNoRateLimitHeaders(t, r.h)
	if got := counterValue(t, e.f.m.decisions.WithLabelValues("http", "s0", "error")); got != 1 {
		t.Errorf("error metric %v", got)
	}
	e2 := newEnv(t, l, WithFailClosed(true))
	if r := e2.get("/x/acme/a/b/c", nil); r.status != 503 {
		t.Fatalf("fail closed: %d", r.status)
	}
}

func TestNewErrors(t *testing.T) {
	l := mustParse(t, y(twoTiers))
	if _, err := New(nil, l); err == nil {
		t.Error("nil limiter")
	}
	if _, err := New(Local(newTable(t)), nil); err == nil {
		t.Error("nil source")
	}
	reg := prometheus.NewRegistry()
	if _, err := New(Local(newTable(t)), l, WithRegistry(reg)); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Local(newTable(t)), l, WithRegistry(reg)); err == nil {
		t.Error("two filters on one registry")
	}
	if _, err := New(Local(newTable(t)), l, WithTenantFunc("a", func(*http.Request) (string, bool) { return "", false }),
		WithTenantFunc("a", func(*http.Request) (string, bool) { return "", false })); err == nil {
		t.Error("func registered twice")
	}
}

// TestConcurrentRequestsNeverOvershoot: many clients at once, one budget.
func TestConcurrentRequestsNeverOvershoot(t *testing.T) {
	e := newEnv(t, mustParse(t, y(`
slas:
  - id: p
    match: {pathPattern: "/p/{t}"}
    tiers: [{period: 10, threshold: 50}, {period: 1, threshold: 40}]
`)))
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				req, _ := http.NewRequest("GET", e.srv.URL+"/p/acme", nil)
				res, err := e.srv.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				mu.Lock()
				codes[res.StatusCode]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if codes[200] != 40 || codes[429] != 40 || e.handlerHits() != 40 {
		t.Fatalf("codes %v hits %d, want 40 admitted and 40 refused", codes, e.handlerHits())
	}
}

// TestHeaderValuesShareDigits checks the header values cut from one
// RateLimit string: a denial whose Retry-After is before the window's end
// reports t = Retry-After in RateLimit and the window's end in
// X-Ratelimit-Reset; an id too long for the block's buffer spills intact.
func TestHeaderValuesShareDigits(t *testing.T) {
	long := strings.Repeat("a-very-long-sla-id-", 3)
	for _, tc := range []struct {
		name, id string
		kind     outcomeKind
		d        counters.Decision
		want     [numValues - 1]string // every value but the content type
	}{
		{"allowed", "get-product", outAllowed,
			counters.Decision{Allowed: true, Limit: 200, Remaining: 57, Reset: 1500 * time.Millisecond},
			[numValues - 1]string{"200", "57", "2", "P", `"get-product";r=57;t=2`, ""}},
		{"denied, retry before the reset", "get-product", outDenied,
			counters.Decision{Limit: 200, Reset: 9 * time.Second, RetryAfter: 2100 * time.Millisecond},
			[numValues - 1]string{"200", "0", "9", "P", `"get-product";r=0;t=3`, "3"}},
		{"denied at the reset", "get-product", outDenied,
			counters.Decision{Limit: 200, Reset: 900 * time.Millisecond, RetryAfter: 900 * time.Millisecond},
			[numValues - 1]string{"200", "0", "1", "P", `"get-product";r=0;t=1`, "1"}},
		{"long id", long, outAllowed,
			counters.Decision{Allowed: true, Limit: 1000000000, Remaining: 999999999, Reset: 10 * time.Second},
			[numValues - 1]string{"1000000000", "999999999", "10", "P", `"` + long + `";r=999999999;t=10`, ""}},
	} {
		ts := &tierSet{limitStr: []string{"200"}, rlPrefix: []string{`"` + tc.id + `";r=`}, policy: "P"}
		if tc.d.Limit != 200 {
			ts.limitStr[0] = strconv.FormatInt(tc.d.Limit, 10)
		}
		o := outcome{kind: tc.kind, d: tc.d, ref: tierRef{ts: ts}, sets: []slaRef{{ts: ts}}}
		var scratch [64]byte
		got := o.values(scratch[:])
		if [numValues - 1]string(got.v[:numValues-1]) != tc.want {
			t.Errorf("%s: values %q, want %q", tc.name, got.v[:numValues-1], tc.want)
		}
	}
}
