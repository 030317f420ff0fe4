package counters

import (
	"math"
	"testing"
	"time"
)

// TestOwnerAnswersItsHead: an answer to another origin carries the head of
// the owner's own grant, what it may still admit itself beyond the total:
// the headroom of the cap it granted itself, no more than a sync interval
// of its own demand (plus one unit), and none in an answer to itself.
func TestOwnerAnswersItsHead(t *testing.T) {
	o := NewOwner(OwnerConfig{Lease: true, Self: "o", SelfIncarnation: 1, Contact: time.Hour, Interval: time.Second})
	o.SetMembers(base, []string{"a", "o"}, nil)
	k := ownerKey()
	rep := func(own, demand int64) *Report {
		return &Report{Key: k, Threshold: 1000, Own: own, Demand: demand}
	}
	now := at(time.Second)
	for _, m := range []string{"a", "o"} {
		o.Hello(now, m)
	}
	if ans := o.Report(now, "a", 1, rep(0, 0)); ans.Head != 0 {
		t.Fatalf("before the owner granted itself anything: head %d, want 0", ans.Head)
	}
	self := o.Report(now, "o", 1, rep(10, 40))
	if self.Head != 0 || !self.HasGrant || self.Grant <= 10 {
		t.Fatalf("the owner's answer to itself: %+v, want a grant above its 10 and no head", self)
	}
	ans := o.Report(now.Add(100*time.Millisecond), "a", 1, rep(5, 5))
	w := o.window(k)
	st := w.find("o")
	want := min(self.Grant-10, int64(math.Ceil(max(st.rate(), st.instant)*float64(time.Second)))+1)
	if ans.Head != want || ans.Head <= 0 {
		t.Fatalf("a's answer: head %d, want %d (the owner's headroom %d, an interval of its demand %.1f, plus one)",
			ans.Head, want, self.Grant-10, max(st.rate(), st.instant)*float64(time.Second))
	}
}

// TestRestartedOwnerHoldsBackItsEarlierRunsHead: a restarted owner that
// reads a total its earlier run answered holds back that answer's head as
// well, what the earlier run may have admitted itself after it; a head
// that another owner answered is not its own earlier run's and changes
// nothing (that owner reports its own counts).
func TestRestartedOwnerHoldsBackItsEarlierRunsHead(t *testing.T) {
	grant := func(from string, head int64) Answer {
		o := NewOwner(OwnerConfig{Lease: true, Self: "o", SelfIncarnation: 2, Contact: time.Hour, Interval: time.Second})
		o.SetMembers(base, []string{"a", "b", "o"}, nil)
		o.PreviousRun(at(2 * time.Second))
		k := ownerKey()
		now := at(5 * time.Second)
		for _, m := range []string{"a", "b", "o"} {
			o.Hello(now, m)
		}
		// The earlier run answered a total of 60: b's 10, a's 20 and its
		// own 30. The new run has admitted nothing yet.
		o.Report(now, "o", 2, &Report{Key: k, Threshold: 100})
		o.Report(now, "b", 1, &Report{Key: k, Threshold: 100, Own: 10, Demand: 1,
			KnownGlobal: 60, KnownAcked: 10, KnownFrom: from, KnownFromIncarnation: 1, KnownHead: head})
		return o.Report(now, "a", 1, &Report{Key: k, Threshold: 100, Own: 20, Demand: 50,
			KnownGlobal: 60, KnownAcked: 20, KnownFrom: from, KnownFromIncarnation: 1, KnownHead: head})
	}
	without, with := grant("o", 0), grant("o", 15)
	if !without.HasGrant || without.Grant-20 < 15 {
		t.Fatalf("without a head: %+v, want a grant of at least 15 beyond a's 20", without)
	}
	if with.Grant != without.Grant-15 {
		t.Errorf("with the earlier run's head of 15: grant %d, want %d (15 less than %d)", with.Grant, without.Grant-15, without.Grant)
	}
	if other, otherNone := grant("p", 15), grant("p", 0); other.Grant != otherNone.Grant {
		t.Errorf("a head another owner answered: grant %d, want %d as without it", other.Grant, otherNone.Grant)
	}
}
