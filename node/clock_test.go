package node

import (
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// skewedSync runs one interval on every engine at true time now, each
// engine reading its own clock (now plus its skew); every call is answered
// after rtt, half of it each way.
func skewedSync(t *testing.T, c *cluster, skew map[string]time.Duration, now time.Time, rtt time.Duration) {
	t.Helper()
	for _, name := range c.names {
		e := c.engines[name]
		for _, b := range e.Prepare(now.Add(skew[name])) {
			resp, err := c.engines[b.Owner].Handle(now.Add(rtt/2).Add(skew[b.Owner]), b.Req)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Apply(now.Add(rtt).Add(skew[name]), b, resp); err != nil {
				t.Fatal(err)
			}
			e.Release(b)
		}
	}
}

// TestEngineClocksMeet: members whose clocks are 40 ms behind, right and
// 70 ms ahead read every time on the median clock after a few rounds, so a
// window begins for all of them at once: the one ahead no longer starts
// the next window 70 ms early.
func TestEngineClocksMeet(t *testing.T) {
	c := newCluster(t, 3, PolicyLease)
	skew := map[string]time.Duration{"n0": -40 * time.Millisecond, "n1": 0, "n2": 70 * time.Millisecond}
	now := t0.Add(100 * time.Millisecond)
	for _, n := range c.names {
		if d := c.engines[n].ClockShift(); d != 0 {
			t.Fatalf("%s: shift %v before any answer, want 0", n, d)
		}
	}
	for range 4 {
		skewedSync(t, c, skew, now, 2*time.Millisecond)
		now = now.Add(100 * time.Millisecond)
	}
	skewedSync(t, c, skew, now, 2*time.Millisecond)
	for _, n := range c.names {
		common := skew[n] + c.engines[n].ClockShift() // the common clock's distance from true time
		if band := clockDeadBand + 100*time.Microsecond; common < -band || common > band {
			t.Errorf("%s (clock %v): shift %v puts its common clock %v from the median, want within the dead band %v", n, skew[n], c.engines[n].ClockShift(), common, clockDeadBand)
		}
	}
	// 30 ms before a window ends (true time), the member 70 ms ahead is
	// still in that window: 30 ms left, not the next window's 1 s less 40 ms.
	l := []counters.Limit{{Tenant: "t", Endpoint: "/p", Method: "GET", Period: time.Second, Threshold: 100}}
	end := now.Truncate(time.Second).Add(time.Second)
	d, err := c.engines["n2"].Take(end.Add(-30*time.Millisecond).Add(skew["n2"]), l, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Reset < 29*time.Millisecond || d.Reset > 31*time.Millisecond {
		t.Errorf("the member 70 ms ahead, 30 ms before the window ends: reset %v, want 30 ms", d.Reset)
	}
}

// A peer's clock is ignored when the call took too long to tell it, or when
// it is absurdly far off; the shift is the median, so one member far off
// moves nobody.
func TestClockSyncSamples(t *testing.T) {
	var c clockSync
	sent := t0
	c.sample("a", sent.Add(time.Hour).UnixNano(), sent, sent.Add(time.Millisecond))  // an hour off
	c.sample("b", sent.Add(5*time.Second).UnixNano(), sent, sent.Add(2*time.Second)) // a call of 2 s
	c.sample("c", 0, sent, sent.Add(time.Millisecond))                               // no clock given
	c.update("self", []string{"a", "b", "c", "self"})
	if d := c.shift.Load(); d != 0 {
		t.Fatalf("shift %v from samples that should be ignored, want 0", time.Duration(d))
	}
	// Two peers 10 ms ahead and one 20 s ahead: the median of the four
	// clocks (self at 0) is 10 ms ahead; the shift stops the dead band
	// short of it.
	c.sample("a", sent.Add(10*time.Millisecond+500*time.Microsecond).UnixNano(), sent, sent.Add(time.Millisecond))
	c.sample("b", sent.Add(10*time.Millisecond+500*time.Microsecond).UnixNano(), sent, sent.Add(time.Millisecond))
	c.sample("c", sent.Add(20*time.Second).UnixNano(), sent, sent.Add(time.Millisecond))
	c.update("self", []string{"a", "b", "c", "self"})
	if d := time.Duration(c.shift.Load()); d != 10*time.Millisecond-clockDeadBand {
		t.Errorf("shift %v, want %v (the median less the dead band; the peer 20 s off moves nothing)", d, 10*time.Millisecond-clockDeadBand)
	}
	// A slow call whose two ways differ shows a wrong offset; the shortest
	// of the recent calls decides.
	c.sample("a", sent.Add(60*time.Millisecond).UnixNano(), sent, sent.Add(100*time.Millisecond))
	c.sample("b", sent.Add(60*time.Millisecond).UnixNano(), sent, sent.Add(100*time.Millisecond))
	c.update("self", []string{"a", "b", "c", "self"})
	if d := time.Duration(c.shift.Load()); d != 10*time.Millisecond-clockDeadBand {
		t.Errorf("after slow calls: shift %v, want %v still", d, 10*time.Millisecond-clockDeadBand)
	}
	// A member gone no longer counts.
	c.update("self", []string{"a", "self"})
	if d := time.Duration(c.shift.Load()); d != 5*time.Millisecond-clockDeadBand {
		t.Errorf("with one peer 10 ms ahead: shift %v, want %v (halfway, less the band)", d, 5*time.Millisecond-clockDeadBand)
	}
	// Clocks in step within the band: no shift.
	var st clockSync
	st.sample("a", sent.Add(1300*time.Microsecond).UnixNano(), sent, sent.Add(time.Millisecond)) // 0.8 ms ahead
	st.sample("b", sent.Add(-200*time.Microsecond).UnixNano(), sent, sent.Add(time.Millisecond))
	st.update("self", []string{"a", "b", "self"})
	if d := st.shift.Load(); d != 0 {
		t.Errorf("clocks within %v of each other: shift %v, want 0", clockDeadBand, time.Duration(d))
	}
}
