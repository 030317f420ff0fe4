package counters

// View is what an admission Policy sees of one tier when a request arrives:
// the tier's threshold, the request's cost, this instance's own counts and
// what it last learnt from the key's owner. All counts are in cost units.
type View struct {
	Threshold int64
	Cost      int64
	// Members is the number of instances sharing the limit (>= 1) and Index
	// this instance's position among them, in [0, Members).
	Members int
	Index   int
	// Hash is the series hash; static shares use it to spread the remainder
	// of Threshold / Members over instances.
	Hash uint64

	// Own is this instance's cumulative admitted count in the current window,
	// Acked the part of Own the owner has acknowledged (and so included in
	// Global), Global the last global total the owner returned.
	Own, Acked, Global int64
	// PrevGlobal and PrevOwn are the previous window's global estimate
	// (global plus own unreported) and own count, already weighted by the
	// share of the previous window still inside the sliding period. Both are
	// 0 for fixed windows.
	PrevGlobal, PrevOwn int64
	// Granted is the owner's lease: the value Own may reach in this window.
	// It is meaningful only when HasGrant is set.
	Granted  int64
	HasGrant bool
	// Informed says the grant was made knowing this instance's demand
	// (Slot.Informed); Spare is the owner's last word on budget this
	// instance may still get (Answer.Spare).
	Informed bool
	Spare    int64
	// Fallback says this instance has not heard from the key's owner since
	// before the window began (counters.FallbackAfter): it cannot ask, and
	// the owner reserves its static share for it.
	Fallback bool
	// Restricted says the window began while this instance could not
	// reach a majority of its members (Table.SetMinority), past the term:
	// it admits at most Safe, its safe share, whatever it holds.
	Restricted bool
	Safe       int64
}

// Used is the instance's best estimate of the global count: what the owner
// reported, plus what this instance admitted since, plus the weighted
// previous window.
func (v *View) Used() int64 { return v.PrevGlobal + v.Global + (v.Own - v.Acked) }

// Remaining is Threshold minus Used, never below zero.
func (v *View) Remaining() int64 { return max(0, v.Threshold-v.Used()) }

// A Policy is an admission rule: given the view of one tier, it says whether
// Cost more units fit and how many remain afterwards, as this instance sees
// it. A Policy must be pure and safe for concurrent use; it is called with the
// entry locked, on the request path, so it must not block or allocate.
type Policy interface {
	Admit(v View) (ok bool, remaining int64)
}

// Optimistic is the Salesforce filter's rule: admit while the last global
// total plus this instance's unreported count plus the cost stays within the
// threshold. With N instances it can overshoot by up to (N-1) times the
// traffic of one sync interval, because each instance spends the same
// remaining budget until the next sync tells it about the others.
type Optimistic struct{}

// Admit implements Policy.
func (Optimistic) Admit(v View) (bool, int64) { return optimisticAdmit(&v) }

func optimisticAdmit(v *View) (bool, int64) {
	used := v.Used()
	if used+v.Cost > v.Threshold {
		return false, max(0, v.Threshold-used)
	}
	return true, v.Threshold - used - v.Cost
}

// Static is LINE's split: each instance may admit StaticShare of the
// threshold per window, whatever the others do. It never overshoots while
// the member count is right, and wastes budget when traffic is uneven.
type Static struct{}

// Admit implements Policy.
func (Static) Admit(v View) (bool, int64) { return staticAdmit(&v) }

func staticAdmit(v *View) (bool, int64) {
	return admitLocal(v, StaticShare(v.Threshold, v.Members, v.Index, v.Hash))
}

// Lease admits only within the budget the key's owner granted this instance
// (View.Granted), a cap on the instance's own estimate: its own count in
// the window, plus for sliding tiers its weighted previous window (so room
// frees up by itself as the previous window slides out). Without a grant an
// instance admits nothing: it asks the owner first (the decision is
// pending, and the node waits for the answer), so that owners reserve
// nothing for instances that have no traffic. Only an instance that has
// not heard from the owner since before the window began (View.Fallback)
// falls back to its static share, which the owner reserves for it.
type Lease struct{}

// Admit implements Policy.
func (Lease) Admit(v View) (bool, int64) { return leaseAdmit(&v) }

func leaseAdmit(v *View) (bool, int64) {
	if v.Restricted {
		return admitLocal(v, v.Safe)
	}
	if !v.HasGrant {
		if v.Fallback {
			return admitLocal(v, StaticShare(v.Threshold, v.Members, v.Index, v.Hash))
		}
		return false, 0
	}
	if v.PrevOwn+v.Own+v.Cost > v.Granted {
		return false, 0
	}
	return true, max(0, v.Remaining()-v.Cost)
}

// leasePending reports whether a lease denial may turn into an admission
// at the next answer of the owner: the limit has room as far as this
// instance knows, and it holds no grant yet, or the grant was made without
// knowing of this instance's demand, or the owner said more may come.
func leasePending(v *View) bool {
	if v.Threshold <= 0 || v.Restricted || v.Remaining() < v.Cost {
		return false
	}
	if !v.HasGrant {
		return !v.Fallback
	}
	return !v.Informed || v.Spare > 0
}

// admitLocal admits within a local share, counting only this instance's own
// requests; remaining is reported from the global estimate so that headers
// stay meaningful for clients.
func admitLocal(v *View, share int64) (bool, int64) {
	if v.PrevOwn+v.Own+v.Cost > share {
		return false, 0
	}
	return true, max(0, v.Remaining()-v.Cost)
}

// StaticShare splits threshold over members exactly: every instance gets
// threshold / members and the remainder goes, one unit each, to the first
// threshold % members instances in an order rotated by the series hash, so
// that the shares of all instances add up to threshold and no single
// instance gets every key's remainder. members < 1 counts as 1.
func StaticShare(threshold int64, members, index int, hash uint64) int64 {
	if members <= 1 {
		return threshold
	}
	m := int64(members)
	share := threshold / m
	rem := threshold % m
	pos := (int64(index) + int64(hash%uint64(m))) % m
	if pos < rem {
		share++
	}
	return share
}

// Closed denies every request: the fail-closed rule while a backing store
// cannot be reached.
type Closed struct{}

// Admit implements Policy.
func (Closed) Admit(View) (bool, int64) { return false, 0 }
