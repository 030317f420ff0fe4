package httpfilter

import (
	"net/url"
	"path"
	"strings"
)

// A request path is split here the way net/http's ServeMux (Go 1.22 and
// later, routing_tree.go) splits it, so that the filter charges the
// requests the mux serves and no others:
//
//   - the mux matches the escaped path (r.URL.EscapedPath()), segment by
//     segment, decoding each segment on its own: "%2F" stays inside its
//     segment;
//   - a trailing slash, and a segment that decodes to "/" alone, are the
//     same to the mux ("/"): a single wildcard matches neither, "/{$}"
//     matches both;
//   - for every method but CONNECT, a path that is not clean (cleanPath
//     below changes it) is redirected, never served by a handler. CONNECT
//     paths are matched as they are. An empty segment ("//") then matches
//     a wildcard without being recorded as its value (routingNode.findChild
//     takes "" for the wildcard key), so the handler's r.PathValue values
//     are shifted or out of range: the filter refuses those requests when
//     they match an SLA (see Filter.Middleware).

// slashSeg stands for a trailing slash, or a segment that decodes to "/",
// in pathSegs.segs.
const slashSeg = "/"

// pathSegs is a request path split into its segments once, so that many
// patterns can be tried against it with a count check and a few string
// compares each.
type pathSegs struct {
	n     int    // number of segments (all of them, even past len(segs))
	pct   uint64 // bit i: segs[i] holds %-escapes, decoded when compared or captured
	clean bool   // ServeMux would not redirect it: no "//", no "." or ".." segment
	empty bool   // has "//" (an empty segment other than a trailing slash)
	segs  [maxPatternSegments]string
}

// split fills ps from p and reports whether p starts with "/". escaped says
// whether p is an escaped path (r.URL.EscapedPath()) or already decoded
// (r.URL.Path when r.URL.RawPath is empty: then no segment holds an
// encoded "/", and decoding segment by segment changes nothing). Only the
// first len(segs) segments are kept; the others are counted and checked
// for cleanliness.
func (ps *pathSegs) split(p string, escaped bool) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	ps.n, ps.pct, ps.clean, ps.empty = 0, 0, true, false
	rest := p[1:]
	for {
		j := strings.IndexByte(rest, '/')
		seg := rest
		if j >= 0 {
			seg = rest[:j]
		}
		switch {
		case seg == "":
			if j >= 0 {
				ps.clean, ps.empty = false, true // "//"
			} else {
				seg = slashSeg // a trailing slash, or the path "/"
			}
		case seg[0] == '.' && (len(seg) == 1 || seg == ".."):
			ps.clean = false
		}
		if ps.n < len(ps.segs) {
			if escaped && strings.IndexByte(seg, '%') >= 0 {
				if seg == "%2F" || seg == "%2f" {
					seg = slashSeg
				} else {
					ps.pct |= 1 << ps.n
				}
			}
			ps.segs[ps.n] = seg
		}
		ps.n++
		if j < 0 {
			return true
		}
		rest = rest[j+1:]
	}
}

// pathUnescape decodes a path segment as ServeMux does: an invalid escape
// leaves the segment as it is.
func pathUnescape(seg string) string {
	u, err := url.PathUnescape(seg)
	if err != nil {
		return seg
	}
	return u
}

// unescapedEqual reports whether pathUnescape(seg) == lit, without
// allocating.
func unescapedEqual(seg, lit string) bool {
	for i := 0; i < len(seg); i++ {
		if seg[i] == '%' && (i+2 >= len(seg) || !isHex(seg[i+1]) || !isHex(seg[i+2])) {
			return seg == lit // invalid escape: compared as it is
		}
	}
	j := 0
	for i := 0; i < len(seg); j++ {
		c := seg[i]
		if c == '%' {
			c = unhex(seg[i+1])<<4 | unhex(seg[i+2])
			i += 3
		} else {
			i++
		}
		if j >= len(lit) || lit[j] != c {
			return false
		}
	}
	return j == len(lit)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// muxCleanPath is ServeMux's cleanPath (net/http/server.go): the path the
// mux redirects p to when the two differ. Unlike [path.Clean] it keeps a
// trailing slash.
func muxCleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		if len(p) == len(np)+1 && strings.HasPrefix(p, np) {
			np = p
		} else {
			np += "/"
		}
	}
	return np
}
