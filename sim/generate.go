package sim

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The explorer's generator: random scenarios drawn from a seed, written as
// scenario file text (the format ParseScenario reads), so that any of them
// can be saved to a file and run again with go run ./cmd/sim -file F.
//
// The ranges it covers:
//
//	instances   3 .. 60 (3 .. 6: 45%, 7 .. 20: 37%, 21 .. 60: 18%)
//	sync        100 ms .. 1 s, in 50 ms steps; gossip profile local or lan
//	duration    30 s .. 60 s (at least two of the longest period)
//	SLAs        1 .. 3; longest tier 5 s .. 30 s, fixed or sliding, and
//	            sometimes a shorter second tier (1 s, 2 s or 5 s);
//	            thresholds 20 .. 5000 (a shorter tier's at least 10)
//	tenants     1 .. 500 (log-uniform, before the cost cap), at 0.5x .. 3x their limit: balanced
//	            (one rate for all) or skewed (a few hot tenants at 1.5x .. 3x,
//	            the rest at 0.5x .. 1x); spread evenly over the instances,
//	            pinned to one, mostly on one or a few, or moving between
//	            instances (2 .. 4 moves; with ExploreConfig.Turning, half
//	            of them every 1 .. 6 s through 2 .. 5 members); Poisson or
//	            even arrivals, bursts, ramps, streams that start or stop
//	            mid-run
//	faults      0 .. 3 of: a partition of any split (1|N-1 up to halves;
//	            two-way, isolate or one-way cut) starting at any moment and
//	            lasting 0.1 .. 3 longest periods, healed or not; a crash
//	            (of a random member or a tenant's owner) with or without a
//	            restart; a graceful leave; a join
//	network     latency 0.2 .. 5 ms, exponential or lognormal jitter, loss
//	            up to 10%, duplicates up to 5%; clock skew up to 500 ms
//
// A scenario's cost is capped (see exploreBudget, in generate_cost.go).

// GenerateScenario returns the name and file text of scenario i drawn from
// seed: explore-SEED-I. The text depends on seed and i only, so scenario i
// is the same whatever the number of scenarios explored. Its first line is
// a comment that says how to run it again.
func GenerateScenario(seed uint64, i int) (name string, src []byte) {
	return generateScenario(seed, i, false)
}

// generateScenario is GenerateScenario, with half the moving groups moving
// every few seconds when turning is set (ExploreConfig.Turning).
func generateScenario(seed uint64, i int, turning bool) (name string, src []byte) {
	name = fmt.Sprintf("explore-%d-%d", seed, i)
	g := &gen{r: newGenRand(seed, i), turning: turning}
	g.draw()
	return name, g.text(name)
}

func newGenRand(seed uint64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15^uint64(i)))
}

// ExploreRunSeed is the seed the explorer runs every generated scenario
// with: the golden seed of the scenarios in testdata, so that a generated
// file copied there reproduces the same run under go test.
const ExploreRunSeed = 1

type gen struct {
	r       *rand.Rand
	turning bool // see generateScenario

	n          int // initial instances
	sync, dur  time.Duration
	profile    string
	longest    time.Duration // the longest tier period of all SLAs
	net        string
	skew       []string
	slas       []genSLA
	lines      []genLine
	members    []*genMember
	events     []genEvent
	faultsDesc []string
	tenants    int
	skewed     bool
	budget     float64 // us
}

type genSLA struct {
	id    string
	tiers []genTier
}

type genTier struct {
	alg       string
	period    time.Duration
	threshold int64
	factor    float64 // threshold relative to the longest tier's, per second
}

// rate returns the SLA's tightest rate (requests per second), as parseRate
// reads "1x".
func (s *genSLA) rate() float64 {
	r := math.Inf(1)
	for _, t := range s.tiers {
		r = min(r, float64(t.threshold)/t.period.Seconds())
	}
	return r
}

// genLine is one traffic line; the lines of a moving group share tenants.
type genLine struct {
	prefix   string // tenants prefix[1-count]
	count    int
	sla      int
	rate     float64 // times the SLA's tightest rate
	rampTo   float64 // > 0: ramp from rate to rampTo
	spread   string
	arrivals string
	burst    float64 // 0: steady
	from, to time.Duration
	// weight of a line of a group that moves every few seconds (0 for
	// any other): its share of the group's key reports, which every member
	// the group turns through sends all along (see keyCost).
	weight float64
}

type genMember struct {
	name   string
	joined time.Duration
	left   time.Duration // 0: never
	down   [][2]time.Duration
}

