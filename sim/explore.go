package sim

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// The explorer: many generated scenarios (GenerateScenario), each run under
// every policy, and the distribution of their windows' errors, so that the
// accuracy claims are checked over the space and not at hand-picked points.

// ExploreConfig says what to explore. The zero value explores nothing; a
// plain value.
type ExploreConfig struct {
	// Seed drives the generator: scenario i is GenerateScenario(Seed, i).
	// Every scenario runs with ExploreRunSeed.
	Seed uint64
	// Scenarios is how many scenarios to generate and run: 0 .. Scenarios-1.
	Scenarios int
	// Policies to run. Default: all (Policies()).
	Policies []Policy
	// Workers is how many scenarios run at once. Default GOMAXPROCS. The
	// results do not depend on it.
	Workers int
	// Worst is how many of the lease policy's worst scenarios to keep per
	// metric. Default 3.
	Worst int
	// NoSkew runs every scenario with its clocks in step (its skew line
	// dropped), to tell what clock skew adds: the sim charges requests to
	// windows by true time, the instances by their own clocks.
	NoSkew bool
	// MedianClock counts every scenario's windows on its members' median
	// clock, the one the engines enforce, instead of true time (the
	// "measure median" directive, Scenario.MedianClock): it tells the
	// windows the cluster let over its limit from those where the whole
	// cluster's clock is off the simulator's.
	MedianClock bool
	// Turning makes half the groups of tenants that move between members
	// move every 1 to 6 s, through 2 to 5 members in turn, instead of 2 to
	// 4 times in the run (sim/testdata/moving-cut-80 is one such group
	// through a cut). It changes only scenarios with a moving group, about
	// half of those (43 of seed 1's 500); without it, scenario i of a seed
	// is the same as it always was.
	Turning bool
}

// Metric is one per-window measure of error the explorer reports, in
// percent.
type Metric int

// The metrics, per complete window.
const (
	// MetricOvershoot is Window.Overshoot: admitted beyond the limit, as a
	// share of the limit.
	MetricOvershoot Metric = iota
	// MetricUndershoot is Window.Undershoot: min(offered, limit) not
	// admitted, as a share of it.
	MetricUndershoot
	// MetricUndershootSafe is UndershootVsSafe: what the best
	// partition-safe rule could admit (PartitionSafe) and the window did
	// not, as a share of it.
	MetricUndershootSafe
	// MetricWronglyDenied is Window.FalseDenialShare: requests denied
	// while their window ended below its limit, as a share of the window's
	// requests.
	MetricWronglyDenied
	// MetricWronglyAdmitted is max(0, charged-limit)/offered: requests
	// admitted beyond the limit, as a share of the window's requests.
	MetricWronglyAdmitted
	numMetrics
)

// Metrics returns every metric, in the order reports list them.
func Metrics() []Metric {
	return []Metric{MetricOvershoot, MetricUndershoot, MetricUndershootSafe, MetricWronglyDenied, MetricWronglyAdmitted}
}

func (m Metric) String() string {
	return [...]string{"overshoot", "undershoot", "undershoot vs safe", "wrongly denied", "wrongly admitted"}[m]
}

// Class is a kind of window the explorer summarises apart.
type Class int

// The classes. Every window is in ClassAll and in one of ClassCalm,
// ClassFault and ClassSliding; ClassEasy is a part of ClassCalm.
const (
	ClassAll Class = iota
	// ClassCalm: a fixed tier's window in which the membership did not
	// change and the cluster was whole (an earlier fault may still weigh
	// on it: a lease owner reserves for a lost member for a few windows).
	ClassCalm
	// ClassFault: a fixed tier's window in which the membership changed or
	// the cluster was cut (or had a crashed member not yet detected).
	ClassFault
	// ClassSliding: a sliding tier's window, measured as a fixed window
	// (the sliding rule may rightly deny early in a window after a full
	// one, which reads as undershoot and wrong denials).
	ClassSliding
	// ClassEasy: the calm windows where the targets are meant to hold
	// without excuse: a limit of at least 100 (a request is at most 1% of
	// it) and a period of at least 5 sync intervals.
	ClassEasy
	numClasses
)

// Classes returns every class, in the order reports list them.
func Classes() []Class { return []Class{ClassAll, ClassCalm, ClassFault, ClassSliding, ClassEasy} }

