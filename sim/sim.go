package sim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/node"
	"github.com/peerlimit/peerlimit/peerpb"
	"github.com/peerlimit/peerlimit/ring"
	"google.golang.org/protobuf/proto"
)

// Policy is a sync policy the simulator can run: the three of node.Engine,
// and Central, the model of seed 000's central store. The zero value is not
// a policy (Run rejects it).
type Policy string

// The policies.
const (
	Optimistic Policy = "optimistic"
	Static     Policy = "static"
	Lease      Policy = "lease"
	// LeaseMajority is the lease policy with the other partition rule,
	// node.PartitionMajority (Lease runs the default, node.PartitionReserve).
	LeaseMajority Policy = "lease-majority"
	// Central is seed 000's design: every instance admits with the
	// optimistic rule and, every sync interval, adds its delta per key to
	// one central counter (INCRBY) and reads the total back.
	Central Policy = "central"
)

// Policies returns every policy, in the order results list them.
func Policies() []Policy { return []Policy{Optimistic, Static, Lease, LeaseMajority, Central} }

// ParsePolicy maps a name to a Policy.
func ParsePolicy(s string) (Policy, error) {
	p := Policy(s)
	if slices.Contains(Policies(), p) {
		return p, nil
	}
	return "", fmt.Errorf("sim: unknown policy %q (want optimistic, static, lease, lease-majority or central)", s)
}

// base is the Unix time of virtual time 0: a whole hour, so that every
// window of every period that divides an hour starts with the run.
const base = int64(1_699_999_200) * int64(time.Second)

// Stats describes a run's cost. A plain value.
type Stats struct {
	// Decisions is the number of requests decided; Events the number of
	// events processed; Wall the real time the run took.
	Decisions int64
	Events    int64
	Wall      time.Duration
	// Lost counts messages lost at random, Cut those dropped by a
	// partition, Duplicates the extra copies delivered, Timeouts the
	// batches failed after a sync interval without an answer, Rejected the
	// batches an owner refused (e.g. a member it does not know yet),
	// ApplyErrors the answers Apply refused.
	Lost, Cut, Duplicates, Timeouts, Rejected, ApplyErrors int64
	// Evicted counts series evicted from local tables (the sizing should
	// make it 0).
	Evicted int64
	// Pending counts the requests whose lease decision was pending and
	// that waited for the owner's answers (Scenario.PendingWait), and
	// PendingAdmitted those admitted after the wait; PendingWait is their
	// total wait and PendingWaitMax the longest, in virtual time.
	Pending, PendingAdmitted    int64
	PendingWait, PendingWaitMax time.Duration
	// Retries counts the denied requests the clients retried after the
	// Retry-After they were given (traffic retry=once), RetriesDenied
	// those denied again, and RetriesWronglyDenied those of them the
	// window still had room for when it ended (the Retry-After did not tell
	// the truth).
	Retries, RetriesDenied, RetriesWronglyDenied int64
}

// retry is a client's second try of a denied request.
type retry struct {
	stream *stream
	inst   *instance
}

// DecisionsPerSecond returns simulated decisions per second of real time.
func (s Stats) DecisionsPerSecond() float64 {
	if s.Wall <= 0 {
		return 0
	}
	return float64(s.Decisions) / s.Wall.Seconds()
}

// newWorld builds the world of a run of sc under p with seed, set up and
// ready to run from virtual time 0.
func newWorld(sc *Scenario, p Policy, seed uint64) (*world, error) {
	w := &world{
		sc:     sc,
		policy: p,
		sync:   int64(sc.Sync),
		end:    int64(sc.Duration),
		net:    rand.New(rand.NewPCG(seed, 2)),
		mem:    rand.New(rand.NewPCG(seed, 3)),
		byName: map[string]*instance{},
		store:  map[counters.Key]int64{},
		drop:   map[[2]string]bool{},
	}
	w.storeInst = &instance{w: w, name: "store", up: true, idx: -1}
	if err := w.setup(seed); err != nil {
		return nil, err
	}
	return w, nil
}

// runUntil dispatches the events before virtual time until (at most the
// run's end), leaving the later ones queued as they were.
func (w *world) runUntil(until int64) error {
	until = min(until, w.end)
	for w.q.len() > 0 && w.q.peek().at < until {
		e := w.q.pop()
		w.vt = e.at
		w.stats.Events++
		if err := w.dispatch(e); err != nil {
			return err
		}
	}
	return nil
}

