package httpfilter

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Canonical header keys, set directly in the header map (no
// canonicalisation per request). HTTP header names are case-insensitive:
// "Ratelimit-Policy" is the draft's RateLimit-Policy.
const (
	hdrLimit       = "X-Ratelimit-Limit"
	hdrRemaining   = "X-Ratelimit-Remaining"
	hdrReset       = "X-Ratelimit-Reset"
	hdrPolicy      = "Ratelimit-Policy"
	hdrRateLimit   = "Ratelimit"
	hdrRetryAfter  = "Retry-After"
	hdrContentType = "Content-Type"
)

// ProblemQuotaExceeded is the problem type of a 429 response body, from
// draft-ietf-httpapi-ratelimit-headers-11 section 5.1.
const ProblemQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

const problemJSON = "application/problem+json"

// Middleware returns next behind the filter: func(http.Handler)
// http.Handler, usable with any router (wrap the whole ServeMux, or one
// handler registered on it).
//
// A request matching no SLA is passed to next untouched. A request that
// matches is charged (see [Filter]) and gets, allowed or denied, the
// headers of the tier closest to its limit (the one with the least
// remaining, or the denying one with the longest wait):
//
//	X-Ratelimit-Limit: 200          the tier's threshold
//	X-Ratelimit-Remaining: 57       what is left of it in this window
//	X-Ratelimit-Reset: 1            whole seconds until the window ends, rounded up
//	RateLimit-Policy: "get-product";q=1000;w=10, "get-product-1s";q=200;w=1
//	RateLimit: "get-product-1s";r=57;t=1
//
// RateLimit-Policy and RateLimit follow
// draft-ietf-httpapi-ratelimit-headers-11: one policy item per tier of
// every reporting SLA; the first tier of an SLA is named by the SLA id,
// the others by the id and the period ("get-product-1s", "-500ms", "-1m",
// "-2h"); w is left out for periods that are not whole seconds. A tenant
// with an override sees its own quotas.
//
// Over the limit the response is 429 with Retry-After (whole seconds,
// rounded up, at least 1) and an application/problem+json body:
//
//	{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",
//	 "title":"Too Many Requests","status":429,
//	 "detail":"quota of 200 per 1s exhausted; retry after 1 s",
//	 "sla":"get-product","tier":{"period_s":1,"threshold":200},
//	 "retry_after_s":1,"violated-policies":["get-product-1s"]}
//
// Without a tenant under noTenant: reject, or with a tenant that cannot be
// counted (see [MaxTenantLen]), the response is 400 with a problem+json
// body naming the SLA, the tenant source and, for a bad tenant, what is
// wrong with it (never the value itself):
//
//	{"type":"about:blank","title":"Bad Request","status":400,
//	 "detail":"invalid tenant id in path variable {orgId}: not valid UTF-8",
//	 "sla":"put-product"}
//
// # Which requests an SLA sees
//
// The filter decides on the path and the method that net/http's ServeMux
// (Go 1.22 and later) routes, whether it wraps the whole mux or one handler
// registered on it, so that what it charges is what the mux serves:
//
//   - The path is matched escaped, segment by segment, each segment decoded
//     on its own (see [Pattern]): "/v1/organizations/beta%2Fx/product/1"
//     charges tenant "beta/x", the r.PathValue("orgId") its handler gets,
//     and "/v1/organizations/acme/product/1%2F2" is acme's.
//   - HEAD is charged as GET (to the SLAs that name GET, in GET's
//     counters) unless an SLA that names HEAD matches the request: ServeMux
//     serves HEAD with the GET handler unless a HEAD pattern matches.
//   - A path the mux would redirect to its clean form ("//", a "." or ".."
//     segment; the mux keeps a trailing slash, and "%2E" is not a dot) is
//     never served by a mux handler, so it is never charged. When that path,
//     as it is or cleaned, matches an SLA, the filter answers with the mux's
//     own redirect (307 to the clean path; an empty ServeMux writes it)
//     without calling next, so that a router that would serve such a path
//     cannot be used to dodge the SLA. CONNECT paths are matched as they
//     are, as the mux does; but one with "//" that matches an SLA is
//     refused with 400, as the mux would give its handler shifted path
//     values (the tenant of another segment).
//   - A trailing slash is part of the path: "/v1/organizations/acme/product/1/"
//     does not match ".../product/*" (nor the mux pattern
//     ".../product/{id}"). A "**" pattern matches with and without it.
//
// Behind a router with other rules (one that ignores trailing slashes or
// case, or decodes "%2F" before splitting), wrap the handlers the router
// picks rather than the router, after it has rewritten the path.
func (f *Filter) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.serveHTTP(w, r, next)
	})
}