func (m *genMember) upAt(t time.Duration) bool {
	if t < m.joined || (m.left > 0 && t >= m.left) {
		return false
	}
	for _, d := range m.down {
		if t >= d[0] && t < d[1] {
			return false
		}
	}
	return true
}

// known reports whether the member exists at t (joined and not left),
// running or not.
func (m *genMember) known(t time.Duration) bool {
	return t >= m.joined && (m.left == 0 || t < m.left)
}

type genEvent struct {
	at   time.Duration
	text string
}

func (g *gen) uniform(a, b float64) float64 { return a + (b-a)*g.r.Float64() }

// logUniform draws in [a, b] with a uniform logarithm.
func (g *gen) logUniform(a, b float64) float64 {
	return math.Exp(g.uniform(math.Log(a), math.Log(b)))
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

// pick returns an index drawn with the given weights.
func (g *gen) pick(weights ...float64) int {
	var sum float64
	for _, w := range weights {
		sum += w
	}
	x := g.r.Float64() * sum
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}

func (g *gen) draw() {
	switch g.pick(0.45, 0.37, 0.18) {
	case 0:
		g.n = 3 + g.r.IntN(4) // 3..6
	case 1:
		g.n = 7 + g.r.IntN(14) // 7..20
	default:
		g.n = 21 + g.r.IntN(40) // 21..60
	}
	for i := 0; i < g.n; i++ {
		g.members = append(g.members, &genMember{name: memberName(i)})
	}
	g.budget = exploreBudget
	if g.chance(exploreHeavyShare) {
		g.budget *= 4
	}
	g.sync = time.Duration(100+50*g.r.IntN(19)) * time.Millisecond
	g.profile = "local"
	if g.chance(0.4) {
		g.profile = "lan"
	}
	g.drawSLAs()
	g.dur = time.Duration(30+5*g.r.IntN(7)) * time.Second
	g.dur = max(g.dur, 2*g.longest)
	g.tenants = min(max(int(g.logUniform(1, 501)), 1), 500)
	g.capRounds()
	g.drawNetwork()
	g.drawTraffic()
	g.drawFaults()
	g.capCost()
}

func (g *gen) drawSLAs() {
	periods := []time.Duration{5 * time.Second, 10 * time.Second, 10 * time.Second, 15 * time.Second, 20 * time.Second, 30 * time.Second}
	alg := func() string {
		if g.chance(0.4) {
			return "sliding"
		}
		return "fixed"
	}
	for k := range 1 + g.pick(0.6, 0.3, 0.1) {
		p := periods[g.r.IntN(len(periods))]
		s := genSLA{id: "s" + strconv.Itoa(k+1), tiers: []genTier{{alg: alg(), period: p, factor: 1}}}
		if g.chance(0.35) {
			var short []time.Duration
			for _, q := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second} {
				if q < p {
					short = append(short, q)
				}
			}
			// The short tier allows 0.7x .. 2.5x the long tier's rate:
			// below 1x it binds on steady traffic, above it on bursts.
			s.tiers = append(s.tiers, genTier{alg: alg(), period: short[g.r.IntN(len(short))], factor: g.uniform(0.7, 2.5)})
		}
		g.longest = max(g.longest, p)
		g.slas = append(g.slas, s)
	}
}

func (g *gen) drawNetwork() {
	lat := time.Duration(g.logUniform(200, 5000)) * time.Microsecond
	var jitter string
	if g.chance(0.7) {
		jitter = "exp:" + fmtDur(time.Duration(g.logUniform(100, 3000))*time.Microsecond)
	} else {
		jitter = fmt.Sprintf("lognormal:%s:%s", fmtDur(time.Duration(g.logUniform(200, 5000))*time.Microsecond), fmtFloat(g.uniform(0.3, 1.5)))
	}
	g.net = fmt.Sprintf("latency=%s jitter=%s", fmtDur(lat), jitter)
	if g.chance(0.4) {
		g.net += " loss=" + fmtFloat(g.logUniform(0.1, 10)) + "%"
	}
	if g.chance(0.3) {
		g.net += " dup=" + fmtFloat(g.logUniform(0.1, 5)) + "%"
	}
	switch g.pick(0.6, 0.3, 0.1) {
	case 1:
		g.skew = append(g.skew, "random "+fmtDur(time.Duration(g.logUniform(10, 500))*time.Millisecond))
	case 2:
		d := time.Duration(g.logUniform(50, 500)) * time.Millisecond
		sign := "+"
		if g.chance(0.5) {
			sign = "-"
		}
		g.skew = append(g.skew, fmt.Sprintf("%s %s%s", g.members[g.r.IntN(g.n)].name, sign, fmtDur(d)))
	}
}

