package sim

import (
	"cmp"
	"slices"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/peerpb"
)

// The central policy is a model of seed 000's Redis design, not node code:
// every instance decides with the optimistic rule on its own counters
// (counters.Table with counters.Optimistic), and every sync interval sends,
// for every key with traffic, its delta since the last acknowledged call to
// one central counter (Redis INCRBY) and caches the total it reads back.
//
// The store is the simulated member "store": one call per key per interval
// (as the seed's 75 calls/s for 25 tenants on 3 instances), over the same
// simulated network, with the same latency, loss and duplication, and
// unreachable from the other side of a partition. Deltas are not
// idempotent: a duplicated call, or a call whose answer was lost and whose
// delta is sent again, counts twice, as in the seed. Message sizes are those
// of the same report and total in the peer protocol's encoding, a close
// stand-in for an INCRBY and its reply.

// prepareCentral starts a sync round of a central-policy instance: one call
// per window with an unacknowledged delta or with traffic since the last
// call (the seed reads the total back on every sync).
func (w *world) prepareCentral(in *instance, now time.Time) {
	var fl []*flight
	in.tab.Range(func(en *counters.Entry) bool {
		en.Lock()
		defer en.Unlock()
		if en.Dead() {
			return true
		}
		tenant, endpoint, method, period := en.Identity()
		var buf counters.Slot
		prev := en.Previous(&buf) // a copy: Store keeps the demand put in flight below
		for _, s := range [2]*counters.Slot{prev, en.Current()} {
			if s == nil {
				continue // the previous window held nothing (Entry.Previous)
			}
			delta := s.Own - s.Acked
			if delta == 0 && (s.Demand == 0 || s != en.Current()) {
				continue
			}
			fl = append(fl, &flight{
				inst: in, gen: in.gen, sentAt: w.vt, entry: en,
				key:     counters.Key{Tenant: tenant, Endpoint: endpoint, Method: method, Period: period, WindowStart: s.Start},
				sentOwn: s.Own, demand: s.Demand,
			})
			s.Demand = 0
		}
		if prev != nil {
			en.Store(prev)
		}
		return true
	})
	// The table's iteration order is random: send in key order, so that the
	// random draws of the network happen in the same order in every run.
	slices.SortFunc(fl, func(a, b *flight) int {
		return cmp.Or(
			cmp.Compare(a.key.Tenant, b.key.Tenant),
			cmp.Compare(a.key.Endpoint, b.key.Endpoint),
			cmp.Compare(a.key.Method, b.key.Method),
			cmp.Compare(a.key.Period, b.key.Period),
			cmp.Compare(a.key.WindowStart, b.key.WindowStart),
		)
	})
	for _, f := range fl {
		in.round = append(in.round, f)
		f.entry.Lock()
		acked := int64(0)
		var buf counters.Slot
		if s := f.entry.Slot(f.key.WindowStart, &buf); s != nil {
			acked = s.Acked
		}
		f.entry.Unlock()
		delta := f.sentOwn - acked
		w.send(&message{from: in, to: w.storeInst, flight: f, delta: delta, req: &peerpb.SyncRequest{
			Origin: in.name,
			Reports: []*peerpb.Report{{
				Tenant: f.key.Tenant, Endpoint: f.key.Endpoint, Method: f.key.Method,
				PeriodMs: f.key.Period.Milliseconds(), WindowStartMs: f.key.WindowStart / int64(time.Millisecond),
				Own: delta,
			}},
		}})
	}
}

// handleStore is the central store receiving an INCRBY: it adds the delta
// and answers the new total.
func (w *world) handleStore(m *message) {
	k := m.flight.key
	w.store[k] += m.delta
	total := w.store[k]
	w.send(&message{resp: true, from: w.storeInst, to: m.from, flight: m.flight, total: total,
		answer: &peerpb.SyncResponse{Totals: []*peerpb.Total{{Global: total}}}})
}

// applyCentral caches the total the store returned for a key.
func (w *world) applyCentral(f *flight, total int64) {
	f.entry.Lock()
	defer f.entry.Unlock()
	var buf counters.Slot
	s := f.entry.Slot(f.key.WindowStart, &buf)
	if s == nil {
		return // the window rolled away meanwhile
	}
	s.Acked = max(s.Acked, f.sentOwn)
	s.Global = total
	s.SetGlobalAt(f.inst.now().UnixNano())
	f.entry.Store(s)
}