// Run simulates sc under one policy with the given seed and returns the
// measured result. Runs are deterministic: the same scenario, policy and
// seed give the same result. Run is safe to call from several goroutines on
// the same Scenario; each run is single-threaded.
func Run(sc *Scenario, p Policy, seed uint64) (*Result, error) {
	if _, err := ParsePolicy(string(p)); err != nil {
		return nil, err
	}
	start := time.Now()
	w, err := newWorld(sc, p, seed)
	if err != nil {
		return nil, err
	}
	if err := w.runUntil(w.end); err != nil {
		return nil, err
	}
	// Requests still waiting when the run ends are decided then.
	w.vt = w.end - 1
	for _, in := range w.insts {
		for _, p := range in.parked {
			if !p.done && in.eng != nil && in.gen == p.gen {
				w.pendingDeadline(p)
			}
		}
	}
	for _, in := range w.insts {
		w.countEvictions(in)
	}
	w.stats.Wall = time.Since(start)
	return w.result(), nil
}

type world struct {
	sc     *Scenario
	policy Policy
	sync   int64
	end    int64
	vt     int64     // virtual time, ns since the start
	woken  []*parked // retryParked's scratch
	q      queue
	net    *rand.Rand // latency, loss, duplication
	mem    *rand.Rand // clock skew, tick phases, detection jitter

	insts     []*instance
	byName    map[string]*instance
	storeInst *instance
	joinGroup int // the group new members land in (a partition's first side)

	store    map[counters.Key]int64 // the central store's counters
	drop     map[[2]string]bool     // one-way cuts: (from, to) pairs whose messages are dropped
	series   []*series
	messages int64
	bytes    int64
	stats    Stats
	// shift is added to virtual time to count requests in windows: the
	// initial members' median clock offset under Scenario.MedianClock, else 0.
	shift int64
}

// instance is one simulated member.
type instance struct {
	w    *world
	idx  int
	name string
	up   bool // running and a member
	// leaving is the stage of a graceful shutdown: 1 while the final sync
	// is in flight, 2 while the handoff batches are.
	leaving int
	gen     uint64 // bumped on every crash, leave and restart
	inc     uint64 // incarnation of the running engine
	offset  int64  // clock skew, ns
	group   int    // partition side; 0 when healed
	// staleUntil: until then its view keeps the running members it was
	// cut off from (Scenario.DetectSide).
	staleUntil int64
	// hostDown: it crashed with its host (Event.Host), so calls to it go
	// unanswered; a member down otherwise refuses them (errRefused).
	hostDown bool

	eng   *node.Engine    // optimistic, static, lease
	tab   *counters.Table // central
	round []*flight       // the batches of the last sync round
	view  []string        // the membership the engine was last given
	phase int64           // tick phase within the sync interval

	// Requests waiting for the owner's answers (pending lease decisions),
	// in arrival order; kick asks for a round as soon as the open one
	// ends, and lastKick rate-limits kicks as the node does.
	parked []*parked
	// waiters indexes the parked requests by the owner whose call's end
	// wakes them (anyCall: every call's), as node.Node.callWaiters does;
	// an entry whose request was decided again since is stale (ver).
	waiters  map[string][]waiter
	seq      uint64 // parked requests so far, their arrival order
	kick     bool
	lastKick int64
	kickAt   int64 // when a deferred kick is due (0: none)
	fullDue  bool  // a tick found a round open: the full round follows it
}

// parked is a request whose lease decision was pending, waiting for the
// instance's next sync calls to end (or its deadline).
type parked struct {
	inst     *instance
	gen      uint64
	stream   *stream
	series   *series
	arrived  int64
	deadline int64
	retried  bool // a client's retry
	done     bool
	// owners are the owners of its series at its last decision, and every
	// whether each call's end may change it (node.Engine.WakeOn): it is
	// decided again when a call to one of them ends (see retryParked).
	owners []string
	every  bool
	seq    uint64 // arrival order among the instance's parked requests
	ver    uint32 // bumped when it is decided again: its old waiters are stale
}

// waiter is a parked request in instance.waiters, current while the
// request's ver is still ver.
type waiter struct {
	p   *parked
	ver uint32
}

// anyCall keys in instance.waiters the requests woken at any call's end.
const anyCall = ""

// wait indexes p under the owners whose calls' ends wake it.
func (in *instance) wait(p *parked) {
	if in.waiters == nil {
		in.waiters = make(map[string][]waiter)
	}
	if p.every {
		in.waiters[anyCall] = append(in.waiters[anyCall], waiter{p, p.ver})
		return
	}
	for _, o := range p.owners {
		in.waiters[o] = append(in.waiters[o], waiter{p, p.ver})
	}
}

// serving reports whether the load balancer sends the instance requests:
// it is running and not shutting down.
func (in *instance) serving() bool { return in.up && in.leaving == 0 }

// now returns the instance's clock: virtual time plus its skew.
func (in *instance) now() time.Time { return time.Unix(0, base+in.w.vt+in.offset) }

