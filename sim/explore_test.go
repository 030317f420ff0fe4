package sim

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// exploreN runs the explorer over that many scenarios in
// TestExploreMany, for CI (it prints the distribution, and fails on a
// generator or simulator error and, for 500 scenarios, on exploreRatchet):
//
//	go test ./sim -run TestExploreMany -explore 500 -v -timeout 30m
var exploreN = flag.Int("explore", 0, "run the explorer over this many scenarios (TestExploreMany)")

// The generator covers its ranges: over 200 scenarios, every draw reaches
// both ends of its range and every kind of traffic and fault occurs.
func TestGenerateScenarioCovers(t *testing.T) {
	const n = 200
	var (
		insts, tenants, slas  []int
		syncs, durs           []time.Duration
		rates, phases, spans  []float64
		splits                [][2]int // minority, running members
		seen                  = map[string]int{}
		names                 = map[string]bool{}
		partitionRe           = regexp.MustCompile(`(partition|isolate|cut) (\d+)\|(\d+) at (\d+m?s)(?: for (\d+m?s))?`)
		partitionCountByLines = 0
	)
	for i := range n {
		// The odd ones as ExploreConfig.Turning draws them.
		turning := i%2 == 1
		g := &gen{r: newGenRand(1, i), turning: turning}
		g.draw()
		name, src := generateScenario(1, i, turning)
		if !bytes.Equal(src, g.text(name)) {
			t.Fatalf("%s: GenerateScenario and the generator disagree", name)
		}
		if names[string(src)] {
			t.Fatalf("%s: the same text as an earlier scenario", name)
		}
		names[string(src)] = true
		sc, err := ParseScenario(name, src)
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		if sc.Instances != g.n || sc.Sync != g.sync || sc.Duration != g.dur {
			t.Fatalf("%s: parsed %d instances, sync %v, %v; generated %d, %v, %v", name, sc.Instances, sc.Sync, sc.Duration, g.n, g.sync, g.dur)
		}
		insts = append(insts, g.n)
		syncs = append(syncs, g.sync)
		durs = append(durs, g.dur)
		tenants = append(tenants, g.tenants)
		slas = append(slas, len(g.slas))
		seen["profile "+g.profile]++
		if g.skewed {
			seen["skewed"]++
		} else {
			seen["balanced"]++
		}
		for _, s := range g.slas {
			for j, tier := range s.tiers {
				seen[tier.alg]++
				if j > 0 {
					seen["two tiers"]++
				}
			}
		}
		prefixes := map[string]int{}
		for _, l := range g.lines {
			rates = append(rates, l.rate)
			prefixes[l.prefix]++
			switch {
			case l.rampTo > 0:
				seen["ramp"]++
			case l.burst > 0:
				seen["burst"]++
			}
			if l.arrivals == "even" {
				seen["even arrivals"]++
			}
			if l.from > 0 || l.to > 0 {
				seen["from/to"]++
			}
			switch {
			case l.spread == "even":
				seen["spread even"]++
			case strings.Count(l.spread, ":") > 1:
				seen["spread several"]++
			case strings.HasSuffix(l.spread, ":100%"):
				seen["spread pinned"]++
			default:
				seen["spread one hot"]++
			}
		}
		for _, k := range prefixes {
			if k > 1 {
				seen["moving"]++
			}
			if k > 5 {
				seen["moving every few seconds"]++
			}
		}
		for _, f := range []string{"loss=", "dup=", "lognormal"} {
			if strings.Contains(g.net, f) {
				seen[f]++
			}
		}
		for _, s := range g.skew {
			if strings.HasPrefix(s, "random") {
				seen["skew random"]++
			} else {
				seen["skew member"]++
			}
		}
		for _, e := range g.events {
			kind := strings.Fields(e.text)[0]
			if strings.HasPrefix(e.text, "crash owner:") {
				kind = "crash owner"
			}
			seen[kind]++
		}
		for _, d := range g.faultsDesc {
			if strings.HasPrefix(d, "crash") && !strings.Contains(d, "restart") {
				seen["crash for good"]++
			}
			m := partitionRe.FindStringSubmatch(d)
			if m == nil {
				continue
			}
			partitionCountByLines++
			if m[5] == "" {
				seen["no heal"]++
			}
			small, _ := strconv.Atoi(m[2])
			large, _ := strconv.Atoi(m[3])
			splits = append(splits, [2]int{small, small + large})
			at, _ := time.ParseDuration(m[4])
			phases = append(phases, float64(at%g.longest)/float64(g.longest))
			if m[5] != "" {
				span, _ := time.ParseDuration(m[5])
				spans = append(spans, float64(span)/float64(g.longest))
			}
		}
	}
	check := func(what string, ok bool, got ...any) {
		t.Helper()
		if !ok {
			t.Errorf("%s: got %v", what, got)
		}
	}
	check("instances 3 .. 60", slices.Min(insts) == 3 && slices.Max(insts) >= 55 && slices.Max(insts) <= 60, slices.Min(insts), slices.Max(insts))
	check("sync 100ms .. 1s", slices.Min(syncs) == 100*time.Millisecond && slices.Max(syncs) == time.Second, slices.Min(syncs), slices.Max(syncs))
	check("duration 30s .. 60s", slices.Min(durs) == 30*time.Second && slices.Max(durs) == 60*time.Second, slices.Min(durs), slices.Max(durs))
	check("tenants 1 .. 500", slices.Min(tenants) == 1 && slices.Max(tenants) >= 200 && slices.Max(tenants) <= 500, slices.Min(tenants), slices.Max(tenants))
	check("SLAs 1 .. 3", slices.Min(slas) == 1 && slices.Max(slas) == 3, slices.Min(slas), slices.Max(slas))
	check("rates 0.5x .. 3x", slices.Min(rates) < 0.6 && slices.Max(rates) > 2.9 && slices.Min(rates) >= 0.2 && slices.Max(rates) <= 3, slices.Min(rates), slices.Max(rates))
	var ones, halves int
	for _, s := range splits {
		if s[0] == 1 {
			ones++
		}
		if s[1] >= 4 && s[0] == s[1]/2 {
			halves++
		}
	}
	check("partitions 1|N-1 and halves", ones > 0 && halves > 0, ones, halves)
	check("partitions start anywhere in a window", slices.Min(phases) < 0.1 && slices.Max(phases) > 0.9, slices.Min(phases), slices.Max(phases))
	check("partitions last 0.1 .. 3 windows", slices.Min(spans) < 0.2 && slices.Max(spans) > 2, slices.Min(spans), slices.Max(spans))
	for _, k := range []string{
		"profile local", "profile lan", "balanced", "skewed", "fixed", "sliding", "two tiers",
		"ramp", "burst", "even arrivals", "from/to", "moving", "moving every few seconds",
		"spread even", "spread several", "spread pinned", "spread one hot",
		"loss=", "dup=", "lognormal", "skew random", "skew member",
		"partition", "isolate", "cut", "heal", "no heal", "crash", "crash owner", "crash for good", "restart", "leave", "join",
	} {
		check(k+" occurs", seen[k] > 0, seen[k])
	}
	t.Logf("instances %d..%d, tenants %d..%d, %d partitions; %v", slices.Min(insts), slices.Max(insts), slices.Min(tenants), slices.Max(tenants), partitionCountByLines, seen)
}

