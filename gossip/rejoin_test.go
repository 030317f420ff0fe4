package gossip

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestRejoinSetTimeline(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	r := newRejoinSet(3, time.Minute)
	seeds := []string{"s:1", "self:1"}
	alive := map[string]bool{"s:1": false}

	steps := []struct {
		at    time.Duration
		do    func(now time.Time)
		alive map[string]bool
		want  []string
	}{
		0: {0, func(time.Time) {}, nil, []string{"s:1"}},
		1: {1 * time.Second, func(now time.Time) { r.failed("b", "b:1", now) }, nil, []string{"s:1", "b:1"}},
		2: {2 * time.Second, func(now time.Time) { r.failed("a", "a:1", now) }, nil, []string{"s:1", "a:1", "b:1"}},
		// The seed is an alive member: skipped. A remembered address that
		// is alive again under another name is skipped too.
		3: {3 * time.Second, func(time.Time) {}, map[string]bool{"s:1": true, "a:1": true}, []string{"b:1"}},
		// b comes back: forgotten.
		4: {4 * time.Second, func(time.Time) { r.alive("b") }, nil, []string{"s:1", "a:1"}},
		// Count bound: c, d, e push out the oldest (a).
		5: {5 * time.Second, func(now time.Time) {
			r.failed("c", "c:1", now)
			r.failed("d", "d:1", now.Add(time.Millisecond))
			r.failed("e", "e:1", now.Add(2*time.Millisecond))
		}, nil, []string{"s:1", "c:1", "d:1", "e:1"}},
		// Age bound: a minute after failing, entries are forgotten.
		6: {65*time.Second + 1500*time.Microsecond, func(time.Time) {}, nil, []string{"s:1", "e:1"}},
		7: {66 * time.Second, func(time.Time) {}, nil, []string{"s:1"}},
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		s.do(now)
		a := s.alive
		if a == nil {
			a = alive
		}
		got := r.targets(now, seeds, "self:1", a)
		if !slices.Equal(got, s.want) {
			t.Errorf("step %d: targets = %v, want %v", i, got, s.want)
		}
	}
}

func TestRejoinSetBounded(t *testing.T) {
	t0 := time.Unix(0, 0)
	r := newRejoinSet(DefaultRejoinMax, time.Hour)
	for i := range 10_000 {
		r.failed(fmt.Sprintf("n%d", i), fmt.Sprintf("h:%d", i), t0.Add(time.Duration(i)))
	}
	if r.len() != DefaultRejoinMax {
		t.Fatalf("remembered %d addresses, want %d", r.len(), DefaultRejoinMax)
	}
	got := r.targets(t0.Add(10_000), nil, "", nil)
	if got[0] != fmt.Sprintf("h:%d", 10_000-DefaultRejoinMax) {
		t.Fatalf("kept %v..., want the newest %d", got[0], DefaultRejoinMax)
	}
}