// flight is one sync call in progress: an engine batch to one owner, or one
// key's delta to the central store.
type flight struct {
	inst   *instance
	gen    uint64
	sentAt int64
	done   bool
	batch  *node.Batch
	// central
	entry   *counters.Entry
	key     counters.Key
	sentOwn int64
	demand  int64
}

// errRefused answers a call to a member whose process stopped on a host
// that is up: the connection is refused.
var errRefused = errors.New("sim: connection refused")

type message struct {
	resp   bool
	from   *instance
	to     *instance
	flight *flight
	req    *peerpb.SyncRequest
	answer *peerpb.SyncResponse
	err    error
	delta  int64 // central request
	total  int64 // central answer
}

func (w *world) setup(seed uint64) error {
	sc := w.sc
	// Timeline first: at equal times, faults run before the traffic.
	for i := range sc.Timeline {
		w.q.push(&event{at: int64(sc.Timeline[i].At), kind: evFault, fault: &sc.Timeline[i]})
	}
	for i := 0; i < sc.Instances; i++ {
		w.newInstance(memberName(i))
	}
	for _, in := range w.insts {
		in.up = true // the initial members all know each other from the start
	}
	if sc.MedianClock {
		// The clock the engines bring their members' clocks to, once all
		// of them have heard each other.
		offs := make([]int64, len(w.insts))
		for i, in := range w.insts {
			offs[i] = in.offset
		}
		w.shift = node.Median(offs)
	}
	for _, in := range w.insts {
		if err := w.start(in, false); err != nil {
			return err
		}
	}
	bySeries := map[[2]string]*series{}
	nstream := uint64(0)
	for i := range sc.Traffic {
		tr := &sc.Traffic[i]
		sla := sc.sla(tr.SLA)
		to := int64(tr.To)
		if to == 0 || to > w.end {
			to = w.end
		}
		for _, tenant := range tr.Tenants {
			s := bySeries[[2]string{tenant, tr.SLA}]
			if s == nil {
				s = newSeries(tenant, sla, sc.Duration)
				bySeries[[2]string{tenant, tr.SLA}] = s
				w.series = append(w.series, s)
			}
			st := &stream{
				tr:     tr,
				series: s,
				rng:    rand.New(rand.NewPCG(seed, 1<<32+nstream)),
				from:   int64(tr.From),
				to:     to,
				burstP: int64(sla.longest()),
			}
			nstream++
			x := st.draw()
			if !tr.Poisson {
				x = st.rng.Float64() // a random phase for even arrivals
			}
			if at := st.next(st.from, x); at >= 0 {
				w.q.push(&event{at: at, kind: evArrival, stream: st})
			}
		}
	}
	return nil
}

// tableConfig sizes the local counter tables to the scenario: one shard
// (a run is single-threaded: nothing contends) holding four times its
// series, so that nothing is ever evicted (Stats.Evicted checks it), and no
// larger, since Prepare and Sweep scan a table's whole capacity.
func (w *world) tableConfig() counters.Config {
	cfg := counters.DefaultConfig()
	n := 0
	for _, tr := range w.sc.Traffic {
		n += len(tr.Tenants) * len(w.sc.sla(tr.SLA).Tiers)
	}
	cfg.Shards = 1
	cfg.MaxEntries = max(16, 4*n)
	return cfg
}

func (sc *Scenario) sla(id string) *SLA {
	for i := range sc.SLAs {
		if sc.SLAs[i].ID == id {
			return &sc.SLAs[i]
		}
	}
	return nil
}

func (w *world) newInstance(name string) *instance {
	in := &instance{w: w, idx: len(w.insts), name: name, group: w.joinGroup}
	if off, ok := w.sc.Skew[name]; ok {
		in.offset = int64(off)
	} else if w.sc.SkewRandom > 0 {
		m := int64(w.sc.SkewRandom)
		in.offset = w.mem.Int64N(2*m+1) - m
	}
	w.insts = append(w.insts, in)
	w.byName[name] = in
	return in
}

