package httpfilter

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestServeMuxEncodedSlash replays issue 18's reports against a real
// ServeMux: an encoded slash in the wildcard segment or in the tenant
// segment no longer skips the limiter, and the count charged to each
// tenant is what the handler served to it.
func TestServeMuxEncodedSlash(t *testing.T) {
	e := newMuxEnv(t, productLimits, productPatterns...)
	for i := range 100 {
		if st := e.do("PUT", "/v1/organizations/acme/product/1"); st != 200 {
			t.Fatalf("acme PUT %d: %d", i, st)
		}
	}
	// acme is over its PUT limit: "1%2F2" is still acme's product.
	for i := range 50 {
		if st := e.do("PUT", "/v1/organizations/acme/product/1%2F2"); st != 429 {
			t.Fatalf("acme PUT 1%%2F2 %d: %d, want 429", i, st)
		}
	}
	// "beta%2Fx" is tenant "beta/x", charged like any other.
	codes := map[int]int{}
	for range 150 {
		codes[e.do("PUT", "/v1/organizations/beta%2Fx/product/1")]++
	}
	if codes[200] != 100 || codes[429] != 50 {
		t.Errorf("beta/x: %v, want 100 × 200 and 50 × 429", codes)
	}
	served := e.servedSnapshot()
	_, charged := e.lim.snapshot()
	want := map[string]int{"acme PUT": 100, "beta/x PUT": 100}
	if !mapsEqual(served, want) || !mapsEqual(charged, want) {
		t.Errorf("served %v, charged %v, want both %v", served, charged, want)
	}
}

// TestServeMuxHEADChargedAsGET: ServeMux serves HEAD with the GET handler,
// so HEAD draws on the GET SLA's budget (and its counters).
func TestServeMuxHEADChargedAsGET(t *testing.T) {
	e := newMuxEnv(t, productLimits, productPatterns...)
	codes := map[int]int{}
	for range 1100 {
		codes[e.do("HEAD", "/v1/organizations/acme/product/1")]++
	}
	if codes[200] != 1000 || codes[429] != 100 {
		t.Errorf("HEAD: %v, want 1000 × 200 and 100 × 429", codes)
	}
	if st := e.do("GET", "/v1/organizations/acme/product/1"); st != 429 {
		t.Errorf("GET after 1000 HEAD: %d, want 429 (one budget)", st)
	}
	served := e.servedSnapshot()
	_, charged := e.lim.snapshot()
	if !mapsEqual(served, map[string]int{"acme HEAD": 1000}) || !mapsEqual(charged, map[string]int{"acme GET": 1000}) {
		t.Errorf("served %v, charged %v", served, charged)
	}
}

// TestServeMuxHEADHandler: when an SLA names HEAD (and the mux has a HEAD
// handler), HEAD is charged to it and not to the GET SLA.
func TestServeMuxHEADHandler(t *testing.T) {
	e := newMuxEnv(t, `
slas:
  - id: get-product
    match: {methods: [GET], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 10, threshold: 5}]
  - id: head-product
    match: {methods: [HEAD], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 10, threshold: 3}]
`, "GET /v1/organizations/{orgId}/product/{id}", "HEAD /v1/organizations/{orgId}/product/{id}")
	for i, want := range []int{200, 200, 200, 429} {
		if st := e.do("HEAD", "/v1/organizations/acme/product/1"); st != want {
			t.Errorf("HEAD %d: %d, want %d", i, st, want)
		}
	}
	for i, want := range []int{200, 200, 200, 200, 200, 429} {
		if st := e.do("GET", "/v1/organizations/acme/product/1"); st != want {
			t.Errorf("GET %d: %d, want %d", i, st, want)
		}
	}
	want := map[string]int{"acme HEAD": 3, "acme GET": 5}
	served := e.servedSnapshot()
	_, charged := e.lim.snapshot()
	if !mapsEqual(served, want) || !mapsEqual(charged, want) {
		t.Errorf("served %v, charged %v, want both %v", served, charged, want)
	}
}