func (c Class) String() string {
	return [...]string{"all", "fixed, no fault", "fixed, fault", "sliding", "no fault, limit >= 100, period >= 5 syncs"}[c]
}

// classesOf returns the classes of a window (ClassAll first).
func (ref *reference) classesOf(w Window) []Class {
	tier, start, ok := ref.window(w)
	switch {
	case ok && tier.Algorithm == counters.Sliding:
		return []Class{ClassAll, ClassSliding}
	case ok && ref.faulted(start, tier.Period):
		return []Class{ClassAll, ClassFault}
	case ok && w.Limit >= 100 && tier.Period >= 5*ref.sc.Sync:
		return []Class{ClassAll, ClassCalm, ClassEasy}
	}
	return []Class{ClassAll, ClassCalm}
}

// windowMetrics computes every metric of one window, in percent, and the
// requests each counts.
func windowMetrics(w Window, safe float64) (pct, reqs [numMetrics]float64) {
	over := float64(max(0, w.Charged-w.Limit))
	pct[MetricOvershoot], reqs[MetricOvershoot] = 100*w.Overshoot(), over
	pct[MetricUndershoot], reqs[MetricUndershoot] = 100*w.Undershoot(), float64(max(0, min(w.Offered, w.Limit)-w.Charged))
	pct[MetricUndershootSafe], reqs[MetricUndershootSafe] = 100*UndershootVsSafe(w, safe), max(0, safe-float64(w.Charged))
	pct[MetricWronglyDenied], reqs[MetricWronglyDenied] = 100*w.FalseDenialShare(), float64(w.FalseDenials())
	if w.Offered > 0 {
		pct[MetricWronglyAdmitted], reqs[MetricWronglyAdmitted] = 100*min(1, over/float64(w.Offered)), over
	}
	return pct, reqs
}

// Exploration is what Explore found. A plain value.
type Exploration struct {
	Seed      uint64
	Scenarios int
	NoSkew    bool // see ExploreConfig.NoSkew
	Median    bool // see ExploreConfig.MedianClock
	Turning   bool // see ExploreConfig.Turning
	// Policies has one summary per policy run, in the order asked.
	Policies []PolicySummary
	// Worst holds, per metric (indexed by Metric), the lease policy's
	// worst scenarios: those whose worst window is worst, worst first.
	Worst [numMetrics][]Case
	// LeaseWorse lists the windows where the lease policy admitted fewer
	// requests than the static split, by more than one point of the
	// requests offered, while the static split stayed within the limit,
	// counting only the requests the window's own tier denied (see
	// belowStatic);
	// LeaseWorseCount counts them, over LeaseWorseWindows compared windows
	// and LeaseWorseScenarios scenarios. The list keeps the worst
	// (exploreGaps), worst first.
	LeaseWorse          []Gap
	LeaseWorseCount     int
	LeaseWorseWindows   int
	LeaseWorseScenarios int
	// UnderFamilies counts, by family (indexed by Family), lease's windows
	// that undershoot the safe reference by more than its target.
	UnderFamilies [numFamilies]int
	// UnderBy counts, of those windows, the ones whose admissions fell
	// short of the reference by at most one request (UnderBy[0]) and at
	// most two (UnderBy[1]): in a window with a limit under 20 one
	// request is 5% or more.
	UnderBy [2]int
	// UnderCauses counts those windows by what most likely cost them (the
	// first Cause that applies; every window has one), and UnderCauseShort
	// the requests they fell short of the reference by.
	UnderCauses     [numCauses]int
	UnderCauseShort [numCauses]float64
	// UnderNoneDenied counts, of those windows, the ones that denied none
	// of the requests that arrived in them: some waited for an answer
	// across the window's end and were charged to the next window, while
	// this one's budget went unused.
	UnderNoneDenied int
	// Anomalies lists runs the simulator flagged: answers Apply refused or
	// series evicted (both should never happen).
	Anomalies []string
	// CPU is the time the runs took, summed over the workers (it varies
	// from run to run; Summary leaves it out).
	CPU time.Duration
}

// PolicySummary is one policy's distributions over the complete windows of
// every scenario explored. A plain value.
type PolicySummary struct {
	Policy Policy
	// Rows holds one summary per class of window (indexed by Class).
	Rows [numClasses]Row
	// Messages counts the sync messages of every run.
	Messages int64
}