// start (re)starts an instance with a fresh engine: it joined through a
// seed before serving, so it knows the members on its side at once; the
// others learn about it after the notify delay (when announce is set).
func (w *world) start(in *instance, announce bool) error {
	in.up, in.hostDown = true, false
	in.leaving = 0
	in.gen++
	in.inc = max(in.inc+1, uint64(base+w.vt))
	in.round = nil
	in.view = nil
	if w.policy == Central {
		cfg := w.tableConfig()
		cfg.Policy = counters.Optimistic{}
		tab, err := counters.NewTable(cfg)
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		in.tab = tab
	} else {
		pol, part := node.Policy(w.policy), node.PartitionReserve
		if w.policy == LeaseMajority {
			pol, part = node.PolicyLease, node.PartitionMajority
		}
		eng, err := node.NewEngine(node.EngineConfig{
			Name:         in.name,
			Incarnation:  in.inc,
			Policy:       pol,
			Partition:    part,
			QuorumTerm:   w.sc.QuorumTerm,
			SafeShare:    w.sc.SafeShare,
			Table:        w.tableConfig(),
			Ring:         ring.DefaultConfig(),
			SyncInterval: w.sc.Sync,
			CallTimeout:  w.sc.Sync, // a call is given up at its deadline (Engine.CallDeadline), at most an interval after it was sent
		})
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		in.eng = eng
		w.refresh(in)
	}
	in.phase = w.mem.Int64N(w.sync)
	w.q.push(&event{at: w.vt + in.phase, kind: evTick, inst: in, gen: in.gen})
	if announce {
		w.notifyOthers(in, int64(w.sc.Notify))
	}
	return nil
}

// stop takes an instance down: its engine and all its state are dropped.
// The requests waiting for an answer there end first, so that what the
// clients offered does not depend on the policy: after a graceful leave's
// last sync they are decided once more, as the node's shutdown does; in a
// crash their clients see the connection fail (denied, no Retry-After).
func (w *world) stop(in *instance, delay int64, graceful bool) {
	for _, p := range in.parked {
		switch {
		case p.done:
		case graceful && in.eng != nil:
			w.pendingDeadline(p)
		default:
			w.settle(p, counters.Decision{Tier: -1})
		}
	}
	w.countEvictions(in)
	in.up = false
	in.leaving = 0
	in.gen++
	in.eng, in.tab, in.round, in.view = nil, nil, nil, nil
	in.parked, in.kick, in.waiters = nil, false, nil
	w.notifyOthers(in, delay)
}

func (w *world) countEvictions(in *instance) {
	switch {
	case in.eng != nil:
		w.stats.Evicted += int64(in.eng.Table().Stats().Evicted)
	case in.tab != nil:
		w.stats.Evicted += int64(in.tab.Stats().Evicted)
	}
}

// notifyOthers schedules a membership refresh on every running member but
// except, after delay plus a per-member jitter.
func (w *world) notifyOthers(except *instance, delay int64) {
	w.notifyJitter(except, delay, int64(w.sc.DetectJitter))
}

// notifyJitter is notifyOthers with a jitter in [0, jitter).
func (w *world) notifyJitter(except *instance, delay, jitter int64) {
	for _, in := range w.insts {
		if in.up && in != except {
			w.refreshIn(in, delay, jitter)
		}
	}
}

// refreshIn schedules a membership refresh on in after delay plus a
// jitter in [0, jitter), and returns when.
func (w *world) refreshIn(in *instance, delay, jitter int64) int64 {
	if jitter > 0 {
		delay += w.mem.Int64N(jitter)
	}
	at := w.vt + delay
	w.q.push(&event{at: at, kind: evRefresh, inst: in, gen: in.gen})
	return at
}

// refresh feeds an instance's engine the members it can see now, the way
// gossip's callback does in production: the running members on its side of
// any partition, and until its staleUntil those it was cut off from.
func (w *world) refresh(in *instance) {
	if in.eng == nil {
		return
	}
	var view []string
	stale := w.vt < in.staleUntil
	for _, o := range w.insts {
		if o.up && (w.sees(in, o) || stale && slices.Contains(in.view, o.name)) {
			view = append(view, o.name)
		}
	}
	slices.Sort(view)
	if slices.Equal(view, in.view) {
		return
	}
	in.view = view
	in.eng.SetMembers(in.now(), view)
}

// sees reports whether in and o can reach each other: on the same side
// of any partition, and no cut between them either way.
func (w *world) sees(in, o *instance) bool {
	return o.group == in.group && !w.drop[[2]string{o.name, in.name}] && !w.drop[[2]string{in.name, o.name}]
}

// notifyCut schedules the members' refreshes after a partition or cut: a
// member left with few others on its side (Scenario.DetectSide) sees it
// later than Detect, and keeps the members it lost in its view until then.
func (w *world) notifyCut(detect int64) {
	up := 0
	for _, in := range w.insts {
		if in.up {
			up++
		}
	}
	jitter := int64(w.sc.DetectJitter)
	for _, in := range w.insts {
		if !in.up {
			continue
		}
		in.staleUntil = 0
		if at := w.refreshIn(in, w.cutDelay(in, up, detect), jitter); at > w.vt+int64(w.sc.Detect)+jitter {
			in.staleUntil = at
		}
	}
}

