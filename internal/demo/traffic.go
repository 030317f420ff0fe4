package demo

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/peerlimit/peerlimit/httpfilter"
)

// TenantHeader is set on every generated request (besides the {orgId} of
// the path), so that a limits file taking the tenant from a header sees the
// same tenant.
const TenantHeader = "X-Tenant-ID"

// SharedTenant is the ground-truth tenant of an SLA with no tenant source
// (one global bucket).
const SharedTenant = "*"

// Tier is one tier of an SLA as the ground truth sees it.
type Tier struct {
	Period    time.Duration
	Threshold int64
}

// StreamSLA is one SLA a stream's requests match, with the tiers that apply
// to the stream's tenant.
type StreamSLA struct {
	ID     string
	Tenant string // the stream's tenant, or SharedTenant for a global SLA
	Shadow bool   // counted, never enforced
	Tiers  []Tier
}

// Stream is one flow of the load: requests of one tenant with one method.
type Stream struct {
	Tenant string
	Method string  // GET or PUT
	Rate   float64 // requests per second
	// Hot streams are pushed above their limit (Factor x the limit rate);
	// the others stay below it.
	Hot    bool
	Factor float64 // Rate / LimitRate; 0 for an unlimited stream
	SLAs   []StreamSLA
}

// LimitRate is the highest sustained rate the stream's enforced tiers
// admit: min(threshold / period) over them, in requests per second; +Inf
// when no enforced SLA matches.
func (s *Stream) LimitRate() float64 {
	r := math.Inf(1)
	for _, sla := range s.SLAs {
		if sla.Shadow {
			continue
		}
		for _, t := range sla.Tiers {
			r = min(r, float64(t.Threshold)/t.Period.Seconds())
		}
	}
	return r
}

// Workload is the mix of streams the load generator sends. It is immutable
// once built and safe for concurrent reads.
type Workload struct {
	Streams []Stream
	Rate    float64   // total requests per second
	cum     []float64 // cumulative rates, for Pick
}

// TenantName returns the name of tenant i (0-based) out of n: org-01 ...
func TenantName(i, n int) string {
	w := len(fmt.Sprint(n))
	return fmt.Sprintf("org-%0*d", max(w, 2), i+1)
}

// Shares of the rate: hot streams take at most hotShare of it, so that the
// tenants under their limit still carry a visible part of the traffic.
const (
	hotShare = 2.0 / 3
	coldMax  = 0.8 // cold streams run at most at 80% of their limit
)

