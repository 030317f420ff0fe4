package httpfilter

import (
	"fmt"
	"slices"
	"strings"
)

// MaxCaptures is the largest number of {name} variables a path pattern may
// have. It bounds [Captures], which is a fixed-size array so that matching
// does not allocate.
const MaxCaptures = 8

const (
	maxPatternLen      = 1024 // bytes
	maxPatternSegments = 64
	maxNameLen         = 64
)

// Pattern is a compiled path pattern such as
// "/v1/organizations/{orgId}/product/*". Segments are separated by "/":
//
//   - a literal segment ("product") matches exactly that segment (case-sensitive);
//   - "*" matches exactly one segment;
//   - "{name}" matches exactly one segment and captures it as name;
//   - "**" matches the rest of the path, whatever it is, including nothing
//     ("/v1/**" matches "/v1", "/v1/" and "/v1/a/b"); it may only be the last
//     segment.
//
// The pattern "/" matches only the path "/". Empty segments ("//", a trailing
// "/"), the dot segments "." and "..", and the characters "?", "#" and "%"
// are not allowed in a pattern: a pattern is compared with decoded path
// segments, so a literal is written decoded ("café", not "caf%C3%A9"),
// and it never sees the query or the fragment.
//
// A path is matched the way net/http's ServeMux (Go 1.22 and later) routes
// it, so that a middleware in front of a ServeMux charges what the mux
// serves: the path is the escaped one (r.URL.EscapedPath(); a path without
// "%" is its own escaped form), it is split at "/", and each segment is
// decoded on its own before it is compared or captured. "%2F" inside a
// segment stays inside it: "/o/a%2Fb/p" has the three segments "o", "a/b"
// and "p", and {name} captures "a/b", what r.PathValue returns. As in
// ServeMux, "*" and "{name}" never match a trailing slash or a segment that
// decodes to "/" alone ("%2F"), and the pattern "/" also matches "/%2F". A
// path ServeMux would redirect (one with "//", or a "." or ".." segment;
// "%2E" is not a dot) never matches.
//
// Matching does not allocate, except to decode a captured segment that
// holds %-escapes; other captured values are substrings of the path,
// returned in a fixed-size [Captures].
//
// The zero value matches nothing; use [CompilePattern]. A Pattern is
// immutable and safe for concurrent use.
type Pattern struct {
	src   string
	segs  []segment
	names []string // capture names, in order of appearance

	// For matching against a pre-split path (matchSegs): the literal
	// checks, last segment first (the most specific part of a path is
	// usually at its end, so mismatches are found with one compare), then
	// the wildcard segments.
	lits  []segment // kind segLiteral, with pos set
	wilds []segment // kind segStar or segCapture, with pos set
	nsegs int       // segments before a final "**"
	rest  bool      // ends with "**"
}

type segKind uint8

const (
	segLiteral segKind = iota
	segStar            // *
	segCapture         // {name}
	segRest            // **
)

type segment struct {
	kind segKind
	lit  string // segLiteral only
	idx  uint8  // segCapture only: index into Captures
	pos  uint8  // position of the segment in the path
}

// Captures holds the values of a pattern's {name} variables for one match:
// decoded path segments. The zero value holds no captures. A Captures is a
// plain value; copy it freely.
type Captures struct {
	names []string // the pattern's names; shared, never modified
	vals  [MaxCaptures]string
}

// Len returns the number of variables captured.
func (c *Captures) Len() int { return len(c.names) }

// Name returns the name of the i-th variable, 0 <= i < Len().
func (c *Captures) Name(i int) string { return c.names[i] }

// Value returns the value of the i-th variable, 0 <= i < Len().
func (c *Captures) Value(i int) string { return c.vals[i] }

// Get returns the value captured for {name}, and whether the pattern has such
// a variable.
func (c *Captures) Get(name string) (string, bool) {
	for i, n := range c.names {
		if n == name {
			return c.vals[i], true
		}
	}
	return "", false
}

// CompilePattern parses a path pattern. See [Pattern] for the syntax.
func CompilePattern(s string) (*Pattern, error) {
	p, err := compilePattern(s)
	if err != nil {
		return nil, fmt.Errorf("httpfilter: pattern %q: %w", s, err)
	}
	return p, nil
}

// MustCompilePattern is like [CompilePattern] but panics on error. It is meant
// for patterns that are constants in a program.
func MustCompilePattern(s string) *Pattern {
	p, err := CompilePattern(s)
	if err != nil {
		panic(err)
	}
	return p
}

