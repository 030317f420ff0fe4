package sim

import "container/heap"

// event is one thing that happens at a virtual time. Events at the same time
// run in the order they were scheduled (seq), so a run is a pure function of
// the scenario and the seed.
type event struct {
	at   int64 // virtual time, ns since the start of the run
	seq  uint64
	kind evKind

	inst   *instance // tick, refresh
	gen    uint64    // the instance's generation when scheduled
	stream *stream   // arrival
	msg    *message  // deliver
	fault  *Event    // timeline
	park   *parked   // pending deadline
	retry  *retry    // a client's retry
	flight *flight   // a sync call's deadline
}

type evKind uint8

const (
	evArrival evKind = iota
	evTick
	evRefresh
	evDeliver
	evFault
	evPendingDeadline
	evRetry
	evKick
	evCallTimeout
)

// queue is a min-heap of events ordered by (at, seq).
type queue struct {
	h   eventHeap
	seq uint64
}

func (q *queue) push(e *event) {
	e.seq = q.seq
	q.seq++
	heap.Push(&q.h, e)
}

func (q *queue) pop() *event { return heap.Pop(&q.h).(*event) }

// peek returns the next event without taking it; the queue must not be
// empty.
func (q *queue) peek() *event { return q.h[0] }

func (q *queue) len() int { return len(q.h) }

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return e
}
