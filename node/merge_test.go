package node

import (
	"math"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// TestApplyMergedAcknowledgesWhatTheOwnerCounts: a member merging its own
// windows reads a window at 2, admits one more before the answer is
// applied, and its owner (itself) counts the 3 (Owner.Merged). The
// window's acknowledged count and total say so too: a member that brought
// 2 as its part of that total to the next owner, when the series moved,
// had its third request counted twice there (TestClusterWireResynchronises
// saw 11 where 10 were admitted). An answer of another owner acknowledges
// what the report carried, no more.
func TestApplyMergedAcknowledgesWhatTheOwnerCounts(t *testing.T) {
	for _, merged := range []bool{true, false} {
		tb, err := counters.NewTable(counters.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		l := []counters.Limit{{Tenant: "t", Endpoint: "/p", Method: "GET", Period: 10 * time.Second, Threshold: 100}}
		now := t0.Add(time.Second)
		for range 3 {
			if _, err := tb.Take(now, l, 1); err != nil {
				t.Fatal(err)
			}
		}
		en := tb.Get("t", "/p", "GET", 10*time.Second)
		en.Lock()
		start := en.Current().Start
		en.Unlock()
		r := &ref{e: en, start: start, own: 2}
		if own := apply(nil, now.UnixNano(), r, &counters.Answer{Global: 6}, 0, math.MinInt64, merged); own != 3 {
			t.Errorf("merged=%v: apply returned %d, want the window's count 3", merged, own)
		}
		en.Lock()
		s := en.Current()
		acked, global := s.Acked, s.Global
		en.Unlock()
		wantAcked, wantGlobal := int64(2), int64(6)
		if merged {
			wantAcked, wantGlobal = 3, 7
		}
		if acked != wantAcked || global != wantGlobal {
			t.Errorf("merged=%v: acknowledged %d of a total of %d, want %d of %d", merged, acked, global, wantAcked, wantGlobal)
		}
	}
}
