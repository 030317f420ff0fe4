package node

import (
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// TestMajorityRuleOnACluster: on a real 3-node cluster (memberlist and gRPC
// on 127.0.0.1, the network cut by faultnet) with the majority rule and a
// 1 s term, at twice the limit, round-robin:
//   - a partition that outlasts the term: n2, which reaches no majority,
//     admits nothing in the windows that begin after the term, and n0 and
//     n1 get the whole limit together; the cluster never goes over it;
//   - a crash: once the term has passed, the two survivors get the whole
//     limit (the reserve rule kept the dead member's share for 3 windows).
func TestMajorityRuleOnACluster(t *testing.T) {
	const threshold, period, sync = 200, 2 * time.Second, 100 * time.Millisecond
	rate := 2.0 * threshold / period.Seconds()
	clock := alignedClock(period)
	c := startCluster(t, 3, clusterOpts{policy: PolicyLease, sync: sync, faults: true, clock: clock, configure: func(cfg *Config) {
		cfg.Partition, cfg.QuorumTerm = PartitionMajority, time.Second
	}})
	limits := []counters.Limit{{Tenant: "acme", Endpoint: "/v1/p/*", Method: "GET", Period: period, Threshold: threshold}}
	atWindowStart := func() { waitWindowStart(t, clock, period) }
	check := func(phase string, admitted, offered map[int64]int64) {
		t.Helper()
		checkWindows(t, phase, threshold, admitted, offered)
	}

	// A partition longer than the term.
	major, minor := c.nodes[:2], c.nodes[2]
	c.net.Cut(names(major), []string{minor.Name()})
	waitFor(t, 10*time.Second, "n2 to lose its majority and n0, n1 to keep theirs", func() bool {
		return !minor.Engine().Majority() && major[0].Engine().Majority() && major[1].Engine().Majority()
	})
	// Windows that begin a term (and the contact period) after the cut.
	lost := clock()
	waitFor(t, 10*time.Second, "a term and a contact period after the cut", func() bool {
		return clock().Sub(lost) > time.Second+2*time.Second
	})
	atWindowStart()
	admitted, offered := drive(c, limits, rate, 2*period)
	check("2|1 partition past the term", admitted, offered)
	if got := ownOf(minor, limits[0]); got > 0 {
		t.Errorf("n2, cut off from the majority past the term, admitted %d (safe share 0)", got)
	}
	c.net.Heal()
	c.waitMembers(10*time.Second, c.nodes...)

	// A crash: the survivors get the whole limit once the term has passed.
	victim := c.nodes[2]
	victim.Kill()
	rest := &testCluster{t: t, nodes: c.nodes[:2], clock: clock}
	c.waitMembers(10*time.Second, rest.nodes...)
	killed := clock()
	waitFor(t, 10*time.Second, "a term and a contact period after the crash", func() bool {
		return clock().Sub(killed) > 3*time.Second
	})
	atWindowStart()
	admitted, offered = drive(rest, limits, rate, 2*period)
	check("after a crash, past the term", admitted, offered)
}

// ownOf is a node's own admitted count in the current and the previous
// window of a series.
func ownOf(n *Node, l counters.Limit) int64 {
	e := n.Engine().Table().Get(l.Tenant, l.Endpoint, l.Method, l.Period)
	if e == nil {
		return 0
	}
	e.Lock()
	defer e.Unlock()
	own := e.Current().Own
	var buf counters.Slot
	if p := e.Previous(&buf); p != nil {
		own += p.Own
	}
	return own
}
