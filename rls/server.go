package rls

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/node"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Method is the counters.Limit Method of every series the server counts:
// a descriptor's series is (tenant: its entries, endpoint: its domain,
// method: Method, period: its unit).
const Method = "RLS"

// maxEntries bounds the entries of one descriptor, and maxDescriptors the
// descriptors of one request.
const (
	maxEntries     = 16
	maxDescriptors = counters.MaxLimits
)

// Server answers ShouldRateLimit from a node, with the limits of a Config
// (which Set may replace at any time).
type Server struct {
	rlsv3.UnimplementedRateLimitServiceServer
	n   *node.Node
	cfg atomic.Pointer[Config]
}

// NewServer returns a server deciding with n under cfg.
func NewServer(n *node.Node, cfg *Config) *Server {
	s := &Server{n: n}
	s.cfg.Store(cfg)
	return s
}

// Set replaces the configuration (a reload); counts carry over for the
// descriptors whose domain, entries and unit stay the same.
func (s *Server) Set(cfg *Config) { s.cfg.Store(cfg) }

// ShouldRateLimit implements the Envoy rate limit service. Each descriptor
// is decided on its own, as envoy ratelimit does: its limit is the one the
// configuration's tree gives for its entries (or the override the request
// carries), its cost the descriptor's hits_addend, else the request's,
// else 1. A descriptor with no limit, an unlimited one, or an unknown
// domain is OK. The overall code is OVER_LIMIT if any descriptor is over
// its limit and not in shadow mode. The response carries the headers the
// HTTP middleware sets, for the most restrictive limit.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "rls: domain must not be empty")
	}
	ds := req.GetDescriptors()
	if len(ds) == 0 {
		return nil, status.Error(codes.InvalidArgument, "rls: descriptors must not be empty")
	}
	if len(ds) > maxDescriptors {
		return nil, status.Errorf(codes.InvalidArgument, "rls: %d descriptors, at most %d", len(ds), maxDescriptors)
	}
	cfg := s.cfg.Load()
	// The usual answer, of one descriptor, is one allocation with its
	// status, the status's messages and the headers; more descriptors take
	// two more, for their statuses and their messages.
	a := new(answer)
	resp := &a.resp
	resp.OverallCode = rlsv3.RateLimitResponse_OK
	var parts []statusParts
	if len(ds) <= len(a.parts) {
		resp.Statuses, parts = a.status[:len(ds)], a.parts[:len(ds)]
	} else {
		resp.Statuses, parts = make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(ds)), make([]statusParts, len(ds))
	}
	// First each descriptor's limit, and the names of the limits that the
	// matched ones replace: a replaced limit is not applied.
	type match struct {
		lim    *Limit
		shadow bool
		tenant string
	}
	var matchBuf [maxDescriptors]match
	matches := matchBuf[:len(ds)]
	var replaced map[string]bool
	var entries [maxEntries]Entry
	for i, d := range ds {
		if len(d.GetEntries()) == 0 || len(d.GetEntries()) > maxEntries {
			return nil, status.Errorf(codes.InvalidArgument, "rls: descriptors[%d]: %d entries, want 1 to %d", i, len(d.GetEntries()), maxEntries)
		}
		if d.GetIsNegativeHits() {
			return nil, status.Errorf(codes.InvalidArgument, "rls: descriptors[%d]: negative hits are not supported", i)
		}
		es := entries[:0]
		for _, e := range d.GetEntries() {
			es = append(es, Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		lim, shadow := s.limitOf(cfg, req.GetDomain(), d, es)
		parts[i].status.Code = rlsv3.RateLimitResponse_OK
		resp.Statuses[i] = &parts[i].status
		if lim == nil || lim.Unlimited {
			continue
		}
		matches[i] = match{lim: lim, shadow: shadow, tenant: tenantOf(es)}
		for _, name := range lim.Replaces {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			replaced[name] = true
		}
	}
	var worst counters.Decision // the most restrictive decision made
	decided := false
	for i, d := range ds {
		lim, st := matches[i].lim, resp.Statuses[i]
		if lim == nil || (lim.Name != "" && replaced[lim.Name]) {
			continue
		}
		cost := int64(req.GetHitsAddend())
		if h := d.GetHitsAddend(); h != nil {
			cost = int64(h.GetValue())
		} else if cost == 0 {
			cost = 1
		}
		ls := [1]counters.Limit{{Tenant: matches[i].tenant, Endpoint: req.GetDomain(), Method: Method, Period: lim.Period, Threshold: int64(lim.RequestsPerUnit)}}
		dec, err := s.n.Take(ctx, ls[:], cost)
		if err != nil {
			if errors.Is(err, counters.ErrBadKey) {
				return nil, status.Errorf(codes.InvalidArgument, "rls: descriptors[%d]: %v", i, err)
			}
			return nil, status.Errorf(codes.Unavailable, "rls: %v", err)
		}
		p := &parts[i]
		p.current.Name, p.current.RequestsPerUnit, p.current.Unit = lim.Name, lim.RequestsPerUnit, lim.Unit
		st.CurrentLimit = &p.current
		st.LimitRemaining = uint32(min(max(dec.Remaining, 0), 1<<32-1))
		p.reset.Seconds, p.reset.Nanos = int64(dec.Reset/time.Second), int32(dec.Reset%time.Second)
		st.DurationUntilReset = &p.reset
		if !dec.Allowed && !matches[i].shadow { // shadow mode answers OK whatever the decision
			st.Code, resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT, rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if !decided || (!dec.Allowed && worst.Allowed) || (dec.Allowed == worst.Allowed && dec.Remaining < worst.Remaining) {
			worst, decided = dec, true
		}
	}
	if decided {
		resp.ResponseHeadersToAdd = a.headers.set(&worst)
	}
	return resp, nil
}

// limitOf returns a descriptor's limit: the request's override (its unit,
// times unit_multiplier when set), else the configuration's, and whether
// it is in shadow mode. An override with a unit peerlimit does not support
// gives no limit.
func (s *Server) limitOf(cfg *Config, domain string, d *ratelimitv3.RateLimitDescriptor, es []Entry) (*Limit, bool) {
	if o := d.GetLimit(); o != nil {
		unit := rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit()) // the same numbers, as envoy ratelimit converts them
		period, ok := unitPeriod(unit)
		if !ok {
			return nil, false
		}
		if m := o.GetUnitMultiplier(); m != nil && m.GetValue() > 1 {
			period *= time.Duration(m.GetValue())
		}
		return &Limit{Unit: unit, Period: period, RequestsPerUnit: o.GetRequestsPerUnit()}, false
	}
	if cfg == nil {
		return nil, false
	}
	n := cfg.Lookup(domain, es)
	if n == nil {
		return nil, false
	}
	return n.Limit, n.Shadow
}

// tenantOf is a descriptor's series name: its entries as key=value, joined
// by "&", each part escaped so that two descriptors never share a name.
func tenantOf(es []Entry) string {
	if len(es) == 1 && !strings.ContainsAny(es[0].Key, "&=%") && !strings.ContainsAny(es[0].Value, "&=%") {
		return es[0].Key + "=" + es[0].Value // the usual case, in one allocation
	}
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(escape(e.Key))
		b.WriteByte('=')
		b.WriteString(escape(e.Value))
	}
	return b.String()
}