func (g *gen) drawTraffic() {
	g.skewed = g.chance(0.5)
	// Split the tenants among the SLAs; an SLA may get none.
	counts := make([]int, len(g.slas))
	for t := 0; t < g.tenants; t++ {
		if t < len(g.slas) {
			counts[t]++
		} else {
			counts[g.r.IntN(len(g.slas))]++
		}
	}
	prefix := 0
	next := func() string {
		p := string(rune('a' + prefix))
		prefix++
		return p
	}
	for s, c := range counts {
		if c == 0 {
			continue
		}
		if !g.skewed || c == 1 {
			g.addLines(genLine{prefix: next(), count: c, sla: s, rate: g.uniform(0.5, 3)})
			continue
		}
		hot := min(c-1, max(1, int(math.Round(float64(c)*g.uniform(0.02, 0.2)))))
		g.addLines(genLine{prefix: next(), count: hot, sla: s, rate: g.uniform(1.5, 3)})
		g.addLines(genLine{prefix: next(), count: c - hot, sla: s, rate: g.uniform(0.5, 1)})
	}
}

// addLines draws a tenant group's options and adds its line, or, for a
// moving group, one line per instance it moves to.
func (g *gen) addLines(l genLine) {
	l.arrivals = "poisson"
	if g.chance(0.2) {
		l.arrivals = "even"
	}
	switch g.pick(0.8, 0.1, 0.1) {
	case 1:
		l.burst = g.uniform(0.05, 0.5)
	case 2:
		a, b := g.uniform(0.2, 3), g.uniform(0.2, 3)
		l.rate, l.rampTo = a, b
	}
	if g.chance(0.15) {
		if g.chance(0.5) {
			l.from = roundMs(time.Duration(g.uniform(0, 0.5) * float64(g.dur)))
		} else {
			l.to = roundMs(time.Duration(g.uniform(0.5, 1) * float64(g.dur)))
		}
	}
	if g.chance(0.1) { // moving: the client moves to another instance every few seconds
		start, end := l.from, l.to
		if end == 0 {
			end = g.dur
		}
		k := 2 + g.r.IntN(3)
		cuts := []time.Duration{start}
		for j := 1; j < k; j++ {
			cuts = append(cuts, roundMs(start+time.Duration(g.r.Float64()*float64(end-start))))
		}
		slices.Sort(cuts)
		cuts = append(cuts, end)
		first := len(g.lines)
		for j := 0; j < k; j++ {
			if cuts[j+1] <= cuts[j] {
				continue
			}
			m := l
			m.from, m.to = cuts[j], cuts[j+1]
			if m.to == g.dur && l.to == 0 {
				m.to = 0
			}
			m.spread = g.members[g.r.IntN(g.n)].name + ":100%"
			g.lines = append(g.lines, m)
		}
		// With turning, half the moving groups move every 1 to 6 s
		// instead, through 2 to 5 members in turn (a client whose
		// connections are rebalanced often). Drawn from a generator of
		// their own, seeded by what was drawn above, so that every other
		// draw of the scenario stays as it was.
		f := rand.New(rand.NewPCG(uint64(cuts[1])^uint64(k)<<56, uint64(first)))
		if g.turning && f.IntN(2) == 0 {
			g.lines = g.lines[:first]
			every := time.Duration(10+f.IntN(51)) * 100 * time.Millisecond
			turn := f.Perm(g.n)[:min(g.n, 2+f.IntN(4))]
			for j, at := 0, start; at < end; j, at = j+1, at+every {
				m := l
				m.from, m.to = at, min(at+every, end)
				if m.to == g.dur && l.to == 0 {
					m.to = 0
				}
				m.spread = g.members[turn[j%len(turn)]].name + ":100%"
				g.lines = append(g.lines, m)
			}
			w := min(1, float64(len(turn))/float64(len(g.lines)-first))
			for j := first; j < len(g.lines); j++ {
				g.lines[j].weight = w
			}
		}
		return
	}
	switch g.pick(0.45, 0.25, 0.15, 0.15) {
	case 0:
		l.spread = "even"
	case 1:
		l.spread = fmt.Sprintf("%s:%d%%", g.members[g.r.IntN(g.n)].name, 50+g.r.IntN(46))
	case 2:
		l.spread = g.members[g.r.IntN(g.n)].name + ":100%"
	default:
		k := 2 + g.r.IntN(min(3, g.n-1))
		idx := g.r.Perm(g.n)[:k]
		total := 60 + g.r.IntN(41)
		var parts []string
		left := total
		for j, m := range idx {
			sh := left / (k - j)
			if j < k-1 {
				sh = max(1, sh/2+g.r.IntN(sh+1))
				sh = min(sh, left-(k-j-1))
			} else {
				sh = left
			}
			left -= sh
			parts = append(parts, fmt.Sprintf("%s:%d%%", g.members[m].name, sh))
		}
		l.spread = strings.Join(parts, ",")
	}
	g.lines = append(g.lines, l)
}