// Row is the distribution of every metric over one class of windows. A
// plain value.
type Row struct {
	Windows int
	// Dist holds, per metric (indexed by Metric), the median, 99th
	// percentile and worst over the windows, in percent.
	Dist [numMetrics]Dist
	// Offered, WronglyDenied and WronglyAdmitted count requests over the
	// windows: WronglyDenied sums Window.FalseDenials, WronglyAdmitted the
	// requests charged beyond the limit.
	Offered, WronglyDenied, WronglyAdmitted int64
	// Beyond counts, per target (indexed by Target), the windows that miss
	// the design target: the windows a scenario's expect line with that
	// bound would fail on.
	Beyond [numTargets]int
}

// Target is one of the design targets (SPEC: no overshoot beyond ~1%, no
// undershoot beyond ~5%; false denials counted in every test) as a
// scenario file's expect line checks it on one window.
type Target int

// The targets.
const (
	// TargetOvershoot: charged above the limit by more than max(1% of
	// the limit, 1 request) (expect overshoot<=1%).
	TargetOvershoot Target = iota
	// TargetUndershootSafe: undershoot against the partition-safe
	// reference above 5%.
	TargetUndershootSafe
	// TargetWronglyDenied: more than 1% of the window's requests wrongly
	// denied (expect falsedeny<=1%).
	TargetWronglyDenied
	numTargets
)

func (t Target) String() string {
	return [...]string{"overshoot > max(1%, 1 request)", "undershoot vs safe > 5%", "wrongly denied > 1%"}[t]
}

// misses reports which targets a window misses.
func misses(w Window, pct [numMetrics]float64) [numTargets]bool {
	return [numTargets]bool{
		TargetOvershoot:      w.overshootBeyond(1),
		TargetUndershootSafe: pct[MetricUndershootSafe] > 5,
		TargetWronglyDenied:  pct[MetricWronglyDenied] > 1,
	}
}

// Dist is a distribution's median, 99th percentile and maximum (nearest
// rank). A plain value.
type Dist struct {
	Median, P99, Worst float64
}

// Case is one of the worst scenarios for a metric: its worst window. A
// plain value.
type Case struct {
	Index int    // the scenario's index: GenerateScenario(seed, Index)
	Name  string // explore-SEED-INDEX
	// Value is the metric in the window, in percent; Requests the
	// requests it counts (admitted beyond the limit, or not admitted, or
	// wrongly denied or admitted), which breaks ties.
	Value    float64
	Requests float64
	Window   Window
	Safe     float64 // what the partition-safe rule could admit in the window
}

// worse orders cases worst first: by value, then by requests.
func worse(a, b Case) int {
	if c := cmp.Compare(b.Value, a.Value); c != 0 {
		return c
	}
	return cmp.Compare(b.Requests, a.Requests)
}

// Gap is a window where the lease policy did worse than the static split.
// A plain value.
type Gap struct {
	Index         int
	Name          string
	Lease, Static Window
	// Requests is how many more requests static admitted than lease, at
	// most as many as lease's tier denied itself, and Points the same as
	// a share of the requests offered (the larger of the two policies'
	// Offered), in points; Requests orders the gaps.
	Points, Requests float64
}

// exploreGaps is how many of the lease-worse-than-static windows an
// Exploration keeps.
const exploreGaps = 10

// A Family is a kind of window that a target miss may belong to; a window
// may belong to several.
type Family int

const (
	// FamilySmall: a limit under 20, where one request is 5% or more.
	FamilySmall Family = iota
	// FamilyShort: a tier shorter than 3 sync intervals.
	FamilyShort
	// FamilySmallOrShort: either of the two.
	FamilySmallOrShort
	// FamilySliding: a sliding tier.
	FamilySliding
	// FamilyFixedFault: a fixed tier whose window a fault touched.
	FamilyFixedFault
	// FamilyLarge: a limit of 50 or more and a tier of 3 intervals or more.
	FamilyLarge
	// FamilyOther: none of the above.
	FamilyOther
	numFamilies
)

