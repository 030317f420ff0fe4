package node

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/internal/prefetch"
	"github.com/peerlimit/peerlimit/peerpb"
	"github.com/peerlimit/peerlimit/ring"
)

// Batch is one sync call to one owner: what Prepare built, to be sent, and
// then passed to Apply with the answer or to Fail.
type Batch struct {
	Owner string
	Req   *peerpb.SyncRequest
	refs  []ref
	enc   *encoder // the packed form (nil for a store, or no reports)
	// partial says windows to report were left out (MaxBatch, or the
	// request's definitions were full): the batch claims no view, and so
	// not that it carries every window this member holds a cap in.
	partial bool
	// sent is when the batch was prepared, on the member's own clock (for
	// the clock estimate of clock.go).
	sent time.Time
}

// Resyncs returns how many batches owners refused for want of dictionary
// entries (a receiver that restarted unseen, or lost its dictionary): each
// cost its counts one interval's delay, never a count.
func (e *Engine) Resyncs() uint64 { return e.resyncs.Load() }

// Len returns the number of windows the batch reports.
func (b *Batch) Len() int { return len(b.refs) }

type ref struct {
	e      *counters.Entry
	start  int64
	own    int64
	demand int64
	epoch  uint64
}

// Prepare builds this interval's sync: one batch per remote owner with
// every window that changed since it was last acknowledged (or whose owner
// changed), and merges the windows this member owns itself directly, with no
// call. Batches are sorted by owner.
func (e *Engine) Prepare(now time.Time) []*Batch {
	e.clock.update(e.cfg.Name, e.Members())
	e.updateQuorum(e.clock.at(now))
	// A batch that reaches MaxBatch leaves the rest for the next round,
	// which walks the table from where the first one did (the series past
	// the cap are not left out again).
	return e.prepare(now, e.ring.Owner, e.ring.Version(), false, true, e.table.Len(), func(fn func(*counters.Entry) bool) {
		e.table.RangeFrom(e.resume.Swap(0), fn)
	})
}

// PrepareAsking builds a sync asked for at once by pending decisions: like
// Prepare, but only with the series that had a pending decision since the
// last call (counters.Table.TakeAsking), and with no heartbeat batches. Its
// cost is what those series are, whatever the table holds. The series whose
// caps were lowered while they admitted under the old ones (apply) go too,
// in the batches to their owners that the others make, and in no other:
// such a batch acknowledges the answer that lowered them, and the owner
// holds their old caps back until they report after it.
func (e *Engine) PrepareAsking(now time.Time) []*Batch {
	asking, riders := e.table.TakeAsking()
	return e.prepare(now, e.ring.Owner, e.ring.Version(), false, false, len(asking), func(fn func(*counters.Entry) bool) {
		for _, en := range asking {
			if !fn(en) {
				return
			}
		}
	}, riders...)
}

// Prompted reports whether an answer applied since the last call asked a
// window to report at once (counters.Answer.Prompt): the caller then runs
// a sync asked for at once (PrepareAsking), which reports it.
func (e *Engine) Prompted() bool { return e.table.TakePrompted() }

// Handoff builds the batches a member sends as it leaves gracefully: every
// window it has counts in, to the owner that window will have once this
// member is gone, so that the successor holds this member's counts as an
// origin of its own and none are lost with the ring change. Every batch
// says the member is leaving, and every other member gets one (empty if
// need be), so that no owner keeps reserving budget for it.
func (e *Engine) Handoff(now time.Time) []*Batch {
	others := slices.DeleteFunc(e.Members(), func(m string) bool { return m == e.cfg.Name })
	if len(others) == 0 || e.cfg.Central != "" {
		return nil
	}
	after, err := ring.New(e.cfg.Ring)
	if err != nil {
		return nil
	}
	after.Set(others)
	// Every batch defines its keys afresh (a new session each), so that
	// no receiver can miss a definition: there is no next interval.
	e.wireMu.Lock()
	for _, m := range others {
		e.newDict(m)
	}
	e.wireMu.Unlock()
	bs := e.prepare(now, after.Owner, 0, true, false, e.table.Len(), e.table.Range)
	has := map[string]bool{}
	for _, b := range bs {
		b.Req.Leaving = true
		has[b.Owner] = true
	}
	for _, m := range others {
		if !has[m] {
			bs = append(bs, &Batch{Owner: m, Req: &peerpb.SyncRequest{Origin: e.cfg.Name, Incarnation: e.cfg.Incarnation, Leaving: true}})
		}
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].Owner < bs[j].Owner })
	return bs
}