// escaper escapes the characters tenantOf joins with.
var escaper = strings.NewReplacer("%", "%25", "&", "%26", "=", "%3D")

func escape(s string) string {
	if !strings.ContainsAny(s, "&=%") {
		return s
	}
	return escaper.Replace(s)
}

func unitPeriod(u rlsv3.RateLimitResponse_RateLimit_Unit) (time.Duration, bool) {
	for _, v := range units {
		if v.unit == u {
			return v.period, true
		}
	}
	return 0, false
}

// Headers are the HTTP middleware's headers for a decision: X-Ratelimit-Limit,
// -Remaining and -Reset (whole seconds, rounded up), and Retry-After when
// it is denied. cmd/peerlimit's /v1/check answers with them too.
func Headers(d *counters.Decision) []*corev3.HeaderValue { return new(headerSet).set(d) }

// headerSet holds the headers of one answer: the three every answer
// carries, and room in the list for Retry-After, which only a denial
// carries (it takes an allocation of its own, which keeps an answer of one
// descriptor in a smaller size class).
type headerSet struct {
	vals [3]corev3.HeaderValue
	list [4]*corev3.HeaderValue
}

// set fills h with the headers of d and returns them; it allocates a
// string that holds every value (and Retry-After).
func (h *headerSet) set(d *counters.Decision) []*corev3.HeaderValue {
	reset := int64((d.Reset + time.Second - 1) / time.Second)
	var buf [4 * 20]byte
	b := strconv.AppendInt(buf[:0], d.Limit, 10)
	ends := [4]int{len(b)}
	b = strconv.AppendInt(b, max(d.Remaining, 0), 10)
	ends[1] = len(b)
	b = strconv.AppendInt(b, reset, 10)
	ends[2] = len(b)
	keys := [4]string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Retry-After"}
	n := 3
	if !d.Allowed && d.RetryAfter > 0 {
		b = strconv.AppendInt(b, int64((d.RetryAfter+time.Second-1)/time.Second), 10)
		ends[3] = len(b)
		n = 4
	}
	all := string(b)
	from := 0
	for i := range n {
		var v *corev3.HeaderValue
		if i < len(h.vals) {
			v = &h.vals[i]
		} else {
			v = new(corev3.HeaderValue)
		}
		v.Key, v.Value = keys[i], all[from:ends[i]]
		h.list[i] = v
		from = ends[i]
	}
	return h.list[:n]
}

// answer is a response with room for one descriptor's status and the
// headers.
type answer struct {
	resp    rlsv3.RateLimitResponse
	status  [1]*rlsv3.RateLimitResponse_DescriptorStatus
	parts   [1]statusParts
	headers headerSet
}

// statusParts holds one descriptor's status and its messages, so that an
// answer allocates them at once.
type statusParts struct {
	status  rlsv3.RateLimitResponse_DescriptorStatus
	current rlsv3.RateLimitResponse_RateLimit
	reset   durationpb.Duration
}