var familyNames = [numFamilies]string{
	FamilySmall:        "limit under 20",
	FamilyShort:        "tier under 3 sync intervals",
	FamilySmallOrShort: "either of those two",
	FamilySliding:      "sliding",
	FamilyFixedFault:   "fixed, with a fault",
	FamilyLarge:        "limit >= 50 and tier >= 3 intervals",
	FamilyOther:        "none of these",
}

func (f Family) String() string { return familyNames[f] }

// families returns the families of window w, whose classes (classesOf)
// are cls.
func families(ref *reference, w Window, cls []Class) (fs [numFamilies]bool) {
	tier, _, ok := ref.window(w)
	fs[FamilySmall] = w.Limit < 20
	fs[FamilyShort] = ok && tier.Period < 3*ref.sc.Sync
	fs[FamilySmallOrShort] = fs[FamilySmall] || fs[FamilyShort]
	fs[FamilySliding] = slices.Contains(cls, ClassSliding)
	fs[FamilyFixedFault] = slices.Contains(cls, ClassFault)
	fs[FamilyLarge] = ok && w.Limit >= 50 && tier.Period >= 3*ref.sc.Sync
	fs[FamilyOther] = !fs[FamilySmallOrShort] && !fs[FamilySliding] && !fs[FamilyFixedFault] && !fs[FamilyLarge]
	return fs
}

// Cause is what most likely cost lease a window under the safe reference,
// judged from the scenario's events around it, the first that applies.
type Cause int

const (
	// CauseCrashHost: a member crashed with its host (Event.Host) at most
	// the reserve horizon (the default ReserveWindows periods, at least the
	// default ReserveMin) plus the detect delay before the window ended.
	// The reserve rule keeps a lost member's share, since such a crash
	// looks like a partition; the reference gives it to the survivors once
	// they notice.
	CauseCrashHost Cause = iota
	// CauseCrash: the same with only the member's process crashing, whose
	// host refuses the calls to it (node.Engine.Refused).
	CauseCrash
	// CausePartition: the membership was split in sides (a partition or
	// cut, or its heal not yet noticed) at some moment of the window, as
	// the reference has it (membershipSegments).
	CausePartition
	// CauseMembership: a member joined, left or restarted from twice the
	// detect delay before the window on to its end.
	CauseMembership
	// CauseCalmSmall: none of these, and a limit under 20.
	CauseCalmSmall
	// CauseCalmShort: none of these, and a tier under 3 sync intervals.
	CauseCalmShort
	// CauseCalm: none of these.
	CauseCalm
	numCauses
)

var causeNames = [numCauses]string{
	CauseCrashHost:  "a crash with its host within the reserve horizon",
	CauseCrash:      "a process crash within the reserve horizon",
	CausePartition:  "a partition or cut, or its heal not yet noticed",
	CauseMembership: "a member joining, leaving or restarting",
	CauseCalmSmall:  "no fault near it, a limit under 20",
	CauseCalmShort:  "no fault near it, a tier under 3 sync intervals",
	CauseCalm:       "no fault near it, neither",
}

func (c Cause) String() string { return causeNames[c] }

// causeOf returns the Cause of window w.
func causeOf(ref *reference, w Window) Cause {
	tier, start, ok := ref.window(w)
	if !ok {
		return CauseCalm
	}
	sc := ref.sc
	end := start + int64(tier.Period)
	detect := int64(sc.Detect + sc.DetectJitter)
	horizon := max(counters.DefaultReserveWindows*int64(tier.Period), int64(counters.DefaultReserveMin)) + detect
	var crash, host, cut, member bool
	for _, ev := range sc.Timeline {
		at := int64(ev.At)
		switch ev.Kind {
		case "crash":
			near := at < end && at+horizon > start
			crash = crash || near
			host = host || (near && ev.Host)
		case "join", "leave", "restart":
			member = member || (at < end && at+2*detect > start)
		}
	}
	for seg := range ref.within(start, end) {
		cut = cut || len(seg.sides) > 1
	}
	switch {
	case host:
		return CauseCrashHost
	case crash:
		return CauseCrash
	case cut:
		return CausePartition
	case member:
		return CauseMembership
	case w.Limit < 20:
		return CauseCalmSmall
	case tier.Period < 3*sc.Sync:
		return CauseCalmShort
	}
	return CauseCalm
}

