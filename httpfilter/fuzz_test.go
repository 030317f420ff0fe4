package httpfilter

import (
	"errors"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, name := range []string{"testdata/seed.yaml", "testdata/seed002.yaml", "testdata/seed002_header.yaml",
		"testdata/limits.example.yaml", "limits.yaml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, c := range errCases() {
		f.Add(y(c.yaml))
	}
	f.Add([]byte("slas: &a [*a]"))
	f.Add([]byte("a: &x {b: *x}"))
	f.Add([]byte("slas:\n  - !!map {id: a}\n"))
	f.Add([]byte("slas:\n  - id: a\n    match: {pathPattern: /a}\n    noTenant: shared\n    tiers: [{period: !!int x, threshold: !!float y}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Parse("fuzz.yaml", data)
		l2, err2 := Parse("fuzz.yaml", data)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("not deterministic:\n%v\n---\n%v", err, err2)
		}
		if err != nil {
			if l != nil {
				t.Fatal("limits returned with an error")
			}
			joined, ok := err.(interface{ Unwrap() []error })
			if !ok {
				t.Fatalf("error is not joined: %T %v", err, err)
			}
			for _, e := range joined.Unwrap() {
				var fe *FieldError
				if !errors.As(e, &fe) || !strings.HasPrefix(e.Error(), "fuzz.yaml:") {
					t.Fatalf("error does not start with the file name: %q", e)
				}
			}
			return
		}
		if l2.Digest != l.Digest || len(l2.SLAs) != len(l.SLAs) || len(l.SLAs) == 0 {
			t.Fatalf("bad result: %d SLAs", len(l.SLAs))
		}
		for i := range l.SLAs {
			s := &l.SLAs[i]
			if s.Cost < 1 || len(s.Tiers) == 0 || s.Endpoint == "" || s.KeyMethod == "" || (s.Pattern == nil) != (len(s.GRPCMethods) > 0) {
				t.Fatalf("bad SLA %+v", s)
			}
			all := [][]Tier{s.Tiers}
			for _, o := range s.Overrides {
				all = append(all, o)
			}
			for _, tiers := range all {
				for _, tr := range tiers {
					if tr.Period <= 0 || tr.Period > maxPeriod || tr.Threshold < 0 || tr.Threshold > maxThreshold ||
						(tr.Threshold > 0 && tr.Threshold < s.Cost) {
						t.Fatalf("bad tier %+v in %s", tr, s.ID)
					}
				}
			}
			if s.Tenant.Kind == TenantPath && (s.Pattern == nil || s.Pattern.Index(s.Tenant.Name) != s.Tenant.Index) {
				t.Fatalf("bad tenant %+v", s.Tenant)
			}
			if s.Tenant.Kind == TenantNone && s.NoTenant != NoTenantShared {
				t.Fatalf("no tenant source with reject: %+v", s)
			}
		}
		ms := l.MatchHTTP("GET", "/v1/organizations/acme/product/1", nil)
		ms = l.MatchGRPC("/a.B/C", ms)
		for _, m := range ms {
			m.PathTenant()
		}
	})
}

