package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// TestEngineLoweredCapHeldUntilReported: an origin may admit up to its old
// cap while the answer that lowers it is on its way. A sync asked for at
// once by a request of another series then acknowledges that answer; the
// owner must not take the lower cap as what the origin holds before the
// origin's count from after the answer reaches it, or another member gets
// what the origin already admitted. In TestMillionTenants, acknowledgements
// taken that way let three processes admit up to 110 of a limit of 100.
func TestEngineLoweredCapHeldUntilReported(t *testing.T) {
	c := newCluster(t, 3, PolicyLease)
	owner, n1, n2 := c.engines["n0"], c.engines["n1"], c.engines["n2"]
	// Two series owned by n0: x, which n1 and n2 share, and y, whose
	// request makes n1 ask at once.
	var ls []counters.Limit
	for i := 0; len(ls) < 2; i++ {
		l := counters.Limit{Tenant: fmt.Sprintf("t%d", i), Endpoint: "/p/*", Method: "GET", Period: 10 * time.Second, Threshold: 100}
		if o, _ := owner.ring.Owner(l.Hash()); o == "n0" {
			ls = append(ls, l)
		}
	}
	x, y := ls[:1], ls[1:]
	admitted := map[*Engine]int{}
	take := func(e *Engine, now time.Time, n int) {
		for range n {
			if d, _ := e.Take(now, x, 1); d.Allowed {
				admitted[e]++
			}
		}
	}
	// syncOne runs one round of e alone, with between run between the
	// owner's answer and its arrival.
	syncOne := func(e *Engine, now time.Time, bs []*Batch, between func()) {
		for _, b := range bs {
			resp, err := c.engines[b.Owner].Handle(now, b.Req)
			if err != nil {
				t.Fatal(err)
			}
			if between != nil {
				between()
			}
			if err := e.Apply(now, b, resp); err != nil {
				t.Fatal(err)
			}
			e.Release(b)
		}
	}
	granted := func(e *Engine) int64 {
		en := e.Table().Get(x[0].Tenant, x[0].Endpoint, x[0].Method, x[0].Period)
		en.Lock()
		defer en.Unlock()
		return en.Current().Granted
	}

	// A window that begins well after the membership did (none of its
	// budget is held back for members that might not have synced).
	now := t0.Add(10*time.Second + 100*time.Millisecond)
	c.sync(now)
	// n1 alone has traffic: its cap grows.
	for range 6 {
		take(n1, now, 10)
		now = now.Add(200 * time.Millisecond)
		c.sync(now)
	}
	// n2's traffic comes; n1's next answer lowers its cap, and n1 admits
	// up to its old cap before the answer arrives.
	for range 3 {
		take(n2, now, 30)
		now = now.Add(200 * time.Millisecond)
		syncOne(n2, now, n2.Prepare(now), nil)
	}
	// (The syncs x's earlier pending requests asked for are done: full
	// rounds reported x since.)
	n1.Table().TakeAsking()
	old := granted(n1)
	syncOne(n1, now, n1.Prepare(now), func() { take(n1, now, int(old)-admitted[n1]-1) })
	if g := granted(n1); g >= int64(admitted[n1]) || admitted[n1] >= int(old) {
		t.Fatalf("setup: n1's cap %d, then %d once n2 has demand, and n1 admitted %d meanwhile; want it lowered below that", old, g, admitted[n1])
	}
	// A request of y makes n1 ask at once: that sync acknowledges the
	// lower cap of x.
	now = now.Add(20 * time.Millisecond)
	if d, _ := n1.Take(now, y, 1); !d.Pending {
		t.Fatalf("setup: y's first request at n1: %+v, want it pending", d)
	}
	syncOne(n1, now, n1.PrepareAsking(now), nil)
	// n2 asks for more, round after round, while n1 stays quiet.
	for range 10 {
		take(n2, now, 30)
		now = now.Add(200 * time.Millisecond)
		syncOne(n2, now, n2.Prepare(now), nil)
	}
	if total := admitted[n1] + admitted[n2]; total > 100 {
		t.Errorf("n1 admitted %d (its cap %d lowered to %d), n2 %d: %d of a limit of 100", admitted[n1], old, granted(n1), admitted[n2], total)
	}
}