// TestServeMuxEveryPosition puts an encoded slash (and other escapes, dot
// segments, a trailing slash) in every segment of the pattern, for GET,
// HEAD and PUT, and checks that each tenant was charged exactly what the
// handler served it.
func TestServeMuxEveryPosition(t *testing.T) {
	e := newMuxEnv(t, productLimits, productPatterns...)
	cases := []struct {
		path   string // {T}: the tenant
		status int    // after redirects
		tenant string // the tenant the handler serves; {T}: the tenant
	}{
		{"/v1/organizations/{T}/product/1", 200, "{T}"},
		{"/v1/organizations/{T}/product/1%2F2", 200, "{T}"},       // wildcard segment
		{"/v1/organizations/{T}%2Fx/product/1", 200, "{T}/x"},     // tenant segment
		{"/v1/organizations/%2F{T}/product/1", 200, "/{T}"},       // tenant segment, leading
		{"/v1%2Forganizations/{T}/product/1", 404, ""},            // literal segment 1
		{"/v1/organizations%2F{T}/product/1", 404, ""},            // literal segment 2 into the tenant's
		{"/v1/organizations/{T}/product%2F1", 404, ""},            // literal segment 4 into the wildcard's
		{"/v1/organizations/{T}/product/%2F", 404, ""},            // a lone %2F: no wildcard takes it
		{"/v1/organizations/%2F/product/1", 404, ""},              // ... not even the tenant's
		{"/v1/%6Frganizations/{T}/product/%31", 200, "{T}"},       // escaped letters in literals
		{"/v1/organizations/{T}/product/1/", 404, ""},             // trailing slash
		{"/v1/organizations/x/../{T}/product/1", 200, "{T}"},      // redirected, then served
		{"/v1//organizations/{T}/./product/1", 200, "{T}"},        // redirected, then served
		{"/v1/organizations/{T}/product/1%2F..%2F..", 200, "{T}"}, // escaped dots are not dot segments
		{"/v1/organizations/%2e%2e/product/1", 200, ".."},         // ... and ".." is a tenant
	}
	want := map[string]int{}
	for _, method := range []string{"GET", "HEAD", "PUT"} {
		for i, c := range cases {
			tenant := fmt.Sprintf("%s%d", strings.ToLower(method), i)
			path := strings.ReplaceAll(c.path, "{T}", tenant)
			if st := e.do(method, path); st != c.status {
				t.Errorf("%s %s: %d, want %d", method, path, st, c.status)
			}
			if c.tenant != "" {
				want[strings.ReplaceAll(c.tenant, "{T}", tenant)+" "+method]++
			}
		}
	}
	served := e.servedSnapshot()
	_, charged := e.lim.snapshot()
	if !mapsEqual(served, want) {
		t.Errorf("served %v\nwant %v", served, want)
	}
	if s, c := perTenant(served), perTenant(charged); !mapsEqual(s, c) {
		t.Errorf("served per tenant %v\ncharged per tenant %v", s, c)
	}
	for k := range charged {
		if strings.HasSuffix(k, " HEAD") {
			t.Errorf("%q: HEAD is charged as GET", k)
		}
	}
}

// fuzzMethods are the request methods FuzzServeMux sends; the first four
// can be given to its SLAs.
var fuzzMethods = [...]string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "PROPFIND"}

