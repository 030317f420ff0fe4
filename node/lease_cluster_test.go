package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/gossip"
)

// The lease policy on real clusters (memberlist and gRPC on 127.0.0.1)
// with DefaultConfig's timing: the LAN gossip profile (a lost member is
// noticed after about 6 s) and a 200 ms sync. Each case offers tenants 80%
// or 2x of their limit and checks every complete window:
//
//   - at 80%, no more than 1% of the requests denied (every one should pass);
//   - at 2x, at most 1% (or one request) over the limit and at most 5%
//     under it.
//
// Requests are sent concurrently, as clients do: a request that waits for
// its owner's answer holds up no other. The cases run one at a time: under
// -race, several clusters at once starve the CPU enough for memberlist to
// suspect live members.

const (
	leasePeriod = 5 * time.Second
	leaseLimit  = 500
)

// leaseLoad is one tenant's traffic: rate requests per second, each sent to
// the node that pick names (by the request's offset from the start).
type leaseLoad struct {
	tenant string
	rate   float64
	pick   func(i int, at time.Duration) int
}

func pinned(n int) func(int, time.Duration) int { return func(int, time.Duration) int { return n } }

func roundRobin(nodes int) func(int, time.Duration) int {
	return func(i int, _ time.Duration) int { return i % nodes }
}

// moving sends to node (at / every) % nodes: a client that reconnects to
// another instance every so often.
func moving(nodes int, every time.Duration) func(int, time.Duration) int {
	return func(_ int, at time.Duration) int { return int(at/every) % nodes }
}

type windowCount struct {
	offered, admitted, charged int64
	// denials by node and by the wait they said: what a failure shows
	denials map[string]int
}

// leaseTenantLimits is the one tier every tenant is limited by.
func leaseTenantLimits(tenant string) []counters.Limit {
	return []counters.Limit{{Tenant: tenant, Endpoint: "/v1/organizations/{orgId}/product/*", Method: "PUT",
		Period: leasePeriod, Threshold: leaseLimit}}
}

// driveLoads offers the loads for d, every request in its own goroutine,
// and returns per tenant and window start (by arrival) what was offered and
// admitted, and what each window was charged (by decision time).
func driveLoads(c *testCluster, loads []leaseLoad, d time.Duration, during func(at time.Duration)) map[string]map[int64]*windowCount {
	var mu sync.Mutex
	counts := map[string]map[int64]*windowCount{}
	win := func(tenant string, ws int64) *windowCount {
		if counts[tenant] == nil {
			counts[tenant] = map[int64]*windowCount{}
		}
		if counts[tenant][ws] == nil {
			counts[tenant][ws] = &windowCount{}
		}
		return counts[tenant][ws]
	}
	var inflight sync.WaitGroup
	start := time.Now()
	tk := time.NewTicker(5 * time.Millisecond)
	defer tk.Stop()
	acc := make([]float64, len(loads))
	sent := make([]int, len(loads))
	last := start
	for now := range tk.C {
		at := now.Sub(start)
		if at >= d {
			break
		}
		if during != nil {
			during(at)
		}
		for j, l := range loads {
			acc[j] += l.rate * now.Sub(last).Seconds()
			for ; acc[j] >= 1; acc[j]-- {
				n := c.nodes[l.pick(sent[j], at)]
				sent[j]++
				tenant := l.tenant
				inflight.Add(1)
				go func() {
					defer inflight.Done()
					arrived := counters.WindowStart(c.clock().UnixNano(), int64(leasePeriod))
					dec, err := n.Allow(context.Background(), leaseTenantLimits(tenant)...)
					decided := counters.WindowStart(c.clock().UnixNano(), int64(leasePeriod))
					mu.Lock()
					defer mu.Unlock()
					win(tenant, arrived).offered++
					if err == nil && !dec.Allowed {
						w := win(tenant, arrived)
						if w.denials == nil {
							w.denials = map[string]int{}
						}
						w.denials[fmt.Sprintf("%s retry=%v", n.Name(), dec.RetryAfter.Round(100*time.Millisecond))]++
					}
					if err == nil && dec.Allowed {
						win(tenant, arrived).admitted++
						win(tenant, decided).charged++
					}
				}()
			}
		}
		last = now
	}
	inflight.Wait()
	return counts
}