// prepare builds one batch per owner (as ownerOf says) of the windows of
// the series each yields to report: the changed ones, or every one with
// counts when all is set; then those of riders whose owners have a batch.
// A full round (full set) also sends every other member a batch, and a
// batch of it that left no window out says under which membership view it
// was built; a partial round (the series asking for budget) does neither,
// since it does not carry every window this member holds a lease in. most
// is how many series each yields at most, which sizes the batches. raw is
// the member's own clock; the windows are read on the common one
// (clock.go).
func (e *Engine) prepare(raw time.Time, ownerOf func(uint64) (string, bool), epoch uint64, all, full bool, most int, each func(func(*counters.Entry) bool), riders ...*counters.Entry) []*Batch {
	now := e.clock.at(raw)
	r := &round{e: e, sent: raw, now: now, nowNs: now.UnixNano(), epoch: epoch, all: all, full: full, links: *e.links.Load()}
	r.members, r.index = e.table.Share()
	// Batches are sized for an even spread of the series the round may
	// report over the owners, which spares growing them report by report
	// (a round kicked for a few waiting series sized by the table took
	// and cleared megabytes each time at a million series).
	r.perOwner = min((most+len(riders))/max(1, len(e.ring.Members()))+1, e.cfg.MaxBatch)
	if e.cfg.Central == "" {
		// The dictionaries stay as this round leaves them until it is done.
		e.wireMu.Lock()
		defer e.wireMu.Unlock()
		e.local.trim(2*e.table.Len() + 1024)
		r.self = e.table.PeerID(e.cfg.Name, e.cfg.Incarnation)
		r.local = &e.localRound
	}
	// The series come a chunk at a time: the whole chunk's entries are
	// asked for from memory (counters.Entry.Prefetch) a chunk ahead, while
	// the chunk before is worked on, and their owners looked up first, with
	// no lock in between, so that the loads of the entries from memory
	// overlap instead of each waiting for the last (a sync touches every
	// series of a large table, few of which are in the CPU's caches). The
	// windows this member owns are merged after each chunk, while their
	// entries are still in the caches.
	const chunkLen = 32
	var chunks [2][chunkLen]*counters.Entry
	fill, n, ready := 0, 0, 0 // filling chunks[fill] (n so far); chunks[fill^1][:ready] waits
	ask := func(ens []*counters.Entry) {
		var x byte
		for _, en := range ens {
			x ^= en.Prefetch()
		}
		runtime.KeepAlive(x)
	}
	work := func(ens []*counters.Entry) {
		var owners [chunkLen]string
		var oks [chunkLen]bool
		var x byte
		for i, en := range ens {
			x ^= en.PrefetchPast()
			owners[i], oks[i] = e.cfg.Central, true
			if e.cfg.Central == "" {
				owners[i], oks[i] = ownerOf(en.Hash())
			}
		}
		runtime.KeepAlive(x)
		r.touchDicts(ens, owners[:len(ens)], oks[:len(ens)])
		for i, en := range ens {
			if oks[i] {
				r.series(en, owners[i])
			}
		}
		if r.local != nil && len(r.local.refs) >= localChunk {
			r.mergeLocal()
		}
	}
	// flush works on every series added so far.
	flush := func() {
		ask(chunks[fill][:n])
		work(chunks[fill^1][:ready])
		work(chunks[fill][:n])
		n, ready = 0, 0
	}
	add := func(en *counters.Entry) bool {
		chunks[fill][n] = en
		if n++; n == chunkLen {
			ask(chunks[fill][:n])
			work(chunks[fill^1][:ready])
			fill, n, ready = fill^1, 0, n
		}
		return true
	}
	each(add)
	flush()
	r.rideOnly = true
	for _, en := range riders {
		add(en)
	}
	flush()
	if r.local != nil {
		r.mergeLocal()
		if full {
			// Every window this member owns and holds a cap in is merged:
			// it is synced with itself under this view (counters.Owner's
			// synced).
			e.owner.Acknowledge(now, e.cfg.Name, 0, e.view.Load(), false)
		}
	}
	// Under the lease policy every other member gets a batch, empty if need
	// be: a heartbeat that keeps this member in contact with it as an
	// owner, and, after a membership change, tells it this member has
	// nothing else to report.
	if e.cfg.Central == "" && e.cfg.Policy == PolicyLease && full {
		for _, m := range e.Members() {
			if m != e.cfg.Name && r.batch(m) == nil {
				r.add(&Batch{Owner: m, Req: r.request(m)})
			}
		}
	}
	var view uint64
	if full {
		view = e.view.Load()
	}
	out := r.batches
	for _, b := range out {
		if b.enc != nil {
			b.enc.finish(b.Req)
		}
		l := r.links[b.Owner]
		if full && l != nil {
			l.reported.Store(int64(len(b.refs)))
		}
		switch {
		case full && !b.partial:
			// Every window this member holds a cap in: it covers its
			// acknowledgement whatever came before.
			b.Req.View, b.Req.AckCovers = view, true
			if l != nil {
				l.uncovered.Store(false)
			}
		case !full && l != nil:
			// The windows whose caps were lowered below their counts went
			// with it (riders), unless some missed a batch before.
			b.Req.AckCovers = !l.uncovered.Load()
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Owner < out[j].Owner })
	return out
}