// compilePattern returns errors without a prefix so that the limits loader
// can place them after "file:line: sla ...: match.pathPattern: ".
func compilePattern(s string) (*Pattern, error) {
	switch {
	case s == "":
		return nil, fmt.Errorf("empty pattern")
	case len(s) > maxPatternLen:
		return nil, fmt.Errorf("longer than %d bytes", maxPatternLen)
	case s[0] != '/':
		return nil, fmt.Errorf("must start with \"/\"")
	}
	p := &Pattern{src: s}
	if s == "/" {
		return p, nil
	}
	parts := strings.Split(s[1:], "/")
	if len(parts) > maxPatternSegments {
		return nil, fmt.Errorf("more than %d segments", maxPatternSegments)
	}
	for i, part := range parts {
		n := i + 1 // 1-based segment number for messages
		switch {
		case part == "":
			if i == len(parts)-1 {
				return nil, fmt.Errorf("trailing \"/\" is not allowed")
			}
			return nil, fmt.Errorf("segment %d is empty (\"//\")", n)
		case part == "**":
			if i != len(parts)-1 {
				return nil, fmt.Errorf("segment %d: \"**\" must be the last segment", n)
			}
			p.segs = append(p.segs, segment{kind: segRest})
		case part == "*":
			p.segs = append(p.segs, segment{kind: segStar})
		case part[0] == '{':
			if part[len(part)-1] != '}' {
				if strings.IndexByte(part, '}') >= 0 {
					return nil, fmt.Errorf("segment %d %q: a variable must be the whole segment", n, part)
				}
				return nil, fmt.Errorf("segment %d %q: unclosed \"{\"", n, part)
			}
			name := part[1 : len(part)-1]
			if err := checkIdent(name); err != nil {
				return nil, fmt.Errorf("segment %d %q: variable name %w", n, part, err)
			}
			for _, old := range p.names {
				if old == name {
					return nil, fmt.Errorf("segment %d: duplicate variable {%s}", n, name)
				}
			}
			if len(p.names) == MaxCaptures {
				return nil, fmt.Errorf("more than %d variables", MaxCaptures)
			}
			p.segs = append(p.segs, segment{kind: segCapture, idx: uint8(len(p.names))})
			p.names = append(p.names, name)
		default:
			if part == "." || part == ".." {
				return nil, fmt.Errorf("segment %d: dot segment %q never matches a cleaned path", n, part)
			}
			for j := 0; j < len(part); j++ {
				switch c := part[j]; {
				case c == '*':
					return nil, fmt.Errorf("segment %d %q: \"*\" must be the whole segment", n, part)
				case c == '{' || c == '}':
					return nil, fmt.Errorf("segment %d %q: a variable must be the whole segment", n, part)
				case c < 0x20 || c == 0x7f:
					return nil, fmt.Errorf("segment %d: control character %#x", n, c)
				case c == '?':
					return nil, fmt.Errorf("segment %d %q: \"?\" is not allowed: a pattern matches the path, never the query", n, part)
				case c == '#':
					return nil, fmt.Errorf("segment %d %q: \"#\" is not allowed: the fragment never reaches the server", n, part)
				case c == '%':
					return nil, fmt.Errorf("segment %d %q: \"%%\" is not allowed: segments are matched decoded, so write the character itself (a segment cannot hold \"/\")", n, part)
				}
			}
			p.segs = append(p.segs, segment{kind: segLiteral, lit: part})
		}
	}
	for i, sg := range p.segs {
		sg.pos = uint8(i)
		switch sg.kind {
		case segLiteral:
			p.lits = append(p.lits, sg)
		case segStar, segCapture:
			p.wilds = append(p.wilds, sg)
		case segRest:
			p.rest = true
			continue
		}
		p.nsegs++
	}
	slices.Reverse(p.lits)
	return p, nil
}

