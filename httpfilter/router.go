package httpfilter

// methodNames are the HTTP methods a limits file may name, in canonical
// order (the order of SLA.Methods and SLA.KeyMethod).
var methodNames = [...]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"}

const (
	getSlot     = 0
	headSlot    = 1
	otherMethod = len(methodNames) // slot for extension methods (PROPFIND, ...)
	numSlots    = otherMethod + 1
	allMethods  = uint16(1)<<numSlots - 1
)

// methodIndex returns the slot of an HTTP method; methods are
// case-sensitive (RFC 9110), so "get" is an extension method.
func methodIndex(m string) int {
	switch m {
	case "GET":
		return 0
	case "HEAD":
		return 1
	case "POST":
		return 2
	case "PUT":
		return 3
	case "PATCH":
		return 4
	case "DELETE":
		return 5
	case "OPTIONS":
		return 6
	case "CONNECT":
		return 7
	case "TRACE":
		return 8
	}
	return otherMethod
}

func methodBit(m string) uint16 { return 1 << methodIndex(m) }

// Match is one SLA that applies to a request. The zero value has a nil SLA.
type Match struct {
	SLA      *SLA
	Captures Captures // the path's variables (HTTP SLAs only)
}

// PathTenant returns the tenant taken from the path when the SLA's tenant
// source is a path variable: ("", false) for other sources. The value is
// the decoded segment, what r.PathValue returns; it is empty only for a
// CONNECT request whose path has "//" (ServeMux matches those as they are).
func (m *Match) PathTenant() (string, bool) {
	if m.SLA == nil || m.SLA.Tenant.Kind != TenantPath {
		return "", false
	}
	return m.Captures.vals[m.SLA.Tenant.Index], true
}

// router indexes the enabled SLAs: HTTP SLAs by method slot (each slot's
// list is in file order and already contains the SLAs that match every
// method), gRPC SLAs in file order. Matching splits the path once, then
// scans one slot's list; each pattern costs a segment-count check and
// usually one string compare to reject, so this stays cheap for the tens of
// SLAs a service has (see BenchmarkLimitsMatchHTTP).
//
// HEAD is routed as ServeMux routes it: a request is served by a HEAD
// handler when one matches, otherwise by the GET handler. So the HEAD list
// also holds the SLAs that name GET but not HEAD, and they apply to a HEAD
// request unless an SLA that names HEAD matches it too (see
// Limits.MatchHTTP).
type router struct {
	http [numSlots][]*SLA
	grpc []*SLA
}

func buildRouter(slas []SLA) router {
	var r router
	for i := range slas {
		s := &slas[i]
		if !s.Enabled {
			continue
		}
		if s.IsGRPC() {
			r.grpc = append(r.grpc, s)
			continue
		}
		for slot := 0; slot < numSlots; slot++ {
			if s.methods&(1<<slot) != 0 || slot == headSlot && s.headAsGET() {
				r.http[slot] = append(r.http[slot], s)
			}
		}
	}
	return r
}

// namesHEAD reports whether the SLA lists HEAD in its methods (an SLA
// without methods matches HEAD without naming it).
func (s *SLA) namesHEAD() bool { return s.Methods != nil && s.methods&(1<<headSlot) != 0 }

// headAsGET reports whether the SLA applies to HEAD requests only as GET
// ones: it names GET but not HEAD.
func (s *SLA) headAsGET() bool {
	return s.methods&(1<<getSlot) != 0 && s.methods&(1<<headSlot) == 0
}

// MatchHTTP appends to dst every enabled HTTP SLA that matches the request,
// in file order, and returns the extended slice. Every match applies: a
// request is admitted only if all of them admit it. With a dst of enough
// capacity it does not allocate (except to decode a captured segment that
// holds %-escapes).
//
// path is the escaped path, r.URL.EscapedPath() (a path without "%" is its
// own escaped form), matched segment by segment as ServeMux routes it (see
// [Pattern]). A path ServeMux would redirect (not clean: "//", a "." or
// ".." segment) matches nothing, except for CONNECT, which ServeMux routes
// as it is. A HEAD request matches the SLAs that match HEAD; unless one of
// them names HEAD in its methods, it also matches those that name GET, as
// ServeMux serves HEAD with the GET handler when no HEAD handler matches.
func (l *Limits) MatchHTTP(method, path string, dst []Match) []Match {
	var ps pathSegs
	if !ps.split(path, true) || !ps.clean && method != "CONNECT" {
		return dst
	}
	return l.matchSplit(method, &ps, dst)
}

// matchSplit is MatchHTTP on a split path, clean or not.
func (l *Limits) matchSplit(method string, ps *pathSegs, dst []Match) []Match {
	slot := methodIndex(method)
	cands := l.router.http[slot]
	if len(cands) == 0 {
		return dst
	}
	start := len(dst)
	named := false // HEAD: an SLA naming HEAD matched
	var c Captures // reused: a successful match sets every value it has
	for _, s := range cands {
		if s.Pattern.matchSegs(ps, &c) {
			dst = append(dst, Match{SLA: s, Captures: c})
			named = named || slot == headSlot && s.namesHEAD()
		}
	}
	if named {
		// The HEAD handler serves the request: the SLAs that apply to
		// HEAD only as GET do not.
		keep := dst[:start]
		for _, m := range dst[start:] {
			if m.SLA.methods&(1<<headSlot) != 0 {
				keep = append(keep, m)
			}
		}
		clear(dst[len(keep):])
		dst = keep
	}
	return dst
}

// MatchGRPC appends to dst every enabled gRPC SLA that matches fullMethod
// ("/pkg.Service/Method"), in file order, and returns the extended slice.
// With a dst of enough capacity it does not allocate.
func (l *Limits) MatchGRPC(fullMethod string, dst []Match) []Match {
	for _, s := range l.router.grpc {
		if s.MatchGRPC(fullMethod) {
			dst = append(dst, Match{SLA: s})
		}
	}
	return dst
}
