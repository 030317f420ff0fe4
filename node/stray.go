package node

import (
	"fmt"
	"math"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/peerpb"
)

// A member whose view of the membership differs from the owner's it
// reports to (one of them has seen a change the other has not yet) gets
// its reports answered without a grant: they are stray in the owner's
// view. The member may then fall back to its static share
// (counters.Table.Declined), so that the members of a healed partition
// are not refused while their views differ. That is safe only if the
// owner of the series in the answering member's view reserved the share:
// it did for a member it had not heard from since before the window
// began, and not for one in contact with it, to which it may have granted
// nothing while it gave the rest of the limit to others or to itself.
// After an owner crashed, the member that noticed first reports to the
// successor, which still names the crashed owner (sim/testdata
// owner-crash-pinned: that owner had granted itself the whole limit, and
// the static share it never reserved was admitted on top of it). So an
// answer names that owner for each stray report (SyncResponse.stray_owners),
// and the member falls back only if it heard nothing from it since before
// the window began.

// stray records in resp that the report at place i was stray here, owner
// being its series' owner in this member's view.
func stray(resp *peerpb.SyncResponse, i int, owner string) {
	if owner == "" {
		return // no view yet: the sender falls back as it always did
	}
	resp.StrayReports = append(resp.StrayReports, uint32(i))
	resp.StrayOwners = append(resp.StrayOwners, owner)
}

// declineAfter returns, for each of n reports of a batch, the time after
// which the sender may fall back to its static share in a window that an
// answer without a grant declines (see apply): math.MinInt64 if the answer
// says nothing of that report, or resp's stray owner for it was last heard
// from more than FallbackAfter before (never, if that owner is this member
// itself). It returns nil if resp names no stray report, and an error if
// the lists are malformed.
func (e *Engine) declineAfter(resp *peerpb.SyncResponse, n int) ([]int64, error) {
	if len(resp.GetStrayReports()) == 0 && len(resp.GetStrayOwners()) == 0 {
		return nil, nil
	}
	if len(resp.StrayReports) != len(resp.StrayOwners) || len(resp.StrayReports) > n {
		return nil, fmt.Errorf("%d stray reports and %d stray owners for %d reports", len(resp.StrayReports), len(resp.StrayOwners), n)
	}
	after := make([]int64, n)
	for i := range after {
		after[i] = math.MinInt64
	}
	links := *e.links.Load()
	wait := int64(counters.FallbackAfter(e.contact))
	prev := -1
	for j, pos := range resp.StrayReports {
		owner := resp.StrayOwners[j]
		switch {
		case int(pos) <= prev || int(pos) >= n:
			return nil, fmt.Errorf("stray report %d out of order or of range (%d reports)", pos, n)
		case owner == "" || len(owner) > MaxOriginSize:
			return nil, fmt.Errorf("a stray owner must be 1..%d bytes", MaxOriginSize)
		}
		prev = int(pos)
		switch l := links[owner]; {
		case owner == e.cfg.Name:
			after[pos] = math.MaxInt64 // in contact with itself
		case l != nil && l.answered.Load() > 0:
			after[pos] = l.answered.Load() + wait
		}
	}
	return after, nil
}

// declined is after's value for report i, math.MinInt64 without one.
func declined(after []int64, i int) int64 {
	if after == nil {
		return math.MinInt64
	}
	return after[i]
}
