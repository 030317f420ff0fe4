package sim

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

func testStream(tr Traffic, dur time.Duration, burstP time.Duration) *stream {
	to := int64(tr.To)
	if to == 0 {
		to = int64(dur)
	}
	return &stream{tr: &tr, rng: rand.New(rand.NewPCG(1, 2)), from: int64(tr.From), to: to, burstP: int64(burstP)}
}

// arrivals returns the arrival times of a stream over its life.
func arrivals(st *stream) []int64 {
	var out []int64
	x := st.draw()
	if !st.tr.Poisson {
		x = 0.5
	}
	for at := st.next(st.from, x); at >= 0; at = st.next(at, st.draw()) {
		out = append(out, at)
	}
	return out
}

func TestStreamEvenArrivals(t *testing.T) {
	st := testStream(Traffic{Rate: 100, Burst: 1, From: 2 * time.Second, To: 12 * time.Second}, 20*time.Second, 10*time.Second)
	got := arrivals(st)
	if len(got) != 1000 {
		t.Fatalf("%d arrivals at 100/s over 10 s, want 1000", len(got))
	}
	if got[0] != int64(2*time.Second+5*time.Millisecond) {
		t.Errorf("first arrival at %v, want 2.005s (half a gap after from)", time.Duration(got[0]))
	}
	for i := 1; i < len(got); i++ {
		if d := got[i] - got[i-1]; d < int64(10*time.Millisecond)-1 || d > int64(10*time.Millisecond)+1 {
			t.Fatalf("gap %v between arrivals %d and %d, want 10ms", time.Duration(d), i-1, i)
		}
	}
}

func TestStreamPoissonArrivals(t *testing.T) {
	st := testStream(Traffic{Rate: 1000, Burst: 1, Poisson: true}, 100*time.Second, 10*time.Second)
	n := float64(len(arrivals(st)))
	// 100,000 expected; the standard deviation is ~316.
	if math.Abs(n-100_000) > 5*316 {
		t.Fatalf("%v Poisson arrivals, want 100000 ± 1580", n)
	}
}

func TestStreamBurst(t *testing.T) {
	// 2x of 100/s packed into the first 10% of each 10 s window.
	st := testStream(Traffic{Rate: 200, Burst: 0.1}, 30*time.Second, 10*time.Second)
	got := arrivals(st)
	if len(got) < 5990 || len(got) > 6010 {
		t.Errorf("%d arrivals, want ~6000 (the average rate is kept)", len(got))
	}
	for _, at := range got {
		if at%int64(10*time.Second) >= int64(time.Second) {
			t.Fatalf("arrival at %v, outside the first second of its window", time.Duration(at))
		}
	}
}

func TestStreamRamp(t *testing.T) {
	st := testStream(Traffic{Rate: 10, RampTo: 110, Burst: 1}, 10*time.Second, 10*time.Second)
	perSecond := make([]int, 10)
	for _, at := range arrivals(st) {
		perSecond[at/int64(time.Second)]++
	}
	// The rate goes from 10/s to 110/s: each second gets ~10/s more.
	for i, n := range perSecond {
		want := 15 + 10*i
		if n < want-2 || n > want+2 {
			t.Errorf("second %d: %d arrivals, want ~%d (%v)", i, n, want, perSecond)
		}
	}
}

func TestPickSpread(t *testing.T) {
	w := &world{}
	var insts []*instance
	for i := 0; i < 4; i++ {
		insts = append(insts, &instance{w: w, idx: i, name: memberName(i), up: true})
	}
	count := func(st *stream, n int) map[string]int {
		got := map[string]int{}
		for i := 0; i < n; i++ {
			got[st.pick(insts).name]++
		}
		return got
	}
	even := &stream{tr: &Traffic{}}
	if got := count(even, 400); got["n0"] != 100 || got["n1"] != 100 || got["n2"] != 100 || got["n3"] != 100 {
		t.Errorf("even spread: %v, want 100 each", got)
	}
	skew := &stream{tr: &Traffic{Spread: []Weight{{"n0", 0.7}, {"n1", 0.1}}}}
	if got := count(skew, 1000); got["n0"] != 700 || got["n1"] != 100 || got["n2"] != 100 || got["n3"] != 100 {
		t.Errorf("n0:70%%,n1:10%% spread: %v, want 700/100/100/100", got)
	}
	// n0 goes down: the others keep their proportions (1:1:1).
	insts[0].up = false
	if got := count(skew, 300); got["n0"] != 0 || got["n1"] != 100 || got["n2"] != 100 || got["n3"] != 100 {
		t.Errorf("spread with n0 down: %v, want 0/100/100/100", got)
	}
	// Only named members with a zero share left: spread evenly.
	zero := &stream{tr: &Traffic{Spread: []Weight{{"n0", 1}}}}
	if got := count(zero, 300); got["n1"] != 100 || got["n2"] != 100 || got["n3"] != 100 {
		t.Errorf("100%% on a member that is down: %v, want the others evenly", got)
	}
	for _, in := range insts {
		in.up = false
	}
	if in := even.pick(insts); in != nil {
		t.Errorf("picked %s with every member down", in.name)
	}
}

