package httpfilter

import (
	"fmt"
	"strings"
	"testing"
)

func TestCompilePatternErrors(t *testing.T) {
	cases := []struct{ pattern, msg string }{
		{"", "empty pattern"},
		{"a/b", `must start with "/"`},
		{"/a/", `trailing "/"`},
		{"//a", "segment 1 is empty"},
		{"/a//b", "segment 2 is empty"},
		{"/**/a", `"**" must be the last segment`},
		{"/a*", `"*" must be the whole segment`},
		{"/*a", `"*" must be the whole segment`},
		{"/a/***", `"*" must be the whole segment`},
		{"/{a", `unclosed "{"`},
		{"/{a}b", "a variable must be the whole segment"},
		{"/x{a}", "a variable must be the whole segment"},
		{"/a}", "a variable must be the whole segment"},
		{"/{}", "variable name is empty"},
		{"/{1a}", "must match [A-Za-z_]"},
		{"/{a-b}", "must match [A-Za-z_]"},
		{"/{a}/{a}", "duplicate variable {a}"},
		{"/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}", "more than 8 variables"},
		{"/a/./b", "dot segment"},
		{"/a/..", "dot segment"},
		{"/a\x00b", "control character"},
		{"/search?q=1", `"?" is not allowed`},
		{"/a/{b}/c#top", `"#" is not allowed`},
		{"/a%2Fb/{c}", `"%" is not allowed`},
		{"/caf%C3%A9", `"%" is not allowed`},
		{"/100%", `"%" is not allowed`},
		{"/" + strings.Repeat("a", maxPatternLen), "longer than"},
		{strings.Repeat("/a", maxPatternSegments+1), "more than 64 segments"},
	}
	for _, c := range cases {
		_, err := CompilePattern(c.pattern)
		if err == nil {
			t.Errorf("CompilePattern(%q) succeeded", c.pattern)
			continue
		}
		if !strings.HasPrefix(err.Error(), "httpfilter: pattern ") || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("CompilePattern(%q) = %v, want %q", c.pattern, err, c.msg)
		}
	}
}