func (f *Filter) serveHTTP(w http.ResponseWriter, r *http.Request, next http.Handler) {
	c := f.current()
	if !c.hasHTTP {
		next.ServeHTTP(w, r)
		return
	}
	s := f.pool.Get().(*scratch)
	// r.URL.Path is decoded; when RawPath is empty, the escaped path is
	// its default encoding, whose segments decode to Path's: split Path.
	// Otherwise the escaped form matters ("%2F" in a segment).
	p, escaped := r.URL.Path, false
	if r.URL.RawPath != "" {
		p, escaped = r.URL.EscapedPath(), true
	}
	if !s.path.split(p, escaped) {
		f.pool.Put(s)
		next.ServeHTTP(w, r) // "*" (OPTIONS) or an authority (CONNECT): no pattern matches
		return
	}
	if !s.path.clean && r.Method != "CONNECT" && f.redirectUnclean(w, r, c, s) {
		f.pool.Put(s)
		return
	}
	ms := c.lim.matchSplit(r.Method, &s.path, s.matches[:0])
	if len(ms) == 0 {
		f.pool.Put(s)
		next.ServeHTTP(w, r)
		return
	}
	if s.path.empty { // CONNECT with "//": see reqpath.go
		id := ms[0].SLA.ID
		f.pool.Put(s)
		writeProblem(w, http.StatusBadRequest, `a CONNECT path with an empty segment ("//") cannot be matched reliably`, id)
		return
	}
	tenants := s.tenants[:0]
	for i := range ms {
		t, st := c.slas[ms[i].SLA.index].httpTenant(r, &ms[i])
		tenants = append(tenants, tenantResult{t, st})
	}
	o := f.decide(r.Context(), c, ms, tenants, s)
	switch o.kind {
	case outAllowed:
		blk := o.values(s.buf[:])
		setRateLimitHeaders(w.Header(), blk)
		f.pool.Put(s)
		next.ServeHTTP(w, r)
	case outDenied:
		blk := o.values(s.buf[:])
		h := w.Header()
		setRateLimitHeaders(h, blk)
		h[hdrRetryAfter] = blk.v[vRetryAfter : vRetryAfter+1 : vRetryAfter+1]
		blk.v[vContentType] = problemJSON
		h[hdrContentType] = blk.v[vContentType : vContentType+1 : vContentType+1]
		body := o.problem429(s.buf[:0])
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write(body)
		f.pool.Put(s)
	case outNoTenant:
		f.pool.Put(s)
		writeProblem(w, http.StatusBadRequest, "no valid tenant for this request: "+o.sla.tenantSourceText(), o.sla.sla.ID)
	case outBadTenant:
		f.pool.Put(s)
		writeProblem(w, http.StatusBadRequest, "invalid tenant id in "+o.sla.tenantSourceText()+": "+o.tst.reason(), o.sla.sla.ID)
	case outError:
		f.pool.Put(s)
		if f.failClosed {
			writeProblem(w, http.StatusServiceUnavailable, "the rate limiter failed", "")
			return
		}
		next.ServeHTTP(w, r)
	default:
		f.pool.Put(s)
		next.ServeHTTP(w, r)
	}
}

// setRateLimitHeaders sets the five rate-limit headers. Each header gets a
// one-element slice of blk.v with its capacity capped, so that an Add by
// the handler copies instead of writing into the block.
func setRateLimitHeaders(h http.Header, blk *hdrBlock) {
	v := blk.v[:]
	h[hdrLimit] = v[vLimit : vLimit+1 : vLimit+1]
	h[hdrRemaining] = v[vRemaining : vRemaining+1 : vRemaining+1]
	h[hdrReset] = v[vReset : vReset+1 : vReset+1]
	h[hdrPolicy] = v[vPolicy : vPolicy+1 : vPolicy+1]
	h[hdrRateLimit] = v[vRateLimit : vRateLimit+1 : vRateLimit+1]
}

