package counters

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestOwnerSeriesHandlesAndCollisions replays random reports of several
// origins over several series and windows, with sweeps, against a model of
// the G-counter (per window, per origin: the counts of earlier runs plus
// the largest of the current one). Callers keep the handles Report returns
// (Report.Series) and pass them again, or pass none; sweeps make some
// stale. With the owner's buckets narrowed to two, most series share a
// chain of colliding hashes: a collision must cost a comparison, never a
// count.
func TestOwnerSeriesHandlesAndCollisions(t *testing.T) {
	for _, mask := range []uint64{^uint64(0), 1, 0} {
		t.Run(fmt.Sprintf("mask=%#x", mask), func(t *testing.T) {
			for seed := range uint64(20) {
				ownerSeriesReplay(t, seed, mask)
			}
		})
	}
}

func ownerSeriesReplay(t *testing.T, seed, mask uint64) {
	rng := rand.New(rand.NewPCG(seed, 13))
	o := NewOwner(OwnerConfig{})
	o.bucketMask = mask
	origins := []string{"a", "b", "c"}
	o.SetMembers(base, origins, nil)
	type series struct {
		tenant, endpoint string
		period           time.Duration
	}
	var all []series
	for _, tenant := range []string{"t1", "t2", "t12"} {
		for _, ep := range []string{"/x", "/y"} {
			for _, p := range []time.Duration{time.Second, 3 * time.Second} {
				all = append(all, series{tenant, ep, p})
			}
		}
	}
	type win struct {
		s     int
		start int64
	}
	type run struct{ inc, base, own int64 }
	model := map[win]map[string]*run{}
	handles := map[string]*OwnerSeries{} // origin and series -> handle kept
	inc := map[string]int64{"a": 1, "b": 1, "c": 1}
	now := base
	for step := range 3000 {
		now = now.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
		if rng.IntN(100) == 0 {
			o.Sweep(now)
			for w := range model {
				if w.start+2*int64(all[w.s].period)+int64(2*time.Second) < now.UnixNano() {
					delete(model, w)
				}
			}
			continue
		}
		org := origins[rng.IntN(len(origins))]
		if rng.IntN(200) == 0 {
			inc[org]++ // a restart
		}
		si := rng.IntN(len(all))
		s := all[si]
		// The current window, now and then the one before (a late report).
		start := WindowStart(now.UnixNano(), int64(s.period)) - int64(rng.IntN(2))*int64(s.period)
		w := win{si, start}
		if model[w] == nil {
			model[w] = map[string]*run{}
		}
		r := model[w][org]
		if r == nil {
			r = &run{inc: inc[org]}
			model[w][org] = r
		}
		if inc[org] > r.inc {
			r.base += r.own
			r.inc, r.own = inc[org], 0
		}
		r.own += rng.Int64N(3)
		hk := fmt.Sprint(org, "/", si)
		rep := &Report{
			Key:       Key{Tenant: s.tenant, Endpoint: s.endpoint, Method: "GET", Period: s.period, WindowStart: start},
			Threshold: 1 << 40, Own: r.own, Demand: 1,
		}
		if rng.IntN(4) != 0 {
			rep.Series = handles[hk]
		}
		a := o.Report(now, org, uint64(r.inc), rep)
		if rep.Series == nil || rep.Series.key.Tenant != s.tenant || rep.Series.key.Endpoint != s.endpoint || rep.Series.key.Period != s.period {
			t.Fatalf("seed %d step %d: the handle returned is not the series reported", seed, step)
		}
		handles[hk] = rep.Series
		var want int64
		for _, x := range model[w] {
			want += x.base + x.own
		}
		if a.Global != want {
			t.Fatalf("seed %d step %d: %s reported %+v in window %d of series %d: global %d, want %d",
				seed, step, org, *r, start, si, a.Global, want)
		}
		if got := o.Stats().Windows; got != len(model) {
			t.Fatalf("seed %d step %d: %d windows, want %d", seed, step, got, len(model))
		}
	}
}

// TestOwnerSweptHandle: a handle whose series was swept is looked up again
// by key, and counts from zero in the new window (the old one is gone).
func TestOwnerSweptHandle(t *testing.T) {
	o := NewOwner(OwnerConfig{})
	o.SetMembers(base, []string{"a"}, nil)
	r := report(5, 1, 0, false)
	o.Report(at(time.Second), "a", 1, r)
	old := r.Series
	if old == nil {
		t.Fatal("no handle returned")
	}
	if n := o.Sweep(base.Add(time.Hour)); n != 1 {
		t.Fatalf("swept %d windows, want 1", n)
	}
	k := ownerKey()
	k.WindowStart = base.Add(time.Hour).UnixNano()
	r2 := &Report{Key: k, Threshold: 100, Own: 2, Series: old}
	if a := o.Report(base.Add(time.Hour), "a", 1, r2); a.Global != 2 {
		t.Fatalf("global %d after the sweep, want 2", a.Global)
	}
	if r2.Series == old || r2.Series == nil {
		t.Fatal("the swept handle was kept")
	}
	r3 := &Report{Key: k, Threshold: 100, Own: 3}
	if a := o.Report(base.Add(time.Hour), "a", 1, r3); a.Global != 3 || r3.Series != r2.Series {
		t.Fatalf("global %d (want 3), handle %p (want %p)", a.Global, r3.Series, r2.Series)
	}
}
