package sim

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/ring"
)

const minimal = `desc d
instances 3
duration 30s
sla api fixed:10s:1000
traffic tenants=org1 sla=api rate=2x
`

func TestParseScenario(t *testing.T) {
	src := `# a comment
desc Two SLAs, a partition and a crash   # trailing comment
instances 4
sync 250ms
duration 90s
warmup 20s
network latency=2ms jitter=lognormal:3ms:0.5 loss=1% dup=0.002
detect 500ms jitter=100ms
notify 50ms
skew n1 +20ms
skew random 5ms
measure median
sla api fixed:10s:1000 sliding:1s:150
sla search sliding:1m:600
traffic tenants=a,cold[3-5] sla=api rate=1.5x spread=n0:60%,n1:10% arrivals=even from=5s to=80s
traffic tenants=b sla=search ramp=10/s..3x burst=20%
plot b search
at 40s heal
at 20s partition n0,n1 | n2,store | n3
at 30s isolate n3
at 50s crash owner:a/api
at 60s join n4
at 70s leave n4
expect lease overshoot<=1% undershoot<=5% messages<=1000 target:undershoot<=2%
`
	sc, err := ParseScenario("x", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "x" || sc.Desc != "Two SLAs, a partition and a crash" {
		t.Errorf("name %q desc %q", sc.Name, sc.Desc)
	}
	if sc.Instances != 4 || sc.Sync != 250*time.Millisecond || sc.Duration != 90*time.Second || sc.Warmup != 20*time.Second {
		t.Errorf("instances %d sync %v duration %v warmup %v", sc.Instances, sc.Sync, sc.Duration, sc.Warmup)
	}
	want := Network{Latency: 2 * time.Millisecond, Jitter: 3 * time.Millisecond, JitterDist: "lognormal", Sigma: 0.5, Loss: 0.01, Dup: 0.002}
	if sc.Net != want {
		t.Errorf("network %+v, want %+v", sc.Net, want)
	}
	if sc.Detect != 500*time.Millisecond || sc.DetectJitter != 100*time.Millisecond || sc.Notify != 50*time.Millisecond {
		t.Errorf("detect %v jitter %v notify %v", sc.Detect, sc.DetectJitter, sc.Notify)
	}
	if sc.Skew["n1"] != 20*time.Millisecond || sc.SkewRandom != 5*time.Millisecond || !sc.MedianClock {
		t.Errorf("skew %v random %v median %v", sc.Skew, sc.SkewRandom, sc.MedianClock)
	}
	if len(sc.SLAs) != 2 || len(sc.SLAs[0].Tiers) != 2 || sc.SLAs[0].Tiers[1] != (Tier{counters.Sliding, time.Second, 150}) {
		t.Errorf("slas %+v", sc.SLAs)
	}
	tr := sc.Traffic[0]
	if !slices.Equal(tr.Tenants, []string{"a", "cold3", "cold4", "cold5"}) {
		t.Errorf("tenants %v", tr.Tenants)
	}
	if tr.Rate != 150 || tr.Poisson || tr.From != 5*time.Second || tr.To != 80*time.Second { // 1.5 x min(100/s, 150/s)
		t.Errorf("traffic %+v", tr)
	}
	if !slices.Equal(tr.Spread, []Weight{{"n0", 0.6}, {"n1", 0.1}}) {
		t.Errorf("spread %v", tr.Spread)
	}
	tr = sc.Traffic[1]
	if tr.Rate != 10 || tr.RampTo != 30 || tr.Burst != 0.2 || !tr.Poisson { // 3 x 600/60s
		t.Errorf("ramp traffic %+v", tr)
	}
	if sc.PlotTenant != "b" || sc.PlotSLA != "search" {
		t.Errorf("plot %s %s", sc.PlotTenant, sc.PlotSLA)
	}
	var kinds []string
	for _, ev := range sc.Timeline {
		kinds = append(kinds, ev.Kind)
	}
	if !slices.Equal(kinds, []string{EvPartition, EvPartition, EvHeal, EvCrash, EvJoin, EvLeave}) {
		t.Errorf("timeline not sorted by time: %v", kinds)
	}
	if g := sc.Timeline[0].Groups; len(g) != 3 || !slices.Equal(g[1], []string{"n2", "store"}) {
		t.Errorf("partition groups %q", g)
	}
	if g := sc.Timeline[1].Groups; len(g) != 2 || g[0] != nil || !slices.Equal(g[1], []string{"n3"}) {
		t.Errorf("isolate groups %q", g)
	}
	// owner:a/api resolves to the owner on the initial ring.
	rg, _ := ring.New(ring.DefaultConfig())
	rg.Set([]string{"n0", "n1", "n2", "n3"})
	owner, _ := rg.Owner(counters.SeriesHash("a", "api", "GET", 10*time.Second))
	if sc.Timeline[3].Name != owner || sc.Timeline[3].Text != "crash "+owner+" (owner of a/api)" {
		t.Errorf("owner:a/api = %q (%q), want %q", sc.Timeline[3].Name, sc.Timeline[3].Text, owner)
	}
	if len(sc.Expect) != 1 || len(sc.Expect[0].Bounds) != 3 || len(sc.Expect[0].Targets) != 1 ||
		sc.Expect[0].Bounds[2] != (Bound{"messages", "<=", 1000}) || sc.Expect[0].Targets[0] != (Bound{"undershoot", "<=", 2}) {
		t.Errorf("expect %+v", sc.Expect)
	}
}

func TestParseScenarioDefaults(t *testing.T) {
	sc, err := ParseScenario("m", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	local := Profiles["local"]
	if sc.Sync != time.Second || sc.Warmup != 10*time.Second || sc.Profile != "local" || sc.Detect != local.Detect ||
		sc.DetectJitter != local.DetectJitter || sc.Notify != local.Notify || sc.PendingWait != 3*time.Second {
		t.Errorf("defaults: sync %v warmup %v profile %s detect %v jitter %v notify %v pending %v",
			sc.Sync, sc.Warmup, sc.Profile, sc.Detect, sc.DetectJitter, sc.Notify, sc.PendingWait)
	}
	lan, err := ParseScenario("m", []byte(minimal+"profile lan\npending 0s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if lan.Detect != Profiles["lan"].Detect || lan.PendingWait != 0 {
		t.Errorf("profile lan: detect %v pending %v", lan.Detect, lan.PendingWait)
	}
	if _, err := ParseScenario("m", []byte(minimal+"profile wan\n")); err == nil {
		t.Error("profile wan accepted")
	}
	cut, err := ParseScenario("m", []byte(minimal+"at 5s cut n0,n1 -> n2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ev := cut.Timeline[0]; ev.Kind != EvCut || !slices.Equal(ev.Groups[0], []string{"n0", "n1"}) || !slices.Equal(ev.Groups[1], []string{"n2"}) {
		t.Errorf("cut event %+v", ev)
	}
	if _, err := ParseScenario("m", []byte(minimal+"at 5s cut n0 n2\n")); err == nil {
		t.Error("cut without -> accepted")
	}
	rt, err := ParseScenario("m", []byte(minimal+"traffic tenants=x sla=api rate=1x retry=once\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !rt.Traffic[1].Retry || rt.Traffic[0].Retry {
		t.Errorf("retry=once: %+v", rt.Traffic)
	}
	if _, err := ParseScenario("m", []byte(minimal+"traffic tenants=x sla=api rate=1x retry=twice\n")); err == nil {
		t.Error("retry=twice accepted")
	}
	if tr := sc.Traffic[0]; tr.Rate != 200 || !tr.Poisson || tr.Burst != 1 || tr.Spread != nil {
		t.Errorf("traffic defaults %+v", tr)
	}
	if sc.PlotTenant != "org1" || sc.PlotSLA != "api" {
		t.Errorf("plot defaults %s %s", sc.PlotTenant, sc.PlotSLA)
	}
}

func TestParseScenarioErrors(t *testing.T) {
	for _, tc := range []struct {
		extra string // appended to minimal
		want  string
	}{
		{"bogus 1", ":6: bogus: unknown directive"},
		{"instances 0", ":6: instances: want a count"},
		{"sync -1s", ":6: sync: want a positive duration"},
		{"network loss=2", "loss=2: want a probability"},
		{"network jitter=gauss:1ms", "want exp:MEAN or lognormal"},
		{"network speed=1", "speed=1: unknown key"},
		{"sla api fixed:10s:5", `duplicate SLA "api"`},
		{"sla b fixed:7s:5", "period must divide 1h"},
		{"sla b fixed:10s:0", "threshold must be in"},
		{"sla b fixed:1s:5 sliding:1s:9", "two tiers with period 1s"},
		{"sla b leaky:1s:5", "unknown algorithm"},
		{"traffic tenants=x sla=nope rate=1x", `unknown SLA "nope"`},
		{"traffic tenants=x sla=api", "exactly one of rate= and ramp="},
		{"traffic tenants=x sla=api rate=fast", "want Nx or N/s"},
		{"traffic tenants=x[5-1] sla=api rate=1x", "want PREFIX[A-B]"},
		{"traffic tenants=x sla=api rate=1x spread=n0:80%,n1:30%", "more than 100%"},
		{"traffic tenants=x sla=api rate=1x spread=n7:50%", `unknown member "n7"`},
		{"traffic tenants=x sla=api rate=1x from=9s to=3s", "from < to"},
		{"at 5s explode n1", `unknown event "explode"`},
		{"at 5s partition n0,n1", "at least two non-empty groups"},
		{"at 5s crash n9", `unknown member "n9"`},
		{"at 5s join n1", "join n1: already a member"},
		{"at 50s heal", "after the end of the run"},
		{"at 5s crash owner:org1/nope", `unknown SLA "nope"`},
		{"expect fast overshoot<=1%", `unknown policy "fast"`},
		{"expect lease overshoot<=1", "want a percentage"},
		{"expect lease latency<=1", "unknown metric"},
		{"skew n9 +1s", `skew: unknown member "n9"`},
		{"measure mean", "want median or real"},
	} {
		_, err := ParseScenario("bad", []byte(minimal+tc.extra+"\n"))
		if err == nil {
			t.Errorf("%q: accepted", tc.extra)
			continue
		}
		if !errors.Is(err, ErrScenario) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "bad") {
			t.Errorf("%q: error %q, want it to wrap ErrScenario, name the file and contain %q", tc.extra, err, tc.want)
		}
	}
	for _, tc := range []struct{ src, want string }{
		{"instances 3\nduration 1s\nsla a fixed:1s:1\ntraffic tenants=x sla=a rate=1x\n", "desc is required"},
		{"desc d\nduration 1s\nsla a fixed:1s:1\ntraffic tenants=x sla=a rate=1x\n", "instances is required"},
		{"desc d\ninstances 1\nsla a fixed:1s:1\ntraffic tenants=x sla=a rate=1x\n", "duration is required"},
		{"desc d\ninstances 1\nduration 1s\n", "traffic line is required"},
	} {
		if _, err := ParseScenario("bad", []byte(tc.src)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.src, err, tc.want)
		}
	}
}

func TestBuiltinScenarios(t *testing.T) {
	scs, err := Scenarios()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, sc := range scs {
		names[sc.Name] = true
		if strings.Contains(sc.Desc, "\n") || len(sc.Desc) > 120 {
			t.Errorf("%s: description must be one short line, got %q", sc.Name, sc.Desc)
		}
		if sc.Name == "speed" {
			continue
		}
		for _, p := range Policies() {
			if !slices.ContainsFunc(sc.Expect, func(e Expect) bool { return e.Policy == p }) {
				t.Errorf("%s: no expect line for %s", sc.Name, p)
			}
		}
	}
	for _, n := range []string{"steady", "skew", "hot-tenant", "partition-2-1", "partition-heal", "owner-crash",
		"scale-up", "scale-down", "lossy", "clock-skew",
		"acc-3n-100ms-even", "acc-3n-100ms-skew", "acc-3n-1s-even", "acc-3n-1s-skew", "acc-3n-1s-partition",
		"acc-10n-100ms-even", "acc-10n-100ms-skew", "acc-10n-1s-even", "acc-10n-1s-skew",
		"acc-10n-100ms-partition", "acc-10n-1s-partition", "speed"} {
		if !names[n] {
			t.Errorf("missing scenario %s", n)
		}
	}
	if _, err := LoadScenario("../x"); err == nil {
		t.Error("LoadScenario accepted a path")
	}
	if _, err := LoadScenario("nope"); err == nil {
		t.Error("LoadScenario found a scenario that does not exist")
	}
}