// checkLease checks every complete window (offered for all of its period,
// at least 90% of rate x period) of every load.
func checkLease(t *testing.T, counts map[string]map[int64]*windowCount, loads []leaseLoad) {
	t.Helper()
	for _, l := range loads {
		want := int64(l.rate * leasePeriod.Seconds() * 0.9)
		var starts []int64
		for ws := range counts[l.tenant] {
			starts = append(starts, ws)
		}
		slices.Sort(starts)
		complete := 0
		for _, ws := range starts {
			w := counts[l.tenant][ws]
			if w.offered < want || ws == starts[0] || ws == starts[len(starts)-1] {
				continue // cut by the start or the end of the run
			}
			complete++
			denied := w.offered - w.admitted
			t.Logf("%s (%.0f/s): window %d: offered %d admitted %d charged %d (limit %d)",
				l.tenant, l.rate, ws/1e9%1000, w.offered, w.admitted, w.charged, leaseLimit)
			if w.offered < leaseLimit { // under the limit: every request should pass
				if float64(denied) > 0.01*float64(w.offered) {
					t.Errorf("%s window %d: %d of %d requests denied (%.1f%%) under the limit, want <= 1%%; denials %v",
						l.tenant, ws/1e9%1000, denied, w.offered, 100*float64(denied)/float64(w.offered), w.denials)
				}
				continue
			}
			if w.charged > leaseLimit*101/100+1 || w.charged < leaseLimit*95/100 {
				t.Errorf("%s window %d: charged %d, want %d..%d", l.tenant, ws/1e9%1000, w.charged, leaseLimit*95/100, leaseLimit*101/100+1)
			}
		}
		if complete < 1 {
			t.Errorf("%s: no complete window measured", l.tenant)
		}
	}
}

// startLANCluster starts n nodes with the production gossip profile, a
// 200 ms sync and the network cut by faultnet, on a clock aligned to the
// window period.
func startLANCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	clock := alignedClock(leasePeriod)
	return startCluster(t, n, clusterOpts{policy: PolicyLease, sync: 200 * time.Millisecond, faults: true, clock: clock,
		configure: func(cfg *Config) { cfg.Gossip.Profile = gossip.ProfileLAN }})
}

func atLeaseWindowStart(t *testing.T, c *testCluster) {
	t.Helper()
	waitFor(t, 2*leasePeriod, "a window start", func() bool {
		return c.clock().UnixNano()%int64(leasePeriod) < int64(20*time.Millisecond)
	})
}

func rate80() float64 { return 0.8 * leaseLimit / leasePeriod.Seconds() }
func rate2x() float64 { return 2.0 * leaseLimit / leasePeriod.Seconds() }

// TestLeasePinnedTenantsGetTheirLimit: each tenant's traffic all reaches one
// instance (keep-alive clients): at 80% every request passes, at 2x the
// tenant gets its whole limit, on 3 and on 10 instances.
func TestLeasePinnedTenantsGetTheirLimit(t *testing.T) {
	for _, n := range []int{3, 10} {
		t.Run(fmt.Sprintf("%d-nodes", n), func(t *testing.T) {
			c := startLANCluster(t, n)
			loads := []leaseLoad{
				{tenant: "p80-a", rate: rate80(), pick: pinned(0)},
				{tenant: "p80-b", rate: rate80(), pick: pinned(n - 1)},
				{tenant: "p2x-a", rate: rate2x(), pick: pinned(1)},
			}
			atLeaseWindowStart(t, c)
			checkLease(t, driveLoads(c, loads, 4*leasePeriod, nil), loads)
		})
	}
}

// TestLeaseMovingTenant: a tenant's client reconnects to another instance
// every 1.7 s, in the middle of windows.
func TestLeaseMovingTenant(t *testing.T) {
	c := startLANCluster(t, 3)
	loads := []leaseLoad{
		{tenant: "m80", rate: rate80(), pick: moving(3, 1700*time.Millisecond)},
		{tenant: "m2x", rate: rate2x(), pick: moving(3, 1700*time.Millisecond)},
	}
	atLeaseWindowStart(t, c)
	checkLease(t, driveLoads(c, loads, 4*leasePeriod, nil), loads)
}

