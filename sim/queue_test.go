package sim

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestQueueOrder pops events pushed out of order, some at equal times: by
// time, then in the order they were pushed.
func TestQueueOrder(t *testing.T) {
	var q queue
	for i, at := range []int64{5, 1, 5, 3, 1, 5} {
		q.push(&event{at: at, gen: uint64(i)})
	}
	var got [][2]int64
	for q.len() > 0 {
		e := q.pop()
		got = append(got, [2]int64{e.at, int64(e.gen)})
	}
	want := [][2]int64{{1, 1}, {1, 4}, {3, 3}, {5, 0}, {5, 2}, {5, 5}}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v (by time, then scheduling order)", got, want)
	}
}

// byTimeSeq orders events as the queue pops them.
func byTimeSeq(a, b *event) int {
	return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq))
}

// TestQueueInterleaved pushes events at random times, many of them equal, and
// pops them in between, as a run does: every event must come out in
// (at, seq) order among those queued, and each exactly once.
func TestQueueInterleaved(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var q queue
		var want []*event // queued, not yet popped, in (at, seq) order
		now := int64(0)
		for range 2000 {
			if rng.IntN(3) > 0 || q.len() == 0 {
				// Later than now, in a small range so that times repeat.
				e := &event{at: now + rng.Int64N(20)}
				q.push(e)
				i, _ := slices.BinarySearchFunc(want, e, byTimeSeq)
				want = slices.Insert(want, i, e)
				continue
			}
			if got := q.peek(); got != want[0] {
				t.Fatalf("round %d: peek gave (%d, %d), want (%d, %d)", round, got.at, got.seq, want[0].at, want[0].seq)
			}
			got := q.pop()
			if got != want[0] {
				t.Fatalf("round %d: pop gave (%d, %d), want (%d, %d)", round, got.at, got.seq, want[0].at, want[0].seq)
			}
			if got.at < now {
				t.Fatalf("round %d: time went back from %d to %d", round, now, got.at)
			}
			now = got.at
			want = want[1:]
		}
		for len(want) > 0 {
			if got := q.pop(); got != want[0] {
				t.Fatalf("round %d, draining: pop gave (%d, %d), want (%d, %d)", round, got.at, got.seq, want[0].at, want[0].seq)
			}
			want = want[1:]
		}
		if q.len() != 0 {
			t.Fatalf("round %d: %d events left after every one was popped", round, q.len())
		}
	}
}
