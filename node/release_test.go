package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// TestReleasedBatchBuffersAreReused: the buffers of a released batch serve
// the next round's batch to the same owner, and the counts still add up
// exactly round after round (a buffer still in use by an earlier batch, or
// one reused without being emptied, would break the totals).
func TestReleasedBatchBuffersAreReused(t *testing.T) {
	c := newCluster(t, 2, PolicyOptimistic) // every request admitted at once
	e := c.engines["n0"]
	var limits []counters.Limit
	for i := range 200 {
		limits = append(limits, counters.Limit{Tenant: fmt.Sprint("t", i), Endpoint: "/p", Method: "GET", Period: time.Hour, Threshold: 1 << 30})
	}
	now := t0.Add(2 * time.Hour)
	var lastRefs *ref
	var lastBuf *byte
	reused := 0
	for round := 1; round <= 6; round++ {
		for _, l := range limits {
			e.Take(now, []counters.Limit{l}, 1)
		}
		for _, b := range e.Prepare(now) {
			if b.Len() > 0 {
				if &b.refs[:1][0] == lastRefs {
					reused++
				}
				lastRefs = &b.refs[:1][0]
			}
			if b.enc != nil && cap(b.enc.buf) > 0 {
				if &b.enc.buf[:1][0] == lastBuf {
					reused++
				}
				lastBuf = &b.enc.buf[:1][0]
			}
			resp, err := c.engines[b.Owner].Handle(now, b.Req)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Apply(now, b, resp); err != nil {
				t.Fatal(err)
			}
			e.Release(b)
			if b.refs != nil || b.Req != nil {
				t.Fatal("a released batch keeps its buffers")
			}
		}
		for _, l := range limits {
			en := e.Table().Get(l.Tenant, l.Endpoint, l.Method, l.Period)
			en.Lock()
			s := en.Slot(counters.WindowStart(now.UnixNano(), int64(l.Period)), new(counters.Slot))
			got := s.Global
			en.Unlock()
			if got != int64(round) {
				t.Fatalf("round %d: %s's global %d, want %d", round, l.Tenant, got, round)
			}
		}
		now = now.Add(200 * time.Millisecond)
	}
	// From the third round on (the first batch to a member is unpacked),
	// both the refs and the packed buffer come back.
	if reused < 6 {
		t.Fatalf("buffers reused %d times in 6 rounds, want at least 6", reused)
	}
}

// TestSparesKeepTheLargest: once the kept buffers are full of small ones
// (a table's first rounds, when it held few series), a larger released
// buffer takes the smallest one's place, so that the rounds of the grown
// table reuse their buffers instead of allocating them every round (the
// keys-defined-over-time SyncCost row allocated 82 bytes per key per
// interval, 28 once its large buffers were kept).
func TestSparesKeepTheLargest(t *testing.T) {
	var sp spares[byte]
	for i := range spareKeep {
		sp.put(make([]byte, 0, 100+i))
	}
	big := make([]byte, 0, 10_000)
	sp.put(big)
	got := sp.take(9_000)
	if cap(got) != cap(big) || &got[:1][0] != &big[:1][0] {
		t.Fatalf("take(9000) returned a buffer of capacity %d, not the kept one of %d", cap(got), cap(big))
	}
	if len(sp.kept) != spareKeep-1 {
		t.Fatalf("%d kept after the take, want %d", len(sp.kept), spareKeep-1)
	}
	for _, k := range sp.kept {
		if cap(k) == 100 {
			t.Fatalf("the smallest buffer (100) is still kept: %d", cap(k))
		}
	}
	// A smaller one than every kept buffer is not kept when full.
	sp.put(make([]byte, 0, 10_000))
	sp.put(make([]byte, 0, 50))
	for _, k := range sp.kept {
		if cap(k) == 50 {
			t.Fatal("a buffer smaller than every kept one took a place")
		}
	}
}
