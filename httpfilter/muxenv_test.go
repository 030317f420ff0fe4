package httpfilter

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// recLimiter is a Local limiter that records what it is asked: every Take,
// and per "tenant method" (the tenant and the key method of each limit)
// the Takes it admitted, which are what it charged. The SLAs of these
// tests have one tier each, so one limit is one SLA.
type recLimiter struct {
	local   *LocalLimiter
	mu      sync.Mutex
	takes   int
	charged map[string]int
	last    []counters.Limit // the limits of the last Take
}

func newRecLimiter(t testing.TB) *recLimiter {
	return &recLimiter{local: Local(newTable(t)), charged: map[string]int{}}
}

func (l *recLimiter) Take(ctx context.Context, limits []counters.Limit, cost int64) (counters.Decision, error) {
	return l.TakeAt(time.Now(), limits, cost)
}

func (l *recLimiter) TakeAt(now time.Time, limits []counters.Limit, cost int64) (counters.Decision, error) {
	d, err := l.local.TakeAt(now, limits, cost)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.takes++
	l.last = slices.Clone(limits)
	if err == nil && d.Allowed {
		for _, lim := range limits {
			l.charged[lim.Tenant+" "+lim.Method]++
		}
	}
	return d, err
}

func (l *recLimiter) snapshot() (takes int, charged map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takes, maps(l.charged)
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// muxEnv is the filter in front of a real http.ServeMux, served by a real
// HTTP server on 127.0.0.1. Every handler records the tenant it serves,
// r.PathValue("orgId"), and the method it sees: served["tenant METHOD"].
type muxEnv struct {
	t      *testing.T
	lim    *recLimiter
	f      *Filter
	srv    *httptest.Server
	mu     sync.Mutex
	served map[string]int
}

// newMuxEnv registers one recording handler on mux for each of patterns
// (ServeMux patterns) and puts the filter in front of the whole mux.
func newMuxEnv(t *testing.T, limits string, patterns ...string) *muxEnv {
	t.Helper()
	e := &muxEnv{t: t, lim: newRecLimiter(t), served: map[string]int{}}
	clk := newFakeClock() // never advanced: every request falls in one window
	f, err := New(e.lim, mustParse(t, y(limits)), WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	e.f = f
	mux := http.NewServeMux()
	for _, p := range patterns {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			e.mu.Lock()
			e.served[r.PathValue("orgId")+" "+r.Method]++
			e.mu.Unlock()
			_, _ = io.WriteString(w, "served "+r.PathValue("orgId"))
		})
	}
	e.srv = httptest.NewServer(f.Middleware(mux))
	t.Cleanup(e.srv.Close)
	return e
}

// do sends method with the request target exactly as written (escapes
// and dot segments included), following redirects; it returns the final
// status.
func (e *muxEnv) do(method, target string) int {
	e.t.Helper()
	req := &http.Request{Method: method, Header: http.Header{},
		URL: &url.URL{Scheme: "http", Host: strings.TrimPrefix(e.srv.URL, "http://"), Opaque: target}}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

func (e *muxEnv) servedSnapshot() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps(e.served)
}

// perTenant sums "tenant METHOD" counts per tenant.
func perTenant(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k[:strings.LastIndexByte(k, ' ')]] += v
	}
	return out
}

const productLimits = `
slas:
  - id: get-product
    match: {methods: [GET], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 10, threshold: 1000}]
  - id: put-product
    match: {methods: [PUT], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 10, threshold: 100}]
`

var productPatterns = []string{
	"GET /v1/organizations/{orgId}/product/{id}",
	"PUT /v1/organizations/{orgId}/product/{id}",
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