// checkIdent reports whether s is a valid variable name:
// [A-Za-z_][A-Za-z0-9_]*, at most maxNameLen bytes.
func checkIdent(s string) error {
	if s == "" {
		return fmt.Errorf("is empty")
	}
	if len(s) > maxNameLen {
		return fmt.Errorf("is longer than %d bytes", maxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		digit := '0' <= c && c <= '9'
		if !letter && !(digit && i > 0) {
			return fmt.Errorf("%q must match [A-Za-z_][A-Za-z0-9_]*", s)
		}
	}
	return nil
}

// String returns the pattern as written. It is the endpoint component of
// counter keys: two SLAs with the same pattern string count the same
// endpoint, whatever the concrete paths.
func (p *Pattern) String() string { return p.src }

// Names returns the names of the pattern's variables in order. The caller must
// not modify the returned slice.
func (p *Pattern) Names() []string { return p.names }

// Index returns the position of variable name in [Captures], or -1.
func (p *Pattern) Index(name string) int {
	for i, n := range p.names {
		if n == name {
			return i
		}
	}
	return -1
}

// Match reports whether path, an escaped path such as r.URL.EscapedPath()
// returns, matches the pattern, and returns the captured variables. See
// [Pattern] for the rules.
func (p *Pattern) Match(path string) (Captures, bool) {
	var c Captures
	ok := p.match(path, &c)
	return c, ok
}

// Matches reports whether path matches the pattern, without captures.
func (p *Pattern) Matches(path string) bool {
	var c Captures
	return p.match(path, &c)
}

func (p *Pattern) match(path string, c *Captures) bool {
	if p == nil || p.src == "" {
		return false
	}
	var ps pathSegs
	return ps.split(path, true) && ps.clean && p.matchSegs(&ps, c)
}

// matchSegs reports whether the split path matches, and fills c (which
// must be zero or reused by the caller; on failure its values are
// unspecified). It matches ps as it is: the caller decides what to do with
// a path that is not clean. FuzzPattern holds it against a transcription of
// ServeMux's matching, FuzzServeMux against ServeMux itself.
func (p *Pattern) matchSegs(ps *pathSegs, c *Captures) bool {
	if p.rest {
		if ps.n < p.nsegs {
			return false
		}
	} else if ps.n != p.nsegs {
		if p.nsegs == 0 && p.src == "/" { // the pattern "/": ServeMux's "/{$}"
			return ps.n == 1 && ps.segs[0] == slashSeg
		}
		return false
	}
	for i := range p.lits {
		l := &p.lits[i]
		if ps.pct&(1<<l.pos) != 0 {
			if !unescapedEqual(ps.segs[l.pos], l.lit) {
				return false
			}
		} else if ps.segs[l.pos] != l.lit {
			return false
		}
	}
	for i := range p.wilds {
		if ps.segs[p.wilds[i].pos] == slashSeg {
			return false
		}
	}
	c.names = p.names
	for i := range p.wilds {
		if w := &p.wilds[i]; w.kind == segCapture {
			v := ps.segs[w.pos]
			if ps.pct&(1<<w.pos) != 0 {
				v = pathUnescape(v)
			}
			c.vals[w.idx] = v
		}
	}
	return true
}

// grpcPattern is a compiled gRPC method pattern: "*" (every method),
// "/pkg.Service/*" (every method of a service) or "/pkg.Service/Method".
type grpcPattern struct {
	src    string
	kind   grpcKind
	prefix string // grpcService: "/pkg.Service/"
}

type grpcKind uint8

const (
	grpcExact grpcKind = iota
	grpcService
	grpcAny
)

func compileGRPCPattern(s string) (grpcPattern, error) {
	if s == "*" {
		return grpcPattern{src: s, kind: grpcAny}, nil
	}
	if len(s) > maxPatternLen {
		return grpcPattern{}, fmt.Errorf("longer than %d bytes", maxPatternLen)
	}
	const form = `must be "*", "/pkg.Service/*" or "/pkg.Service/Method"`
	if s == "" || s[0] != '/' {
		return grpcPattern{}, fmt.Errorf("%q %s", s, form)
	}
	svc, method, ok := strings.Cut(s[1:], "/")
	if !ok || svc == "" || method == "" || strings.IndexByte(method, '/') >= 0 {
		return grpcPattern{}, fmt.Errorf("%q %s", s, form)
	}
	for i := 0; i < len(svc); i++ {
		if c := svc[i]; !isIdentByte(c) && c != '.' {
			return grpcPattern{}, fmt.Errorf("%q: service %q: invalid character %q", s, svc, c)
		}
	}
	if svc[0] == '.' || svc[len(svc)-1] == '.' || strings.Contains(svc, "..") {
		return grpcPattern{}, fmt.Errorf("%q: service %q: empty package component", s, svc)
	}
	if method == "*" {
		return grpcPattern{src: s, kind: grpcService, prefix: s[:len(s)-1]}, nil
	}
	for i := 0; i < len(method); i++ {
		if !isIdentByte(method[i]) {
			return grpcPattern{}, fmt.Errorf("%q: method %q: invalid character %q", s, method, method[i])
		}
	}
	return grpcPattern{src: s, kind: grpcExact}, nil
}

func isIdentByte(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// match reports whether the full gRPC method name ("/pkg.Service/Method", as
// in grpc.UnaryServerInfo.FullMethod) matches.
func (g *grpcPattern) match(full string) bool {
	switch g.kind {
	case grpcAny:
		return true
	case grpcService:
		if len(full) <= len(g.prefix) || full[:len(g.prefix)] != g.prefix {
			return false
		}
		return strings.IndexByte(full[len(g.prefix):], '/') < 0
	default:
		return full == g.src
	}
}