// outcome is what one scenario gave, reduced to what the summary needs.
type outcome struct {
	err      error
	cpu      time.Duration
	policies []policyOutcome
	worst    [numMetrics]Case // lease's worst window per metric
	hasLease bool
	families [numFamilies]int   // lease's windows under the safe reference, by family
	underBy  [2]int             // and those of them short by at most 1 and 2 requests
	underND  int                // and those that denied no request that arrived in them
	causes   [numCauses]int     // and by cause
	short    [numCauses]float64 // and the requests they fell short by
	gaps     []Gap
	compared int
	anomaly  []string
}

type policyOutcome struct {
	rows     [numClasses]rowOutcome
	messages int64
}

type rowOutcome struct {
	metrics                                 [numMetrics][]float32
	offered, wronglyDenied, wronglyAdmitted int64
	beyond                                  [numTargets]int
}

// Explore generates cfg.Scenarios scenarios from cfg.Seed, runs each under
// every policy of cfg.Policies with ExploreRunSeed, and summarises. The
// result depends on cfg.Seed, cfg.Scenarios and cfg.Policies only.
func Explore(cfg ExploreConfig) (*Exploration, error) {
	if len(cfg.Policies) == 0 {
		cfg.Policies = Policies()
	}
	for _, p := range cfg.Policies {
		if _, err := ParsePolicy(string(p)); err != nil {
			return nil, err
		}
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	if cfg.Worst <= 0 {
		cfg.Worst = 3
	}
	outs := make([]outcome, cfg.Scenarios)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(cfg.Workers, max(cfg.Scenarios, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				outs[i] = exploreOne(cfg, i)
			}
		}()
	}
	for i := range cfg.Scenarios {
		next <- i
	}
	close(next)
	wg.Wait()

	e := &Exploration{Seed: cfg.Seed, Scenarios: cfg.Scenarios, NoSkew: cfg.NoSkew, Median: cfg.MedianClock, Turning: cfg.Turning, Policies: make([]PolicySummary, len(cfg.Policies))}
	all := make([][numClasses][numMetrics][]float32, len(cfg.Policies))
	for i := range outs {
		o := &outs[i]
		if o.err != nil {
			return nil, o.err
		}
		e.CPU += o.cpu
		e.Anomalies = append(e.Anomalies, o.anomaly...)
		for j, po := range o.policies {
			s := &e.Policies[j]
			s.Messages += po.messages
			for c := range numClasses {
				row, ro := &s.Rows[c], &po.rows[c]
				for m := range numMetrics {
					all[j][c][m] = append(all[j][c][m], ro.metrics[m]...)
				}
				row.Offered += ro.offered
				row.WronglyDenied += ro.wronglyDenied
				row.WronglyAdmitted += ro.wronglyAdmitted
				for t := range numTargets {
					row.Beyond[t] += ro.beyond[t]
				}
			}
		}
		if o.hasLease {
			for m := range numMetrics {
				e.Worst[m] = append(e.Worst[m], o.worst[m])
			}
		}
		for f := range numFamilies {
			e.UnderFamilies[f] += o.families[f]
		}
		for j := range e.UnderBy {
			e.UnderBy[j] += o.underBy[j]
		}
		e.UnderNoneDenied += o.underND
		for c := range numCauses {
			e.UnderCauses[c] += o.causes[c]
			e.UnderCauseShort[c] += o.short[c]
		}
		e.LeaseWorse = append(e.LeaseWorse, o.gaps...)
		e.LeaseWorseCount += len(o.gaps)
		e.LeaseWorseWindows += o.compared
		if len(o.gaps) > 0 {
			e.LeaseWorseScenarios++
		}
	}
	for j, p := range cfg.Policies {
		s := &e.Policies[j]
		s.Policy = p
		for c := range numClasses {
			s.Rows[c].Windows = len(all[j][c][MetricOvershoot])
			for m := range numMetrics {
				s.Rows[c].Dist[m] = distribution(all[j][c][m])
			}
		}
	}
	for m := range numMetrics {
		w := e.Worst[m]
		// Worst first; among equals, the lower index (a stable order).
		slices.SortStableFunc(w, worse)
		w = slices.DeleteFunc(w, func(c Case) bool { return c.Value <= 0 })
		e.Worst[m] = w[:min(len(w), cfg.Worst)]
	}
	slices.SortStableFunc(e.LeaseWorse, func(a, b Gap) int {
		if c := cmp.Compare(b.Requests, a.Requests); c != 0 {
			return c
		}
		return cmp.Compare(b.Points, a.Points)
	})
	e.LeaseWorse = e.LeaseWorse[:min(len(e.LeaseWorse), exploreGaps)]
	return e, nil
}