// touchDicts asks for the dictionary slots the entries ens were defined at
// for their owners (the encoder's check that an entry is defined in its
// owner's dictionary, and this member's own with its owner's handle), with
// no other work in between, so that their loads from memory overlap: a
// table's order is not the order its series were first sent in, and one
// at a time each waited for its memory (in TestMillionTenants, 8% of a
// process's sync CPU). The indexes are read without the entries' locks
// (WireHint): one that is stale asks for a slot for nothing.
func (r *round) touchDicts(ens []*counters.Entry, owners []string, oks []bool) {
	var x byte
	for i, en := range ens {
		if !oks[i] {
			continue
		}
		w := int(en.WireHint()) - 1
		if w < 0 {
			continue
		}
		if r.local != nil && owners[i] == r.e.cfg.Name {
			if d := &r.e.local; w < len(d.ents) && w < len(d.series) {
				x ^= prefetch.Lines(unsafe.Pointer(&d.ents[w]), unsafe.Sizeof(d.ents[w]))
				x ^= prefetch.Lines(unsafe.Pointer(&d.series[w]), unsafe.Sizeof(d.series[w]))
			}
		} else if b := r.batch(owners[i]); b != nil && b.enc != nil {
			if d := b.enc.d; w < len(d.ents) {
				x ^= prefetch.Lines(unsafe.Pointer(&d.ents[w]), unsafe.Sizeof(d.ents[w]))
				x ^= prefetch.Lines(unsafe.Pointer(&d.thr[w]), unsafe.Sizeof(d.thr[w]))
			}
		}
	}
	runtime.KeepAlive(x)
}

// round is one prepare's state.
type round struct {
	e              *Engine
	sent           time.Time // on the member's own clock (Batch.sent)
	now            time.Time
	nowNs          int64
	epoch          uint64
	all, full      bool
	rideOnly       bool // series go only in batches already begun (prepare's riders)
	members, index int  // the static share's (counters.Table.Share)
	perOwner       int
	links          map[string]*link
	// batches are the round's, in the order they were begun; byOwner
	// finds them by owner once there are more than a few.
	batches []*Batch
	byOwner map[string]*Batch
	// local gathers the windows this member owns (nil with a central
	// store), self is this member's run as the owner of their answers.
	local *localRound
	self  counters.PeerID
}

// localChunk is how many windows this member owns a round gathers before
// it merges them (Owner.ReportAll): the owner reads a few at once.
const localChunk = 32

// localRound holds the windows this member owns that a round gathered and
// has not merged yet, in buffers kept from round to round (the engine's
// wireMu guards them): refs, their reports and their places in the local
// dictionary.
type localRound struct {
	refs []ref
	reps []counters.Report
	idx  []int32
	ans  []counters.Answer
}

// batchScan is how many batches a round finds by scanning them: a cluster
// of a few members compares a name or two per window, not a hash.
const batchScan = 8

// batch returns the round's batch to owner, or nil.
func (r *round) batch(owner string) *Batch {
	if r.byOwner != nil {
		return r.byOwner[owner]
	}
	for _, b := range r.batches {
		if b.Owner == owner {
			return b
		}
	}
	return nil
}

