package httpfilter

import (
	"reflect"
	"testing"
)

func ids(ms []Match) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.SLA.ID)
	}
	return out
}

func TestMatchHTTPReturnsEveryMatchingSLAInFileOrder(t *testing.T) {
	l := mustParse(t, y(`
defaults:
  tenant: {header: X-Tenant}
slas:
  - id: all-org
    match: {pathPattern: "/v1/organizations/{orgId}/**"}
    tenant: {fromPath: orgId}
    tiers: [{period: 60, threshold: 10000}]
  - id: get-product
    match: {methods: [GET, HEAD], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tenant: {fromPath: orgId}
    tiers: [{period: 10, threshold: 1000}]
  - id: put-product
    match: {methods: [PUT], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 10, threshold: 100}]
  - id: disabled
    enabled: false
    match: {pathPattern: "/**"}
    tiers: [{period: 1, threshold: 1}]
  - id: rpc-all
    match: {grpcMethods: ["*"]}
    tiers: [{period: 1, threshold: 1}]
  - id: rpc-orders
    match: {grpcMethods: [/shop.Orders/*, /shop.Carts/Get]}
    tiers: [{period: 1, threshold: 1}]
`))
	cases := []struct {
		method, path string
		want         []string
	}{
		{"GET", "/v1/organizations/acme/product/1", []string{"all-org", "get-product"}},
		{"HEAD", "/v1/organizations/acme/product/1", []string{"all-org", "get-product"}},
		{"PUT", "/v1/organizations/acme/product/1", []string{"all-org", "put-product"}},
		{"DELETE", "/v1/organizations/acme/product/1", []string{"all-org"}},
		{"PROPFIND", "/v1/organizations/acme/product/1", []string{"all-org"}},
		{"get", "/v1/organizations/acme/product/1", []string{"all-org"}}, // methods are case-sensitive
		{"GET", "/v1/organizations/acme", []string{"all-org"}},
		{"GET", "/v2/organizations/acme/product/1", nil},
		{"GET", "/", nil},
	}
	for _, c := range cases {
		if got := ids(l.MatchHTTP(c.method, c.path, nil)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("MatchHTTP(%s %s) = %v, want %v", c.method, c.path, got, c.want)
		}
	}
	ms := l.MatchHTTP("PUT", "/v1/organizations/acme/product/1", nil)
	if tn, ok := ms[0].PathTenant(); !ok || tn != "acme" {
		t.Errorf("all-org PathTenant = %q, %v", tn, ok)
	}
	if tn, ok := ms[1].PathTenant(); ok || tn != "" {
		t.Errorf("put-product (header tenant) PathTenant = %q, %v", tn, ok)
	}
	if v, ok := ms[1].Captures.Get("orgId"); !ok || v != "acme" {
		t.Errorf("put-product captures orgId = %q, %v", v, ok)
	}
	if got := ids(l.MatchGRPC("/shop.Orders/Create", nil)); !reflect.DeepEqual(got, []string{"rpc-all", "rpc-orders"}) {
		t.Errorf("MatchGRPC orders = %v", got)
	}
	if got := ids(l.MatchGRPC("/shop.Carts/Put", nil)); !reflect.DeepEqual(got, []string{"rpc-all"}) {
		t.Errorf("MatchGRPC carts = %v", got)
	}
	// dst is appended to, not overwritten.
	dst := l.MatchHTTP("GET", "/v1/organizations/a/product/1", nil)
	dst = l.MatchGRPC("/shop.Carts/Get", dst)
	if got := ids(dst); !reflect.DeepEqual(got, []string{"all-org", "get-product", "rpc-all", "rpc-orders"}) {
		t.Errorf("appended = %v", got)
	}
	var zero Limits
	if ms := zero.MatchHTTP("GET", "/", nil); len(ms) != 0 {
		t.Error("zero Limits matches")
	}
	if (&Match{}).SLA != nil {
		t.Error("zero Match")
	}
	if _, ok := (&Match{}).PathTenant(); ok {
		t.Error("zero Match has a tenant")
	}
}

func TestSLAMatchIgnoresEnabled(t *testing.T) {
	l := mustParse(t, y(`
slas:
  - id: off
    enabled: false
    match: {methods: [GET], pathPattern: "/a/{t}"}
    tiers: [{period: 1, threshold: 1}]
`))
	s := l.SLA("off")
	if _, ok := s.MatchHTTP("GET", "/a/x"); !ok {
		t.Error("SLA.MatchHTTP ignores the method/path")
	}
	if _, ok := s.MatchHTTP("POST", "/a/x"); ok {
		t.Error("SLA.MatchHTTP ignored the method")
	}
	if s.MatchGRPC("/a.B/C") {
		t.Error("HTTP SLA matched a gRPC method")
	}
	if l.SLA("missing") != nil {
		t.Error("SLA(missing) != nil")
	}
}

// TestMatchHTTPHeadAsGET: a HEAD request matches the SLAs naming GET, as
// ServeMux serves it with the GET handler, unless an SLA naming HEAD
// matches it too (the mux then serves it with the HEAD handler).
func TestMatchHTTPHeadAsGET(t *testing.T) {
	l := mustParse(t, y(`
slas:
  - id: all
    match: {pathPattern: "/v1/**"}
    noTenant: shared
    tenant: none
    tiers: [{period: 60, threshold: 10000}]
  - id: get-product
    match: {methods: [GET, POST], pathPattern: "/v1/{org}/product/*"}
    tiers: [{period: 10, threshold: 1000}]
  - id: head-product
    match: {methods: [HEAD], pathPattern: "/v1/{org}/product/{id}/meta"}
    tenant: {fromPath: org}
    tiers: [{period: 10, threshold: 1000}]
  - id: get-orders
    match: {methods: [GET], pathPattern: "/v1/{org}/orders/*"}
    tiers: [{period: 10, threshold: 1000}]
  - id: head-orders
    match: {methods: [HEAD, DELETE], pathPattern: "/v1/{org}/orders/*"}
    tiers: [{period: 10, threshold: 1000}]
`))
	for _, c := range []struct {
		method, path string
		want         []string
	}{
		{"HEAD", "/v1/acme/product/1", []string{"all", "get-product"}},       // GET's SLA
		{"HEAD", "/v1/acme/product/1/meta", []string{"all", "head-product"}}, // its own
		{"HEAD", "/v1/acme/orders/1", []string{"all", "head-orders"}},        // its own, not GET's
		{"GET", "/v1/acme/orders/1", []string{"all", "get-orders"}},
		{"POST", "/v1/acme/orders/1", []string{"all"}},
		{"HEAD", "/v2/acme/product/1", nil},
	} {
		if got := ids(l.MatchHTTP(c.method, c.path, nil)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("MatchHTTP(%s %s) = %v, want %v", c.method, c.path, got, c.want)
		}
	}
	// SLA.MatchHTTP compares the method as it is.
	if _, ok := l.SLA("get-product").MatchHTTP("HEAD", "/v1/acme/product/1"); ok {
		t.Error("SLA.MatchHTTP matched HEAD to a GET SLA")
	}
}