// upAt returns the members running at t (not crashed, joined, not left).
func (g *gen) upAt(t time.Duration) []*genMember {
	var out []*genMember
	for _, m := range g.members {
		if m.upAt(t) {
			out = append(out, m)
		}
	}
	return out
}

func (g *gen) drawFaults() {
	n := g.pick(0.15, 0.4, 0.3, 0.15)
	var times []time.Duration
	lo, hi := float64(g.longest/2), float64(g.dur-500*time.Millisecond)
	for range n {
		times = append(times, roundMs(time.Duration(g.uniform(lo, hi))))
	}
	slices.Sort(times)
	var healed time.Duration // the end of the last partition
	for _, t := range times {
		switch g.pick(0.45, 0.25, 0.15, 0.15) {
		case 0:
			if t < healed {
				continue // one partition at a time
			}
			healed = g.partition(t)
		case 1:
			g.crash(t)
		case 2:
			ups := g.upAt(t)
			if len(ups) < 3 {
				continue
			}
			m := ups[g.r.IntN(len(ups))]
			m.left = t
			g.event(t, "leave "+m.name)
			g.faultsDesc = append(g.faultsDesc, fmt.Sprintf("%s leaves at %s", m.name, fmtDur(t)))
		case 3:
			m := &genMember{name: memberName(len(g.members)), joined: t}
			g.members = append(g.members, m)
			g.event(t, "join "+m.name)
			g.faultsDesc = append(g.faultsDesc, fmt.Sprintf("%s joins at %s", m.name, fmtDur(t)))
		}
	}
	slices.SortStableFunc(g.events, func(a, b genEvent) int { return int(a.at - b.at) })
}

func (g *gen) event(t time.Duration, text string) {
	g.events = append(g.events, genEvent{at: t, text: text})
}

// partition cuts the running members at t into a minority of 1 .. half of
// them and the rest (members down at t go with the rest), for 0.1 .. 3
// longest periods, and returns when it heals (the end of the run if not).
func (g *gen) partition(t time.Duration) time.Duration {
	ups := g.upAt(t)
	if len(ups) < 2 {
		return 0
	}
	k := 1 + g.r.IntN(len(ups)/2)
	perm := g.r.Perm(len(ups))
	minority := map[string]bool{}
	for _, j := range perm[:k] {
		minority[ups[j].name] = true
	}
	var small, large []string
	for _, m := range g.members {
		switch {
		case minority[m.name]:
			small = append(small, m.name)
		case m.known(t):
			large = append(large, m.name)
		}
	}
	length := roundMs(time.Duration(g.logUniform(0.1, 3) * float64(g.longest)))
	kind := "partition"
	switch {
	case k == 1 && g.chance(0.4):
		kind = "isolate"
		g.event(t, "isolate "+small[0])
	case g.chance(0.12):
		kind = "cut"
		from, to := large, small
		if g.chance(0.5) {
			from, to = small, large
		}
		g.event(t, fmt.Sprintf("cut %s -> %s", strings.Join(from, ","), strings.Join(to, ",")))
	default:
		a, b := large, small
		if g.chance(0.5) {
			a, b = small, large
		}
		g.event(t, fmt.Sprintf("partition %s | %s", strings.Join(a, ","), strings.Join(b, ",")))
	}
	heal := t + length
	d := fmt.Sprintf("%s %d|%d at %s", kind, k, len(ups)-k, fmtDur(t))
	if heal >= g.dur-100*time.Millisecond {
		g.faultsDesc = append(g.faultsDesc, d+" (no heal)")
		return g.dur
	}
	g.event(heal, "heal")
	g.faultsDesc = append(g.faultsDesc, d+" for "+fmtDur(length))
	return heal
}