func TestPatternMatch(t *testing.T) {
	cases := []struct {
		pattern, path string
		ok            bool
		caps          string // name=value,... in order
	}{
		{"/", "/", true, ""},
		{"/", "", false, ""},
		{"/", "/a", false, ""},
		{"/a", "/a", true, ""},
		{"/a", "/a/", false, ""},
		{"/a", "/A", false, ""},
		{"/a", "a", false, ""},
		{"/a", "/ab", false, ""},
		{"/a/b", "/a/b", true, ""},
		{"/a/b", "/a", false, ""},
		{"/a/b", "/a/b/c", false, ""},
		{"/product/*", "/product/42", true, ""},
		{"/product/*", "/product/", false, ""},
		{"/product/*", "/product", false, ""},
		{"/product/*", "/product/42/x", false, ""},
		{"/product/*", "//product/42", false, ""},
		{"/v1/organizations/{orgId}/product/*", "/v1/organizations/acme/product/42", true, "orgId=acme"},
		{"/v1/organizations/{orgId}/product/*", "/v1/organizations//product/42", false, ""},
		{"/v1/organizations/{orgId}/product/*", "/v1/organizations/acme/product", false, ""},
		{"/v1/organizations/{orgId}/product/*", "/v1/organizations/acme/products/42", false, ""},
		{"/o/{org}/p/{id}", "/o/acme/p/7", true, "org=acme,id=7"},
		// Escaped paths, segment by segment, as ServeMux matches them.
		{"/o/{org}/p/{id}", "/o/a%2Fb/p/7", true, "org=a/b,id=7"},
		{"/o/{org}/p/{id}", "/o/acme/p/1%2f2", true, "org=acme,id=1/2"},
		{"/o/{org}/p/{id}", "/o/acme/p%2F7", false, ""},
		{"/o/{org}/p/{id}", "/o/acme/p/%2F", false, ""}, // a lone %2F is a slash to the mux
		{"/o/{org}/p/{id}", "/o/%2e%2e/p/7", true, "org=..,id=7"},
		{"/o/{org}/p/{id}", "/o/x/../acme/p/7", false, ""}, // redirected by the mux
		{"/o/{org}/p/{id}", "/o/./p/7", false, ""},
		{"/o/{org}/p/{id}", "/o/%zz/p/7", true, "org=%zz,id=7"}, // invalid escape: kept
		{"/o/{org}/p/{id}", "/o/a%20b/p/%C3%A9", true, "org=a b,id=\u00e9"},
		{"/org", "/%6Frg", true, ""},
		{"/a b", "/a%20b", true, ""},
		{"/", "/%2F", true, ""},
		{"/", "/%2F/", false, ""},
		{"/**", "/", true, ""},
		{"/**", "/a/b/c", true, ""},
		{"/**", "", false, ""},
		{"/v1/**", "/v1", true, ""},
		{"/v1/**", "/v1/", true, ""},
		{"/v1/**", "/v1/a/b/c/", true, ""},
		{"/v1/**", "/v1/a/b//c", false, ""}, // redirected by the mux
		{"/v1/**", "/v1%2Fa", false, ""},
		{"/v1/**", "/v1/%2F", true, ""},
		{"/v1/**", "/v2/a", false, ""},
		{"/v1/**", "/v10", false, ""},
		{"/{t}/**", "/acme", true, "t=acme"},
		{"/{t}/**", "/acme/x/y", true, "t=acme"},
		{"/{t}/**", "//x", false, ""},
		{"/*/*", "/a/b", true, ""},
		{"/*/*", "/a/", false, ""},
		{"/ünï/{c}", "/ünï/ø", true, "c=ø"},
	}
	for _, c := range cases {
		p := MustCompilePattern(c.pattern)
		caps, ok := p.Match(c.path)
		if ok != c.ok {
			t.Errorf("%q.Match(%q) = %v, want %v", c.pattern, c.path, ok, c.ok)
			continue
		}
		if p.Matches(c.path) != ok {
			t.Errorf("%q.Matches(%q) disagrees with Match", c.pattern, c.path)
		}
		if !ok {
			continue
		}
		var got []string
		for i := 0; i < caps.Len(); i++ {
			got = append(got, caps.Name(i)+"="+caps.Value(i))
		}
		if s := strings.Join(got, ","); s != c.caps {
			t.Errorf("%q.Match(%q) captures %q, want %q", c.pattern, c.path, s, c.caps)
		}
		for i, n := range p.Names() {
			if v, ok := caps.Get(n); !ok || v != caps.Value(i) || p.Index(n) != i {
				t.Errorf("%q: Get(%q) = %q, %v; Index = %d", c.pattern, n, v, ok, p.Index(n))
			}
		}
	}
	if _, ok := (&Captures{}).Get("x"); ok {
		t.Error("zero Captures has a value")
	}
	var zero Pattern
	if zero.Matches("/") {
		t.Error("zero Pattern matches")
	}
	if MustCompilePattern("/a").Index("x") != -1 {
		t.Error("Index of a missing name")
	}
}