// add adds a batch to the round, sent at the round's time.
func (r *round) add(b *Batch) {
	b.sent = r.sent
	r.batches = append(r.batches, b)
	if r.byOwner != nil {
		r.byOwner[b.Owner] = b
	} else if len(r.batches) > batchScan {
		r.byOwner = make(map[string]*Batch, 2*len(r.batches))
		for _, b := range r.batches {
			r.byOwner[b.Owner] = b
		}
	}
}

// series adds the windows of en to report to the batch of its owner, or
// to the windows this member owns.
func (r *round) series(en *counters.Entry, owner string) {
	e := r.e
	en.Lock()
	defer en.Unlock()
	if en.Dead() {
		return
	}
	e.table.AdvanceCarried(en, r.now)
	// The windows this member owns are gathered for its own owner, with no
	// call (mergeLocal); with a central store every window goes to the
	// store, whatever this member's name.
	local := r.local != nil && owner == e.cfg.Name
	if r.rideOnly && (local || r.batch(owner) == nil) {
		if l := r.links[owner]; !local && l != nil {
			l.uncovered.Store(true)
		}
		return
	}
	var b *Batch // the owner's batch; nil while none is needed yet, or for the windows this member owns
	var buf counters.Slot
	prev := en.Previous(&buf) // a copy: Store keeps the demand put in flight below
	for _, s := range [2]*counters.Slot{prev, en.Current()} {
		if s == nil {
			continue // the previous window held nothing (Entry.Previous)
		}
		carried := s.HasGrant && s.GlobalAt() == 0 // a carried lease no owner answered here yet
		// A lease beyond the count is reported too, traffic or not, so
		// that the owner can take back what an idle member holds (on a
		// sliding tier the lease caps the count plus the weighted
		// previous window, so a member whose client moved away holds
		// one until the owner lowers it).
		holds := s == en.Current() && s.HasGrant && s.Granted > s.Own
		if s.Own == 0 && s.Demand == 0 && !carried && !holds {
			continue // no traffic in this window
		}
		// The current window is reported every interval while it has
		// traffic, as in the seed: the answer refreshes the global total
		// (others keep admitting), and under leases a quiet instance's
		// zero demand lets the owner move its budget to busier ones. The
		// previous window only when something changed or its owner did.
		if !r.all && s != en.Current() && s.Own == s.Acked && s.Demand == 0 && s.Epoch == uint32(r.epoch) {
			continue
		}
		if !local {
			if b == nil {
				if b = r.batch(owner); b == nil {
					b = r.begin(owner)
				}
			}
			if len(b.refs) >= e.cfg.MaxBatch {
				r.leftOut(b, en)
				continue // waits for the next interval
			}
		}
		var wi int64 // the series' index in the owner's dictionary
		if b != nil && b.enc != nil {
			var ok bool
			if wi, ok = b.enc.index(en); !ok {
				r.leftOut(b, en)
				continue // its definition waits for the next interval
			}
		}
		capv, has := r.capOf(en, s)
		switch {
		case local:
			li := e.local.index(en)
			l := r.local
			l.refs, l.reps, l.idx = r.ref(l.refs, en, s), append(l.reps, counters.Report{}), append(l.idx, li)
			rep := &l.reps[len(l.reps)-1]
			report(rep, e.table, en, s, capv, has)
			rep.Series, rep.Local = e.local.series[li], en
		case b.enc != nil:
			b.refs = r.ref(b.refs, en, s)
			b.enc.add(wi, int64(en.PeriodOf()), s, capv, has)
		default:
			b.refs = r.ref(b.refs, en, s)
			var rep counters.Report
			report(&rep, e.table, en, s, capv, has)
			b.Req.Reports = append(b.Req.Reports, toWire(&rep))
		}
		s.Demand = 0 // in flight; Fail puts it back
	}
	if prev != nil {
		en.Store(prev)
	}
}

// ref appends the ref of the window of s to refs, filled in place (see
// readTotal).
func (r *round) ref(refs []ref, en *counters.Entry, s *counters.Slot) []ref {
	refs = append(refs, ref{})
	f := &refs[len(refs)-1]
	f.e, f.start, f.own, f.demand, f.epoch = en, s.Start, s.Own, s.Demand, r.epoch
	return refs
}