// Explore gives the same summary whatever the number of workers, and its
// worst scenarios' files parse and reproduce their worst window.
func TestExploreDeterministic(t *testing.T) {
	// Seed 11's first four scenarios are cheap (under a second without the
	// race detector) and have windows of every class.
	n := 4
	if testing.Short() {
		n = 2
	}
	cfg := ExploreConfig{Seed: 11, Scenarios: n, Workers: 1}
	a, err := Explore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workers = 3
	b, err := Explore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var sa, sb bytes.Buffer
	if err := a.Summary(&sa); err != nil {
		t.Fatal(err)
	}
	if err := b.Summary(&sb); err != nil {
		t.Fatal(err)
	}
	if sa.String() != sb.String() {
		t.Fatalf("1 worker:\n%s\n3 workers:\n%s", sa.String(), sb.String())
	}
	t.Log("\n" + sa.String())
	for _, want := range []string{"| lease | all |", "| static | fixed, fault |", "| optimistic | sliding |", "lease: the worst scenarios per metric"} {
		if !strings.Contains(sa.String(), want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	for _, p := range a.Policies {
		r := &p.Rows
		if r[ClassAll].Windows == 0 || r[ClassAll].Windows != r[ClassCalm].Windows+r[ClassFault].Windows+r[ClassSliding].Windows || r[ClassEasy].Windows > r[ClassCalm].Windows {
			t.Errorf("%s: %d windows, classes %d + %d + %d, easy %d", p.Policy, r[ClassAll].Windows, r[ClassCalm].Windows, r[ClassFault].Windows, r[ClassSliding].Windows, r[ClassEasy].Windows)
		}
	}
	cases := a.WorstCases()
	if len(cases) == 0 {
		t.Fatal("no worst case")
	}
	for _, c := range cases {
		text := a.CaseText(c)
		if !strings.HasPrefix(string(text), "# lease ") || !strings.Contains(string(text), fmt.Sprintf("go run ./cmd/sim -file %s.txt", c.Name)) {
			t.Errorf("%s: the file does not say why it is here and how to run it:\n%s", c.Name, text)
		}
		sc, err := ParseScenario(c.Name, text)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		r, err := Run(sc, Lease, ExploreRunSeed)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(r.Windows, c.Window) {
			t.Errorf("%s: running the file does not give the window %+v", c.Name, c.Window)
		}
	}
}

// exploreRatchet is, for the CI's run (500 scenarios from seed 1), the
// number of lease's windows over all classes that may miss each design
// target: what was measured plus 2% for noise, since owners give the
// units a water level leaves over in a window's last two intervals to the
// largest needs first (counters.LargestFirstIntervals, 2026-11-30): 425
// windows over, 8,398 under and 12,034 wrongly denied of 80,298. Before
// that, since an owner bounds
// what a concurrent owner's total hides from it by what it had told the
// origin that brings that total (counters.originState.told, 2026-11-29):
// 421 windows over, 8,758 under and 12,302 wrongly denied of 80,298.
// Before that, since the lan profile
// models a small side of a cut noticing it late, as memberlist does
// (Profile.Side, 2026-11-29): 421 windows over, 8,765 under and 12,314
// wrongly denied of 80,298 (422, 8,562 and 12,161 before, against
// limits of 434, 8,668 and 12,464). Before that, since an owner that takes
// a window over from a member found stopped reserves nothing for it when
// no total of its says it had counts (counters.priorQuiet, 2026-11-29):
// 425 windows over, 8,498 under and 12,220 wrongly denied of 80,298.
// Since then a sliding tier's lowered cap rides when it is below the
// count plus the weighted window before (node.apply, 2026-11-29): 427,
// 8,551 and 12,332, within the limits of then, which stayed; and
// since the lan profile notices a heal within gossip's 2 s rejoin period
// (Profile.Heal, 2026-11-29): 422, 8,565 and 12,167. Before
// priorQuiet, since owners ask members whose traffic moved away for a
// prompt report (counters.Answer.Prompt, 2026-11-29): 423 windows over,
// 8,510 under and 12,233 wrongly denied (437, 8,717 and 12,412 when only
// a second report without demand was asked). Before it, since a waiting
// request is decided again when its owner answers and at the round's end, not at every
// call's end (node.Engine.WakeOn, 2026-11-28): 438 windows over, 8,799
// under and 12,494 wrongly denied of 80,298. Before it, since
// owners release the static shares of members that came back from a
// partition with nothing to report (counters.Owner.sideBack) and lower
// a sliding tier's caps only by the known excess (2026-11-27): 442
// windows over, 8,801 under and 12,521 wrongly denied of 80,298. Before
// them 434, 8,965 and 12,705, since owners bound what a member found
// stopped spent after its last report by its demand
// (counters.StoppedDemandFactor). Before it 432, 9,007 and 12,726, with
// counters.StoppedClockSlack; 432, 9,146 and 12,807 before
// that, since the reference and the wrongly-denied count bound a tier of
// an SLA with several by the room its other tiers' windows ended with
// (Window.siblingRoom); the same runs counted 432, 10,678 and 14,167
// before that yardstick. The README's accuracy section has the figures of
// every change before. A change that misses more fails TestExploreMany;
// one that misses fewer should lower these.
var exploreRatchet = map[int][numTargets]int{
	500: {TargetOvershoot: 434, TargetUndershootSafe: 8566, TargetWronglyDenied: 12275},
}

// TestExploreMany runs the explorer over -explore scenarios (none by
// default) and prints the summary; it fails on an error, on a run the
// simulator flags (answers refused, series evicted), and, for the CI's
// 500 scenarios, when lease misses a design target in more windows than
// exploreRatchet allows.
func TestExploreMany(t *testing.T) {
	if *exploreN <= 0 {
		t.Skip("run with -explore N")
	}
	start := time.Now()
	e, err := Explore(ExploreConfig{Seed: 1, Scenarios: *exploreN})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := e.Summary(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s\n%d scenarios in %v", b.String(), *exploreN, time.Since(start).Round(time.Millisecond))
	for _, a := range e.Anomalies {
		t.Error(a)
	}
	limits, ok := exploreRatchet[*exploreN]
	if !ok {
		return
	}
	for _, p := range e.Policies {
		if p.Policy != Lease {
			continue
		}
		for target, n := range p.Rows[ClassAll].Beyond {
			if n > limits[target] {
				t.Errorf("lease misses target %v in %d windows of %d, more than the %d recorded in exploreRatchet", Target(target), n, p.Rows[ClassAll].Windows, limits[target])
			} else if n*100 < limits[target]*97 {
				t.Logf("lease misses target %v in %d windows, well under the %d recorded: lower exploreRatchet", Target(target), n, limits[target])
			}
		}
	}
}

// TestExploreNoSkew: with NoSkew the scenarios run with their clocks in
// step, the summary says so, and the files of the worst cases reproduce
// that run (no skew line; nothing else dropped).
func TestExploreNoSkew(t *testing.T) {
	idx := -1
	for i := 0; i < 50 && idx < 0; i++ {
		if _, src := GenerateScenario(11, i); bytes.Contains(src, []byte("\nskew ")) {
			idx = i
		}
	}
	if idx < 0 {
		t.Fatal("no scenario of seed 11 among the first 50 has a skew line")
	}
	name, with := GenerateScenario(11, idx)
	_, without := ExploreConfig{Seed: 11, NoSkew: true}.Scenario(idx)
	if n := bytes.Count(with, []byte("\n")) - bytes.Count(without, []byte("\n")); n != 1 || bytes.Contains(without, []byte("\nskew ")) {
		t.Fatalf("dropped %d lines, want the skew line only:\n%s", n, without)
	}
	sc, err := ParseScenario(name, without)
	if err != nil {
		t.Fatal(err)
	}
	if sc.SkewRandom != 0 || len(sc.Skew) != 0 {
		t.Errorf("skew %v, random %v: want none", sc.Skew, sc.SkewRandom)
	}
	e, err := Explore(ExploreConfig{Seed: 11, Scenarios: idx + 1, Policies: []Policy{Lease}, NoSkew: true})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := e.Summary(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "clocks in step") {
		t.Errorf("the summary does not say the clocks were in step:\n%s", b.String())
	}
	if len(e.WorstCases()) == 0 {
		t.Fatal("no worst case listed")
	}
	for _, c := range append(e.WorstCases(), Case{Index: idx, Name: name}) {
		if text := e.CaseText(c); bytes.Contains(text, []byte("\nskew ")) {
			t.Errorf("%s's file has a skew line:\n%s", c.Name, text)
		}
	}
	// The same case's file from an exploration with the clocks as
	// generated keeps it.
	if text := (&Exploration{Seed: 11}).CaseText(Case{Index: idx, Name: name}); !bytes.Contains(text, []byte("\nskew ")) {
		t.Errorf("%s's file without NoSkew lacks its skew line:\n%s", name, text)
	}
}

// TestExploreFamilies: the families of lease's windows under the safe
// reference are counted from those windows: every window is in one, none
// holds more than all of them, "either" is the union of small and short,
// and the summary prints them.
func TestExploreFamilies(t *testing.T) {
	e, err := Explore(ExploreConfig{Seed: 11, Scenarios: 4, Workers: 2, Policies: []Policy{Lease}})
	if err != nil {
		t.Fatal(err)
	}
	under := e.Policies[0].Rows[ClassAll].Beyond[TargetUndershootSafe]
	f := e.UnderFamilies
	if under == 0 {
		t.Fatal("no window under the reference: seed 11's first scenarios have some")
	}
	if cover := f[FamilySmallOrShort] + f[FamilySliding] + f[FamilyFixedFault] + f[FamilyLarge] + f[FamilyOther]; cover < under {
		t.Errorf("families %v cover %d windows of the %d under: every window is in one", f, cover, under)
	}
	for fam, n := range f {
		if n > under {
			t.Errorf("%s: %d windows, more than the %d under", Family(fam), n, under)
		}
	}
	if u := f[FamilySmallOrShort]; u < max(f[FamilySmall], f[FamilyShort]) || u > f[FamilySmall]+f[FamilyShort] {
		t.Errorf("either %d, small %d, short %d: not their union", u, f[FamilySmall], f[FamilyShort])
	}
	var b bytes.Buffer
	if err := e.Summary(&b); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("  %s: %d\n", FamilyOther, f[FamilyOther])
	if !strings.Contains(b.String(), "by family") || !strings.Contains(b.String(), want) {
		t.Errorf("the summary lacks the families (%q):\n%s", want, b.String())
	}
	// Those short by a request or two: a part of them, counted per window.
	by := e.UnderBy
	if by[0] > by[1] || by[1] > under {
		t.Errorf("short by at most one request %d, two %d, of %d under: want nested", by[0], by[1], under)
	}
	var one, two, none int
	for i := range 4 {
		name, src := ExploreConfig{Seed: 11}.Scenario(i)
		sc, err := ParseScenario(name, src)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(sc, Lease, ExploreRunSeed)
		if err != nil {
			t.Fatal(err)
		}
		safe := PartitionSafe(sc, r)
		for k, w := range r.Windows {
			if short := safe[k] - float64(w.Charged); UndershootVsSafe(w, safe[k]) > 0.05 {
				one += b2i(short <= 1+1e-9)
				two += b2i(short <= 2+1e-9)
				none += b2i(w.Admitted >= w.Offered)
			}
		}
	}
	if by != [2]int{one, two} {
		t.Errorf("short by one request or less, two or less: %v, want %v", by, [2]int{one, two})
	}
	if want := fmt.Sprintf("by one request or less: %d, by two or less: %d\n", one, two); !strings.Contains(b.String(), want) {
		t.Errorf("the summary lacks %q", want)
	}
	if e.UnderNoneDenied != none || none > under {
		t.Errorf("windows under that denied nothing: %d, want %d (of %d under)", e.UnderNoneDenied, none, under)
	}
	// Every window under has exactly one cause.
	var causes int
	for c, n := range e.UnderCauses {
		causes += n
		if want := fmt.Sprintf("  %s: %d, %.0f requests\n", Cause(c), n, e.UnderCauseShort[c]); !strings.Contains(b.String(), want) {
			t.Errorf("the summary lacks %q", want)
		}
	}
	if causes != under {
		t.Errorf("causes %v add up to %d windows, want the %d under", e.UnderCauses, causes, under)
	}
}

// TestCauseOf: a window's cause is the first of crash, partition and
// membership change that its events give, else what its limit and tier
// are.
func TestCauseOf(t *testing.T) {
	const head = "desc causes\ninstances 4\nsync 500ms\nprofile local\nduration 60s\nsla s1 fixed:10s:100 fixed:1s:10\ntraffic tenants=a sla=s1 rate=1x\n"
	for _, tc := range []struct {
		name, events string
		sla          string
		start        float64
		limit        int64
		want         Cause
	}{
		{"calm", "", "s1/10s", 20, 100, CauseCalm},
		{"calm, small", "", "s1/10s", 20, 10, CauseCalmSmall},
		{"calm, short", "", "s1/1s", 20, 100, CauseCalmShort},
		{"crash within the horizon", "at 5s crash n1\n", "s1/10s", 30, 100, CauseCrash},
		{"host crash within the horizon", "at 5s crash n1 host\n", "s1/10s", 30, 100, CauseCrashHost},
		{"crash past the horizon", "at 5s crash n1\n", "s1/10s", 40, 100, CauseCalm},
		{"crash after the window", "at 35s crash n1\n", "s1/10s", 20, 100, CauseCalm},
		{"partition in it", "at 25s partition n0 | n1,n2,n3\nat 45s heal\n", "s1/10s", 20, 100, CausePartition},
		{"heal not yet noticed", "at 5s partition n0 | n1,n2,n3\nat 19800ms heal\n", "s1/10s", 20, 100, CausePartition},
		{"heal noticed before", "at 5s partition n0 | n1,n2,n3\nat 15s heal\n", "s1/10s", 20, 100, CauseCalm},
		{"no heal", "at 5s cut n0 -> n1\n", "s1/10s", 50, 100, CausePartition},
		{"crash and partition", "at 25s partition n0 | n1,n2,n3\nat 26s crash n1\n", "s1/10s", 20, 100, CauseCrash},
		{"join", "at 21s join n4\n", "s1/10s", 20, 100, CauseMembership},
		{"leave just before", "at 19500ms leave n3\n", "s1/10s", 20, 100, CauseMembership},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := ParseScenario(tc.name, []byte(head+tc.events))
			if err != nil {
				t.Fatal(err)
			}
			w := Window{Tenant: "a", SLA: tc.sla, WindowStart: tc.start, Limit: tc.limit}
			if got := causeOf(newReference(sc), w); got != tc.want {
				t.Errorf("%s at %vs: %q, want %q", tc.sla, tc.start, got, tc.want)
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestBelowStatic: a window counts as lease below static by what its own
// tier denied, not by what another tier of the SLA denied before it.
func TestBelowStatic(t *testing.T) {
	win := func(offered, admitted int64) Window {
		return Window{Tenant: "a", SLA: "api/5s", Limit: 100, Offered: offered, Admitted: admitted, Charged: admitted}
	}
	for _, tc := range []struct {
		name          string
		lease, static Window
		requests, pts float64
		below         bool
	}{
		{"one tier: what lease denied", win(100, 60), win(100, 90), 30, 30, true},
		{"another tier denied the rest: no gap", win(4, 4), win(8, 8), 0, 0, false},
		{"another tier denied some, this tier 2", win(6, 4), win(8, 8), 2, 25, true},
		{"within a point", win(200, 199), win(200, 200), 1, 0.5, false},
		{"static over its limit", win(200, 60), Window{Limit: 100, Offered: 200, Admitted: 110, Charged: 110}, 50, 25, false},
		{"lease admitted more", win(100, 95), win(100, 90), -5, -5, false},
	} {
		req, pts, below := belowStatic(tc.lease, tc.static)
		if req != tc.requests || math.Abs(pts-tc.pts) > 1e-9 || below != tc.below {
			t.Errorf("%s: %v requests, %v points, below %v; want %v, %v, %v", tc.name, req, pts, below, tc.requests, tc.pts, tc.below)
		}
	}
}