// TestLeaseMemberCutMidWindow: round-robin load; 3.5 s into a window the
// last node is cut off from the others for 9 s, both ways or one way (it
// receives nothing, what it sends still arrives). With the LAN profile the
// others notice after about 6 s; of four, the one cut off sees nothing
// before the heal (a member alone drops the others after 30 s or more:
// memberlist's suspicion is not shortened by confirmations there), so it
// keeps the others in its view and their owners in its ring throughout.
// Meanwhile, and after, the windows stay within the bounds.
func TestLeaseMemberCutMidWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		nodes  int
		oneway bool
	}{{"2|1", 3, false}, {"one-way", 3, true}, {"3|1", 4, false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := startLANCluster(t, tc.nodes)
			cutOff := c.nodes[tc.nodes-1]
			loads := []leaseLoad{
				{tenant: "r80", rate: rate80(), pick: roundRobin(tc.nodes)},
				{tenant: "r2x", rate: rate2x(), pick: roundRobin(tc.nodes)},
			}
			cutAt, healAt := leasePeriod+3500*time.Millisecond, leasePeriod+12500*time.Millisecond
			cut, healed := false, false
			atLeaseWindowStart(t, c)
			// The membership views as they change, shown if the test fails.
			var views []string
			last := make([]string, len(c.nodes))
			t0 := time.Now()
			aloneDropped := false // the node cut off saw fewer members before the heal
			during := func(at time.Duration) {
				if cut && !healed && len(cutOff.Engine().Members()) < tc.nodes {
					aloneDropped = true
				}
				for i, n := range c.nodes {
					if v := fmt.Sprint(n.Engine().Members()); v != last[i] {
						last[i] = v
						views = append(views, fmt.Sprintf("%v %s sees %s", at.Round(10*time.Millisecond), n.Name(), v))
					}
				}
			}
			defer func() {
				if t.Failed() {
					t.Logf("start at %v; views:\n%s", t0.Format("15:04:05.000"), strings.Join(views, "\n"))
				}
			}()
			counts := driveLoads(c, loads, 5*leasePeriod, func(at time.Duration) {
				during(at)
				switch {
				case !cut && at >= cutAt:
					cut = true
					rest, alone := names(c.nodes[:tc.nodes-1]), names(c.nodes[tc.nodes-1:])
					if tc.oneway {
						c.net.CutOneWay(rest, alone)
					} else {
						c.net.Cut(rest, alone)
					}
				case !healed && at >= healAt:
					healed = true
					c.net.Heal()
				}
			})
			checkLease(t, counts, loads)
			if tc.nodes >= 4 && aloneDropped {
				t.Errorf("%s dropped members from its view during the cut: the test no longer covers a member that sees the cut late", cutOff.Name())
			}
		})
	}
}

// cutThenHeal returns a driveLoads hook that cuts the last node off from
// the others (both ways) at cutAt and heals the network at healAt.
func cutThenHeal(c *testCluster, cutAt, healAt time.Duration) func(at time.Duration) {
	cut, healed := false, false
	last := len(c.nodes) - 1
	return func(at time.Duration) {
		switch {
		case !cut && at >= cutAt:
			cut = true
			c.net.Cut(names(c.nodes[:last]), names(c.nodes[last:]))
		case !healed && at >= healAt:
			healed = true
			c.net.Heal()
		}
	}
}

// TestLeaseIdleMemberBackAfterPartition: n2, which serves none of the
// traffic, is cut off 2 s into a window and healed 0.5 s into the next,
// before the gossip notices (LAN profile). Out of contact when that window
// began, n2 may have spent its static share there, so the owner reserves
// it; once n2 is back and has sent a complete batch that reports nothing
// in the window, it spent nothing there, and the owner releases the share
// (counters.Owner.sideBack). Both tenants are pinned to n0: at 80% no
// request is denied, at 2x the window is charged its whole limit. Before,
// the owner kept n2's third of each limit to the window's end: a sixth of
// the 80% tenant's requests denied, and the 2x tenant charged 333 of 500
// (sim/testdata/heal-idle-side.txt).
func TestLeaseIdleMemberBackAfterPartition(t *testing.T) {
	c := startLANCluster(t, 3)
	loads := []leaseLoad{
		{tenant: "p80", rate: rate80(), pick: pinned(0)},
		{tenant: "p2x", rate: rate2x(), pick: pinned(0)},
	}
	cutAt, healAt := leasePeriod+2*time.Second, 2*leasePeriod+500*time.Millisecond
	atLeaseWindowStart(t, c)
	counts := driveLoads(c, loads, 5*leasePeriod, cutThenHeal(c, cutAt, healAt))
	checkLease(t, counts, loads)
}