// begin begins the round's batch to owner.
func (r *round) begin(owner string) *Batch {
	e := r.e
	b := &Batch{Owner: owner, Req: r.request(owner)}
	n := r.perOwner
	if l := r.links[owner]; l != nil && r.full {
		if last := int(l.reported.Load()); last > n {
			n = min(last+last/16, e.cfg.MaxBatch)
		}
	}
	b.refs = e.spare.refs.take(n)
	if e.cfg.Central == "" && r.links[owner] != nil && r.links[owner].packed.Load() {
		b.enc = e.newEncoder(owner, r.nowNs, n)
	} else {
		b.Req.Reports = make([]*peerpb.Report, 0, n)
	}
	r.add(b)
	return b
}

// request returns a new request to owner, acknowledging the newest answer
// of owner this member applied. Made before any of the batch's windows is
// read: their reports count what was admitted under the grants of that
// answer and earlier ones (counters.Report.Ack).
func (r *round) request(owner string) *peerpb.SyncRequest {
	members, _ := r.e.table.Share()
	req := &peerpb.SyncRequest{Origin: r.e.cfg.Name, Incarnation: r.e.cfg.Incarnation, Members: uint32(min(max(members, 0), MaxMembers))}
	if l := r.links[owner]; l != nil {
		req.Ack = l.ack.Load()
	}
	return req
}

// leftOut notes that a round left en out of b (b was full): b is not
// complete, and a full round's next one starts from en.
func (r *round) leftOut(b *Batch, en *counters.Entry) {
	b.partial = true
	if r.full {
		r.e.resume.CompareAndSwap(0, en.Hash())
	}
}

// capOf returns the cap this member may reach in the window of s without
// asking, as it reports it: its grant, or its static share while it falls
// back to it, or what it has; and whether it is a grant. en must be
// locked.
func (r *round) capOf(en *counters.Entry, s *counters.Slot) (int64, bool) {
	e := r.e
	if safe, ok := e.table.RestrictedCap(en, s); ok {
		return safe, false // whatever it holds, it spends no more
	}
	if s.HasGrant {
		return s.Granted, true
	}
	if s.Fallback {
		return counters.StaticShare(en.Threshold(), int(s.FallbackMembers), int(s.FallbackIndex), en.Hash()), false
	}
	if _, fallback := e.contactWith(en.Hash(), s.Start); fallback || e.cfg.Policy != PolicyLease {
		return counters.StaticShare(en.Threshold(), r.members, r.index, en.Hash()), false
	}
	return s.Own, false
}

// report fills rep, a zero Report, with the report of the window of s and
// its cap (in place: see readTotal). en must be locked.
func report(rep *counters.Report, tb *counters.Table, en *counters.Entry, s *counters.Slot, capv int64, has bool) {
	rep.Key = key(en, s.Start)
	rep.Threshold, rep.Algorithm = en.Threshold(), en.Algorithm()
	rep.Own, rep.Demand = s.Own, s.Demand
	rep.Cap, rep.HasGrant, rep.Carry = capv, has, has && s.Carry
	rep.CapFrom, rep.CapFromIncarnation = tb.Peer(s.GrantFrom)
	rep.KnownGlobal, rep.KnownAcked, rep.KnownHead = s.Global, s.Acked, int64(s.Head)
	rep.KnownFrom, rep.KnownFromIncarnation = tb.Peer(s.From)
}

// mergeLocal merges the windows this member owns that the round gathered
// (Owner.ReportAll) and applies the answers. Their counts were read a
// little before, and requests decided since, under the caps held before:
// like another member's batch, the merge is numbered (Owner.Hello), and
// the owner holds the old caps for this member until it hears the counts
// the windows reached by the time their grants were applied
// (Owner.Merged).
func (r *round) mergeLocal() {
	e, l := r.e, r.local
	if len(l.refs) == 0 {
		return
	}
	if cap(l.ans) < len(l.reps) {
		l.ans = make([]counters.Answer, len(l.reps), cap(l.reps))
	}
	ans := l.ans[:len(l.reps)]
	seq := e.owner.Hello(r.now, e.cfg.Name)
	e.owner.ReportAll(r.now, e.cfg.Name, e.cfg.Incarnation, l.reps, ans)
	for k := range l.refs {
		e.local.series[l.idx[k]] = l.reps[k].Series
		l.reps[k].Own = max(l.reps[k].Own, apply(nil, r.nowNs, &l.refs[k], &ans[k], r.self, math.MinInt64, true))
	}
	e.owner.Merged(r.now, e.cfg.Name, e.cfg.Incarnation, seq, l.reps)
	clear(l.refs) // keeps no series alive
	clear(l.reps)
	l.refs, l.reps, l.idx = l.refs[:0], l.reps[:0], l.idx[:0]
}

