package httpfilter

import (
	"errors"
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

// FuzzPattern compiles a path pattern and matches it: never a panic; the
// sequential matcher (Pattern.Match) and the router's split-path matcher
// agree; and a path built from the pattern (each wildcard replaced by a
// value) matches it with the right captures.
func FuzzPattern(f *testing.F) {
	for _, p := range []string{"/", "/a", "/v1/organizations/{orgId}/product/*", "/**", "/a/**", "/{a}/{b}/**",
		"/a//b", "/a/", "/{a", "/*/*", "/ü/{x}", "/shop.v1.Orders/*", "*", "/a.B/C"} {
		f.Add(p, "/v1/organizations/acme/product/1")
		f.Add(p, p)
	}
	f.Add("/a/**", "/a")
	f.Add("/", "/")
	f.Add("/**", "")
	f.Fuzz(func(t *testing.T, pattern, path string) {
		if g, err := compileGRPCPattern(pattern); err == nil {
			if !g.match(pattern) && g.kind != grpcService {
				t.Fatalf("gRPC pattern %q does not match itself", pattern)
			}
			g.match(path)
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
			var ps pathSegs
			var c2 Captures
			ok2 := ps.split(path) && p.matchSegs(&ps, &c2)
			if ok1 != ok2 {
				t.Fatalf("%q vs %q: Match = %v, matchSegs = %v", pattern, path, ok1, ok2)
			}
			if ok1 {
				for i := 0; i < c1.Len(); i++ {
					if c1.Value(i) != c2.Value(i) || c1.Value(i) == "" {
						t.Fatalf("%q vs %q: capture %d: %q vs %q", pattern, path, i, c1.Value(i), c2.Value(i))
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
				b.WriteString(seg.lit)
			case segStar:
				b.WriteString("s" + strconv.Itoa(i))
			case segCapture:
				v := "v" + strconv.Itoa(i)
				want[p.names[seg.idx]] = v
				b.WriteString(v)
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
			if _, ok := check(pattern); !ok {
				t.Fatalf("literal pattern %q does not match itself", pattern)
			}
		}
	})
}