func TestGRPCPattern(t *testing.T) {
	cases := []struct {
		pattern string
		err     string
		match   []string
		noMatch []string
	}{
		{pattern: "*", match: []string{"/a.B/C", "/x/y", ""}},
		{pattern: "/shop.v1.Orders/*", match: []string{"/shop.v1.Orders/Create", "/shop.v1.Orders/Get"},
			noMatch: []string{"/shop.v1.Orders/", "/shop.v1.Orders", "/shop.v1.OrdersX/Get", "/shop.v1.Orders/a/b", "/other.Orders/Get"}},
		{pattern: "/shop.v1.Orders/Create", match: []string{"/shop.v1.Orders/Create"},
			noMatch: []string{"/shop.v1.Orders/CreateX", "/shop.v1.Orders/Get", "shop.v1.Orders/Create"}},
		{pattern: "/Svc/M_1", match: []string{"/Svc/M_1"}},
		{pattern: "", err: "must be"},
		{pattern: "shop.Orders/Get", err: "must be"},
		{pattern: "/shop.Orders", err: "must be"},
		{pattern: "/shop.Orders/", err: "must be"},
		{pattern: "//Get", err: "must be"},
		{pattern: "/a/b/c", err: "must be"},
		{pattern: "/*/Get", err: "invalid character"},
		{pattern: "/a.B/Ge*", err: "invalid character"},
		{pattern: "/a..B/Get", err: "empty package component"},
		{pattern: "/.a/Get", err: "empty package component"},
		{pattern: "/a b/Get", err: "invalid character"},
	}
	for _, c := range cases {
		g, err := compileGRPCPattern(c.pattern)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("compileGRPCPattern(%q) = %v, want error %q", c.pattern, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("compileGRPCPattern(%q): %v", c.pattern, err)
			continue
		}
		for _, m := range c.match {
			if !g.match(m) {
				t.Errorf("%q does not match %q", c.pattern, m)
			}
		}
		for _, m := range c.noMatch {
			if g.match(m) {
				t.Errorf("%q matches %q", c.pattern, m)
			}
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	p := MustCompilePattern("/v1/organizations/{orgId}/product/*")
	path := "/v1/organizations/acme/product/42"
	allocs := testing.AllocsPerRun(100, func() {
		c, ok := p.Match(path)
		if !ok || c.Value(0) != "acme" {
			t.Fatal("no match")
		}
	})
	if allocs != 0 {
		t.Errorf("Pattern.Match allocates %v times", allocs)
	}
	l := benchLimits(t, 50)
	dst := make([]Match, 0, 8)
	allocs = testing.AllocsPerRun(100, func() {
		dst = l.MatchHTTP("GET", "/v1/organizations/acme/product/42", dst[:0])
		if len(dst) != 2 {
			t.Fatalf("%d matches", len(dst))
		}
		dst = l.MatchGRPC("/svc49.Orders/Create", dst[:0])
		if len(dst) != 1 {
			t.Fatalf("%d grpc matches", len(dst))
		}
	})
	if allocs != 0 {
		t.Errorf("MatchHTTP+MatchGRPC allocate %v times", allocs)
	}
}

// benchLimits builds n HTTP SLAs on distinct resources (plus one catch-all
// and the seed's get-product at the end, the worst case for a linear scan)
// and n gRPC SLAs.
func benchLimits(tb testing.TB, n int) *Limits {
	tb.Helper()
	var b strings.Builder
	b.WriteString("slas:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - id: r%d\n    match: {methods: [GET, POST], pathPattern: \"/v1/organizations/{orgId}/resource%d/*\"}\n    tiers: [{period: 10, threshold: 100}]\n", i, i)
		fmt.Fprintf(&b, "  - id: g%d\n    tenant: {metadata: x-tenant}\n    match: {grpcMethods: [/svc%d.Orders/*]}\n    tiers: [{period: 10, threshold: 100}]\n", i, i)
	}
	b.WriteString("  - id: all\n    match: {pathPattern: \"/v1/organizations/{orgId}/**\"}\n    tiers: [{period: 60, threshold: 100000}]\n")
	b.WriteString("  - id: get-product\n    match: {methods: [GET], pathPattern: \"/v1/organizations/{orgId}/product/*\"}\n    tiers: [{period: 10, threshold: 1000}, {period: 1, threshold: 200}]\n")
	l, err := Parse("bench.yaml", []byte(b.String()))
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

func BenchmarkPatternMatch(b *testing.B) {
	p := MustCompilePattern("/v1/organizations/{orgId}/product/*")
	path := "/v1/organizations/acme/product/42"
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := p.Match(path); !ok {
			b.Fatal("no match")
		}
	}
}

func BenchmarkLimitsMatchHTTP(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		l := benchLimits(b, n)
		dst := make([]Match, 0, 8)
		b.Run(fmt.Sprintf("slas=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				dst = l.MatchHTTP("GET", "/v1/organizations/acme/product/42", dst[:0])
				if len(dst) != 2 {
					b.Fatal(len(dst))
				}
			}
		})
	}
}

func BenchmarkLimitsMatchGRPC(b *testing.B) {
	l := benchLimits(b, 50)
	dst := make([]Match, 0, 8)
	b.ReportAllocs()
	for b.Loop() {
		dst = l.MatchGRPC("/svc49.Orders/Create", dst[:0])
		if len(dst) != 1 {
			b.Fatal(len(dst))
		}
	}
}
