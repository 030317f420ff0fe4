package httpfilter

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// y trims the leading newline of a raw string so that line 1 is the first
// line after the backquote.
func y(s string) []byte { return []byte(strings.TrimPrefix(s, "\n")) }

func mustParse(t *testing.T, data []byte, opts ...Option) *Limits {
	t.Helper()
	l, err := Parse("limits.yaml", data, opts...)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return l
}

func TestSeedYAMLLoads(t *testing.T) {
	l, err := LoadFile("testdata/seed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.SLAs) != 1 {
		t.Fatalf("got %d SLAs, want 1", len(l.SLAs))
	}
	s := l.SLAs[0]
	want := []Tier{{Period: 10 * time.Second, Threshold: 1000, Algorithm: Fixed, Line: 8},
		{Period: time.Second, Threshold: 200, Algorithm: Fixed, Line: 10}}
	if !reflect.DeepEqual(s.Tiers, want) {
		t.Errorf("tiers = %+v, want %+v", s.Tiers, want)
	}
	if s.ID != "get-product" || !s.Enabled || s.Line != 2 || s.Cost != 1 || s.Shadow || s.NoTenant != NoTenantReject {
		t.Errorf("sla = %+v", s)
	}
	if !reflect.DeepEqual(s.Methods, []string{"GET"}) || s.KeyMethod != "GET" {
		t.Errorf("methods = %v, key method %q", s.Methods, s.KeyMethod)
	}
	if s.Pattern.String() != "/v1/organizations/{orgId}/product/*" || s.Endpoint != s.Pattern.String() {
		t.Errorf("pattern %q endpoint %q", s.Pattern, s.Endpoint)
	}
	wantTenant := TenantSource{Kind: TenantPath, Name: "orgId", Key: "orgId", Index: 0, Inferred: true}
	if s.Tenant != wantTenant {
		t.Errorf("tenant = %+v, want %+v", s.Tenant, wantTenant)
	}
	ms := l.MatchHTTP("GET", "/v1/organizations/acme/product/42", nil)
	if len(ms) != 1 || ms[0].SLA != &l.SLAs[0] {
		t.Fatalf("matches = %+v", ms)
	}
	if tenant, ok := ms[0].PathTenant(); !ok || tenant != "acme" {
		t.Errorf("PathTenant = %q, %v", tenant, ok)
	}
	if ms := l.MatchHTTP("PUT", "/v1/organizations/acme/product/42", nil); len(ms) != 0 {
		t.Errorf("PUT matched %d SLAs", len(ms))
	}
}