// cutDelay is how long in, one of up running members, takes to see a cut:
// detect, or from four members on, if one to len(DetectSide) members
// (itself included) are left on its side, DetectSide's per member lost.
func (w *world) cutDelay(in *instance, up int, detect int64) int64 {
	if up < 4 {
		return detect
	}
	side := 0
	for _, o := range w.insts {
		if o.up && w.sees(in, o) {
			side++
		}
	}
	if side == up || side > len(w.sc.DetectSide) {
		return detect
	}
	return max(detect, int64(w.sc.DetectSide[side-1])*int64(up-side))
}

func (w *world) dispatch(e *event) error {
	switch e.kind {
	case evArrival:
		w.arrival(e)
	case evTick:
		if e.inst.gen == e.gen && e.inst.up {
			w.tick(e.inst)
		}
	case evRefresh:
		if e.inst.gen == e.gen && e.inst.up {
			w.refresh(e.inst)
		}
	case evDeliver:
		w.deliver(e.msg)
	case evFault:
		return w.fault(e.fault)
	case evPendingDeadline:
		w.pendingDeadline(e.park)
	case evRetry:
		w.retryRequest(e.retry)
	case evCallTimeout:
		w.callTimeout(e.flight)
	case evKick:
		if e.inst.gen == e.gen && e.inst.up {
			e.inst.kickAt = 0
			w.kickSync(e.inst)
		}
	}
	return nil
}

func (w *world) arrival(e *event) {
	st := e.stream
	w.request(st, st.pick(w.insts), false)
	if at := st.next(w.vt, st.draw()); at >= 0 {
		e.at = at
		w.q.push(e)
	}
}

// retryRequest is a client's retry of a denied request, at the instance
// that denied it if it still serves.
func (w *world) retryRequest(r *retry) {
	in := r.inst
	if !in.serving() {
		in = r.stream.pick(w.insts)
	}
	w.stats.Retries++
	w.request(r.stream, in, true)
}

// request decides one request of a stream at an instance (nil: none
// serves), now or, when the lease decision is pending, after the wait.
func (w *world) request(st *stream, in *instance, retried bool) {
	s := st.series
	var d counters.Decision
	d.Tier = -1
	if in != nil {
		var err error
		if in.tab != nil {
			d, err = in.tab.Take(in.now(), s.limits, 1)
		} else {
			d, err = in.eng.Take(in.now(), s.limits, 1)
		}
		if err != nil {
			d = counters.Decision{Tier: -1}
		}
		w.stats.Decisions++
	}
	if d.Pending && w.sc.PendingWait > 0 {
		// As the node does (node.waitPending): the request waits for the
		// next sync round, which is asked for at once, and is decided again
		// when each of its calls ends, for at most PendingWait, even past
		// the end of its window (it is then decided, and charged, in the
		// next one).
		p := &parked{inst: in, gen: in.gen, stream: st, series: s, arrived: w.vt, deadline: w.vt + int64(w.sc.PendingWait), retried: retried}
		p.owners, p.every = in.eng.WakeOn(s.limits, nil)
		p.seq, in.seq = in.seq, in.seq+1
		in.parked = append(in.parked, p)
		in.wait(p)
		w.stats.Pending++
		w.q.push(&event{at: p.deadline, kind: evPendingDeadline, park: p})
		w.kickSync(in)
		return
	}
	w.decided(st, in, w.vt, d, retried)
}

// decided records a request's decision and, for a denied request whose
// client retries, schedules the retry after the Retry-After it was given.
func (w *world) decided(st *stream, in *instance, arrived int64, d counters.Decision, retried bool) {
	st.series.record(arrived+w.shift, w.vt+w.shift, d)
	if d.Allowed {
		return
	}
	if retried {
		w.stats.RetriesDenied++
		st.series.retryDenied(w.vt + w.shift)
		return
	}
	if st.tr.Retry && in != nil && d.RetryAfter > 0 && d.RetryAfter <= time.Minute {
		// The Retry-After header the middleware writes: whole seconds, at
		// least one.
		after := max(time.Second, (d.RetryAfter+time.Second-1)/time.Second*time.Second)
		w.q.push(&event{at: w.vt + int64(after), kind: evRetry, retry: &retry{stream: st, inst: in}})
	}
}

