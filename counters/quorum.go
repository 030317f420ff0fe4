package counters

import "math"

// The majority rule of the lease policy (node.PartitionMajority) tells a
// partition from a crash by quorum. An instance that cannot reach a
// majority of the members it knew recently keeps what the lease policy
// gives it for a term, and then, in every window that begins after that,
// admits at most its safe share: SafeShare of its static share (0: nothing,
// it fails closed). The owners on the majority side, after the same term
// plus the time it takes a member to notice that it lost contact, reserve
// only that safe share for each member they cannot reach, and hand the rest
// of the limit to the members they can. Both sides stay within the limit
// together, and a crash costs the survivors one term instead of several
// windows.

// MinoritySpan is a span of time in which an instance could not reach a
// majority of its members: every window that begins in [From, Until) is
// restricted to the safe share (Until is math.MaxInt64 while the span
// lasts). Unix nanoseconds.
type MinoritySpan struct {
	From, Until int64
}

// minority is what SetMinority installs: the spans, newest last, and the
// safe share as a fraction of the static share.
type minority struct {
	spans []MinoritySpan
	safe  float64
}

// SetMinority installs the spans in which this instance was (or is) cut
// off from a majority, and its safe share there, a fraction in [0, 1] of
// its static share. A window that begins in a span admits at most the safe
// share under the lease policy, whatever it holds, until a grant arrives
// after the span ended (an owner that granted it then knew it was back).
// No spans: no restriction. The spans are copied.
func (t *Table) SetMinority(spans []MinoritySpan, safe float64) {
	if len(spans) == 0 {
		t.minority.Store(nil)
		return
	}
	safe = min(max(safe, 0), 1)
	t.minority.Store(&minority{spans: append([]MinoritySpan(nil), spans...), safe: safe})
}

// restricted reports whether a window that began at start, whose slot s
// holds or not a grant, is restricted to the safe share.
func (m *minority) restricted(s *Slot) bool {
	for i := len(m.spans) - 1; i >= 0; i-- {
		sp := m.spans[i]
		if s.Start >= sp.From && s.Start < sp.Until {
			return !(s.HasGrant && s.GrantedAt() >= sp.Until)
		}
	}
	return false
}

// SafeShare is the safe share of an instance: fraction safe (in [0, 1]) of
// its static share, rounded down.
func SafeShare(threshold int64, members, index int, hash uint64, safe float64) int64 {
	if safe <= 0 {
		return 0
	}
	return int64(math.Floor(float64(StaticShare(threshold, members, index, hash)) * min(safe, 1)))
}

// RestrictedCap reports whether the locked entry's slot s is restricted to
// the safe share (see SetMinority), and that share, as the instance's
// static share stands now. The node reports it as the cap of such a window.
func (t *Table) RestrictedCap(e *Entry, s *Slot) (int64, bool) {
	m := t.minority.Load()
	if m == nil || !m.restricted(s) {
		return 0, false
	}
	sh := t.share.Load()
	return SafeShare(e.threshold, int(sh>>32), int(uint32(sh)), e.hash, m.safe), true
}