// FuzzServeMux holds the filter's matching against ServeMux's routing. For
// a pattern, one or two SLAs on it (methods split between them by sla, two
// bits per method: 1 for SLA a, 2 for b; none for a means every method),
// the same pattern registered on a real ServeMux for the same methods
// with a handler per SLA, and a request (method, request target) parsed as
// a server parses it:
//
//   - if the mux alone routes the request to an SLA's handler, with tenant
//     T (the path variable, r.PathValue), then behind the filter that SLA
//     and no other is charged, once, for T (SharedTenant for an SLA
//     without tenant, or an empty T: noTenant is shared), and the same
//     handler serves it; unless T cannot be counted, and then the filter
//     answers 400 and charges nothing;
//   - otherwise nothing is charged and the response is the mux's (status
//     and Location: a redirect of an unclean path is the mux's own);
//   - but a CONNECT request with "//" that the mux routes to an SLA's
//     handler is refused with 400: the mux would give the handler shifted
//     path values.
func FuzzServeMux(f *testing.F) {
	const product = "/v1/organizations/{orgId}/product/*"
	for _, s := range []struct {
		pattern string
		sla     uint8 // GET, HEAD, POST, PUT: two bits each
		method  uint8
		target  string
	}{
		{product, 1 | 2<<6, 3, "/v1/organizations/beta%2Fx/product/1"},
		{product, 1 | 2<<6, 0, "/v1/organizations/acme/product/1%2F2"},
		{product, 1, 1, "/v1/organizations/acme/product/1"},
		{product, 1 | 2<<2, 1, "/v1/organizations/acme/product/1"},
		{product, 1 | 1<<2, 1, "/v1/organizations/%ff%fe/product/1"},
		{product, 0, 5, "/v1/organizations//product/1"},
		{product, 0, 0, "/v1/organizations/x/../acme/product/1?q=1"},
		{product, 0, 7, "/v1/organizations/%2e%2e/product/%2F"},
		{product, 1, 0, "/v1/%6Frganizations/acme/product/1/"},
		{"/", 0, 0, "/%2F"},
		{"/a/**", 0, 0, "/a"},
		{"/a/**", 1, 0, "/a/%2F/x"},
		{"/a/**", 2 << 2, 1, "/a//b"},
		{"/{t}/**", 0, 5, "//x"},
		{"/caf\u00e9/{t}", 0, 0, "/caf%C3%A9/%7Fx"},
		{"/**", 0, 6, "*"},
	} {
		f.Add(s.pattern, s.sla, s.method, s.target)
	}
	f.Fuzz(func(t *testing.T, pattern string, sla, method uint8, target string) {
		p, err := compilePattern(pattern)
		if err != nil {
			return
		}
		// The SLAs, and the mux patterns for their handlers.
		var methods [2][]string
		for i, m := range fuzzMethods[:4] {
			if who := sla >> (2 * i) & 3; who == 1 || who == 2 {
				methods[who-1] = append(methods[who-1], m)
			}
		}
		if methods[0] == nil {
			methods = [2][]string{nil, nil} // a: every method
		}
		tenantVar := ""
		if len(p.names) > 0 {
			tenantVar = p.names[0]
		}
		quoted, _ := json.Marshal(pattern)
		// Quoting replaces each byte of invalid UTF-8 with U+FFFD (three
		// bytes): the pattern the YAML holds may pass the length limit.
		var quotedBack string
		if err := json.Unmarshal(quoted, &quotedBack); err != nil {
			t.Fatal(err)
		}
		if _, err := compilePattern(quotedBack); err != nil {
			return
		}
		var src strings.Builder
		src.WriteString("slas:\n")
		ids := []string{"a", "b"}
		for i, ms := range methods {
			if i == 1 && ms == nil {
				break
			}
			fmt.Fprintf(&src, "  - id: %s\n    match: {pathPattern: %s", ids[i], quoted)
			if ms != nil {
				fmt.Fprintf(&src, ", methods: [%s]", strings.Join(ms, ", "))
			}
			src.WriteString("}\n    noTenant: shared\n    tiers: [{period: 10, threshold: 1000000}]\n")
			if tenantVar == "" {
				src.WriteString("    tenant: none\n")
			} else {
				fmt.Fprintf(&src, "    tenant: {fromPath: %s}\n", tenantVar)
			}
		}
		limits, err := Parse("fuzz.yaml", []byte(src.String()))
		if err != nil {
			if strings.Contains(err.Error(), "invalid YAML") {
				return // a character YAML refuses even quoted (C1 controls, U+FFFE)
			}
			t.Fatalf("%v\n%s", err, src.String())
		}
		p = limits.SLAs[0].Pattern // as the YAML round trip left it
		muxPats, ok := muxPatterns(p)
		if !ok {
			return
		}
		type seen struct{ sla, tenant, method string }
		var got *seen
		mux := http.NewServeMux()
		for i, ms := range methods {
			if i == 1 && ms == nil {
				break
			}
			h := func(w http.ResponseWriter, r *http.Request) {
				got = &seen{sla: ids[i], method: r.Method}
				defer func() {
					if recover() != nil { // CONNECT with "//": see reqpath.go
						got.tenant = "(PathValue panicked)"
					}
				}()
				got.tenant = r.PathValue(tenantVar)
			}
			prefixes := []string{""}
			if ms != nil {
				prefixes = nil
				for _, m := range ms {
					prefixes = append(prefixes, m+" ")
				}
			}
			for _, pre := range prefixes {
				for _, mp := range muxPats {
					if err := register(mux, pre+mp, h); err != nil {
						t.Fatalf("%s: %v", pre+mp, err)
					}
				}
			}
		}
		raw := fuzzMethods[int(method)%len(fuzzMethods)] + " " + target + " HTTP/1.1\r\nHost: example.com\r\n\r\n"
		newReq := func() *http.Request {
			r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
			if err != nil {
				return nil
			}
			return r
		}
		req := newReq()
		if req == nil {
			return
		}
		alone := httptest.NewRecorder()
		mux.ServeHTTP(alone, req)
		want := got

		lim := newRecLimiter(t)
		flt, err := New(lim, limits)
		if err != nil {
			t.Fatal(err)
		}
		got = nil
		behind := httptest.NewRecorder()
		flt.Middleware(mux).ServeHTTP(behind, newReq())
		takes, _ := lim.snapshot()
		where := fmt.Sprintf("SLAs %v on %q, mux %q, request %q", methods, p.String(), muxPats, strings.SplitN(raw, "\r", 2)[0])

		if want == nil {
			if takes != 0 || got != nil || behind.Code != alone.Code || behind.Header().Get("Location") != alone.Header().Get("Location") {
				t.Fatalf("%s: the mux serves no SLA's handler (%d %q), but behind the filter: %d Takes, handler %v, %d %q",
					where, alone.Code, alone.Header().Get("Location"), takes, got, behind.Code, behind.Header().Get("Location"))
			}
			return
		}
		if req.Method == "CONNECT" && strings.Contains(req.URL.EscapedPath(), "//") {
			// The mux's path values are shifted: the filter refuses.
			if behind.Code != 400 || takes != 0 || got != nil {
				t.Fatalf("%s: CONNECT with \"//\", but the filter answered %d with %d Takes, handler %v", where, behind.Code, takes, got)
			}
			return
		}
		tenant := want.tenant
		switch {
		case tenantVar == "" || tenant == "":
			tenant = SharedTenant
		case checkTenant(tenant) != tenantOK:
			if behind.Code != 400 || takes != 0 || got != nil {
				t.Fatalf("%s: tenant %q cannot be counted, but the filter answered %d with %d Takes, handler %v", where, tenant, behind.Code, takes, got)
			}
			return
		}
		s := limits.SLA(want.sla)
		if takes != 1 || len(lim.last) != 1 || lim.last[0].Tenant != tenant || lim.last[0].Method != s.KeyMethod ||
			got == nil || *got != *want || behind.Code != alone.Code {
			t.Fatalf("%s: the mux serves sla %s for tenant %q; behind the filter: %d Takes %+v, handler %v, %d",
				where, want.sla, tenant, takes, lim.last, got, behind.Code)
		}
	})
}

