package httpfilter

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// stubRW is a reusable ResponseWriter, so that benchmarks measure the
// middleware, not httptest.ResponseRecorder.
type stubRW struct {
	h      http.Header
	status int
	n      int
}

func (w *stubRW) Header() http.Header         { return w.h }
func (w *stubRW) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }
func (w *stubRW) WriteHeader(s int)           { w.status = s }

// benchSLA is one SLA with two tiers, high enough that every request is
// admitted (the allowed path), plus one that denies everything.
const benchSLA = `
slas:
  - id: get-product
    match: {methods: [GET], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers:
      - {period: 10, threshold: 1000000000}
      - {period: 1, threshold: 100000000}
  - id: put-product
    match: {methods: [PUT], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers:
      - {period: 10, threshold: 0}
      - {period: 1, threshold: 0}
`

type benchCase struct {
	name string
	h    http.Handler
	req  *http.Request
}

func benchCases(tb testing.TB) []benchCase {
	f, err := New(Local(newTable(tb)), mustParseTB(tb, y(benchSLA)))
	if err != nil {
		tb.Fatal(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	get := httptest.NewRequest("GET", "/v1/organizations/acme/product/42", nil)
	put := httptest.NewRequest("PUT", "/v1/organizations/acme/product/42", nil)
	other := httptest.NewRequest("GET", "/v1/organizations/acme/orders/42", nil)
	mw := f.Middleware(handler)
	return []benchCase{
		{"bare", handler, get},             // the handler alone
		{"allowed", mw, get},               // one SLA, two tiers, admitted: five headers
		{"denied", mw, put},                // 429 with headers and problem+json body
		{"unmatched", mw, other},           // no SLA matches
		{"bare-unmatched", handler, other}, // baseline for unmatched
	}
}

func mustParseTB(tb testing.TB, data []byte) *Limits {
	tb.Helper()
	l, err := Parse("bench.yaml", data)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// BenchmarkMiddleware compares the same handler with and without the
// middleware, in one run:
//
//	go test -run '^$' -bench BenchmarkMiddleware -benchmem -count 6 ./httpfilter/
func BenchmarkMiddleware(b *testing.B) {
	for _, c := range benchCases(b) {
		b.Run(c.name, func(b *testing.B) {
			w := &stubRW{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				c.h.ServeHTTP(w, c.req)
			}
		})
	}
}

// BenchmarkMiddlewareParallel is the allowed path from every P at once,
// one tenant: the counters of one series are contended.
func BenchmarkMiddlewareParallel(b *testing.B) {
	for _, c := range benchCases(b)[:2] {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &stubRW{h: http.Header{}}
				for pb.Next() {
					c.h.ServeHTTP(w, c.req)
				}
			})
		})
	}
}

// TestMiddlewareAllocs bounds what the middleware adds to a request: a
// budget, not a timing.
func TestMiddlewareAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	cs := benchCases(t)
	allocs := map[string]float64{}
	for _, c := range cs {
		w := &stubRW{h: http.Header{}}
		allocs[c.name] = testing.AllocsPerRun(200, func() { c.h.ServeHTTP(w, c.req) })
	}
	// One block holds the header slices and the digits of the numbers.
	if added := allocs["allowed"] - allocs["bare"]; added > 1 {
		t.Errorf("allowed path adds %v allocations, want <= 1", added)
	}
	if added := allocs["denied"] - allocs["bare"]; added > 1 {
		t.Errorf("denied path adds %v allocations, want <= 1", added)
	}
	if added := allocs["unmatched"] - allocs["bare-unmatched"]; added > 0 {
		t.Errorf("unmatched path adds %v allocations, want 0", added)
	}
}

// BenchmarkMiddlewareCold is BenchmarkMiddleware as a busy server sees it:
// before every request the caches are filled with other data (1 MiB, one
// write per cache line, as a server's network stack and other connections
// would), and every response gets a fresh header map. What the middleware
// adds is allowed minus bare; the walk itself costs the same in both.
//
//	go test -run '^$' -bench BenchmarkMiddlewareCold -benchmem -count 10 ./httpfilter/
func BenchmarkMiddlewareCold(b *testing.B) {
	pollution := make([]byte, 1<<20)
	for _, c := range benchCases(b)[:2] {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for i := 0; i < len(pollution); i += 64 {
					pollution[i]++
				}
				c.h.ServeHTTP(&stubRW{h: make(http.Header)}, c.req)
			}
		})
	}
}
