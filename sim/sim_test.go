package sim

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// goldenSeed is the seed the expect lines of the scenario files were
// measured with.
const goldenSeed = 1

// TestGolden runs every built-in scenario (but the load test) under every
// policy and checks the bounds of its expect lines. A design target the
// result misses is logged as KNOWN MISS: the plain bound next to it holds
// the measured figure, so that it cannot get worse unnoticed. It also checks
// what must hold in every run: every policy is offered the same requests,
// no series is evicted, no answer is refused, and the optimistic policy
// stays within the seed's bound of (N-1) x one interval's traffic.
func TestGolden(t *testing.T) {
	scs, err := Scenarios()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scs {
		if sc.Name == "speed" {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			var offered []int64
			for _, p := range Policies() {
				r, err := Run(sc, p, goldenSeed)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%-10s overshoot %.2f%% undershoot %.2f%% messages %d", p, r.MaxOvershootPct, r.MaxUndershootPct, r.SyncMessages)
				if len(r.Windows) == 0 {
					t.Errorf("%s: no measured window", p)
				}
				// Offered requests must not depend on the policy (but in
				// SLAs with several tiers, where a tier's offered excludes
				// what another tier denied).
				var off []int64
				for _, w := range r.Windows {
					if id, _, _ := strings.Cut(w.SLA, "/"); len(sc.sla(id).Tiers) == 1 {
						off = append(off, w.Offered)
					}
				}
				retries := slices.ContainsFunc(sc.Traffic, func(tr Traffic) bool { return tr.Retry })
				if offered == nil {
					offered = off
				} else if !retries && !slices.Equal(off, offered) { // clients that retry offer what they were denied
					t.Errorf("%s: offered per window %v, the first policy %v: the traffic must not depend on the policy", p, off, offered)
				}
				if r.Stats.Evicted != 0 {
					t.Errorf("%s: %d series evicted: the tables are too small", p, r.Stats.Evicted)
				}
				if r.Stats.ApplyErrors != 0 {
					t.Errorf("%s: %d answers refused by Apply", p, r.Stats.ApplyErrors)
				}
				if p == Optimistic && strings.HasPrefix(sc.Name, "acc-") && strings.HasSuffix(sc.Name, "-even") {
					rate := sc.Traffic[0].Rate
					bound := float64(sc.Instances-1) * rate * sc.Sync.Seconds() / float64(sc.SLAs[0].Tiers[0].Threshold) * 100
					if r.MaxOvershootPct <= 0 || r.MaxOvershootPct > bound {
						t.Errorf("optimistic overshoot %.1f%%, want in (0, %.1f%%]: the seed's (N-1) x one interval's traffic", r.MaxOvershootPct, bound)
					}
				}
				fails, misses := sc.Check(r)
				for _, f := range fails {
					t.Error(f)
				}
				for _, m := range misses {
					t.Log("KNOWN MISS " + m)
				}
				for _, e := range sc.Expect {
					if e.Policy == p && len(e.Targets) > 0 && len(misses) == 0 {
						t.Logf("%s:%d: %s now meets its target: replace the recorded bound with it", sc.Name, e.Line, p)
					}
				}
			}
		})
	}
}

