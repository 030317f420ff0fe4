package sim

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

// queue is a min-heap of events ordered by (at, seq). Its entries hold the
// keys beside the pointer, so that ordering reads no event.
type queue struct {
	h   []qentry
	seq uint64
}

type qentry struct {
	at  int64
	seq uint64
	e   *event
}

func (a *qentry) less(b *qentry) bool {
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (q *queue) push(e *event) {
	e.seq = q.seq
	q.seq++
	q.h = append(q.h, qentry{e.at, e.seq, e})
	// Sift up.
	h := q.h
	i := len(h) - 1
	x := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if !x.less(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = x
}

func (q *queue) pop() *event {
	h := q.h
	top := h[0].e
	n := len(h) - 1
	x := h[n]
	h[n] = qentry{}
	h = h[:n]
	q.h = h
	if n == 0 {
		return top
	}
	// Sift down.
	i := 0
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].less(&h[c]) {
			c = r
		}
		if !h[c].less(&x) {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = x
	return top
}

// peek returns the next event without taking it; the queue must not be
// empty.
func (q *queue) peek() *event { return q.h[0].e }

func (q *queue) len() int { return len(q.h) }