// exploreOne generates and runs scenario i.
func exploreOne(cfg ExploreConfig, i int) outcome {
	name, src := cfg.Scenario(i)
	var o outcome
	sc, err := ParseScenario(name, src)
	if err != nil {
		o.err = fmt.Errorf("sim: explore: the generator wrote an invalid scenario: %w\n%s", err, src)
		return o
	}
	ref := newReference(sc)
	var lease, static *Result
	for _, p := range cfg.Policies {
		r, err := Run(sc, p, ExploreRunSeed)
		if err != nil {
			o.err = fmt.Errorf("sim: explore: %s: %w", name, err)
			return o
		}
		o.cpu += r.Stats.Wall
		if r.Stats.ApplyErrors > 0 || r.Stats.Evicted > 0 {
			o.anomaly = append(o.anomaly, fmt.Sprintf("%s %s: %d answers refused by Apply, %d series evicted", name, p, r.Stats.ApplyErrors, r.Stats.Evicted))
		}
		ref.shift = int64(r.Shift) // the same for every policy: the offsets come from the run's seed
		safe := ref.admitAll(r.Windows)
		po := policyOutcome{messages: r.SyncMessages}
		for k, w := range r.Windows {
			wm, reqs := windowMetrics(w, safe[k])
			cls := ref.classesOf(w)
			if p == Lease {
				if misses(w, wm)[TargetUndershootSafe] {
					fs := families(ref, w, cls)
					for f, in := range fs {
						if in {
							o.families[f]++
						}
					}
					for j := range o.underBy {
						if safe[k]-float64(w.Charged) <= float64(j+1)+1e-9 {
							o.underBy[j]++
						}
					}
					if w.Admitted >= w.Offered {
						o.underND++
					}
					c := causeOf(ref, w)
					o.causes[c]++
					o.short[c] += safe[k] - float64(w.Charged)
				}
				for m := range numMetrics {
					c := Case{Index: i, Name: name, Value: wm[m], Requests: reqs[m], Window: w, Safe: safe[k]}
					if !o.hasLease || worse(c, o.worst[m]) < 0 {
						o.worst[m] = c
					}
				}
				o.hasLease = true
			}
			for _, c := range cls {
				row := &po.rows[c]
				for m := range numMetrics {
					row.metrics[m] = append(row.metrics[m], float32(wm[m]))
				}
				row.offered += w.Offered
				row.wronglyDenied += int64(reqs[MetricWronglyDenied])
				row.wronglyAdmitted += int64(reqs[MetricWronglyAdmitted])
				for t, miss := range misses(w, wm) {
					if miss {
						row.beyond[t]++
					}
				}
			}
		}
		o.policies = append(o.policies, po)
		switch p {
		case Lease:
			lease = r
		case Static:
			static = r
		}
	}
	if lease != nil && static != nil && len(lease.Windows) == len(static.Windows) {
		for k, lw := range lease.Windows {
			sw := static.Windows[k]
			if lw.Tenant != sw.Tenant || lw.SLA != sw.SLA || lw.WindowStart != sw.WindowStart || lw.Offered == 0 || sw.Offered == 0 {
				continue
			}
			o.compared++
			if req, pts, ok := belowStatic(lw, sw); ok {
				o.gaps = append(o.gaps, Gap{Index: i, Name: name, Lease: lw, Static: sw, Points: pts, Requests: req})
			}
		}
	}
	return o
}

// belowStatic reports whether lease's window lw admitted fewer requests
// than static's sw (the same window, both offered something) by more than
// one point of those offered while static stayed within the limit, and by
// how many requests and points. Both were offered the same arrivals; a
// tier's Offered leaves out what another tier of the SLA denied, which
// differs between policies: the larger is the closer to the arrivals. Of
// what lease admitted fewer, the window's gap is only what its own tier
// denied: requests another tier denied count in that tier's windows, if
// static admitted them there. A 5 s window after one that spent most of
// its 10 s tier's budget admits little, and rightly; counted whole, 3,097
// of the 6,729 windows where lease was below static at seed 1 were such,
// 2,379 of them windows whose tier admitted everything it was offered.
func belowStatic(lw, sw Window) (requests, points float64, ok bool) {
	requests = float64(min(sw.Admitted-lw.Admitted, lw.Offered-lw.Admitted))
	points = 100 * requests / float64(max(sw.Offered, lw.Offered))
	return requests, points, points > 1 && sw.Charged <= sw.Limit
}