func runJSON(t *testing.T, sc *Scenario, seed uint64) []byte {
	t.Helper()
	rep := &Report{Scenario: sc.Name, Seed: seed}
	for _, p := range Policies() {
		r, err := Run(sc, p, seed)
		if err != nil {
			t.Fatal(err)
		}
		rep.Results = append(rep.Results, r)
	}
	js, err := rep.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// chaos exercises every random draw and every fault: jitter, loss,
// duplicates, clock skew, Poisson and even arrivals, a partition and its
// heal, a crash and restart, a join and a graceful leave.
const chaos = `desc everything at once
instances 4
sync 200ms
duration 20s
network latency=1ms jitter=lognormal:2ms:1 loss=5% dup=5%
skew random 50ms
sla api fixed:5s:500 sliding:1s:150
traffic tenants=a,b sla=api rate=2x spread=n0:60%
traffic tenants=c sla=api rate=1x arrivals=even
at 5s partition n0,n1 | n2,n3
at 8s heal
at 9s crash n1
at 11s restart n1
at 13s join n4
at 16s leave n2
`

func TestDeterminism(t *testing.T) {
	sc := scenario(t, chaos)
	a, b := runJSON(t, sc, 7), runJSON(t, sc, 7)
	if !bytes.Equal(a, b) {
		t.Error("two runs with seed 7 gave different results.json")
	}
	if c := runJSON(t, sc, 8); bytes.Equal(a, c) {
		t.Error("seeds 7 and 8 gave the same results.json: the seed is not used")
	}
}

func TestResultsJSONFormat(t *testing.T) {
	sc, err := ParseScenario("f", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(sc, Lease, 1)
	if err != nil {
		t.Fatal(err)
	}
	js, err := (&Report{Scenario: "f", Seed: 1, Results: []*Result{r}}).JSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"scenario": "f"`, `"seed": 1`, `"results": [`, `"policy": "lease"`, `"max_overshoot_pct": `,
		`"max_undershoot_pct": `, `"sync_messages": `, `"sync_bytes": `, `"windows": [`, `"tenant": "org1"`, `"sla": "api/10s"`,
		`"window_start": 10,`, `"limit": 1000,`, `"offered": `, `"admitted": `} {
		if !bytes.Contains(js, []byte(key)) {
			t.Errorf("results.json lacks %s:\n%s", key, js)
		}
	}
	// 30 s run, 10 s windows, the first is warm-up: windows 10 and 20.
	if len(r.Windows) != 2 || r.Windows[0].WindowStart != 10 || r.Windows[1].WindowStart != 20 {
		t.Errorf("measured windows %+v, want those starting at 10 s and 20 s", r.Windows)
	}
}

func scenario(t *testing.T, src string) *Scenario {
	t.Helper()
	sc, err := ParseScenario(t.Name(), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// One instance owns every key: no message, and every policy is exact.
func TestSingleInstanceIsExact(t *testing.T) {
	sc := scenario(t, `desc one
instances 1
sync 100ms
duration 40s
sla api fixed:10s:1000
traffic tenants=a,b sla=api rate=3x
`)
	for _, p := range Policies() {
		r, err := Run(sc, p, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range r.Windows {
			if w.Charged != w.Limit {
				t.Errorf("%s: %s at %vs admitted %d, want exactly %d", p, w.Tenant, w.WindowStart, w.Charged, w.Limit)
			}
		}
		if p != Central && r.SyncMessages != 0 {
			t.Errorf("%s: %d messages with a single member, want 0 (own keys merge locally)", p, r.SyncMessages)
		}
		if p == Central && r.SyncMessages == 0 {
			t.Errorf("central: no store call")
		}
	}
}

// Messages across a cut are dropped: cut off from its store, the central
// policy can only count locally and admits the limit on every instance.
func TestStoreBehindPartition(t *testing.T) {
	sc := scenario(t, `desc store cut off
instances 3
sync 100ms
duration 30s
sla api fixed:10s:1000
traffic tenants=a sla=api rate=4x
at 0s partition store | n0,n1,n2
`)
	r, err := Run(sc, Central, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range r.Windows {
		if w.Charged < 2990 {
			t.Errorf("window %v: admitted %d, want ~3000 (each instance alone admits the limit)", w.WindowStart, w.Charged)
		}
	}
	if r.Stats.Cut == 0 || r.Stats.Cut != r.SyncMessages {
		t.Errorf("cut %d of %d messages, want all", r.Stats.Cut, r.SyncMessages)
	}
}

// Duplicated requests never double count in the engine (per-origin
// cumulative counts), but do at the central store (INCRBY deltas), which
// then undershoots.
func TestDuplicates(t *testing.T) {
	sc := scenario(t, `desc duplicates
instances 3
sync 100ms
duration 40s
network dup=50%
sla api fixed:10s:1000
traffic tenants=a sla=api rate=2x
`)
	for _, p := range Policies() {
		r, err := Run(sc, p, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Stats.Duplicates == 0 {
			t.Fatalf("%s: no duplicate", p)
		}
		if p == Central {
			if r.MaxUndershootPct < 20 {
				t.Errorf("central: undershoot %.1f%% with half the INCRBYs applied twice, want >= 20%%", r.MaxUndershootPct)
			}
			continue
		}
		if r.MaxUndershootPct > 1 {
			t.Errorf("%s: undershoot %.1f%% with duplicates: double counting?", p, r.MaxUndershootPct)
		}
	}
}

// A crash drops the engine: the restarted instance starts from nothing,
// under a new incarnation, and the owner keeps its earlier counts.
func TestCrashRestartKeepsOldIncarnationCounts(t *testing.T) {
	sc := scenario(t, `desc restart
instances 3
sync 100ms
duration 40s
sla api fixed:10s:1000
traffic tenants=a sla=api rate=2x spread=n0:50%
at 25s crash n0
at 25100ms restart n0
`)
	r, err := Run(sc, Lease, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range r.Windows {
		// Restarting mid-window, n0 must not get a fresh budget on top of
		// what its previous run admitted (the owner adds incarnations).
		// Its unreported counts (at most a sync interval's) may be lost.
		if w.Charged > w.Limit+20 {
			t.Errorf("window %v: admitted %d of %d after a restart", w.WindowStart, w.Charged, w.Limit)
		}
	}
}

func TestRunRejectsUnknownPolicy(t *testing.T) {
	sc, err := ParseScenario("m", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(sc, "fast", 1); err == nil || !strings.Contains(err.Error(), "unknown policy") {
		t.Fatalf("Run with an unknown policy: %v", err)
	}
}

func TestSpeedScenarioShape(t *testing.T) {
	sc, err := LoadScenario("speed")
	if err != nil {
		t.Fatal(err)
	}
	var rate float64
	for _, tr := range sc.Traffic {
		rate += tr.Rate * float64(len(tr.Tenants))
	}
	if sc.Instances != 10 || sc.Duration != 60*time.Second || rate != 10_000 {
		t.Fatalf("speed: %d instances, %v, %v req/s; want 10, 60s, 10000", sc.Instances, sc.Duration, rate)
	}
}

func ExampleRun() {
	sc, err := ParseScenario("example", []byte(`desc 3 instances, static shares
instances 3
sync 100ms
duration 30s
sla api fixed:10s:1000
traffic tenants=org1 sla=api rate=2x
`))
	if err != nil {
		panic(err)
	}
	r, err := Run(sc, Static, 1)
	if err != nil {
		panic(err)
	}
	for _, w := range r.Windows {
		fmt.Printf("%s %s at %vs: admitted %d of %d\n", w.Tenant, w.SLA, w.WindowStart, w.Charged, w.Limit)
	}
	// Output:
	// org1 api/10s at 10s: admitted 1000 of 1000
	// org1 api/10s at 20s: admitted 1000 of 1000
}

// TestMedianClockCountsTheClusterWindows: members whose clocks are all
// 400 ms ahead of the simulator's agree with each other, and the cluster
// enforces its limit in windows of their clock, which begin 400 ms early
// in virtual time. Traffic at 3x with even arrivals starts 5.2 s in: the
// cluster spends its window [4.6 s, 9.6 s) from 5.2 s on, and its next
// one from 9.6 s, so that the window [5 s, 10 s) of virtual time holds
// the first's 100 and the 24 requests of the second's first 400 ms.
// Counted on the members' median clock ("measure median"), every window
// holds the limit exactly. The partition-safe
// reference follows the same windows: with no fault it is what was
// offered, up to the limit.
func TestMedianClockCountsTheClusterWindows(t *testing.T) {
	const src = `desc skewed together
instances 3
sync 200ms
duration 32s
skew n0 400ms
skew n1 400ms
skew n2 400ms
sla api fixed:5s:100
traffic tenants=a sla=api rate=3x arrivals=even from=5200ms
`
	for _, median := range []bool{false, true} {
		text := src
		if median {
			text += "measure median\n"
		}
		sc := scenario(t, text)
		r, err := Run(sc, Lease, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]time.Duration{false: 0, true: 400 * time.Millisecond}[median]; r.Shift != want {
			t.Errorf("median=%v: shift %v, want %v", median, r.Shift, want)
		}
		var worst int64
		safe := PartitionSafe(sc, r)
		for k, w := range r.Windows {
			worst = max(worst, w.Charged-w.Limit)
			if want := float64(min(w.Offered, w.Limit)); math.Abs(safe[k]-want) > 1e-6 {
				t.Errorf("median=%v: window at %vs: reference %.2f, want %.0f", median, w.WindowStart, safe[k], want)
			}
		}
		switch {
		case median && worst > 1:
			t.Errorf("on the median clock a window admitted %d over its limit, want at most 1", worst)
		case !median && worst < 10:
			t.Errorf("by virtual time the worst window admitted %d over its limit, want the next window's first 400 ms (about 24)", worst)
		}
		t.Logf("median=%v: worst window %d over the limit of 100", median, worst)
	}
}