func key(en *counters.Entry, start int64) counters.Key {
	t, ep, m, p := en.Identity()
	return counters.Key{Tenant: t, Endpoint: ep, Method: m, Period: p, WindowStart: start}
}

// Release gives the batch's buffers back to the engine, for its later
// rounds to reuse (the collector then need not sweep them every interval).
// Call it once Apply or Fail is done with the batch and its request is
// sent; the batch and its request are not to be used after it. A batch
// never released is collected as usual.
func (e *Engine) Release(b *Batch) {
	if b == nil {
		return
	}
	e.spare.refs.put(b.refs)
	if b.enc != nil {
		e.spare.bytes.put(b.enc.buf)
		e.spare.bytes.put(b.enc.heads)
		b.enc.buf, b.enc.heads = nil, nil
	}
	b.refs, b.Req = nil, nil
}

// spareBufs holds a few buffers of released batches: their refs and their
// packed requests.
type spareBufs struct {
	refs  spares[ref]
	bytes spares[byte]
}

// spares holds a few empty slices of one kind for reuse. It is safe for
// concurrent use.
type spares[T any] struct {
	mu   sync.Mutex
	kept [][]T
}

// spareKeep bounds the buffers of each kind kept: a round's batches, one
// per owner, on a cluster of a few members.
const spareKeep = 8

// take returns an empty slice with room for n, if one of about that size
// was kept, or a new one.
func (sp *spares[T]) take(n int) []T {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for i := len(sp.kept) - 1; i >= 0; i-- {
		if b := sp.kept[i]; cap(b) >= n && cap(b) <= 2*n+1024 {
			sp.kept = slices.Delete(sp.kept, i, i+1)
			return b
		}
	}
	return make([]T, 0, n)
}

// put keeps b for a later take, emptied (so that it keeps nothing it
// points to alive), unless enough larger ones are kept.
func (sp *spares[T]) put(b []T) {
	if cap(b) == 0 {
		return
	}
	clear(b)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if len(sp.kept) < spareKeep {
		sp.kept = append(sp.kept, b[:0])
		return
	}
	// Full: b takes the place of the smallest kept if it is larger, so
	// that the buffers of a table that grew (rounds of a few series at
	// first, of all of them later) do not hold every place and leave each
	// round to allocate its batches anew.
	small := 0
	for i, k := range sp.kept {
		if cap(k) < cap(sp.kept[small]) {
			small = i
		}
	}
	if cap(b) > cap(sp.kept[small]) {
		sp.kept[small] = b[:0]
	}
}

// Apply records an owner's answer to a batch.
func (e *Engine) Apply(now time.Time, b *Batch, resp *peerpb.SyncResponse) error {
	if resp != nil {
		e.clock.sample(b.Owner, resp.Clock, b.sent, now)
	}
	now = e.clock.at(now)
	if resp != nil {
		e.noteRun(b.Owner, resp.Incarnation, now)
		if resp.PreviousRunMs > 0 {
			e.owner.PreviousRun(time.UnixMilli(resp.PreviousRunMs))
		}
	}
	if b.enc != nil && resp != nil {
		return e.applyPacked(now, b, resp)
	}
	if resp == nil || len(resp.Totals) != len(b.refs) {
		e.Fail(now, b)
		return fmt.Errorf("node: owner %s answered %d totals for %d reports", b.Owner, len(resp.GetTotals()), len(b.refs))
	}
	after, err := e.declineAfter(resp, len(b.refs))
	if err != nil {
		e.Fail(now, b)
		return fmt.Errorf("node: owner %s answered a malformed answer: %v", b.Owner, err)
	}
	nowNs := now.UnixNano()
	if l := e.answeredBy(b.Owner, nowNs); l != nil {
		l.packed.Store(resp.PackedOk)
	}
	from := e.table.PeerID(b.Owner, resp.Incarnation)
	for i := range b.refs {
		t := resp.Totals[i]
		apply(e.table, nowNs, &b.refs[i], &counters.Answer{Global: t.Global, Grant: t.Grant, HasGrant: t.HasGrant, Carry: t.Carry, Spare: t.Spare, Prompt: t.Prompt}, from, declined(after, i), false)
	}
	e.acknowledge(b.Owner, resp.Seq)
	return nil
}

