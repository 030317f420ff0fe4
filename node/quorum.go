package node

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// Partition is how the lease policy tells a partition from a crash: a
// member that stops answering may be dead, or serving on the other side of
// a partition, and nothing local tells the two apart.
type Partition string

const (
	// PartitionReserve, the default, keeps reserving a lost member's static share for
	// Config.ReserveWindows windows after it was last seen, and at least
	// Config.ReserveMin, in case it is serving behind a partition; then each
	// side takes the other for gone.
	// A crash that takes the host down costs the survivors the dead
	// member's share for that many windows (a process that stops on a host
	// that is up refuses the calls, and costs only the window it stopped
	// in: Engine.Refused); a partition that lasts longer over-admits (each
	// side grants its own members the whole limit). Every member keeps
	// serving.
	PartitionReserve Partition = "reserve"
	// PartitionMajority decides by quorum. A member that cannot reach a
	// majority of the members it knew recently (Config.QuorumMemory) keeps
	// what it holds for Config.QuorumTerm, then admits at most its safe
	// share (Config.SafeShare of its static share; 0 fails closed) in every
	// window that begins after that. The owners on the majority side take
	// back, after the same term, the budget of the members they cannot
	// reach. A crash costs the survivors one term; a partition of any
	// length stays within the limit; the minority side, cut off from most
	// of the cluster, admits only its safe share.
	PartitionMajority Partition = "majority"
)

// ParsePartition maps a name to a Partition ("" is the default,
// PartitionReserve).
func ParsePartition(s string) (Partition, error) {
	switch p := Partition(s); p {
	case PartitionReserve, PartitionMajority:
		return p, nil
	case "":
		return PartitionReserve, nil
	}
	return "", fmt.Errorf("node: unknown partition rule %q (want majority or reserve)", s)
}

// maxMinoritySpans bounds the spans of minority an engine remembers:
// windows that began in older ones have ended.
const maxMinoritySpans = 4

// quorum returns whether this member reaches a majority of the members it
// remembers (alive or lost, but not departed), judged by the answers it got
// from each within the contact period, and since when it has not: the
// newest time at which it had heard from enough others. The lock must be
// held.
func (e *Engine) quorum(now int64) (bool, int64) {
	links := *e.links.Load()
	var heard []int64
	for m := range e.lastSeen {
		if m == e.cfg.Name || e.departed[m] {
			continue
		}
		var t int64
		if l := links[m]; l != nil {
			t = l.lastAnswer.Load()
		}
		heard = append(heard, t)
	}
	need := (len(heard) + 1) / 2 // others that make a majority with this member
	if need == 0 {
		return true, now
	}
	slices.Sort(heard)
	at := heard[len(heard)-need] // the need-th newest answer
	return now-at < int64(e.contact), at
}

// updateQuorum tells the owner whether this member reaches a majority at
// now, and under the majority rule (PartitionMajority) records when it
// lost it and restricts the windows that begin a term later to the safe
// share (counters.Table.SetMinority).
func (e *Engine) updateQuorum(now time.Time) {
	if e.cfg.Policy != PolicyLease || e.cfg.Central != "" {
		return
	}
	nowNs := now.UnixNano()
	e.mu.Lock()
	ok, at := e.quorum(nowNs)
	if e.cfg.Partition != PartitionMajority {
		// Under either rule, the owner trusts that a member found stopped
		// (Refused) stays stopped only while it reaches a majority: a
		// side cut off from most of the cluster would not hear of its
		// restart on the other side (sim/testdata/restart-unseen).
		e.mu.Unlock()
		e.owner.SetMajority(ok)
		return
	}
	spans := e.minority
	last := len(spans) - 1
	open := last >= 0 && spans[last].Until == math.MaxInt64
	switch {
	case !ok && open:
		spans[last].From = min(spans[last].From, at+int64(e.cfg.QuorumTerm))
	case !ok:
		spans = append(spans, counters.MinoritySpan{From: at + int64(e.cfg.QuorumTerm), Until: math.MaxInt64})
	case open && nowNs <= spans[last].From:
		spans = spans[:last] // back before the term ended: nothing was restricted
	case open:
		spans[last].Until = nowNs
	}
	// Spans that ended before any window still live began are of no use.
	spans = slices.DeleteFunc(spans, func(s counters.MinoritySpan) bool {
		return s.Until < nowNs-2*int64(e.cfg.MaxPeriod)
	})
	if len(spans) > maxMinoritySpans {
		spans = spans[len(spans)-maxMinoritySpans:]
	}
	changed := !slices.Equal(spans, e.installed)
	e.minority = spans
	if changed {
		e.installed = slices.Clone(spans)
	}
	e.mu.Unlock()
	if changed {
		e.table.SetMinority(spans, e.cfg.SafeShare)
	}
	e.owner.SetMajority(ok)
}

// Majority reports whether this member reaches a majority of the members
// it remembers (always true under PartitionReserve), as of the last sync
// round.
func (e *Engine) Majority() bool {
	if e.cfg.Partition != PartitionMajority {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	n := len(e.minority)
	return n == 0 || e.minority[n-1].Until != math.MaxInt64
}