// tick is one sync interval of one instance: time out the calls of the last
// round still unanswered, start a new round if none is left in flight, and
// sweep expired windows.
func (w *world) tick(in *instance) {
	now := in.now()
	open, timedOut := false, false
	for _, f := range in.round {
		if f.done {
			continue
		}
		if w.vt-f.sentAt >= w.sync {
			timedOut = true
			f.done = true
			w.stats.Timeouts++
			if f.batch != nil {
				in.eng.CallGivenUp()
			}
			w.fail(f)
		} else {
			open = true
		}
	}
	if in.leaving > 0 {
		w.advanceLeave(in)
	} else if !open {
		w.startRound(in, false)
		if in.eng != nil {
			in.eng.Sweep(now)
		} else {
			in.tab.Sweep(now)
		}
		// The last round ended with calls timing out: its waiting
		// requests are decided again, as after any round (the node wakes
		// them when a round or a call ends), those still pending asking
		// for a round after this one.
		if timedOut && in.eng != nil {
			w.retryParked(in, "")
		}
	} else {
		in.fullDue = true // after the open round: every interval has its full round
	}
	w.q.push(&event{at: w.vt + w.sync, kind: evTick, inst: in, gen: in.gen})
}

// startRound starts a sync round: one batch per owner (Prepare, whose local
// merges apply at once), or the central deltas; a round asked for by
// pending decisions (asking) reports only their series, as the node does.
func (w *world) startRound(in *instance, asking bool) {
	in.round = in.round[:0]
	in.kick = false
	switch {
	case in.eng != nil && asking:
		w.sendBatches(in, in.eng.PrepareAsking(in.now()))
	case in.eng != nil:
		w.prepareEngine(in, in.now())
	default:
		w.prepareCentral(in, in.now())
	}
	w.roundProgress(in)
}

// roundProgress runs what the end of a round starts, once every call of it
// is answered or failed: the waiting requests are decided again, as the
// node does after SyncOnce (and after each call), and a round asked for
// meanwhile starts.
func (w *world) roundProgress(in *instance) {
	if !w.roundOver(in) {
		return
	}
	if in.eng == nil || in.leaving > 0 {
		return
	}
	w.retryParked(in, "")
	switch {
	case in.fullDue:
		in.fullDue = false
		w.startRound(in, false)
	case in.kick:
		w.startRound(in, true)
	}
}

// kickSync asks for a round at once, as node.Node does for a pending
// request: a round of the series asking for budget only, at least a
// hundredth of the interval after the last one asked for (a kick within
// that is deferred, not dropped), and after the open round if one is.
func (w *world) kickSync(in *instance) {
	if in.eng == nil || in.leaving > 0 || in.kickAt > w.vt {
		return // a kick is already scheduled
	}
	if gap := w.sync / 100; in.lastKick > 0 && w.vt-in.lastKick < gap {
		in.kickAt = in.lastKick + gap
		w.q.push(&event{at: in.kickAt, kind: evKick, inst: in, gen: in.gen})
		return
	}
	in.lastKick = w.vt
	for _, f := range in.round {
		if !f.done {
			in.kick = true // starts when the open round ends
			return
		}
	}
	w.startRound(in, true)
}

// retryParked decides the waiting requests again, as the node wakes them
// (Node.waitPending): when a call to owner ends, those waiting for an
// answer of owner or for any call's end (node.Engine.WakeOn), found
// through instance.waiters, and at a round's end (owner ""), all. Either
// way in arrival order. Those still pending ask for another round.
func (w *world) retryParked(in *instance, owner string) {
	if len(in.parked) == 0 {
		return
	}
	if owner == "" {
		clear(in.waiters) // all are decided again below
		still, asked := in.parked[:0], false
		for _, p := range in.parked {
			if !p.done && w.retry1(in, p) {
				still = append(still, p)
				asked = true
			}
		}
		for i := len(still); i < len(in.parked); i++ {
			in.parked[i] = nil
		}
		in.parked = still
		if asked {
			w.kickSync(in)
		}
		return
	}
	woken := w.woken[:0]
	for _, o := range [2]string{owner, anyCall} {
		for _, wt := range in.waiters[o] {
			if !wt.p.done && wt.p.ver == wt.ver {
				woken = append(woken, wt.p)
			}
		}
		delete(in.waiters, o)
	}
	slices.SortFunc(woken, func(a, b *parked) int { return cmp.Compare(a.seq, b.seq) })
	asked := false
	for i, p := range woken {
		if i > 0 && woken[i-1] == p {
			continue // waiting for two of its owners
		}
		asked = w.retry1(in, p) || asked
	}
	clear(woken)
	w.woken = woken[:0]
	if asked {
		w.kickSync(in)
	}
}

// retry1 decides the parked request p again and reports whether it is
// still pending, waiting again (indexed anew in instance.waiters).
func (w *world) retry1(in *instance, p *parked) bool {
	d, err := in.eng.TakeAgain(in.now(), p.series.limits, 1)
	if err == nil && d.Pending {
		p.owners, p.every = in.eng.WakeOn(p.series.limits, p.owners[:0])
		p.ver++
		in.wait(p)
		return true
	}
	if err != nil {
		d = counters.Decision{Tier: -1}
	}
	w.settle(p, d)
	return false
}

