package sim

import (
	"fmt"
	"testing"
)

// TestHealAfterBudgetMoved sweeps a 3|2 partition that begins inside a
// window and heals in it, with the cut-off side's demand split unevenly
// between its two members. The cut-off side's own owner splits what its
// members held of the first owner's grants by their demand, so one of them
// may come back holding less than it held before the cut and the other
// more. Whichever reports first at the heal, the first owner must not hand
// out what the first gave up while the second has not reported: before
// counters.cutBound, 10 of these 75 runs admitted more than 1% over the
// limit, up to 2.5% (40% on n4 and 20% on n3 at 1.5x, heal at 28 s:
// sim/testdata/heal-budget-moved).
func TestHealAfterBudgetMoved(t *testing.T) {
	for _, spread := range []string{"n4:60%", "n3:60%", "n4:40%,n3:20%", "n4:30%,n3:30%", "n4:80%"} {
		for _, heal := range []string{"25s", "26s", "27s", "28s", "29s"} {
			for _, rate := range []string{"1.5x", "2x", "3x"} {
				name := fmt.Sprintf("%s/heal=%s/%s", spread, heal, rate)
				src := fmt.Sprintf(`desc a 3|2 partition at 22 s, healed at %[2]s, demand %[1]s at %[3]s
instances 5
sync 500ms
duration 40s
network latency=1ms jitter=exp:1ms
sla api fixed:10s:1000
traffic tenants=org1 sla=api rate=%[3]s spread=%[1]s
at 22s partition n0,n1,n2 | n3,n4
at %[2]s heal
`, spread, heal, rate)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					leaseWithinLimit(t, src)
				})
			}
		}
	}
}

// leaseWithinLimit runs scenario src under the lease policy (seed 1) and
// fails for every complete window charged more than 1% (and a request)
// over its limit.
func leaseWithinLimit(t *testing.T, src string) {
	t.Helper()
	r, err := Run(scenario(t, src), Lease, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range r.Windows {
		if w.overshootBeyond(1) {
			t.Errorf("%s window at %gs: %d charged of %d", w.Tenant, w.WindowStart, w.Charged, w.Limit)
		}
	}
}

// TestIdleSideBack sweeps a partition or a one-way cut of two members that
// serve none of the traffic, beginning 0.3 to 2 s before a window starts
// and lasting 1.5 to 6 s, with the key's owner on either side, and a
// tenant at 80% of its limit and one at 2x, both pinned to n0. The bounds
// are TestMemberLostNearWindowStart's (checkCutWindows). A member out of
// contact when a window began may have spent its static share there, so
// the owner reserves it; once every such member is back and has sent a
// complete batch that reports nothing in the window, none spent anything
// there, and the owner releases the shares (counters.Owner.sideBack).
// Before, the shares stayed reserved to the window's end: 36 of these 54
// runs failed (counters at bcab040), the 2x tenant charged 400 of 600 and
// up to 14% of the 80% tenant's requests denied in the window after the
// cut (sim/testdata/heal-idle-side).
func TestIdleSideBack(t *testing.T) {
	for _, sides := range [][2]string{{"n0,n1,n2,n3", "n4,n5"}, {"n0,n1,n2,n5", "n3,n4"}} {
		for _, kind := range []string{"partition", "cut-in", "cut-out"} {
			for _, before := range []float64{0.3, 1, 2} {
				for _, lasts := range []float64{1.5, 4, 6} {
					at := 10 - before
					var cut string
					switch kind {
					case "partition":
						cut = fmt.Sprintf("partition %s | %s", sides[0], sides[1])
					case "cut-in": // what the busy side sends is lost
						cut = fmt.Sprintf("cut %s -> %s", sides[0], sides[1])
					default:
						cut = fmt.Sprintf("cut %s -> %s", sides[1], sides[0])
					}
					src := fmt.Sprintf(`desc %[1]s at %[2]gs for %[3]gs; both tenants on n0
instances 6
sync 200ms
profile local
duration 30s
network latency=1ms jitter=exp:1ms
sla put fixed:10s:600
traffic tenants=r80 sla=put rate=0.8x spread=n0:100%%
traffic tenants=r2x sla=put rate=2x spread=n0:100%%
at %[4]dms %[1]s
at %[5]dms heal
`, cut, at, lasts, int(at*1000), int((at+lasts)*1000))
					name := fmt.Sprintf("%s/%s/%gs-before/%gs", sides[1], kind, before, lasts)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						checkCutScenario(t, src, 1)
					})
				}
			}
		}
	}
}
