package sim

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// series is the ground truth of one (tenant, SLA): per tier and per window
// (by virtual time), what was offered and what was admitted across all
// instances.
type series struct {
	tenant string
	sla    *SLA
	limits []counters.Limit // one per tier, prepared
	tiers  []tierCount
}

type tierCount struct {
	// retriesDenied counts, by window, the clients' retries denied again.
	retriesDenied []int64
	// Indexed by window number since the start: requests offered and
	// admitted, by the window they arrived in, and admitted requests by the
	// window they were charged to (a request that waited for the owner's
	// answer across a window start is charged to the next one).
	offered, admitted, charged []int64
}

func newSeries(tenant string, sla *SLA, dur time.Duration) *series {
	s := &series{tenant: tenant, sla: sla}
	for _, t := range sla.Tiers {
		l := counters.Limit{Tenant: tenant, Endpoint: sla.ID, Method: method, Period: t.Period, Threshold: t.Threshold, Algorithm: t.Algorithm}
		s.limits = append(s.limits, l.Prepare())
		n := int(dur/t.Period) + 1
		s.tiers = append(s.tiers, tierCount{offered: make([]int64, n), admitted: make([]int64, n), charged: make([]int64, n), retriesDenied: make([]int64, n)})
	}
	return s
}

// record counts one request that arrived at virtual time arrived and was
// decided at decided (later when it waited for the owner's answers): it is
// offered (and admitted) in the window it arrived in and, if admitted,
// charged to the window it was decided in, as the instance counts it. A tier counts the
// request as offered unless another tier of the SLA denied it: tiers are
// charged together, and a request refused because of another tier says
// nothing about this one (see the package documentation).
func (s *series) record(arrived, decided int64, d counters.Decision) {
	for i := range s.tiers {
		p := int64(s.sla.Tiers[i].Period)
		wa, wd := windowIndex(arrived, p), windowIndex(decided, p)
		tc := &s.tiers[i]
		if wa < 0 || wa >= len(tc.offered) {
			continue // outside the run (a window of Scenario.MedianClock's may begin before it)
		}
		switch {
		case d.Allowed:
			tc.offered[wa]++
			tc.admitted[wa]++
			if wd >= 0 && wd < len(tc.charged) {
				tc.charged[wd]++
			}
		case d.Tier == i || d.Tier < 0:
			tc.offered[wa]++
		}
	}
}

// windowIndex returns the index of the window of period p that t falls
// in, or -1 for any t before 0 (under Scenario.MedianClock, times are
// shifted and may be).
func windowIndex(t, p int64) int {
	if t < 0 {
		return -1
	}
	return int(t / p)
}

// retryDenied counts a client's retry denied again at vt, in the first
// tier's window.
func (s *series) retryDenied(vt int64) {
	tc := &s.tiers[0]
	if w := windowIndex(vt, int64(s.sla.Tiers[0].Period)); w >= 0 && w < len(tc.retriesDenied) {
		tc.retriesDenied[w]++
	}
}

// stream generates one tenant's requests of one traffic line.
type stream struct {
	tr     *Traffic
	series *series
	rng    *rand.Rand
	from   int64 // ns
	to     int64 // ns, exclusive
	burstP int64 // the SLA's longest period, ns
	// smooth weighted round-robin state, by instance index
	cw []float64
}

const rampStep = int64(100 * time.Millisecond)

// rateAt returns the rate (per second) at vt and the next time it may
// change. Rates are piecewise constant: ramps move in 100 ms steps.
func (st *stream) rateAt(vt int64) (float64, int64) {
	if vt < st.from {
		return 0, st.from
	}
	if vt >= st.to {
		return 0, math.MaxInt64
	}
	next := st.to
	r := st.tr.Rate
	if st.tr.RampTo > 0 {
		step := (vt - st.from) / rampStep
		stepStart := st.from + step*rampStep
		mid := float64(stepStart+rampStep/2-st.from) / float64(st.to-st.from)
		r = st.tr.Rate + (st.tr.RampTo-st.tr.Rate)*min(mid, 1)
		next = min(next, stepStart+rampStep)
	}
	if st.tr.Burst < 1 {
		ws := vt - vt%st.burstP
		on := ws + int64(float64(st.burstP)*st.tr.Burst)
		if vt < on {
			r /= st.tr.Burst
			next = min(next, on)
		} else {
			r = 0
			next = min(next, ws+st.burstP)
		}
	}
	return r, next
}

// next returns the virtual time of the arrival after vt, or -1 if there is
// none. It walks the piecewise-constant rate until its integral from vt
// reaches x: x is Exp(1) for Poisson arrivals (a time change of a unit-rate
// Poisson process) and 1 for evenly spaced ones.
func (st *stream) next(vt int64, x float64) int64 {
	for vt < st.to {
		r, b := st.rateAt(vt)
		if r > 0 {
			dt := x / r * 1e9
			if float64(vt)+dt < float64(b) {
				return vt + int64(dt)
			}
			x -= r * float64(b-vt) / 1e9
		}
		vt = b
	}
	return -1
}

func (st *stream) draw() float64 {
	if st.tr.Poisson {
		return st.rng.ExpFloat64()
	}
	return 1
}

// pick chooses the instance for the next request among the serving ones by
// smooth weighted round-robin (nginx's): deterministic, with exactly the
// configured proportions. Named members get their share and the serving
// members not named split the rest evenly; the share of a named member that
// is down goes to the serving ones in proportion to theirs.
func (st *stream) pick(insts []*instance) *instance {
	for len(st.cw) < len(insts) {
		st.cw = append(st.cw, 0)
	}
	nRest, servingNamed := 0, 0.0
	for _, in := range insts {
		if !in.serving() {
			continue
		}
		if w, ok := st.tr.share(in.name); ok {
			servingNamed += w
		} else {
			nRest++
		}
	}
	rest, even := st.tr.restShare(nRest, servingNamed)
	var total float64
	var best *instance
	for i, in := range insts {
		if !in.serving() {
			continue
		}
		w := st.tr.weight(in.name, rest, even)
		st.cw[i] += w
		total += w
		if best == nil || st.cw[i] > st.cw[best.idx] {
			best = in
		}
	}
	if best != nil {
		st.cw[best.idx] -= total
	}
	return best
}

// share returns the spread's share of a member, if it names it.
func (tr *Traffic) share(name string) (float64, bool) {
	for _, w := range tr.Spread {
		if w.Name == name {
			return w.Share, true
		}
	}
	return 0, false
}

// restShare returns the load balancer's weight of a serving member the
// spread does not name, given how many serve (nRest) and the summed shares
// of the named ones that serve; and whether every serving member weighs 1
// instead, because all those weights are zero. stream.pick and the
// reference's sideFractions both weigh members so (Traffic.weight).
func (tr *Traffic) restShare(nRest int, servingNamed float64) (rest float64, even bool) {
	var named float64
	for _, w := range tr.Spread {
		named += w.Share
	}
	if nRest > 0 {
		rest = max(0, 1-named) / float64(nRest)
	}
	return rest, servingNamed+rest*float64(nRest) <= 0
}

// weight returns a serving member's weight under restShare's rest and even.
func (tr *Traffic) weight(name string, rest float64, even bool) float64 {
	if even {
		return 1
	}
	if w, ok := tr.share(name); ok {
		return w
	}
	return rest
}