// muxPatterns returns the ServeMux patterns that together match what p
// matches: "/" is "/{$}", "*" a wildcard named after its position, and a
// final "**" both the prefix and the prefix with "/{rest...}". ok is false
// when a wildcard name would collide with one of p's.
func muxPatterns(p *Pattern) (pats []string, ok bool) {
	if len(p.segs) == 0 {
		return []string{"/{$}"}, true
	}
	var b strings.Builder
	for i, s := range p.segs {
		switch s.kind {
		case segLiteral:
			b.WriteString("/" + url.PathEscape(s.lit))
		case segStar:
			name := fmt.Sprintf("_s%d", i)
			if p.Index(name) >= 0 {
				return nil, false
			}
			b.WriteString("/{" + name + "}")
		case segCapture:
			b.WriteString("/{" + p.names[s.idx] + "}")
		case segRest:
			if p.Index("_rest") >= 0 {
				return nil, false
			}
			if b.Len() == 0 {
				return []string{"/{_rest...}"}, true
			}
			return []string{b.String(), b.String() + "/{_rest...}"}, true
		}
	}
	return []string{b.String()}, true
}

// register is mux.HandleFunc, with its panic (an invalid or conflicting
// pattern) as an error.
func register(mux *http.ServeMux, pattern string, h http.HandlerFunc) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	mux.HandleFunc(pattern, h)
	return nil
}
