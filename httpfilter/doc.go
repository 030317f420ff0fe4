// Package httpfilter turns a YAML limits file into compiled rate-limit
// definitions (SLAs) and matches requests against them; the net/http
// middleware and gRPC interceptor built on it charge the counters.
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
// file order. A file either loads completely or not at all.
//
// # Matching
//
// A path pattern ([Pattern]) has literal segments, "*" (one segment),
// "{name}" (one segment, captured) and a final "**" (the rest). gRPC SLAs
// match full method names: "/pkg.Service/Method", "/pkg.Service/*" or "*".
// [Limits.MatchHTTP] and [Limits.MatchGRPC] return every enabled SLA that
// applies to a request, without allocating when given a slice with room.
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