// distribution returns the median, 99th percentile and maximum of v (nearest
// rank), sorting v.
func distribution(v []float32) Dist {
	if len(v) == 0 {
		return Dist{}
	}
	slices.Sort(v)
	rank := func(q float64) float64 {
		k := int(q*float64(len(v))+0.999999999) - 1 // ceil(q*n) - 1
		return round3(float64(v[min(max(k, 0), len(v)-1)]))
	}
	return Dist{Median: rank(0.5), P99: rank(0.99), Worst: round3(float64(v[len(v)-1]))}
}

// policy returns the summary of policy p, or nil if it was not run.
func (e *Exploration) policy(p Policy) *PolicySummary {
	for i := range e.Policies {
		if e.Policies[i].Policy == p {
			return &e.Policies[i]
		}
	}
	return nil
}

// Summary writes the exploration's tables: per policy, the distribution of
// every metric over the complete windows, the windows where lease did
// worse than static, lease's windows under the safe reference by family,
// and the lease policy's worst scenarios per metric
// (names and worst windows; CaseText gives their files). The same
// exploration always writes the same text.
func (e *Exploration) Summary(w io.Writer) error {
	pw := &printer{w: w}
	skew := ""
	if e.NoSkew {
		skew = ", clocks in step (skew lines dropped)"
	}
	if e.Median {
		skew += ", windows on the members' median clock"
	}
	if e.Turning {
		skew += ", half the moving groups moving every 1 to 6 s"
	}
	pw.printf("explored %d scenarios (generator seed %d, each run with seed %d%s)\n\n", e.Scenarios, e.Seed, ExploreRunSeed, skew)
	pw.printf("per complete window, in %%: median / p99 / worst; \"all\" is the share of every request offered\n\n")
	pw.printf("| policy | windows | count | overshoot | undershoot | undershoot vs safe | wrongly denied | wrongly admitted | denied, all | admitted, all |\n")
	pw.printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range e.Policies {
		for _, c := range Classes() {
			row := s.Rows[c]
			pw.printf("| %s | %s | %d |", s.Policy, c, row.Windows)
			for _, m := range Metrics() {
				d := row.Dist[m]
				pw.printf(" %s / %s / %s |", fmtPct(d.Median), fmtPct(d.P99), fmtPct(d.Worst))
			}
			pw.printf(" %s | %s |\n", share(row.WronglyDenied, row.Offered), share(row.WronglyAdmitted, row.Offered))
		}
	}
	pw.printf("\nwindows that miss a design target (those an expect line would fail on):\n\n")
	pw.printf("| policy | windows | count |")
	for t := range numTargets {
		pw.printf(" %s |", t)
	}
	pw.printf("\n|---|---|---:|---:|---:|---:|\n")
	for _, s := range e.Policies {
		for _, c := range Classes() {
			row := s.Rows[c]
			pw.printf("| %s | %s | %d |", s.Policy, c, row.Windows)
			for t := range numTargets {
				pw.printf(" %d (%.2f%%) |", row.Beyond[t], 100*float64(row.Beyond[t])/float64(max(row.Windows, 1)))
			}
			pw.printf("\n")
		}
	}
	if lease := e.policy(Lease); lease != nil {
		pw.printf("\nlease's %d windows under the safe reference by more than 5%%, by family (a window may be in several):\n", lease.Rows[ClassAll].Beyond[TargetUndershootSafe])
		for f := range numFamilies {
			pw.printf("  %s: %d\n", f, e.UnderFamilies[f])
		}
		pw.printf("short of the reference by one request or less: %d, by two or less: %d\n", e.UnderBy[0], e.UnderBy[1])
		pw.printf("denying none of the requests that arrived in them (some waited across the window's end and were charged to the next): %d\n", e.UnderNoneDenied)
		pw.printf("by what most likely cost them (the first that applies), windows and the requests they fell short by:\n")
		for c := range numCauses {
			pw.printf("  %s: %d, %.0f requests\n", c, e.UnderCauses[c], e.UnderCauseShort[c])
		}
	}
	pw.printf("\nsync messages:")
	for _, s := range e.Policies {
		pw.printf(" %s %d", s.Policy, s.Messages)
	}
	pw.printf("\n")
	if e.LeaseWorseWindows > 0 {
		pw.printf("\nlease admitted fewer requests than static (by more than 1 point of those offered, static within its limit) in %d of %d windows, in %d scenarios",
			e.LeaseWorseCount, e.LeaseWorseWindows, e.LeaseWorseScenarios)
		if len(e.LeaseWorse) == 0 {
			pw.printf("\n")
		} else {
			pw.printf("; the worst (in requests):\n")
		}
		for _, g := range e.LeaseWorse {
			pw.printf("  %s: %s %s at %gs (limit %d): lease admitted %d of %d offered, static %d of %d: %.1f points\n",
				g.Name, g.Lease.Tenant, g.Lease.SLA, g.Lease.WindowStart, g.Lease.Limit,
				g.Lease.Admitted, g.Lease.Offered, g.Static.Admitted, g.Static.Offered, g.Points)
		}
	}
	for _, a := range e.Anomalies {
		pw.printf("ANOMALY %s\n", a)
	}
	pw.printf("\nlease: the worst scenarios per metric (their worst window)\n")
	for _, m := range Metrics() {
		if len(e.Worst[m]) == 0 {
			pw.printf("  %s: none above 0\n", m)
			continue
		}
		pw.printf("  %s:\n", m)
		for _, c := range e.Worst[m] {
			pw.printf("    %s %.3f%%: %s\n", c.Name, c.Value, c.describe())
		}
	}
	return pw.err
}