// BuildWorkload spreads rate requests per second over tenants tenants and
// the two methods, against the limits lim:
//
//   - one tenant in five (at least one) is hot: its streams run at 2-3x
//     their limit rate (the factors spread evenly over the hot tenants).
//     Hot streams are admitted cheapest first (with the seeds' limits: the
//     PUTs, then the GETs) as long as they fit in 2/3 of the rate; a hot
//     stream that does not fit runs cold;
//   - the rest of the rate is spread over the cold streams in proportion to
//     their limit rate, so every cold stream runs at the same fraction of
//     its limit, at most 80%;
//   - if that cap leaves rate unused, the hot streams take it (running
//     further above their limit).
//
// With the seeds' limits (1000 GETs and 100 PUTs per 10 s) and 1000 req/s
// over 25 tenants: the 5 hot tenants send their PUTs at 2-3x the limit and
// the first two also their GETs; everyone else runs at about a fifth of
// their limits.
func BuildWorkload(lim *httpfilter.Limits, tenants int, rate float64) (*Workload, error) {
	if tenants < 1 {
		return nil, fmt.Errorf("demo: BuildWorkload: tenants must be >= 1, got %d", tenants)
	}
	if !(rate > 0) || math.IsInf(rate, 0) {
		return nil, fmt.Errorf("demo: BuildWorkload: rate must be > 0, got %v", rate)
	}
	w := &Workload{Rate: rate}
	hot := max(1, (tenants+2)/5)
	for i := range tenants {
		t := TenantName(i, tenants)
		for _, m := range []string{"GET", "PUT"} { // the sample API's methods
			s := Stream{Tenant: t, Method: m, SLAs: matchSLAs(lim, m, t)}
			if i < hot {
				s.Hot = true
				s.Factor = 2.5
				if hot > 1 {
					s.Factor = 2 + float64(i)/float64(hot-1)
				}
			}
			w.Streams = append(w.Streams, s)
		}
	}
	// Hot streams, cheapest first, while they fit.
	idx := make([]int, 0, len(w.Streams))
	for i := range w.Streams {
		if s := &w.Streams[i]; s.Hot {
			if math.IsInf(s.LimitRate(), 1) {
				s.Hot, s.Factor = false, 0
				continue
			}
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool {
		sa, sb := &w.Streams[idx[a]], &w.Streams[idx[b]]
		return sa.Factor*sa.LimitRate() < sb.Factor*sb.LimitRate()
	})
	budget := rate * hotShare
	if hot == tenants {
		budget = rate
	}
	hotSum := 0.0
	for _, i := range idx {
		s := &w.Streams[i]
		r := s.Factor * s.LimitRate()
		if hotSum+r > budget {
			s.Hot, s.Factor = false, 0
			continue
		}
		s.Rate = r
		hotSum += r
	}
	// Cold streams share the rest in proportion to their limit rate.
	var coldLimit float64
	var unlimited int
	for i := range w.Streams {
		if s := &w.Streams[i]; !s.Hot {
			if l := s.LimitRate(); math.IsInf(l, 1) {
				unlimited++
			} else {
				coldLimit += l
			}
		}
	}
	rest := rate - hotSum
	if unlimited > 0 {
		// Unlimited streams: as much as an average limited stream, or an
		// even share of the rest if nothing is limited.
		per := rest / float64(unlimited)
		if coldLimit > 0 {
			n := float64(len(w.Streams) - unlimited)
			per = min(per, rest/n)
		}
		for i := range w.Streams {
			if s := &w.Streams[i]; !s.Hot && math.IsInf(s.LimitRate(), 1) {
				s.Rate = per
				rest -= per
			}
		}
	}
	if coldLimit > 0 {
		u := min(rest/coldLimit, coldMax)
		for i := range w.Streams {
			if s := &w.Streams[i]; !s.Hot && !math.IsInf(s.LimitRate(), 1) {
				s.Rate = u * s.LimitRate()
				s.Factor = u
				rest -= s.Rate
			}
		}
	}
	if rest > 1e-9 && hotSum > 0 { // the cap left rate unused: hot streams take it
		scale := (hotSum + rest) / hotSum
		for i := range w.Streams {
			if s := &w.Streams[i]; s.Hot {
				s.Rate *= scale
				s.Factor *= scale
			}
		}
	}
	w.Streams = slices.DeleteFunc(w.Streams, func(s Stream) bool { return s.Rate <= 0 })
	if len(w.Streams) == 0 {
		return nil, errors.New("demo: BuildWorkload: no stream has a rate")
	}
	sum := 0.0
	w.cum = make([]float64, len(w.Streams))
	for i, s := range w.Streams {
		sum += s.Rate
		w.cum[i] = sum
	}
	w.Rate = sum
	return w, nil
}

// matchSLAs returns the SLAs a request of tenant with method matches.
func matchSLAs(lim *httpfilter.Limits, method, tenant string) []StreamSLA {
	var out []StreamSLA
	for _, m := range lim.MatchHTTP(method, "/v1/organizations/"+tenant+"/product/1", nil) {
		sla := StreamSLA{ID: m.SLA.ID, Tenant: tenant, Shadow: m.SLA.Shadow}
		if m.SLA.Tenant.Kind == httpfilter.TenantNone {
			sla.Tenant = SharedTenant
		}
		tiers := m.SLA.Tiers
		if sla.Tenant != SharedTenant {
			tiers = m.SLA.TiersFor(tenant)
		}
		for _, t := range tiers {
			sla.Tiers = append(sla.Tiers, Tier{Period: t.Period, Threshold: t.Threshold})
		}
		out = append(out, sla)
	}
	return out
}

// Pick returns the index of a stream chosen with probability proportional
// to its rate.
func (w *Workload) Pick(r *rand.Rand) int {
	x := r.Float64() * w.Rate
	i := sort.SearchFloat64s(w.cum, x)
	return min(i, len(w.Streams)-1)
}

// MaxPeriod returns the longest tier period of any stream (0 if none).
func (w *Workload) MaxPeriod() time.Duration {
	var p time.Duration
	for _, s := range w.Streams {
		for _, sla := range s.SLAs {
			for _, t := range sla.Tiers {
				p = max(p, t.Period)
			}
		}
	}
	return p
}