// redirectUnclean handles a request whose path ServeMux would redirect to
// its clean form (s.path, split and not clean): if that path, as it is or
// cleaned, matches an SLA, it answers with the mux's redirect and reports
// true. Otherwise s.path is left split from a path that matches no SLA,
// and the request goes on.
func (f *Filter) redirectUnclean(w http.ResponseWriter, r *http.Request, c *compiled, s *scratch) bool {
	ep := r.URL.EscapedPath()
	cleaned := muxCleanPath(ep)
	if cleaned == ep {
		s.path.clean = true // never happens: split and cleanPath agree (FuzzServeMux)
		return false
	}
	if len(c.lim.matchSplit(r.Method, &s.path, s.matches[:0])) == 0 {
		if !s.path.split(cleaned, true) || len(c.lim.matchSplit(r.Method, &s.path, s.matches[:0])) == 0 {
			return false
		}
	}
	// An empty ServeMux redirects every path that is not clean, as the
	// application's mux would: same status, same Location.
	f.redirect.ServeHTTP(w, r)
	return true
}

// httpTenant resolves the tenant of an HTTP request for this SLA.
func (cs *compiledSLA) httpTenant(r *http.Request, m *Match) (string, tenantStatus) {
	var t string
	switch cs.sla.Tenant.Kind {
	case TenantNone:
		return SharedTenant, tenantOK
	case TenantPath:
		t, _ = m.PathTenant()
	case TenantHeader:
		if v := r.Header[cs.sla.Tenant.Key]; len(v) > 0 {
			t = v[0]
		}
	case TenantFunc:
		var ok bool
		if t, ok = cs.httpFunc(r); !ok {
			return "", tenantMissing
		}
	default:
		return "", tenantMissing
	}
	return t, checkTenant(t)
}

// tenantSourceText describes where the SLA takes its tenant from, for
// messages.
func (cs *compiledSLA) tenantSourceText() string {
	t := &cs.sla.Tenant
	switch t.Kind {
	case TenantPath:
		return "path variable {" + t.Name + "}"
	case TenantHeader:
		if cs.sla.IsGRPC() {
			return "metadata " + t.Key
		}
		return "header " + t.Key
	case TenantMetadata:
		return "metadata " + t.Key
	case TenantFunc:
		return "func " + t.Name
	}
	return "none"
}

// problem429 appends the body of a 429 response to b.
func (o *outcome) problem429(b []byte) []byte {
	ts, i := o.ref.ts, o.ref.i
	period := ts.periods[i]
	retry := max(ceilSeconds(o.d.RetryAfter), 1)
	b = append(b, `{"type":"`+ProblemQuotaExceeded+`","title":"Too Many Requests","status":429,"detail":"quota of `...)
	b = append(b, ts.limitStr[i]...)
	b = append(b, " per "...)
	b = append(b, ts.pnames[i]...)
	b = append(b, " exhausted; retry after "...)
	b = strconv.AppendInt(b, retry, 10)
	b = append(b, ` s","sla":"`...)
	b = append(b, o.ref.cs.sla.ID...) // ids are [A-Za-z0-9._-]: no escaping needed
	b = append(b, `","tier":{"period_s":`...)
	b = strconv.AppendFloat(b, period.Seconds(), 'f', -1, 64)
	b = append(b, `,"threshold":`...)
	b = append(b, ts.limitStr[i]...)
	b = append(b, `},"retry_after_s":`...)
	b = strconv.AppendInt(b, retry, 10)
	b = append(b, `,"violated-policies":["`...)
	b = append(b, ts.names[i]...)
	b = append(b, `"]}`...)
	return b
}

// problem is an RFC 9457 problem details body.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	SLA    string `json:"sla,omitempty"`
}

// writeProblem writes a problem+json response; for the rare paths (400,
// 503), so it does not try to save allocations.
func writeProblem(w http.ResponseWriter, status int, detail, sla string) {
	body, _ := json.Marshal(problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, SLA: sla})
	w.Header().Set(hdrContentType, problemJSON)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