// pendingDeadline ends a request's wait: decided once more, and denied if
// still pending.
func (w *world) pendingDeadline(p *parked) {
	in := p.inst
	if p.done || in.gen != p.gen || in.eng == nil {
		return
	}
	d, err := in.eng.TakeAgain(in.now(), p.series.limits, 1)
	if err != nil {
		d = counters.Decision{Tier: -1}
	}
	if d.Pending { // as the node says: budget may still come
		d.Pending, d.RetryAfter = false, time.Duration(w.sync)
	}
	w.settle(p, d)
}

func (w *world) settle(p *parked, d counters.Decision) {
	p.done = true
	wait := time.Duration(w.vt - p.arrived)
	w.stats.PendingWait += wait
	w.stats.PendingWaitMax = max(w.stats.PendingWaitMax, wait)
	if d.Allowed {
		w.stats.PendingAdmitted++
	}
	w.decided(p.stream, p.inst, p.arrived, d, p.retried)
}

func (w *world) prepareEngine(in *instance, now time.Time) {
	w.sendBatches(in, in.eng.Prepare(now))
}

func (w *world) sendBatches(in *instance, batches []*node.Batch) {
	for _, b := range batches {
		f := &flight{inst: in, gen: in.gen, sentAt: w.vt, batch: b}
		in.round = append(in.round, f)
		w.q.push(&event{at: w.vt + int64(in.eng.CallDeadline(b)), kind: evCallTimeout, flight: f})
		w.send(&message{from: in, to: w.byName[b.Owner], flight: f, req: b.Req})
	}
}

func (w *world) fail(f *flight) {
	in := f.inst
	if f.batch != nil {
		in.eng.Fail(in.now(), f.batch)
		return
	}
	f.entry.Lock()
	f.entry.AddDemand(f.key.WindowStart, f.demand)
	f.entry.Unlock()
}

// send puts a message on the simulated wire. Every transmission counts in
// sync_messages and sync_bytes, delivered or not: a request (and each
// duplicate copy) and each answer.
func (w *world) send(m *message) {
	n := w.sc.Net
	copies := 1
	if !m.resp && n.Dup > 0 && w.net.Float64() < n.Dup {
		copies = 2
		w.stats.Duplicates++
	}
	size := int64(w.size(m))
	for c := 0; c < copies; c++ {
		if m.err != errRefused { // a refusal is the host's reset, not a message
			w.messages++
			w.bytes += size
		}
		if m.to == nil || m.from.group != m.to.group || w.drop[[2]string{m.from.name, m.to.name}] {
			w.stats.Cut++
			continue
		}
		if n.Loss > 0 && w.net.Float64() < n.Loss {
			w.stats.Lost++
			continue
		}
		w.q.push(&event{at: w.vt + w.latency(), kind: evDeliver, msg: m})
	}
}

func (w *world) size(m *message) int {
	switch {
	case m.req != nil:
		return proto.Size(m.req)
	case m.answer != nil:
		return proto.Size(m.answer)
	}
	return 0 // an error status: no payload
}

func (w *world) latency() int64 {
	n := w.sc.Net
	d := float64(n.Latency)
	switch {
	case n.Jitter <= 0:
	case n.JitterDist == "lognormal":
		d += float64(n.Jitter) * math.Exp(n.Sigma*w.net.NormFloat64())
	default:
		d += float64(n.Jitter) * w.net.ExpFloat64()
	}
	return int64(d)
}

func (w *world) deliver(m *message) {
	if m.from.group != m.to.group || w.drop[[2]string{m.from.name, m.to.name}] { // a cut began while in flight
		w.stats.Cut++
		return
	}
	if !m.resp {
		switch {
		case m.to == w.storeInst:
			w.handleStore(m)
		case m.to.up:
			ans, err := m.to.eng.Handle(m.to.now(), m.req)
			if err != nil {
				w.stats.Rejected++
			}
			w.send(&message{resp: true, from: m.to, to: m.from, flight: m.flight, answer: ans, err: err})
		case !m.to.hostDown && m.flight.batch != nil:
			// Its host answers for it: nothing listens there.
			w.send(&message{resp: true, from: m.to, to: m.from, flight: m.flight, err: errRefused})
		}
		return // a request to a member whose host is down is lost
	}
	f := m.flight
	in := f.inst
	if f.done || in.gen != f.gen {
		return // a duplicate's second answer, a late one, or the sender restarted
	}
	f.done = true
	switch {
	case m.err != nil:
		if m.err == errRefused {
			in.eng.Refused(in.now(), m.from.name)
		}
		w.fail(f)
	case f.batch != nil:
		in.eng.CallAnswered(f.batch, time.Duration(w.vt-f.sentAt))
		if err := in.eng.Apply(in.now(), f.batch, m.answer); err != nil {
			w.stats.ApplyErrors++
		}
		if in.eng.Prompted() {
			defer w.kickSync(in) // after the call's end, as the node's kick waits for it
		}
	default:
		w.applyCentral(f, m.total)
	}
	w.callEnded(f)
}