func TestSeriesRecord(t *testing.T) {
	sla := &SLA{ID: "api", Tiers: []Tier{{counters.Fixed, 10 * time.Second, 1000}, {counters.Sliding, time.Second, 150}}}
	s := newSeries("t", sla, 20*time.Second)
	at := int64(12 * time.Second)
	s.record(at, at, counters.Decision{Allowed: true, Tier: 1})
	s.record(at, at, counters.Decision{Allowed: false, Tier: 0}) // denied by the 10 s tier: not offered to the 1 s one
	s.record(at, at, counters.Decision{Allowed: false, Tier: 1}) // denied by the 1 s tier: not offered to the 10 s one
	if o, a := s.tiers[0].offered[1], s.tiers[0].admitted[1]; o != 2 || a != 1 {
		t.Errorf("10 s tier: offered %d admitted %d, want 2 and 1", o, a)
	}
	if o, a := s.tiers[1].offered[12], s.tiers[1].admitted[12]; o != 2 || a != 1 {
		t.Errorf("1 s tier: offered %d admitted %d, want 2 and 1", o, a)
	}
}

func TestWindowFigures(t *testing.T) {
	for _, tc := range []struct {
		w           Window
		over, under float64
		falseDenied int64
	}{
		{Window{Limit: 1000, Offered: 2000, Admitted: 1000, Charged: 1000}, 0, 0, 0},
		{Window{Limit: 1000, Offered: 2000, Admitted: 1150, Charged: 1150}, 0.15, 0, 0},
		{Window{Limit: 1000, Offered: 2000, Admitted: 900, Charged: 900}, 0, 0.1, 100},
		{Window{Limit: 1000, Offered: 500, Admitted: 400, Charged: 400}, 0, 0.2, 100},
		{Window{Limit: 1000, Offered: 0, Admitted: 0, Charged: 0}, 0, 0, 0},
		// Two requests arrived here waited and were charged to the next
		// window; one arrived in the window before and was charged here.
		{Window{Limit: 100, Offered: 100, Admitted: 100, Charged: 99}, 0, 0.01, 0},
		{Window{Limit: 100, Offered: 80, Admitted: 78, Charged: 100}, 0, 0, 0},
	} {
		if o, u := tc.w.Overshoot(), tc.w.Undershoot(); math.Abs(o-tc.over) > 1e-9 || math.Abs(u-tc.under) > 1e-9 {
			t.Errorf("%+v: overshoot %v undershoot %v, want %v and %v", tc.w, o, u, tc.over, tc.under)
		}
		if fd := tc.w.FalseDenials(); fd != tc.falseDenied {
			t.Errorf("%+v: false denials %d, want %d", tc.w, fd, tc.falseDenied)
		}
	}
}

func TestCheckBounds(t *testing.T) {
	sc, err := ParseScenario("b", []byte(minimal+
		"expect lease overshoot<=1% undershoot<=5% messages<=100 target:overshoot<=0%\n"+
		"expect static overshoot>=10%\n"))
	if err != nil {
		t.Fatal(err)
	}
	res := func(admitted int64, msgs int64) *Result {
		w := Window{Limit: 50, Offered: 100, Admitted: admitted, Charged: admitted}
		return &Result{Policy: Lease, MaxOvershootPct: 100 * w.Overshoot(), MaxUndershootPct: 100 * w.Undershoot(), SyncMessages: msgs, Windows: []Window{w}}
	}
	for _, tc := range []struct {
		r             *Result
		fails, misses int
	}{
		{res(50, 100), 0, 0},
		{res(51, 100), 0, 1}, // 1 request over a limit of 50: within "1% or 1 request", misses the 0% target
		{res(52, 100), 1, 1},
		{res(47, 100), 1, 0}, // 6% under
		{res(48, 101), 1, 0}, // 4% under, one message too many
	} {
		fails, misses := sc.Check(tc.r)
		if len(fails) != tc.fails || len(misses) != tc.misses {
			t.Errorf("admitted %d messages %d: failures %q misses %q, want %d and %d",
				tc.r.Windows[0].Admitted, tc.r.SyncMessages, fails, misses, tc.fails, tc.misses)
		}
	}
	st := res(50, 0)
	st.Policy = Static
	if fails, _ := sc.Check(st); len(fails) != 1 || !strings.Contains(fails[0], "overshoot>=10%") {
		t.Errorf("static without overshoot: failures %q, want the >= bound", fails)
	}
}
