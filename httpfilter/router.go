package httpfilter

// methodNames are the HTTP methods a limits file may name, in canonical
// order (the order of SLA.Methods and SLA.KeyMethod).
var methodNames = [...]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"}

const (
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
// source is a path variable: ("", false) for other sources. A match always
// captures a non-empty value.
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
			if s.methods&(1<<slot) != 0 {
				r.http[slot] = append(r.http[slot], s)
			}
		}
	}
	return r
}

// MatchHTTP appends to dst every enabled HTTP SLA that matches the request,
// in file order, and returns the extended slice. Every match applies: a
// request is admitted only if all of them admit it. With a dst of enough
// capacity it does not allocate. path is the request's path (r.URL.Path),
// preferably cleaned.
func (l *Limits) MatchHTTP(method, path string, dst []Match) []Match {
	cands := l.router.http[methodIndex(method)]
	if len(cands) == 0 {
		return dst
	}
	var ps pathSegs
	if !ps.split(path) {
		return dst
	}
	var c Captures // reused: a successful match sets every value it has
	for _, s := range cands {
		if s.Pattern.matchSegs(&ps, &c) {
			dst = append(dst, Match{SLA: s, Captures: c})
		}
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