// acknowledge records that this member applied the answer numbered seq of
// owner, grants and all: its next batches to owner acknowledge it, and
// their reports count what was admitted under those grants. Never before
// the grants are applied.
func (e *Engine) acknowledge(owner string, seq uint64) {
	if l := (*e.links.Load())[owner]; l != nil {
		l.ack.Store(seq)
	}
}

// touch asks for every entry refs name (counters.Entry.Prefetch), then
// their previous windows' slots (PrefetchPast), with no lock in between,
// so that their loads from memory overlap before each is locked in turn.
func touch(refs []ref) {
	var x byte
	for i := range refs {
		x ^= refs[i].e.Prefetch()
	}
	for i := range refs {
		x ^= refs[i].e.PrefetchPast()
	}
	runtime.KeepAlive(x)
}

// answeredBy records that owner answered a batch at nowNs, and returns
// its link (nil if it has none).
func (e *Engine) answeredBy(owner string, nowNs int64) *link {
	l := (*e.links.Load())[owner]
	if l != nil {
		l.lastAnswer.Store(nowNs)
		l.answered.Store(nowNs)
	}
	return l
}

// apply records an owner's answer to the report r in its window, and
// returns the window's count then (0 if the window is gone). With t, a
// window whose cap the answer lowered below that count rides along with
// the next sync asked for at once (Table.MarkRiding), and an answer
// without a grant lets a window that began after declineAfter fall back
// to its static share (Table.Declined; see declineAfter). merged says the
// answer is this member's own owner's, to a merge (see mergeLocal): the
// owner then counts what the window has admitted by now (Owner.Merged),
// and the window says so (Slot.CountedBy).
func apply(t *counters.Table, nowNs int64, r *ref, a *counters.Answer, from counters.PeerID, declineAfter int64, merged bool) (own int64) {
	r.e.Lock()
	defer r.e.Unlock()
	var buf counters.Slot
	s := r.e.Slot(r.start, &buf)
	if s == nil {
		return 0 // the window rolled away meanwhile
	}
	if r.own > s.Acked {
		s.Acked = r.own
	}
	if a.Global >= s.Acked { // never believe a total below what we know we added
		s.Global = a.Global
	} else {
		s.Global = max(s.Global, s.Acked)
	}
	if merged {
		s.CountedBy(s.Own)
	}
	s.SetGlobalAt(nowNs)
	s.Epoch = uint32(r.epoch)
	s.From = from
	if a.HasGrant {
		if t != nil && s.Own > r.own && s.Own+r.e.PrevWeighted(r.start, nowNs) > a.Grant {
			// A cap lowered below what the window admitted since its
			// report (on a sliding tier the cap bounds the count plus the
			// weighted window before, as the admissions did): the owner
			// holds the old cap back for this member until a report made
			// after this answer says how much that is, so the window goes
			// with the next sync that others' requests ask for
			// (PrepareAsking), or that sync does not cover its
			// acknowledgement.
			t.MarkRiding(r.e)
		}
		if t != nil && a.Prompt && s.HasGrant && a.Grant < s.Granted {
			// Another member waits for the budget the old cap holds: the
			// window goes in a sync asked for at once (Engine.Prompted).
			t.MarkPrompt(r.e)
		}
		s.Granted, s.HasGrant, s.Carry = a.Grant, true, a.Carry
		s.SetGrantedAt(nowNs)
		s.Fallback = false
		s.GrantFrom = from
	}
	if !a.HasGrant && t != nil && s.Start > declineAfter {
		t.Declined(s)
	}
	s.Spare, s.Informed = counters.Sat32(a.Spare), r.demand > 0
	s.Head = counters.Sat32(a.Head)
	r.e.Store(s) // a copy, if the answer is for the previous window
	return s.Own
}

// Fail returns a batch's demand to its windows after a failed call; the
// counts themselves are cumulative and go again in the next batch.
func (e *Engine) Fail(now time.Time, b *Batch) {
	if l := (*e.links.Load())[b.Owner]; l != nil {
		l.uncovered.Store(true) // its riders' reports are lost
	}
	for i := range b.refs {
		r := &b.refs[i]
		r.e.Lock()
		r.e.AddDemand(r.start, r.demand)
		r.e.Unlock()
	}
}