// TestLeaseMemberKilledMidWindow: round-robin load; 2.5 s into a window
// n2 is killed (Node.Kill: its listeners close, as when its process is
// killed) and its clients move to n0 and n1. The gossip notices after
// about 6 s, but the survivors' calls to n2 are refused at once: they take
// it for stopped (Engine.Refused), its series get a new owner, and nothing
// is reserved for it from the next window on. At 80% no window denies more
// than 1% of its requests; at 2x every window stays within the bounds.
// Before, the survivors kept n2's static share (a third of each limit) for
// ReserveWindows windows: a third of the 80% tenants' requests denied in
// each (sim/testdata/crash-80.txt). The tenants that n2 owned may lose
// some in the window it is killed in (its successor keeps in reserve what
// n2 may have granted itself): they are checked from the next window on.
func TestLeaseMemberKilledMidWindow(t *testing.T) {
	c := startLANCluster(t, 3)
	victim := c.nodes[2]
	var loads []leaseLoad
	killAt := leasePeriod + 2500*time.Millisecond
	moved := func(i int, at time.Duration) int {
		if at >= killAt {
			return i % 2
		}
		return i % 3
	}
	for _, tn := range []string{"k80-a", "k80-b", "k80-c"} {
		loads = append(loads, leaseLoad{tenant: tn, rate: rate80(), pick: moved})
	}
	loads = append(loads, leaseLoad{tenant: "k2x", rate: rate2x(), pick: moved})
	owned := map[string]bool{}
	for _, l := range loads {
		if o, _ := c.nodes[0].Engine().Ring().Owner(leaseTenantLimits(l.tenant)[0].Hash()); o == victim.Name() {
			owned[l.tenant] = true
		}
	}
	atLeaseWindowStart(t, c)
	killed := false
	var killWindow int64
	counts := driveLoads(c, loads, 5*leasePeriod, func(at time.Duration) {
		if !killed && at >= killAt {
			killed = true
			killWindow = counters.WindowStart(c.clock().UnixNano(), int64(leasePeriod))
			victim.Kill()
		}
	})
	for tenant := range owned {
		delete(counts[tenant], killWindow)
	}
	t.Logf("n2 owned %v; killed in window %d", owned, killWindow/1e9%1000)
	checkLease(t, counts, loads)
	for _, n := range c.nodes[:2] {
		if slices.Contains(n.Engine().Members(), victim.Name()) {
			t.Errorf("%s still has %s in its view", n.Name(), victim.Name())
		}
		if got := counterValue(n.m.peersStopped); got != 1 {
			t.Errorf("%s: peerlimit_peers_stopped_total %v, want 1", n.Name(), got)
		}
	}
}

// TestLeaseTenantPinnedToCutMember: a tenant at 80% whose clients all
// reach n2 (keep-alive behind a load balancer), and another pinned to n0;
// n2 is cut off from the others 2 s into a window and healed 1 s into the
// window after next (LAN profile: the cut is noticed after about 6 s, the
// heal once the rejoin loop merges the views, every 2 s). No rule that
// knows only its side of a cut can promise a side more than its members'
// static shares while the cut lasts: for all each side knows, the other
// serves the tenant's clients too (the simulator's partition-safe
// reference, which counts a heal once the members notice it;
// sim/testdata/partition-2-1 and partition-minority-hot). So each tenant
// is checked against its side's share in the windows the cut begins in,
// spans and ends in, a third of the limit on n2's side and two thirds on
// the other, and no window goes over the limit. Measured: 166 and 334 of
// the 400 offered in the window the cut spans; all 400 in the window it
// begins in, and 395-400 in the heal's (with the rejoin loop's former
// 10 s period the views had not merged by the end of the heal's window:
// 166 and 334 there too).
func TestLeaseTenantPinnedToCutMember(t *testing.T) {
	c := startLANCluster(t, 3)
	loads := []leaseLoad{
		{tenant: "cut80", rate: rate80(), pick: pinned(2)},
		{tenant: "kept80", rate: rate80(), pick: pinned(0)},
	}
	cutAt, healAt := leasePeriod+2*time.Second, 3*leasePeriod+time.Second
	atLeaseWindowStart(t, c)
	counts := driveLoads(c, loads, 5*leasePeriod, cutThenHeal(c, cutAt, healAt))
	for j, l := range loads {
		side := int64(leaseLimit / 3) // n2's static share, 166 or 167: the smaller
		if j == 1 {
			side = leaseLimit - (leaseLimit+2)/3 // the others' two, 333 or 334: the smaller
		}
		var starts []int64
		for ws := range counts[l.tenant] {
			starts = append(starts, ws)
		}
		slices.Sort(starts)
		if len(starts) < 4 {
			t.Fatalf("%s: %d windows measured, want 4 or more", l.tenant, len(starts))
		}
		for k, ws := range starts {
			w := counts[l.tenant][ws]
			if w.charged > leaseLimit {
				t.Errorf("%s window %d: charged %d, over the limit %d", l.tenant, ws/1e9%1000, w.charged, leaseLimit)
			}
			if k < 1 || k > 3 {
				continue // before the cut, or cut by the end of the run
			}
			t.Logf("%s: window %d (%s): offered %d admitted %d charged %d (limit %d, its side's share %d)",
				l.tenant, ws/1e9%1000, [...]string{"", "cut begins", "cut throughout", "healed"}[k], w.offered, w.admitted, w.charged, leaseLimit, side)
			if want := min(w.offered, side) * 99 / 100; w.admitted < want {
				t.Errorf("%s window %d: admitted %d of %d, want at least %d (its side's share, less 1%%); denials %v",
					l.tenant, ws/1e9%1000, w.admitted, w.offered, want, w.denials)
			}
		}
	}
}
