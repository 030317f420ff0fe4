package sim

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// The generator's cost model: what a generated scenario may cost to run,
// and how the generator keeps it within that. Without it, the ranges
// multiply: 60 instances syncing every 100 ms with 500 tenants would take
// minutes per scenario, where the explorer has a fraction of a second.
//
// The cap bends the ranges, and says how: a run of 30 s rather than 60 s
// first, then a longer sync interval for many instances, then fewer
// tenants, then lower limits (never below 20). So 40 to 60 instances sync
// every 600 ms to 1 s (every 150 ms to 350 ms and up in the heavy tenth of
// the scenarios), and hundreds of tenants come with few instances.

// A generated scenario's estimated cost, in microseconds of one core for
// the four policies: the lease policy's sync rounds (every member contacts
// every owner each interval: ~6 us per member pair and round, with the
// rounds a pending request asks for), its key reports (an owner's grant for
// one key of one sender weighs every member: ~4 us per key, sender, member
// and round) and the decisions (~20 us for the four policies), measured on
// the simulator as it is (one core, no race detector). One scenario in ten
// is heavy and gets four times the budget.
const (
	exploreBudget      = 800_000.0 // us
	exploreHeavyShare  = 0.1
	costPerRoundMember = 6.0  // us, per member pair per round
	costPerKeyReport   = 4.0  // us, per key, sender, member and round
	costPerDecision    = 20.0 // us, all policies
)

// rounds returns the sync rounds of one member over the run.
func (g *gen) rounds() float64 { return float64(g.dur) / float64(g.sync) }

// capRounds keeps the lease policy's rounds (every member to every owner)
// within 60% of the budget: a shorter run first, then a longer sync
// interval. Many tenants on many members also get a shorter run (capCost
// then shrinks the tenant count if still needed).
func (g *gen) capRounds() {
	share := 0.6 * g.budget
	cost := func() float64 { return costPerRoundMember * float64(g.n*g.n) * g.rounds() }
	keys := costPerKeyReport * float64(g.tenants*g.n*g.n) * g.rounds()
	if cost() <= share && keys <= g.keyShare() {
		return
	}
	g.dur = max(30*time.Second, 2*g.longest)
	if cost() <= share {
		return
	}
	need := time.Duration(costPerRoundMember * float64(g.n*g.n) * float64(g.dur) / share)
	g.sync = min(time.Second, max(g.sync, (need+50*time.Millisecond-1)/(50*time.Millisecond)*50*time.Millisecond))
}

// keyShare is the part of the budget the key reports may take: what the
// rounds leave, less 30% for the decisions, and at least 30%.
func (g *gen) keyShare() float64 {
	rounds := costPerRoundMember * float64(g.n*g.n) * g.rounds()
	return max(0.3*g.budget, 0.7*g.budget-rounds)
}

// capCost sets the limits and, when needed, shrinks the tenant groups, so
// that the key reports stay within their share of the budget (keyShare) and
// the decisions within 30% (see exploreBudget).
func (g *gen) capCost() {
	if c := g.keyCost(); c > g.keyShare() {
		f := g.keyShare() / c
		for i := range g.lines {
			g.lines[i].count = max(1, int(float64(g.lines[i].count)*f))
		}
	}
	g.tenants = 0
	seen := map[string]bool{}
	for _, l := range g.lines {
		if !seen[l.prefix] {
			seen[l.prefix] = true
			g.tenants += l.count
		}
	}
	// Limits: each SLA's longest tier gets a threshold drawn in 20 ..
	// 5000, then all shrink together (to no less than 20) until the
	// requests fit.
	for i := range g.slas {
		g.setThreshold(i, int64(g.logUniform(20, 5000)))
	}
	if d := g.decisions(); costPerDecision*d > 0.3*g.budget {
		f := 0.3 * g.budget / (costPerDecision * d)
		for i := range g.slas {
			g.setThreshold(i, max(20, int64(float64(g.slas[i].tiers[0].threshold)*f)))
		}
	}
}

// keyCost estimates the lease policy's key reports over the run: every key
// of every member that gets its traffic, every round, weighed against every
// member.
func (g *gen) keyCost() float64 {
	reports := 0.0
	for _, l := range g.lines {
		r := float64(l.count*len(g.slas[l.sla].tiers)) * float64(g.senders(l))
		if l.weight > 0 {
			r *= l.weight
		}
		reports += r
	}
	return costPerKeyReport * reports * float64(g.n) * g.rounds()
}

// senders returns how many members a line's tenants reach.
func (g *gen) senders(l genLine) int {
	if l.spread == "even" || !strings.HasSuffix(l.spread, "100%") && strings.Count(l.spread, ":") == 1 {
		return g.n
	}
	total := 0
	for _, part := range strings.Split(l.spread, ",") {
		_, pct, _ := strings.Cut(part, ":")
		v, _ := strconv.Atoi(strings.TrimSuffix(pct, "%"))
		total += v
	}
	if total >= 100 {
		return strings.Count(l.spread, ":")
	}
	return g.n
}

func (g *gen) setThreshold(i int, th int64) {
	s := &g.slas[i]
	long := s.tiers[0]
	for j := range s.tiers {
		t := &s.tiers[j]
		// A shorter tier keeps at least 10 requests: below that, one
		// request is 10% of the limit and says little.
		t.threshold = max(10, int64(math.Round(float64(th)*t.factor*t.period.Seconds()/long.period.Seconds())))
	}
}

// decisions estimates the requests offered over the run.
func (g *gen) decisions() float64 {
	var d float64
	for _, l := range g.lines {
		to := l.to
		if to == 0 {
			to = g.dur
		}
		r := l.rate
		if l.rampTo > 0 {
			r = (l.rate + l.rampTo) / 2
		}
		d += float64(l.count) * r * g.slas[l.sla].rate() * (to - l.from).Seconds()
	}
	return d
}
