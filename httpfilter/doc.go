// Package httpfilter turns a YAML limits file into compiled rate-limit
// definitions (SLAs) and matches requests against them; the net/http
// middleware and gRPC interceptors built on it ([Filter]) charge the
// counters.
//
// # Enforcing
//
//	f, err := httpfilter.New(node, reloader)     // a Limiter and a LimitsSource
//	http.ListenAndServe(addr, f.Middleware(mux)) // net/http
//	grpc.NewServer(grpc.UnaryInterceptor(f.UnaryServerInterceptor()),
//		grpc.StreamInterceptor(f.StreamServerInterceptor()))
//
// The [Limiter] is a *node.Node (cluster-wide counts) or [Local] over a
// *counters.Table (this process only). Every request makes one Take for all
// the tiers of all the SLAs it matches, so they are charged together or not
// at all; responses carry X-RateLimit-Limit, -Remaining and -Reset and the
// RateLimit-Policy and RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers-11; a refused request gets 429 (gRPC
// ResourceExhausted) with Retry-After. See [Filter] for the rules (cost,
// shadow SLAs, missing tenants, reloads) and [Filter.Middleware] for the
// response format.
//
// # Limits file
//
// The format extends the one of the Salesforce rate-limit filter:
//
//	slas:
//	  - id: get-product
//	    enabled: true
//	    match:
//	      methods: [GET]
//	      pathPattern: /v1/organizations/{orgId}/product/*
//	    tiers:                 # all tiers must pass
//	      - period: 10         # seconds
//	        threshold: 1000
//	      - period: 1
//	        threshold: 200
//
// testdata/limits.example.yaml documents every field and its default:
// the tenant source (a path variable, a header, gRPC metadata or a Go func
// registered by name), per-tenant overrides (which replace the SLA's tiers
// for the listed tenants), the algorithm of each tier (fixed or sliding),
// shadow mode, the cost of a request, what to do without a tenant, and gRPC
// method matching.
//
// [Parse] and [LoadFile] are strict: unknown fields, wrong types, absurd
// numbers, malformed patterns and inconsistent definitions are all reported,
// each as a [FieldError] naming the file, line, SLA id and field, joined in
// file order (the first 20, then a count of the others). A file either
// loads completely or not at all; one larger than [MaxFileSize] is refused.
//
// # Matching
//
// A path pattern ([Pattern]) has literal segments, "*" (one segment),
// "{name}" (one segment, captured) and a final "**" (the rest). gRPC SLAs
// match full method names: "/pkg.Service/Method", "/pkg.Service/*" or "*".
// [Limits.MatchHTTP] and [Limits.MatchGRPC] return every enabled SLA that
// applies to a request, without allocating when given a slice with room.
//
// Paths and methods are matched as net/http's ServeMux routes them, so
// that the filter charges what the mux serves: the escaped path, segment
// by segment, each segment decoded on its own ("%2F" stays inside its
// segment, and a {name} captures what r.PathValue returns); HEAD as GET
// unless an SLA that names HEAD matches; a path the mux would redirect to
// its clean form is never charged (see [Filter.Middleware]).
//
// Counter keys are (tenant, [SLA].Endpoint, [SLA].KeyMethod, period): the
// pattern as written, never the concrete path, so all of
// /v1/organizations/acme/product/1, /2, ... share acme's budget, and an SLA
// left unchanged by a reload keeps its counters.
//
// # Reloading
//
// [Reloader] holds the current *Limits and replaces it atomically when the
// file changes (polled) or on SIGHUP; a file that does not load is logged
// and the previous limits stay in force.
package httpfilter