func TestProjectLimitsYAML(t *testing.T) {
	l, err := LoadFile("limits.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		id, method string
		threshold  int64
	}
	var got []row
	for _, s := range l.SLAs {
		if len(s.Tiers) != 1 || s.Tiers[0].Period != 10*time.Second {
			t.Errorf("%s: tiers %+v", s.ID, s.Tiers)
		}
		if s.Tenant.Kind != TenantPath || s.Tenant.Name != "orgId" || s.Tenant.Inferred {
			t.Errorf("%s: tenant %+v", s.ID, s.Tenant)
		}
		if s.Endpoint != "/v1/organizations/{orgId}/product/*" {
			t.Errorf("%s: endpoint %q", s.ID, s.Endpoint)
		}
		got = append(got, row{s.ID, s.KeyMethod, s.Tiers[0].Threshold})
	}
	want := []row{{"get-product", "GET", 1000}, {"put-product", "PUT", 100}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for _, c := range []struct{ method, id string }{{"GET", "get-product"}, {"PUT", "put-product"}, {"POST", ""}} {
		ms := l.MatchHTTP(c.method, "/v1/organizations/o1/product/p1", nil)
		switch {
		case c.id == "" && len(ms) != 0:
			t.Errorf("%s matched %d", c.method, len(ms))
		case c.id != "" && (len(ms) != 1 || ms[0].SLA.ID != c.id):
			t.Errorf("%s matched %+v, want %s", c.method, ms, c.id)
		}
	}
}

func TestExampleFileLoads(t *testing.T) {
	l, err := LoadFile("testdata/limits.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	get := l.SLA("get-product")
	if get == nil || get.Description == "" {
		t.Fatalf("get-product: %+v", get)
	}
	premium := []Tier{{Period: 10 * time.Second, Threshold: 10000}, {Period: time.Second, Threshold: 2000}}
	if got := stripLines(get.TiersFor("acme")); !reflect.DeepEqual(got, premium) {
		t.Errorf("acme tiers = %+v, want %+v", got, premium)
	}
	if got := stripLines(get.TiersFor("globex")); !reflect.DeepEqual(got, premium) {
		t.Errorf("globex tiers = %+v", got)
	}
	if got := get.TiersFor("abuser"); len(got) != 1 || got[0].Threshold != 0 || got[0].Period != time.Minute {
		t.Errorf("abuser tiers = %+v", got)
	}
	if got := get.TiersFor("initech"); len(got) != 2 || got[0].Threshold != 1000 {
		t.Errorf("default tiers = %+v", got)
	}
	exp := l.SLA("export-trial")
	if !exp.Shadow || exp.Cost != 5 || exp.Tiers[0].Algorithm != Sliding || exp.Tiers[0].Period != time.Minute {
		t.Errorf("export-trial = %+v", exp)
	}
	if !exp.Pattern.Matches("/v1/organizations/a/exports/x/y") {
		t.Error("export pattern does not match")
	}
	pub := l.SLA("public-health")
	if pub.Tenant.Kind != TenantNone || pub.NoTenant != NoTenantShared || pub.Methods != nil || pub.KeyMethod != "*" {
		t.Errorf("public-health = %+v", pub)
	}
	g := l.SLA("grpc-orders")
	if !g.IsGRPC() || g.Tenant.Kind != TenantMetadata || g.Tenant.Key != "x-tenant-id" || g.KeyMethod != "GRPC" ||
		g.Endpoint != "/shop.v1.Orders/Create,/shop.v1.Orders/Update" {
		t.Errorf("grpc-orders = %+v", g)
	}
	if ms := l.MatchGRPC("/shop.v1.Orders/Create", nil); len(ms) != 1 || ms[0].SLA != g {
		t.Errorf("MatchGRPC = %+v", ms)
	}
	search := l.SLA("search")
	if search.Enabled || search.Tenant.Kind != TenantFunc || search.Tenant.Name != "fromJWT" {
		t.Errorf("search = %+v", search)
	}
	if ms := l.MatchHTTP("GET", "/v1/search", nil); len(ms) != 0 {
		t.Errorf("disabled SLA matched: %+v", ms)
	}
	if got := l.TenantFuncs(); !reflect.DeepEqual(got, []string{"fromJWT"}) {
		t.Errorf("TenantFuncs = %v", got)
	}
	if _, err := LoadFile("testdata/limits.example.yaml", WithTenantFuncs("fromJWT")); err != nil {
		t.Errorf("with the func registered: %v", err)
	}
}

func stripLines(ts []Tier) []Tier {
	out := make([]Tier, len(ts))
	for i, t := range ts {
		t.Line = 0
		out[i] = t
	}
	return out
}

func TestSeed002(t *testing.T) {
	_, err := LoadFile("testdata/seed002.yaml")
	if err == nil {
		t.Fatal("seed 002 without a tenant source loaded")
	}
	for _, want := range []string{
		`testdata/seed002.yaml:6: sla "get-product": tenant: not set`,
		`testdata/seed002.yaml:14: sla "put-product": tenant: not set`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	l, err := LoadFile("testdata/seed002_header.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l.SLAs {
		if s.Tenant.Kind != TenantHeader || s.Tenant.Key != "X-Org-Id" || s.Tenant.Name != "X-Org-ID" {
			t.Errorf("%s: tenant %+v", s.ID, s.Tenant)
		}
	}
}

// errCase is a limits file with exactly one error, which must read
// "limits.yaml:<line>: <sla>: <field>: ..." and contain msg.
type errCase struct {
	name  string
	yaml  string
	line  int
	sla   string // `sla "id"`, `slas[0]`, or "" for file-level errors
	field string
	msg   string
	opts  []Option
}

const tierOK = `
    tiers:
      - period: 10
        threshold: 100
`

// errCases returns the loader's error table; FuzzParse seeds its corpus
// with it.
func errCases() []errCase {
	return []errCase{
		{name: "empty file", yaml: ``, line: 0, msg: "file is empty"},
		{name: "comments only", yaml: "# nothing\n\n", msg: "file is empty"},
		{name: "null document", yaml: "---\n", msg: "file is empty"},
		{name: "syntax error", yaml: "\nslas:\n  - id: [a\n", line: 1, msg: "invalid YAML"},
		{name: "two documents", yaml: "\nslas: []\n---\nslas: []\n", line: 2, msg: "more than one YAML document"},
		{name: "not a mapping", yaml: "\n- a\n", line: 1, msg: "must be a mapping, got a list"},
		{name: "no slas", yaml: "\ndefaults: {cost: 1}\n", line: 1, field: "slas", msg: "required"},
		{name: "empty slas", yaml: "\nslas: []\n", line: 1, field: "slas", msg: "empty"},
		{name: "unknown top-level field", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}` + tierOK + `
limits: 3
`, line: 8, field: "limits", msg: "unknown field"},
		{name: "unknown field in sla", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    treshold: 10` + tierOK, line: 4, sla: `sla "a"`, field: "treshold", msg: "unknown field"},
		{name: "unknown field in match", yaml: `
slas:
  - id: a
    match:
      pathPatern: /a/{t}` + tierOK, line: 4, sla: `sla "a"`, field: "match.pathPatern", msg: "unknown field"},
		{name: "unknown field in tier", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - period: 10
        threshold: 100
        burst: 5
`, line: 7, sla: `sla "a"`, field: "tiers[0].burst", msg: "unknown field"},
		{name: "unknown field in tenant", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tenant: {cookie: sid}` + tierOK, line: 4, sla: `sla "a"`, field: "tenant.cookie", msg: "unknown field"},
		{name: "unknown field in defaults", yaml: `
defaults:
  tenants: {header: X-T}
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}` + tierOK, line: 2, field: "defaults.tenants", msg: "unknown field"},
		{name: "unknown field in override", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}` + tierOK + `    overrides:
      - tenant: [x]
        tiers: [{period: 10, threshold: 5}]
`, line: 8, sla: `sla "a"`, field: "overrides[0].tenant", msg: "unknown field"},
		{name: "merge key", yaml: `
slas:
  - id: a
    <<: {enabled: true}
    match: {pathPattern: "/a/{t}"}` + tierOK, line: 3, sla: `sla "a"`, field: "<<", msg: "merge keys are not supported"},
		{name: "duplicate field", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    shadow: true
    shadow: false` + tierOK, line: 5, sla: `sla "a"`, field: "shadow", msg: "duplicate field (first at line 4)"},
		{name: "period zero", yaml: `
slas:
  - id: get-product
    match: {pathPattern: "/a/{t}"}
    tiers:
      - period: 10
        threshold: 100
      - period: 0
        threshold: 10
`, line: 7, sla: `sla "get-product"`, field: "tiers[1].period", msg: "must be > 0, got 0"},
		{name: "period negative", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - {period: -5, threshold: 10}
`, line: 5, sla: `sla "a"`, field: "tiers[0].period", msg: "must be > 0, got -5"},
		{name: "period over a year", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - {period: 31536001, threshold: 10}
`, line: 5, sla: `sla "a"`, field: "tiers[0].period", msg: "must be at most 1 year"},
		{name: "period duration over a year", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - {period: 9000h, threshold: 10}
`, line: 5, sla: `sla "a"`, field: "tiers[0].period", msg: "must be at most 1 year"},
		{name: "period huge integer", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - {period: 99999999999999999999999, threshold: 10}
`, line: 5, sla: `sla "a"`, field: "tiers[0].period", msg: "must be at most 1 year"},
		{name: "period not a number", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - {period: ten, threshold: 10}
`, line: 5, sla: `sla "a"`, field: "tiers[0].period", msg: `a duration such as`},
		{name: "period fraction", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - {period: 1.5, threshold: 10}
`, line: 5, sla: `sla "a"`, field: "tiers[0].period", msg: "must be a whole number, got 1.5"},
		{name: "period sub-millisecond", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - {period: 1500us, threshold: 10}
`, line: 5, sla: `sla "a"`, field: "tiers[0].period", msg: "whole number of milliseconds"},
		{name: "threshold negative", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - period: 10
        threshold: -1
`, line: 6, sla: `sla "a"`, field: "tiers[0].threshold", msg: "must be >= 0, got -1"},
		{name: "threshold absurd", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - period: 10
        threshold: 1000000000000001
`, line: 6, sla: `sla "a"`, field: "tiers[0].threshold", msg: "must be <= 1000000000000000"},
		{name: "threshold absurd float", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - {period: 10, threshold: 1e16}
`, line: 5, sla: `sla "a"`, field: "tiers[0].threshold", msg: "got 1e16"},
		{name: "threshold beyond int64", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - {period: 10, threshold: 99999999999999999999}
`, line: 5, sla: `sla "a"`, field: "tiers[0].threshold", msg: "got 99999999999999999999"},
		{name: "threshold string", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - {period: 10, threshold: lots}
`, line: 5, sla: `sla "a"`, field: "tiers[0].threshold", msg: `must be a whole number, got string "lots"`},
		{name: "threshold missing", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - {period: 10}
`, line: 5, sla: `sla "a"`, field: "tiers[0].threshold", msg: "required"},
		{name: "duplicate ids", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}` + tierOK + `  - id: a
    match: {pathPattern: "/b/{t}"}` + tierOK, line: 7, sla: `sla "a"`, field: "id", msg: "duplicate id (first at line 2)"},
		{name: "missing id", yaml: `
slas:
  - match: {pathPattern: "/a/{t}"}` + tierOK, line: 2, sla: `slas[0]`, field: "id", msg: "required"},
		{name: "invalid id", yaml: `
slas:
  - id: "a b"
    match: {pathPattern: "/a/{t}"}` + tierOK, line: 2, sla: `sla "a b"`, field: "id", msg: "invalid id"},
		{name: "unknown method", yaml: `
slas:
  - id: a
    match:
      methods: [GET, FETCH]
      pathPattern: /a/{t}` + tierOK, line: 4, sla: `sla "a"`, field: "match.methods[1]", msg: `unknown HTTP method "FETCH"`},
		{name: "lower-case method", yaml: `
slas:
  - id: a
    match:
      methods: [get]
      pathPattern: /a/{t}` + tierOK, line: 4, sla: `sla "a"`, field: "match.methods[0]", msg: "case-sensitive: GET"},
		{name: "duplicate method", yaml: `
slas:
  - id: a
    match:
      methods: [GET, GET]
      pathPattern: /a/{t}` + tierOK, line: 4, sla: `sla "a"`, field: "match.methods[1]", msg: "duplicate method GET"},
		{name: "empty methods", yaml: `
slas:
  - id: a
    match:
      methods: []
      pathPattern: /a/{t}` + tierOK, line: 4, sla: `sla "a"`, field: "match.methods", msg: "empty list"},
		{name: "pattern without slash", yaml: `
slas:
  - id: a
    match: {pathPattern: "a/{t}"}` + tierOK, line: 3, sla: `sla "a"`, field: "match.pathPattern", msg: `must start with "/"`},
		{name: "pattern rest not last", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/**/{t}"}` + tierOK, line: 3, sla: `sla "a"`, field: "match.pathPattern", msg: `"**" must be the last segment`},
		{name: "pattern unclosed variable", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t"}` + tierOK, line: 3, sla: `sla "a"`, field: "match.pathPattern", msg: `unclosed "{"`},
		{name: "pattern partial wildcard", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/b*/{t}"}` + tierOK, line: 3, sla: `sla "a"`, field: "match.pathPattern", msg: `"*" must be the whole segment`},
		{name: "pattern empty segment", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a//{t}"}` + tierOK, line: 3, sla: `sla "a"`, field: "match.pathPattern", msg: "segment 2 is empty"},
		{name: "no match", yaml: `
slas:
  - id: a` + tierOK, line: 2, sla: `sla "a"`, field: "match", msg: "required"},
		{name: "match neither http nor grpc", yaml: `
slas:
  - id: a
    match: {methods: [GET]}` + tierOK, line: 3, sla: `sla "a"`, field: "match", msg: "pathPattern (HTTP) or grpcMethods (gRPC) is required"},
		{name: "match both http and grpc", yaml: `
slas:
  - id: a
    match:
      pathPattern: /a/{t}
      grpcMethods: ["*"]` + tierOK, line: 5, sla: `sla "a"`, field: "match.grpcMethods", msg: "not both"},
		{name: "methods on grpc", yaml: `
slas:
  - id: a
    tenant: {metadata: x-t}
    match:
      methods: [POST]
      grpcMethods: ["*"]` + tierOK, line: 5, sla: `sla "a"`, field: "match.methods", msg: "do not apply to a gRPC SLA"},
		{name: "bad grpc pattern", yaml: `
slas:
  - id: a
    tenant: {metadata: x-t}
    match:
      grpcMethods: [/pkg.Svc/Get, pkg.Svc/*]` + tierOK, line: 5, sla: `sla "a"`, field: "match.grpcMethods[1]", msg: "invalid gRPC method pattern"},
		{name: "no tiers", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
`, line: 2, sla: `sla "a"`, field: "tiers", msg: "required"},
		{name: "empty tiers", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers: []
`, line: 4, sla: `sla "a"`, field: "tiers", msg: "no tiers"},
		{name: "duplicate periods", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - {period: 10, threshold: 100}
      - {period: 10s, threshold: 50}
`, line: 6, sla: `sla "a"`, field: "tiers[1].period", msg: "duplicate period 10s (also tiers[0])"},
		{name: "unknown algorithm", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers:
      - period: 10
        threshold: 100
        algorithm: leaky
`, line: 7, sla: `sla "a"`, field: "tiers[0].algorithm", msg: `unknown value "leaky" (one of: fixed, sliding)`},
		{name: "unknown default algorithm", yaml: `
defaults: {algorithm: gcra}
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}` + tierOK, line: 1, field: "defaults.algorithm", msg: `unknown value "gcra"`},
		{name: "tenant two sources", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tenant: {fromPath: t, header: X-T}` + tierOK, line: 4, sla: `sla "a"`, field: "tenant", msg: "set exactly one of"},
		{name: "tenant empty mapping", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tenant: {}` + tierOK, line: 4, sla: `sla "a"`, field: "tenant", msg: "set exactly one of"},
		{name: "tenant scalar", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tenant: orgId` + tierOK, line: 4, sla: `sla "a"`, field: "tenant", msg: "must be none or a mapping"},
		{name: "tenant path variable missing", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tenant: {fromPath: orgId}` + tierOK, line: 4, sla: `sla "a"`, field: "tenant.fromPath", msg: `pattern "/a/{t}" has no variable {orgId}`},
		{name: "tenant path variable from defaults missing", yaml: `
defaults:
  tenant: {fromPath: orgId}
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}` + tierOK, line: 4, sla: `sla "a"`, field: "tenant.fromPath", msg: "(from defaults at line 2)"},
		{name: "tenant fromPath on grpc", yaml: `
slas:
  - id: a
    match: {grpcMethods: ["*"]}
    tenant: {fromPath: t}` + tierOK, line: 4, sla: `sla "a"`, field: "tenant.fromPath", msg: "a gRPC SLA has no path"},
		{name: "tenant metadata on http", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tenant: {metadata: x-t}` + tierOK, line: 4, sla: `sla "a"`, field: "tenant.metadata", msg: "use header"},
		{name: "tenant bad header", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tenant: {header: "X Tenant"}` + tierOK, line: 4, sla: `sla "a"`, field: "tenant.header", msg: "invalid header name"},
		{name: "tenant reserved metadata", yaml: `
slas:
  - id: a
    match: {grpcMethods: ["*"]}
    tenant: {metadata: grpc-tenant}` + tierOK, line: 4, sla: `sla "a"`, field: "tenant.metadata", msg: "reserved"},
		{name: "tenant unknown func", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tenant: {func: fromCookie}` + tierOK, opts: []Option{WithTenantFuncs("fromJWT")},
			line: 4, sla: `sla "a"`, field: "tenant.func", msg: `unknown tenant func "fromCookie" (registered: fromJWT)`},
		{name: "tenant bad func name", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tenant: {func: "1st"}` + tierOK, line: 4, sla: `sla "a"`, field: "tenant.func", msg: "invalid func name"},
		{name: "tenant not set, two variables", yaml: `
slas:
  - id: a
    match: {pathPattern: "/o/{orgId}/p/{id}"}` + tierOK, line: 2, sla: `sla "a"`, field: "tenant", msg: "several variables (orgId, id)"},
		{name: "tenant none with reject", yaml: `
slas:
  - id: a
    match: {pathPattern: /a}
    tenant: none` + tierOK, line: 4, sla: `sla "a"`, field: "tenant", msg: "would reject every request"},
		{name: "noTenant unknown", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    noTenant: allow` + tierOK, line: 4, sla: `sla "a"`, field: "noTenant", msg: `unknown value "allow"`},
		{name: "cost zero", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    cost: 0` + tierOK, line: 4, sla: `sla "a"`, field: "cost", msg: "must be >= 1, got 0"},
		{name: "default cost zero", yaml: `
defaults: {cost: 0}
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}` + tierOK, line: 1, field: "defaults.cost", msg: "must be >= 1, got 0"},
		{name: "cost above threshold", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    cost: 500` + tierOK, line: 6, sla: `sla "a"`, field: "tiers[0].threshold", msg: "100 is less than the cost of one request, 500 from cost (line 4)"},
		{name: "default cost above override threshold", yaml: `
defaults: {cost: 20}
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}` + tierOK + `    overrides:
      - tenants: [x]
        tiers: [{period: 10, threshold: 5}]
`, line: 10, sla: `sla "a"`, field: "overrides[0].tiers[0].threshold", msg: "from defaults.cost"},
		{name: "enabled not a bool", yaml: `
slas:
  - id: a
    enabled: yes
    match: {pathPattern: "/a/{t}"}` + tierOK, line: 3, sla: `sla "a"`, field: "enabled", msg: `must be true or false, got string "yes"`},
		{name: "override duplicate tenant", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}` + tierOK + `    overrides:
      - tenants: [acme, globex]
        tiers: [{period: 10, threshold: 500}]
      - tenants: [initech, acme]
        tiers: [{period: 10, threshold: 900}]
`, line: 10, sla: `sla "a"`, field: "overrides[1].tenants[1]", msg: `tenant "acme" already has an override (line 8)`},
		{name: "override tenant with a control character", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}` + tierOK + `    overrides:
      - tenants: [acme, "glo\tbex"]
        tiers: [{period: 10, threshold: 500}]
`, line: 8, sla: `sla "a"`, field: "overrides[0].tenants[1]", msg: "tenant id holds a control character: the filter refuses such a tenant"},
		// Patterns that could never match a request: each is a load error
		// naming the file, line, SLA and field.
		{name: "pattern with a query", yaml: `
slas:
  - id: search
    match:
      methods: [GET]
      pathPattern: "/v1/search?q={q}"` + tierOK, line: 5, sla: `sla "search"`, field: "match.pathPattern",
			msg: `invalid pattern "/v1/search?q={q}": segment 2 "search?q={q}": "?" is not allowed: a pattern matches the path, never the query`},
		{name: "pattern with a fragment", yaml: `
slas:
  - id: doc
    noTenant: shared
    match: {pathPattern: "/docs/intro#top"}` + tierOK, line: 4, sla: `sla "doc"`, field: "match.pathPattern",
			msg: `"#" is not allowed: the fragment never reaches the server`},
		{name: "pattern with an escape", yaml: `
slas:
  - id: enc
    match:
      pathPattern: "/v1/organizations/{orgId}/product%2Fitems/*"` + tierOK, line: 4, sla: `sla "enc"`, field: "match.pathPattern",
			msg: `segment 4 "product%2Fitems": "%" is not allowed: segments are matched decoded, so write the character itself`},
		{name: "override without tiers", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}` + tierOK + `    overrides:
      - tenants: [acme]
`, line: 8, sla: `sla "a"`, field: "overrides[0].tiers", msg: "required"},
		{name: "override on global bucket", yaml: `
slas:
  - id: a
    match: {pathPattern: /a}
    noTenant: shared` + tierOK + `    overrides:
      - tenants: [acme]
        tiers: [{period: 10, threshold: 500}]
`, line: 9, sla: `sla "a"`, field: "overrides", msg: "no tenant source"},
		{name: "shared counter keys", yaml: `
slas:
  - id: a
    match: {methods: [GET], pathPattern: "/a/{t}"}` + tierOK + `  - id: b
    match: {methods: [GET], pathPattern: "/a/{t}"}
    tiers:
      - {period: 1, threshold: 10}
      - {period: 10, threshold: 50}
`, line: 11, sla: `sla "b"`, field: "tiers[1].period", msg: `sla "a" (line 2) already counts GET /a/{t} per 10s`},
		{name: "tiers not a list", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers: {period: 10, threshold: 5}
`, line: 4, sla: `sla "a"`, field: "tiers", msg: "must be a list, got a mapping"},
		{name: "too many tiers", yaml: `
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    tiers: [{period: 1, threshold: 5}, {period: 2, threshold: 5}, {period: 3, threshold: 5}, {period: 4, threshold: 5}, {period: 5, threshold: 5}, {period: 6, threshold: 5}, {period: 7, threshold: 5}, {period: 8, threshold: 5}, {period: 9, threshold: 5}, {period: 10, threshold: 5}, {period: 11, threshold: 5}, {period: 12, threshold: 5}, {period: 13, threshold: 5}, {period: 14, threshold: 5}, {period: 15, threshold: 5}, {period: 16, threshold: 5}, {period: 17, threshold: 5}]
`, line: 4, sla: `sla "a"`, field: "tiers", msg: "17 tiers, at most 16"},
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range errCases() {
		t.Run(c.name, func(t *testing.T) {
			l, err := Parse("limits.yaml", y(c.yaml), c.opts...)
			if err == nil {
				t.Fatalf("loaded: %+v", l)
			}
			if l != nil {
				t.Errorf("returned limits along with an error")
			}
			if !errors.Is(err, ErrInvalidLimits) {
				t.Errorf("errors.Is(err, ErrInvalidLimits) = false for %v", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != 1 {
				t.Errorf("want exactly one error, got %d:\n%v", len(lines), err)
			}
			prefix := "limits.yaml"
			if c.line > 0 {
				prefix += ":" + itoa(c.line)
			}
			prefix += ": "
			if c.sla != "" {
				prefix += c.sla + ": "
			}
			if c.field != "" {
				prefix += c.field + ": "
			}
			if !strings.HasPrefix(lines[0], prefix) || !strings.Contains(lines[0], c.msg) {
				t.Errorf("error\n  %s\nwant prefix\n  %s\ncontaining\n  %s", lines[0], prefix, c.msg)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Line != c.line || fe.File != "limits.yaml" {
				t.Errorf("FieldError = %+v", fe)
			}
		})
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

func TestParseReportsAllErrorsInFileOrder(t *testing.T) {
	data := y(`
defaults:
  cost: 0
slas:
  - id: a
    match: {methods: [FETCH], pathPattern: "/a/{t}"}
    tiers:
      - {period: 0, threshold: 5}
  - id: b
    match: {pathPattern: "no-slash"}
    tiers: []
  - id: a
    match: {pathPattern: "/c/{t}"}
    tiers:
      - {period: 10, threshold: -3, algorithm: fast}
  - id: c
    match: {methods: [get], pathPattern: "/c/{t}"}
    tenant: {fromPath: org}
    tiers: [{period: 1, threshold: 1}]
`)
	_, err := Parse("limits.yaml", data)
	if err == nil {
		t.Fatal("loaded")
	}
	want := []string{
		`limits.yaml:2: defaults.cost: must be >= 1, got 0`,
		`limits.yaml:5: sla "a": match.methods[0]: unknown HTTP method "FETCH"`,
		`limits.yaml:7: sla "a": tiers[0].period: must be > 0, got 0`,
		`limits.yaml:9: sla "b": match.pathPattern: invalid pattern "no-slash"`,
		`limits.yaml:10: sla "b": tiers: no tiers`,
		`limits.yaml:11: sla "a": id: duplicate id (first at line 4)`,
		`limits.yaml:14: sla "a": tiers[0].threshold: must be >= 0, got -3`,
		`limits.yaml:14: sla "a": tiers[0].algorithm: unknown value "fast"`,
		`limits.yaml:16: sla "c": match.methods[0]: unknown HTTP method "get"`,
		`limits.yaml:17: sla "c": tenant.fromPath: pattern "/c/{t}" has no variable {org}`,
	}
	got := strings.Split(err.Error(), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(got), len(want), err)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %d:\n  %s\nwant prefix\n  %s", i, got[i], want[i])
		}
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok || len(joined.Unwrap()) != len(want) {
		t.Errorf("err is not a join of %d errors: %T", len(want), err)
	}
}

func TestDefaultsApply(t *testing.T) {
	l := mustParse(t, y(`
defaults:
  tenant: {header: x-tenant-id}
  noTenant: shared
  shadow: true
  cost: 2
  algorithm: sliding
slas:
  - id: http
    match: {pathPattern: "/o/{orgId}/p/{id}"}
    tiers:
      - {period: 10, threshold: 100}
      - {period: 1, threshold: 10, algorithm: fixed}
  - id: rpc
    match: {grpcMethods: [/shop.Orders/*]}
    shadow: false
    cost: 1
    noTenant: reject
    tiers:
      - {period: 500ms, threshold: 100}
`))
	h := l.SLA("http")
	if h.Tenant.Kind != TenantHeader || h.Tenant.Key != "X-Tenant-Id" || h.Tenant.Name != "x-tenant-id" || h.Tenant.Line != 2 {
		t.Errorf("http tenant = %+v", h.Tenant)
	}
	if !h.Shadow || h.Cost != 2 || h.NoTenant != NoTenantShared || h.Tiers[0].Algorithm != Sliding || h.Tiers[1].Algorithm != Fixed {
		t.Errorf("http = %+v", h)
	}
	r := l.SLA("rpc")
	if r.Tenant.Kind != TenantHeader || r.Tenant.Key != "x-tenant-id" {
		t.Errorf("rpc tenant = %+v", r.Tenant)
	}
	if r.Shadow || r.Cost != 1 || r.NoTenant != NoTenantReject || r.Tiers[0].Period != 500*time.Millisecond {
		t.Errorf("rpc = %+v", r)
	}
}

func TestNumberForms(t *testing.T) {
	l := mustParse(t, y(`
slas:
  - id: a
    match: {pathPattern: "/a/{t}"}
    overrides:
      - tenants: [12345, "007", acme]
        tiers: [{period: 1h, threshold: 1e6}]
    tiers:
      - {period: 10, threshold: 1_000}
      - {period: 2m, threshold: 0x10}
      - {period: 1.0, threshold: 0}
`))
	s := l.SLA("a")
	got := []Tier{}
	for _, tr := range s.Tiers {
		got = append(got, Tier{Period: tr.Period, Threshold: tr.Threshold})
	}
	want := []Tier{{Period: 10 * time.Second, Threshold: 1000}, {Period: 2 * time.Minute, Threshold: 16}, {Period: time.Second, Threshold: 0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tiers = %+v, want %+v", got, want)
	}
	for _, tenant := range []string{"12345", "007", "acme"} {
		if tr := s.TiersFor(tenant); len(tr) != 1 || tr[0].Threshold != 1_000_000 || tr[0].Period != time.Hour {
			t.Errorf("TiersFor(%q) = %+v", tenant, tr)
		}
	}
}

// An SLA's counter-key components depend only on what it matches: editing
// other SLAs, its thresholds, id or position, or reordering its lists keeps
// them, so the core keeps counting across a reload.
func TestKeyComponentsStableAcrossEdits(t *testing.T) {
	before := mustParse(t, y(`
slas:
  - id: get-product
    match: {methods: [GET, HEAD], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 10, threshold: 1000}, {period: 1, threshold: 200}]
  - id: orders
    tenant: {metadata: x-t}
    match: {grpcMethods: [/shop.Orders/Update, /shop.Orders/Create]}
    tiers: [{period: 10, threshold: 5}]
`))
	after := mustParse(t, y(`
# a comment shifts every line
slas:
  - id: new-one
    match: {methods: [POST], pathPattern: "/v1/other/{orgId}"}
    tiers: [{period: 10, threshold: 1}]
  - id: orders-renamed
    tenant: {metadata: X-T}
    match: {grpcMethods: [/shop.Orders/Create, /shop.Orders/Update]}
    tiers: [{period: 10, threshold: 50}]
  - id: product-reads
    match: {methods: [HEAD, GET], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 1, threshold: 400}, {period: 10, threshold: 2000}]
`))
	type key struct {
		endpoint, method string
		periods          []time.Duration
	}
	keyOf := func(s *SLA) key {
		k := key{endpoint: s.Endpoint, method: s.KeyMethod}
		for _, tr := range s.Tiers {
			k.periods = append(k.periods, tr.Period)
		}
		slicesSort(k.periods)
		return k
	}
	for _, pair := range [][2]string{{"get-product", "product-reads"}, {"orders", "orders-renamed"}} {
		a, b := keyOf(before.SLA(pair[0])), keyOf(after.SLA(pair[1]))
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s -> %s: keys %+v became %+v", pair[0], pair[1], a, b)
		}
	}
	if k := keyOf(before.SLA("get-product")); k.method != "GET,HEAD" || k.endpoint != "/v1/organizations/{orgId}/product/*" {
		t.Errorf("key = %+v", k)
	}
}

func slicesSort(d []time.Duration) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j] < d[j-1]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}

func TestCheckTenantFuncs(t *testing.T) {
	l := mustParse(t, y(`
slas:
  - id: a
    match: {pathPattern: /a}
    tenant: {func: fromJWT}`+tierOK+`  - id: b
    match: {pathPattern: /b}
    tenant: {func: fromCookie}`+tierOK))
	if got := l.TenantFuncs(); !reflect.DeepEqual(got, []string{"fromJWT", "fromCookie"}) {
		t.Errorf("TenantFuncs = %v", got)
	}
	err := l.CheckTenantFuncs(func(n string) bool { return n == "fromJWT" })
	want := `limits.yaml:10: sla "b": tenant.func: unknown tenant func "fromCookie"`
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("CheckTenantFuncs = %v, want one error starting %q", err, want)
	}
	if err := l.CheckTenantFuncs(func(string) bool { return true }); err != nil {
		t.Errorf("all known: %v", err)
	}
}

func TestLoadFileErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := LoadFile(filepath.Join(dir, "missing.yaml"))
	if err == nil || errors.Is(err, ErrInvalidLimits) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, MaxFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("big file: %v", err)
	}
}

// TestParseSizeCap: Parse refuses what LoadFile refuses, before parsing
// (a 10 MB file took 2.9 s and 297 MiB to be refused).
func TestParseSizeCap(t *testing.T) {
	// Comment lines: cheap to scan, so the file at the cap is parsed.
	data := []byte(strings.Repeat("#"+strings.Repeat("x", 1022)+"\n", MaxFileSize/1024+1))
	l, err := Parse("big.yaml", data[:MaxFileSize+1])
	if err == nil || l != nil {
		t.Fatal("loaded")
	}
	want := "big.yaml: file is 4194305 bytes, larger than 4194304 (MaxFileSize)"
	if err.Error() != want || !errors.Is(err, ErrInvalidLimits) {
		t.Errorf("err = %v, want %s", err, want)
	}
	if _, err := Parse("big.yaml", data[:MaxFileSize]); err == nil || !strings.Contains(err.Error(), "file is empty") {
		t.Errorf("at the cap: %v", err)
	}
}

// TestParseCapsErrorList: a file with thousands of errors reports the
// first 20 in file order and counts the rest (one file gave 62,464 lines).
func TestParseCapsErrorList(t *testing.T) {
	for _, n := range []int{maxErrors, maxErrors + 1, 3 * maxKeptErrors} {
		var b strings.Builder
		b.WriteString("slas:\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "  - {id: s%d, match: {pathPattern: \"/a%d/{t}\"}, tiers: [{period: 10, threshold: -1}]}\n", i, i)
		}
		_, err := Parse("bad.yaml", []byte(b.String()))
		if err == nil {
			t.Fatal("loaded")
		}
		lines := strings.Split(err.Error(), "\n")
		want := min(n, maxErrors)
		if n > maxErrors {
			want++
		}
		if len(lines) != want {
			t.Fatalf("n=%d: %d lines, want %d", n, len(lines), want)
		}
		for i := 0; i < min(n, maxErrors); i++ {
			prefix := fmt.Sprintf("bad.yaml:%d: sla \"s%d\": tiers[0].threshold: must be >= 0", i+2, i)
			if !strings.HasPrefix(lines[i], prefix) {
				t.Errorf("n=%d: line %d = %q, want prefix %q", n, i, lines[i], prefix)
			}
		}
		if n > maxErrors {
			more := "bad.yaml: and " + itoa(n-maxErrors) + " more errors"
			if n-maxErrors == 1 {
				more = "bad.yaml: and 1 more error"
			}
			if last := lines[len(lines)-1]; last != more {
				t.Errorf("n=%d: last line %q, want %q", n, last, more)
			}
		}
		joined := err.(interface{ Unwrap() []error })
		for _, e := range joined.Unwrap() {
			if !errors.Is(e, ErrInvalidLimits) {
				t.Errorf("%v is not ErrInvalidLimits", e)
			}
		}
	}
}

// An alias bomb must be refused quickly, not expanded.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		b.WriteString("a" + itoa(i) + ": &a" + itoa(i) + " [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + itoa(i-1))
		}
		b.WriteString("]\n")
	}
	b.WriteString("slas: *a8\n")
	for _, doc := range []string{
		b.String(),
		"slas: &a [*a, *a]\n",                // alias cycle through a list
		"slas:\n  - &s {id: a, match: *s}\n", // alias cycle through a mapping
		strings.Repeat("[", 300) + strings.Repeat("]", 300), // deep nesting
	} {
		_, err := Parse("bomb.yaml", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), "document too large") {
			t.Errorf("%.40q: err = %v", doc, err)
		}
	}
}
