package counters

import (
	"testing"
	"time"
)

// TestOwnerPrompt: the owner asks a member to report at once
// (Answer.Prompt) when its answer to a report without demand lowers the
// member's cap, leaving it some beyond its count or after an earlier
// report without demand (its traffic moved away), while another member in
// contact asked in vain for budget in the same window within the last
// interval; in no other case.
func TestOwnerPrompt(t *testing.T) {
	o := NewOwner(OwnerConfig{Lease: true, Self: "o", Interval: 200 * time.Millisecond, Contact: time.Second})
	now := at(5 * time.Second).UnixNano()
	k := ownerKey()
	inContact := &contact{since: now - int64(time.Minute), acked: now - int64(100*time.Millisecond)}
	lost := &contact{since: now - int64(time.Minute), acked: now - int64(3*time.Second)}
	asks := func(c *contact, own, g, spare int64) *OwnerSeries {
		ser := &OwnerSeries{}
		if o.prompt(now-int64(50*time.Millisecond), c, ser, &Report{Key: k, Own: own, Demand: 1, Cap: own, HasGrant: true}, g, spare, false) {
			t.Fatal("an ask with demand is asked for a prompt report")
		}
		return ser
	}
	cut := &Report{Key: k, Own: 20, Demand: 0, Cap: 30, HasGrant: true}
	for _, tc := range []struct {
		name     string
		ser      *OwnerSeries
		r        *Report
		g        int64
		wasMoved bool
		want     bool
	}{
		{"another member waits", asks(inContact, 0, 0, 5), cut, 22, true, true},
		{"first report without demand, some cap left", asks(inContact, 0, 0, 5), cut, 22, false, true},
		{"first report without demand, cut to its count", asks(inContact, 0, 0, 5), cut, 20, false, false},
		{"moved, cut to its count", asks(inContact, 0, 0, 5), cut, 20, true, true},
		{"its cap kept", asks(inContact, 0, 0, 5), cut, 30, true, false},
		{"nobody asked", &OwnerSeries{}, cut, 22, true, false},
		{"the ask was served", asks(inContact, 0, 3, 5), cut, 22, true, false},
		{"the ask was refused, nothing to come", asks(inContact, 0, 0, 0), cut, 22, true, false},
		{"the asker is out of contact", asks(lost, 0, 0, 5), cut, 22, true, false},
		{"no record of the asker", asks(nil, 0, 0, 5), cut, 22, true, false},
		{"the ask was in another window", &OwnerSeries{waitAt: now - int64(50*time.Millisecond), waitStart: k.WindowStart - int64(k.Period)}, cut, 22, true, false},
		{"the ask is an interval old", &OwnerSeries{waitAt: now - int64(200*time.Millisecond), waitStart: k.WindowStart}, cut, 22, true, false},
		{"the cut member has demand", asks(inContact, 0, 0, 5), &Report{Key: k, Own: 20, Demand: 2, Cap: 30, HasGrant: true}, 22, true, false},
		{"it held no grant", asks(inContact, 0, 0, 5), &Report{Key: k, Own: 20, Cap: 30}, 22, true, false},
	} {
		if got := o.prompt(now, inContact, tc.ser, tc.r, tc.g, 0, tc.wasMoved); got != tc.want {
			t.Errorf("%s: prompt %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestOwnerPromptsNoPausedMemberToItsCount: through Report, a busy
// member's first report without demand, answered with a cap cut to its
// count, is not asked for a prompt report while another member waits: its
// traffic may only have paused, and a request arriving right after would
// find nothing left.
func TestOwnerPromptsNoPausedMemberToItsCount(t *testing.T) {
	o := NewOwner(OwnerConfig{Lease: true, Self: "o", Interval: 200 * time.Millisecond})
	o.SetMembers(base, []string{"a", "b"}, nil)
	ms := members("a", "b")
	a, b := ms["a"], ms["b"]
	beat(o, 0, 3*time.Second, a, b)
	for ts := 3 * time.Second; ts <= 4*time.Second; ts += 200 * time.Millisecond {
		b.hello(o, at(ts-100*time.Millisecond))
		a.own += 3 // 15 a second: busy enough to be taken for moved (movedDemand)
		a.sync(o, at(ts), ownerKey(), 30, 3)
	}
	if a.cap != 30 {
		t.Fatalf("a's cap %d: want the whole limit", a.cap)
	}
	if ask := b.sync(o, at(4050*time.Millisecond), ownerKey(), 30, 10); ask.Grant > b.own || ask.Spare <= 0 {
		t.Fatalf("b's ask %+v: want it in vain", ask)
	}
	ans := a.sync(o, at(4100*time.Millisecond), ownerKey(), 30, 0)
	if ans.Grant != a.own || ans.Prompt {
		t.Fatalf("a's first report without demand while b needs more than is free: %+v, want its cap cut to its count %d and no prompt", ans, a.own)
	}
}