// callEnded runs what the end of a call starts: a shutdown's next stage,
// or the waiting requests decided again, as the node does when each call
// ends, not only once every call of the round has (a call that is lost or
// slow would hold them all until it times out, and a request waiting into
// the next window of a short tier would need a grant there too); then what
// the end of the round starts, if it was the last call.
func (w *world) callEnded(f *flight) {
	in := f.inst
	if in.leaving > 0 {
		w.advanceLeave(in)
		return
	}
	if f.batch != nil && !w.roundOver(in) {
		w.retryParked(in, f.batch.Owner)
	}
	w.roundProgress(in)
}

// callTimeout gives up a sync call at its deadline (Engine.CallDeadline),
// as the node's context deadline does: the call fails, and ends.
func (w *world) callTimeout(f *flight) {
	in := f.inst
	if f.done || in.gen != f.gen || !in.up {
		return
	}
	f.done = true
	w.stats.Timeouts++
	in.eng.CallGivenUp()
	w.fail(f)
	w.callEnded(f)
}

// roundOver reports whether every call of the instance's open round has
// ended.
func (w *world) roundOver(in *instance) bool {
	for _, f := range in.round {
		if !f.done {
			return false
		}
	}
	return true
}

// leave starts a graceful shutdown, as node.Node.Close does: the instance
// stops taking requests, syncs once more with the current owners, then
// sends Engine.Handoff's batches (every window to the owner it will have
// without this member, each marked as leaving), and only when all are
// answered or timed out leaves the cluster; the others see it gone after the
// notify delay.
func (w *world) leave(in *instance) {
	in.leaving = 1
	if in.eng != nil {
		w.prepareEngine(in, in.now())
	} else {
		w.prepareCentral(in, in.now())
	}
	w.advanceLeave(in)
}

// advanceLeave moves a shutdown to its next stage once nothing is in
// flight.
func (w *world) advanceLeave(in *instance) {
	for _, f := range in.round {
		if !f.done {
			return
		}
	}
	in.round = in.round[:0]
	if in.leaving == 1 && in.eng != nil {
		in.leaving = 2
		w.sendBatches(in, in.eng.Handoff(in.now()))
		if len(in.round) > 0 {
			return
		}
	}
	w.stop(in, int64(w.sc.Notify), true)
}

func (w *world) fault(ev *Event) error {
	detect := int64(w.sc.Detect)
	switch ev.Kind {
	case EvPartition:
		gid := map[string]int{}
		rest := 1 // members not named go with the side written "everyone else", else the first
		for i, g := range ev.Groups {
			if g == nil {
				rest = i + 1
			}
			for _, n := range g {
				gid[n] = i + 1
			}
		}
		for _, in := range append(slices.Clone(w.insts), w.storeInst) {
			if g, ok := gid[in.name]; ok {
				in.group = g
			} else {
				in.group = rest
			}
		}
		if _, ok := gid["store"]; !ok {
			w.storeInst.group = 1
			if ev.Groups[0] == nil {
				w.storeInst.group = rest
			}
		}
		w.joinGroup = w.storeInst.group
		w.notifyCut(detect)
	case EvCut:
		for _, from := range ev.Groups[0] {
			for _, to := range ev.Groups[1] {
				w.drop[[2]string{from, to}] = true
			}
		}
		w.notifyCut(detect)
	case EvHeal:
		clear(w.drop)
		for _, in := range w.insts {
			in.group, in.staleUntil = 0, 0
		}
		w.storeInst.group, w.joinGroup = 0, 0
		w.notifyJitter(nil, int64(w.sc.Heal), int64(w.sc.HealJitter))
	case EvCrash:
		if in := w.byName[ev.Name]; in.up {
			w.stop(in, detect, false)
			in.hostDown = ev.Host
		}
	case EvLeave:
		if in := w.byName[ev.Name]; in.up && in.leaving == 0 {
			w.leave(in)
		}
	case EvRestart:
		in := w.byName[ev.Name]
		if in.up { // a restart of a running member: crash and start at once
			w.countEvictions(in)
			in.up = false
		}
		return w.start(in, true)
	case EvJoin:
		in := w.byName[ev.Name]
		if in == nil {
			in = w.newInstance(ev.Name)
		}
		in.group = w.joinGroup
		return w.start(in, true)
	}
	return nil
}