// FuzzPattern compiles a path pattern and matches it: never a panic;
// Pattern.Match agrees with refMatch, a transcription of ServeMux's own
// matching; the router's split marks a path clean exactly when ServeMux's
// cleanPath leaves it alone, in both of its modes; and a path built from
// the pattern (each wildcard replaced by a value) matches it with the right
// captures.
func FuzzPattern(f *testing.F) {
	for _, p := range []string{"/", "/a", "/v1/organizations/{orgId}/product/*", "/**", "/a/**", "/{a}/{b}/**",
		"/a//b", "/a/", "/{a", "/*/*", "/ü/{x}", "/shop.v1.Orders/*", "*", "/a.B/C", "/a b/{c}"} {
		f.Add(p, "/v1/organizations/acme/product/1")
		f.Add(p, p)
	}
	f.Add("/a/**", "/a")
	f.Add("/", "/")
	f.Add("/", "/%2F")
	f.Add("/**", "")
	f.Add("/o/{org}/p/{id}", "/o/a%2Fb/p/1%2f2")
	f.Add("/o/{org}/p/*", "/o/%2e%2e/p/%2F")
	f.Add("/o/{org}/p/*", "/o/x/../p/1/")
	f.Add("/a b/{c}", "/a%20b/%zz")
	f.Fuzz(func(t *testing.T, pattern, path string) {
		if g, err := compileGRPCPattern(pattern); err == nil {
			if !g.match(pattern) && g.kind != grpcService {
				t.Fatalf("gRPC pattern %q does not match itself", pattern)
			}
			g.match(path)
		}
		var ps pathSegs
		if ps.split(path, true) && ps.clean != (muxCleanPath(path) == path) {
			t.Fatalf("split(%q).clean = %v, cleanPath = %q", path, ps.clean, muxCleanPath(path))
		}
		if ps.split(path, false) && ps.clean != (muxCleanPath(path) == path) {
			t.Fatalf("split(%q, decoded).clean = %v, cleanPath = %q", path, ps.clean, muxCleanPath(path))
		}
		p, err := compilePattern(pattern)
		if err != nil {
			if p != nil {
				t.Fatal("pattern returned with an error")
			}
			return
		}
		if p.String() != pattern {
			t.Fatalf("String() = %q", p.String())
		}
		check := func(path string) (Captures, bool) {
			c1, ok1 := p.Match(path)
			c2, ok2 := refMatch(p, path)
			if ok1 != ok2 {
				t.Fatalf("%q vs %q: Match = %v, ServeMux's rules say %v", pattern, path, ok1, ok2)
			}
			if ok1 {
				for i := 0; i < c1.Len(); i++ {
					if c1.Value(i) != c2[i] {
						t.Fatalf("%q vs %q: capture %d: %q, ServeMux's rules say %q", pattern, path, i, c1.Value(i), c2[i])
					}
				}
			}
			return c1, ok1
		}
		check(path)
		// A concrete path for the pattern.
		var b strings.Builder
		want := map[string]string{}
		for i, seg := range p.segs {
			b.WriteByte('/')
			switch seg.kind {
			case segLiteral:
				b.WriteString(url.PathEscape(seg.lit))
			case segStar:
				b.WriteString("s" + strconv.Itoa(i))
			case segCapture:
				v := "v/" + strconv.Itoa(i)
				want[p.names[seg.idx]] = v
				b.WriteString(url.PathEscape(v))
			case segRest:
				b.WriteString("r/s/t")
			}
		}
		concrete := b.String()
		if concrete == "" {
			concrete = "/"
		}
		c, ok := check(concrete)
		if !ok {
			t.Fatalf("%q does not match its own concrete path %q", pattern, concrete)
		}
		for name, v := range want {
			if got, _ := c.Get(name); got != v {
				t.Fatalf("%q on %q: {%s} = %q, want %q", pattern, concrete, name, got, v)
			}
		}
		if !strings.ContainsAny(pattern, "*{") {
			if _, ok := check((&url.URL{Path: pattern}).EscapedPath()); !ok {
				t.Fatalf("literal pattern %q does not match itself", pattern)
			}
		}
	})
}

// refMatch is how ServeMux (net/http/routing_tree.go, matchPath) would
// match path against the mux pattern that p stands for ("*" and {name}
// for single wildcards, "/" for "/{$}", and "/a/**" for the two patterns
// "/a" and "/a/{rest...}"), written as a plain walk over p's segments. A
// path the mux would redirect never reaches the tree. It returns the
// values of p's variables in order.
func refMatch(p *Pattern, path string) ([]string, bool) {
	if path == "" || path[0] != '/' || muxCleanPath(path) != path {
		return nil, false
	}
	vals := make([]string, len(p.names))
	if len(p.segs) == 0 { // "/{$}"
		seg, rest := muxFirstSegment(path)
		return vals, seg == "/" && rest == ""
	}
	rest := path
	for _, s := range p.segs {
		if s.kind == segRest {
			return vals, true // "/a" (rest == "") or "/a/{rest...}"
		}
		if rest == "" {
			return nil, false
		}
		var seg string
		seg, rest = muxFirstSegment(rest)
		switch s.kind {
		case segLiteral:
			if seg != s.lit {
				return nil, false
			}
		case segStar, segCapture:
			if seg == "/" {
				return nil, false
			}
			if s.kind == segCapture {
				vals[s.idx] = seg
			}
		}
	}
	return vals, rest == ""
}

// muxFirstSegment is ServeMux's firstSegment (routing_tree.go).
func muxFirstSegment(path string) (seg, rest string) {
	if path == "/" {
		return "/", ""
	}
	path = path[1:]
	i := strings.IndexByte(path, '/')
	if i < 0 {
		i = len(path)
	}
	u, err := url.PathUnescape(path[:i])
	if err != nil {
		u = path[:i]
	}
	return u, path[i:]
}
