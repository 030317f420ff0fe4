package sim

import (
	"fmt"
	"strings"
	"testing"
)

// TestMemberLostNearWindowStart cuts one of three members off (both ways,
// or only what the others send it) at moments around a window's start,
// with the LAN profile's failure detection, and heals it 9 s later, with a
// tenant at 80% of its limit and one at 2x, both round-robin. Whichever
// member is cut (the key's owner or not), whether the cut comes before the
// members stop carrying their grants into the next window or after, and
// whatever order the views change in on the way back:
//
//   - at 80%, at most 1% of a window's requests (and at least 1 request)
//     are denied while the limit had room, and lease never denies more than
//     static by more than 1 point;
//   - at 2x, a window admits at most 1% over its limit and at most 5%
//     under it.
//
// It found two faults, both measured before the fix on this sweep: an owner
// that saw a member come back during a window took the member's renewed
// acknowledgements for contact at the window's start and reserved it
// nothing, so both sides of the healed partition granted the window (7%
// over); and a member that began a window on its static share (its owner
// cut off) and then got a new owner in view lost the share and denied
// until that owner's view caught up (up to 5% of the window's requests).
func TestMemberLostNearWindowStart(t *testing.T) {
	for _, at := range []string{"7.5", "8.5", "9", "9.5"} {
		for _, n := range []int{0, 1, 2} {
			for _, oneway := range []bool{false, true} {
				var others []string
				for i := range 3 {
					if i != n {
						others = append(others, fmt.Sprintf("n%d", i))
					}
				}
				cut := fmt.Sprintf("isolate n%d", n)
				if oneway {
					cut = fmt.Sprintf("cut %s -> n%d", strings.Join(others, ","), n)
				}
				src := fmt.Sprintf(`desc n%[1]d cut off %[2]s s into the run (windows start every 5 s)
instances 3
sync 200ms
profile lan
duration 30s
network latency=1ms jitter=exp:1ms
sla put fixed:5s:500
traffic tenants=r80 sla=put rate=0.8x
traffic tenants=r2x sla=put rate=2x
at %[2]ss %[3]s
at 17.5s heal
`, n, at, cut)
				name := fmt.Sprintf("%s@%ss", strings.ReplaceAll(cut, " ", "_"), at)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					checkCutScenario(t, src, 1, 2)
				})
			}
		}
	}
}

// checkCutScenario runs scenario src under lease and static at each seed
// and checks lease's windows against the bounds of checkCutWindows.
func checkCutScenario(t *testing.T, src string, seeds ...uint64) {
	t.Helper()
	sc := scenario(t, src)
	for _, seed := range seeds {
		lease, err := Run(sc, Lease, seed)
		if err != nil {
			t.Fatal(err)
		}
		static, err := Run(sc, Static, seed)
		if err != nil {
			t.Fatal(err)
		}
		checkCutWindows(t, seed, lease, static)
	}
}

func checkCutWindows(t *testing.T, seed uint64, lease, static *Result) {
	t.Helper()
	staticDenied := map[string]float64{}
	for _, w := range static.Windows {
		staticDenied[fmt.Sprint(w.Tenant, w.WindowStart)] = w.FalseDenialShare()
	}
	for _, w := range lease.Windows {
		switch w.Tenant {
		case "r80":
			if d := w.FalseDenials(); d > 1 && w.FalseDenialShare() > 0.01 {
				t.Errorf("seed %d, %s window at %gs: %d of %d requests denied with room left (%.1f%%)",
					seed, w.Tenant, w.WindowStart, d, w.Offered, 100*w.FalseDenialShare())
			}
			if s := staticDenied[fmt.Sprint(w.Tenant, w.WindowStart)]; w.FalseDenialShare() > s+0.01 {
				t.Errorf("seed %d, %s window at %gs: lease denied %.1f%% with room left, static %.1f%%",
					seed, w.Tenant, w.WindowStart, 100*w.FalseDenialShare(), 100*s)
			}
		case "r2x":
			if over := w.Charged - w.Limit; over*100 > w.Limit {
				t.Errorf("seed %d, %s window at %gs: %d charged, %d over the limit of %d", seed, w.Tenant, w.WindowStart, w.Charged, over, w.Limit)
			}
			if under := w.Limit - w.Charged; under*100 > 5*w.Limit {
				t.Errorf("seed %d, %s window at %gs: %d charged, %d under the limit of %d", seed, w.Tenant, w.WindowStart, w.Charged, under, w.Limit)
			}
		}
	}
}
