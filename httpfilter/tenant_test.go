package httpfilter

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestInvalidTenantRefused: a tenant the filter cannot count (not UTF-8, a
// control character, too long) gets 400 with a problem+json body, from the
// path or a header, whatever noTenant says, and nothing is charged: no
// Take at all.
func TestInvalidTenantRefused(t *testing.T) {
	e := newMuxEnv(t, productLimits+`
  - id: api
    match: {pathPattern: "/api/**"}
    tenant: {header: X-Tenant-ID}
    noTenant: shared
    tiers: [{period: 10, threshold: 100}]
`, append(productPatterns, "/api/")...)
	long := strings.Repeat("a", MaxTenantLen+1)
	for _, c := range []struct {
		method, path, header, reason, sla string
	}{
		{"PUT", "/v1/organizations/%ff%fe/product/1", "", "in path variable {orgId}: not valid UTF-8", "put-product"},
		{"GET", "/v1/organizations/ac%01me/product/1", "", "in path variable {orgId}: holds a control character", "get-product"},
		{"GET", "/v1/organizations/%00shared/product/1", "", "holds a control character", "get-product"},
		{"GET", "/v1/organizations/ac%7Fme/product/1", "", "holds a control character", "get-product"},
		{"GET", "/v1/organizations/ac%C2%85me/product/1", "", "holds a control character", "get-product"}, // U+0085, a C1 control
		{"PUT", "/v1/organizations/" + long + "/product/1", "", "longer than 256 bytes", "put-product"},
		{"GET", "/api/x", "\xff\xfe", "in header X-Tenant-Id: not valid UTF-8", "api"},
		{"GET", "/api/x", "ac\tme", "in header X-Tenant-Id: holds a control character", "api"},
		{"GET", "/api/x", long, "in header X-Tenant-Id: longer than 256 bytes", "api"},
	} {
		req, err := http.NewRequest(c.method, e.srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = c.path
		if c.header != "" {
			req.Header["X-Tenant-Id"] = []string{c.header}
		}
		res, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var p struct {
			Type, Title, Detail, SLA string
			Status                   int
		}
		if res.StatusCode != 400 || res.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s %q: %d %q %s", c.method, c.path, c.header, res.StatusCode, res.Header.Get("Content-Type"), body)
			continue
		}
		assertNoRateLimitHeaders(t, res.Header)
		if err := json.Unmarshal(body, &p); err != nil || p.Status != 400 || p.Title != "Bad Request" || p.SLA != c.sla ||
			!strings.HasPrefix(p.Detail, "invalid tenant id ") || !strings.Contains(p.Detail, c.reason) {
			t.Errorf("%s %s %q: body %s (%v)", c.method, c.path, c.header, body, err)
		}
		if strings.Contains(string(body), "\\ufffd") || strings.Contains(string(body), long) {
			t.Errorf("the body echoes the tenant: %s", body)
		}
	}
	if takes, _ := e.lim.snapshot(); takes != 0 {
		t.Errorf("%d Takes for refused tenants, want 0", takes)
	}
	if served := e.servedSnapshot(); len(served) != 0 {
		t.Errorf("served %v", served)
	}
	// The bounds themselves: 256 bytes, non-ASCII letters.
	for _, tenant := range []string{strings.Repeat("b", MaxTenantLen), "caf%C3%A9", "%E5%A4%A7"} {
		if st := e.do("GET", "/v1/organizations/"+tenant+"/product/1"); st != 200 {
			t.Errorf("tenant %.20s...: %d", tenant, st)
		}
	}
	if takes, _ := e.lim.snapshot(); takes != 3 {
		t.Errorf("%d Takes, want 3", takes)
	}
}

// TestInvalidTenantFromFunc: the tenant of a Go func is held to the same
// rule.
func TestInvalidTenantFromFunc(t *testing.T) {
	l := mustParse(t, y(`
slas:
  - id: search
    match: {pathPattern: "/v1/search"}
    tenant: {func: fromToken}
    noTenant: shared
    tiers: [{period: 10, threshold: 5}]
`))
	e := newEnv(t, l, WithTenantFunc("fromToken", func(r *http.Request) (string, bool) {
		tok, err := url.QueryUnescape(r.Header.Get("Authorization"))
		return tok, err == nil
	}))
	for _, c := range []struct {
		token  string
		status int
	}{{"acme", 200}, {"%ff", 400}, {"a%0Ab", 400}, {"", 200}, {"%E2%80%8B", 200}} {
		if r := e.get("/v1/search", map[string]string{"Authorization": c.token}); r.status != c.status {
			t.Errorf("token %q: %d %s, want %d", c.token, r.status, r.body, c.status)
		}
	}
	if e.handlerHits() != 3 {
		t.Errorf("handler hits %d, want 3", e.handlerHits())
	}
}