// crash takes down a running member at t, a tenant's owner or a random one,
// and restarts it later or never.
func (g *gen) crash(t time.Duration) {
	ups := g.upAt(t)
	if len(ups) < 3 {
		return
	}
	m := ups[g.r.IntN(len(ups))]
	target := m.name
	if g.chance(0.3) {
		l := g.lines[g.r.IntN(len(g.lines))]
		ref := fmt.Sprintf("%s1/%s", l.prefix, g.slas[l.sla].id)
		if o, ok := g.owner(ref); ok {
			for _, u := range ups {
				if u.name == o {
					m, target = u, "owner:"+ref
				}
			}
		}
	}
	end := g.dur
	d := fmt.Sprintf("crash %s at %s", m.name, fmtDur(t))
	if g.chance(0.6) {
		back := roundMs(t + time.Duration(g.uniform(0.05, 2)*float64(g.longest)))
		if back < g.dur-100*time.Millisecond {
			end = back
			g.event(back, "restart "+m.name)
			d += ", restart at " + fmtDur(back)
		}
	}
	m.down = append(m.down, [2]time.Duration{t, end})
	// Half the crashes take the host down with the member (its calls go
	// unanswered), half only its process (its host refuses them). Drawn
	// from a hash of the member and the time, not the generator, so that
	// the rest of the scenario is what it was before crashes had a kind.
	h := fnv.New64a()
	fmt.Fprintf(h, "%s@%d", m.name, t)
	if h.Sum64()&1 == 1 {
		target += " host"
		d += " (with its host)"
	}
	g.event(t, "crash "+target)
	g.faultsDesc = append(g.faultsDesc, d)
}

// owner resolves "TENANT/SLA" on the initial ring, as the parser does.
func (g *gen) owner(ref string) (string, bool) {
	sc := &Scenario{}
	for _, s := range g.slas {
		sla := SLA{ID: s.id}
		for _, t := range s.tiers {
			sla.Tiers = append(sla.Tiers, Tier{Period: t.period})
		}
		sc.SLAs = append(sc.SLAs, sla)
	}
	initial := make([]string, g.n)
	for i := range initial {
		initial[i] = memberName(i)
	}
	o, err := (&parser{sc: sc}).owner(ref, initial)
	return o, err == nil
}

func (g *gen) text(name string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s: go run ./cmd/sim -file %s.txt -policy all -seed %d\n", name, name, ExploreRunSeed)
	bal := "balanced"
	if g.skewed {
		bal = "skewed"
	}
	desc := fmt.Sprintf("explorer: %d instances, sync %s, %s profile, %d tenants %s over %d SLA(s)",
		g.n, fmtDur(g.sync), g.profile, g.tenants, bal, len(g.slas))
	if len(g.faultsDesc) > 0 {
		desc += "; " + strings.Join(g.faultsDesc, "; ")
	}
	fmt.Fprintf(&b, "desc %s\n", desc)
	fmt.Fprintf(&b, "instances %d\nsync %s\nprofile %s\nduration %s\n", g.n, fmtDur(g.sync), g.profile, fmtDur(g.dur))
	fmt.Fprintf(&b, "network %s\n", g.net)
	for _, s := range g.skew {
		fmt.Fprintf(&b, "skew %s\n", s)
	}
	for _, s := range g.slas {
		fmt.Fprintf(&b, "sla %s", s.id)
		for _, t := range s.tiers {
			fmt.Fprintf(&b, " %s:%s:%d", t.alg, fmtDur(t.period), t.threshold)
		}
		b.WriteByte('\n')
	}
	for _, l := range g.lines {
		tenants := fmt.Sprintf("%s[1-%d]", l.prefix, l.count)
		if l.count == 1 {
			tenants = l.prefix + "1"
		}
		fmt.Fprintf(&b, "traffic tenants=%s sla=%s", tenants, g.slas[l.sla].id)
		if l.rampTo > 0 {
			fmt.Fprintf(&b, " ramp=%sx..%sx", fmtFloat(l.rate), fmtFloat(l.rampTo))
		} else {
			fmt.Fprintf(&b, " rate=%sx", fmtFloat(l.rate))
		}
		fmt.Fprintf(&b, " spread=%s arrivals=%s", l.spread, l.arrivals)
		if l.burst > 0 {
			fmt.Fprintf(&b, " burst=%s%%", fmtFloat(100*l.burst))
		}
		if l.from > 0 {
			fmt.Fprintf(&b, " from=%s", fmtDur(l.from))
		}
		if l.to > 0 {
			fmt.Fprintf(&b, " to=%s", fmtDur(l.to))
		}
		b.WriteByte('\n')
	}
	for _, e := range g.events {
		fmt.Fprintf(&b, "at %s %s\n", fmtDur(e.at), e.text)
	}
	return b.Bytes()
}

// fmtDur writes a duration as whole seconds when it is one, else in
// milliseconds or microseconds (ParseDuration reads all three).
func fmtDur(d time.Duration) string {
	switch {
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	default:
		return strconv.FormatInt(int64(d/time.Microsecond), 10) + "us"
	}
}

func roundMs(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

// fmtFloat writes f with at most two decimals.
func fmtFloat(f float64) string {
	return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64)
}