func (c Case) describe() string {
	w := c.Window
	return fmt.Sprintf("%s %s at %gs, limit %d, offered %d, admitted %d, charged %d, partition-safe %.1f",
		w.Tenant, w.SLA, w.WindowStart, w.Limit, w.Offered, w.Admitted, w.Charged, c.Safe)
}

// WorstCases returns the lease policy's worst scenarios over every metric,
// each once, in the order Summary lists them.
func (e *Exploration) WorstCases() []Case {
	var out []Case
	seen := map[int]bool{}
	for _, m := range Metrics() {
		for _, c := range e.Worst[m] {
			if !seen[c.Index] {
				seen[c.Index] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// CaseText returns the scenario file of a worst case, with a comment on
// top saying which metrics it is among the worst for and its worst window:
// save it as NAME.txt (in sim/testdata to keep it) and run it with go run
// ./cmd/sim -file NAME.txt -policy all.
func (e *Exploration) CaseText(c Case) []byte {
	var b strings.Builder
	for _, m := range Metrics() {
		for _, o := range e.Worst[m] {
			if o.Index == c.Index {
				fmt.Fprintf(&b, "# lease %s %.3f%%: %s\n", m, o.Value, o.describe())
			}
		}
	}
	_, src := ExploreConfig{Seed: e.Seed, NoSkew: e.NoSkew, MedianClock: e.Median, Turning: e.Turning}.Scenario(c.Index)
	return append([]byte(b.String()), src...)
}

// Scenario returns the file of scenario i as an exploration with c runs
// it: GenerateScenario(c.Seed, i) (turning with c.Turning), without its
// skew line with c.NoSkew, and
// with a "measure median" line with c.MedianClock.
func (c ExploreConfig) Scenario(i int) (name string, src []byte) {
	name, src = generateScenario(c.Seed, i, c.Turning)
	if !c.NoSkew && !c.MedianClock {
		return name, src
	}
	var b bytes.Buffer
	for _, line := range bytes.SplitAfter(src, []byte("\n")) {
		if !c.NoSkew || !bytes.HasPrefix(line, []byte("skew ")) {
			b.Write(line)
		}
	}
	if c.MedianClock {
		b.WriteString("measure median\n")
	}
	return name, b.Bytes()
}

func fmtPct(f float64) string { return fmt.Sprintf("%.2f", f) }

func share(n, of int64) string {
	if of <= 0 {
		return "0"
	}
	return fmt.Sprintf("%.4f%%", 100*float64(n)/float64(of))
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
