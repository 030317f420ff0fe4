package node

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/peerpb"
	"github.com/peerlimit/peerlimit/ring"
)

// Policy names an admission policy.
type Policy string

const (
	// PolicyOptimistic is the seed's rule: admit while the last global total
	// plus the own unreported count fits. Overshoots by up to (N-1) x one
	// interval's traffic.
	PolicyOptimistic Policy = "optimistic"
	// PolicyStatic splits every limit evenly: limit / members per instance.
	// Never overshoots; wastes budget when traffic is uneven.
	PolicyStatic Policy = "static"
	// PolicyLease admits within a budget the key's owner grants each
	// instance in proportion to its demand, keeping a reserve for members it
	// cannot hear. The default.
	PolicyLease Policy = "lease"
)

// ParsePolicy maps a name to a Policy.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyOptimistic, PolicyStatic, PolicyLease:
		return p, nil
	case "":
		return PolicyLease, nil
	}
	return "", fmt.Errorf("node: unknown policy %q (want optimistic, static or lease)", s)
}

func (p Policy) rule() counters.Policy {
	switch p {
	case PolicyOptimistic:
		return counters.Optimistic{}
	case PolicyStatic:
		return counters.Static{}
	}
	return counters.Lease{}
}

// Limits on what a peer may send, checked on every inbound batch.
const (
	MaxKeyBytes   = counters.MaxKeyBytes // tenant + endpoint + method
	MaxCount      = int64(1e15)          // any count or threshold
	MaxPeriodMs   = int64(366 * 24 * time.Hour / time.Millisecond)
	MaxOriginSize = 256
	MaxMembers    = 1 << 16 // the members a batch says its sender counts
)

// ErrBadBatch is wrapped by every validation error of an inbound batch.
var ErrBadBatch = errors.New("node: invalid sync batch")

// EngineConfig configures an Engine.
type EngineConfig struct {
	// Name is this member's name in the cluster.
	Name string
	// Incarnation identifies this run of the member: counts restart from
	// zero in a new incarnation and the old ones stay in the totals. Use
	// the start time in nanoseconds.
	Incarnation uint64
	// Policy is the admission policy. Default PolicyLease.
	Policy Policy
	// Table configures the local counters (size bound, grace). Its Policy
	// is replaced by the rule of Policy above.
	Table counters.Config
	// Ring configures key ownership.
	Ring ring.Config
	// MaxBatch bounds the reports in one batch, sent or received. Keys past
	// it wait for the next interval. Default 100,000: about 1 MB between
	// peers (the packed encoding, wire.go: some 10 bytes per window once
	// its owner knows the key; a key's first report also carries its
	// definition, at most 4 MB of them per batch), about 6 MB to a store.
	MaxBatch int
	// MaxPeriod is the longest tier period in use: a member gone for longer
	// stops counting in static shares. Default 1 minute.
	MaxPeriod time.Duration
	// OwnerWindows bounds the windows this member aggregates as an owner.
	// Default 200,000.
	OwnerWindows int
	// SyncInterval and CallTimeout are the node's (Config); the lease
	// policy's timing derives from them: a member is in contact with an
	// owner while it acknowledges answers sent within
	// 3 x SyncInterval + CallTimeout (counters.OwnerConfig.Contact), and a
	// membership change that recent still counts as under way
	// (counters.OwnerConfig.Settle). Defaults 200 ms and 500 ms.
	SyncInterval time.Duration
	CallTimeout  time.Duration
	// ReserveWindows is for how many windows a member that became
	// unreachable is still reserved for (it may be serving behind a
	// partition). See counters.OwnerConfig. Default 3. ReserveMin is the
	// least time it is reserved for, whatever the tier. Default 10 s.
	ReserveWindows int
	ReserveMin     time.Duration
	// Partition, SafeShare, QuorumTerm and QuorumMemory choose how a lost
	// member is told from a partition (lease policy); see Config. Defaults
	// PartitionReserve, 0, 30 s and 5 minutes.
	Partition    Partition
	SafeShare    float64
	QuorumTerm   time.Duration
	QuorumMemory time.Duration
	// Central, if set, names a single place (a backing store) that every
	// window is reported to, instead of its owner on the ring: Prepare then
	// returns one batch, whose Owner is Central, with every changed window.
	Central string
}

// Engine is the node's sync logic as a pure state machine: decisions,
// membership, the batches to send each interval, and the answers to batches
// received. It does no I/O and starts no goroutines; Node drives it with
// gossip, gRPC and tickers, and the simulator drives the very same code on
// virtual time. It is safe for concurrent use.
type Engine struct {
	resume atomic.Uint64 // hash of the first series a full batch left out (Prepare walks from its shard)
	cfg    EngineConfig
	table  *counters.Table
	ring   *ring.Ring
	owner  *counters.Owner

	contact time.Duration // counters.OwnerConfig.Contact
	view    atomic.Uint64 // counters.ViewDigest of alive
	links   atomic.Pointer[map[string]*link]

	mu       sync.Mutex
	alive    []string         // sorted, includes self
	lastSeen map[string]int64 // every member ever seen, last seen alive (Unix ns)
	departed map[string]bool  // members that announced a graceful leave
	// dead maps the members whose process was found stopped (Refused) to
	// when, until they are heard from again; given is the alive list
	// SetMembers last gave, which the view takes them out of. nDead is
	// len(dead), for Handle to read without the lock.
	dead  map[string]int64
	given []string
	nDead atomic.Int32
	// viewMu makes the changes of the view (setMembers) one at a time.
	viewMu sync.Mutex
	runsMu sync.Mutex
	runs   map[string]runSeen // the runs of the members heard from (noteRun)
	// minority is when this member could not reach a majority (the
	// majority rule), newest last; installed is what the table has.
	minority, installed []counters.MinoritySpan

	// The key dictionaries of the packed encoding (wire.go): this
	// member's, one per receiver, and the origins', as received.
	wireMu   sync.Mutex
	dicts    map[string]*sendDict
	sessions uint32 // the last session number given
	// localRound is prepare's buffers for the windows this member owns,
	// kept between rounds; wireMu guards it.
	localRound localRound
	// spare keeps released batches' buffers for later rounds (Release).
	spare spareBufs
	// local keeps the owner's handles of the series this member owns.
	local   localDict
	resyncs atomic.Uint64
	// calls sets when a sync call is given up (CallDeadline).
	calls callTimer
	// clock brings the members' clocks together (clock.go): every time the
	// engine is given is read on it.
	clock  clockSync
	recvMu sync.Mutex
	recv   map[string]*recvDict
}

// link is this member's side of its contact with one other member as an
// owner: when it last got an answer, and the number of that answer, which
// the next batch acknowledges.
type link struct {
	lastAnswer atomic.Int64 // Unix ns; when first seen until the first answer
	answered   atomic.Int64 // Unix ns of the last answer, 0 if none came
	ack        atomic.Uint64
	// uncovered says a window whose cap the owner lowered below what it
	// had admitted may have missed its report since (a batch to the owner
	// failed, or a sync asked for at once had none to it): batches other
	// than full rounds do not cover their acknowledgement
	// (SyncRequest.ack_covers) until a full round is built.
	uncovered atomic.Bool
	packed    atomic.Bool // its last answer said it decodes the packed form
	// reported is how many windows the last full round reported to it:
	// the next one's batch is sized for as many (round.begin), so that an
	// owner with more than an even share of the series does not grow its
	// batch's buffers, kept from round to round, every round.
	reported atomic.Int64
}

// NewEngine returns an engine that knows only itself.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if cfg.Name == "" {
		return nil, errors.New("node: EngineConfig.Name must be set")
	}
	if cfg.Policy == "" {
		cfg.Policy = PolicyLease
	}
	if _, err := ParsePolicy(string(cfg.Policy)); err != nil {
		return nil, err
	}
	cfg.Table.Policy = cfg.Policy.rule() // the engine's policy, whatever the table config says
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 100_000
	}
	if cfg.MaxPeriod <= 0 {
		cfg.MaxPeriod = time.Minute
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = 200 * time.Millisecond
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = max(2*cfg.SyncInterval, 500*time.Millisecond)
	}
	contact := 3*cfg.SyncInterval + cfg.CallTimeout
	if cfg.Partition == "" {
		cfg.Partition = PartitionReserve
	}
	if _, err := ParsePartition(string(cfg.Partition)); err != nil {
		return nil, err
	}
	if cfg.SafeShare < 0 || cfg.SafeShare > 1 || math.IsNaN(cfg.SafeShare) {
		return nil, fmt.Errorf("node: EngineConfig.SafeShare %v must be in [0, 1]", cfg.SafeShare)
	}
	if cfg.QuorumTerm <= 0 {
		cfg.QuorumTerm = 30 * time.Second
	}
	if cfg.QuorumMemory <= 0 {
		cfg.QuorumMemory = 5 * time.Minute
	}
	tb, err := counters.NewTable(cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	rg, err := ring.New(cfg.Ring)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	e := &Engine{
		cfg:   cfg,
		table: tb,
		ring:  rg,
		owner: counters.NewOwner(counters.OwnerConfig{MaxWindows: cfg.OwnerWindows, Grace: cfg.Table.Grace, Lease: cfg.Policy == PolicyLease,
			ReserveWindows: cfg.ReserveWindows, ReserveMin: cfg.ReserveMin, Settle: contact, Contact: contact, Interval: cfg.SyncInterval,
			Majority: cfg.Partition == PartitionMajority, Term: cfg.QuorumTerm, SafeShare: cfg.SafeShare,
			Self: cfg.Name, SelfIncarnation: cfg.Incarnation}),
		contact:  contact,
		lastSeen: map[string]int64{},
		departed: map[string]bool{},
		dead:     map[string]int64{},
		runs:     map[string]runSeen{},
		dicts:    map[string]*sendDict{},
		recv:     map[string]*recvDict{},
	}
	e.links.Store(&map[string]*link{})
	tb.SetContact(e.contactWith)
	// Alone, until a membership comes; as of no time, and owning nothing
	// before it: a member that just started knows no window's past. Taken
	// as ownership of every series since the epoch, it made a member that
	// joins during a window believe it had owned the window's series all
	// along, and grant them whole to itself at its first merge, with the
	// others' counts not in yet (TestEngineLeaseHoldsUnderInterleavings,
	// hour-join).
	e.setMembers(time.Unix(0, 0), []string{cfg.Name}, false)
	return e, nil
}

// contactWith is the table's ContactFunc: how this member stands with the
// owner of a series, for a window starting at start. With a central store
// there are no grants, and every instance admits its static share.
func (e *Engine) contactWith(hash uint64, start int64) (carry, fallback bool) {
	if e.cfg.Central != "" {
		return false, true
	}
	owner, ok := e.ring.Owner(hash)
	if !ok || owner == e.cfg.Name {
		return true, false
	}
	l := (*e.links.Load())[owner]
	if l == nil {
		return true, false // a member just seen: in contact until proven otherwise
	}
	last := l.lastAnswer.Load()
	return last >= start-int64(counters.CarryWithin(e.contact)), last < start-int64(counters.FallbackAfter(e.contact))
}

// Name returns the member name.
func (e *Engine) Name() string { return e.cfg.Name }

// Policy returns the admission policy in force.
func (e *Engine) Policy() Policy { return e.cfg.Policy }

// Table returns the local counters.
func (e *Engine) Table() *counters.Table { return e.table }

// Ring returns the ownership ring.
func (e *Engine) Ring() *ring.Ring { return e.ring }

// Owner returns the aggregator of the windows this member owns.
func (e *Engine) Owner() *counters.Owner { return e.owner }

// Take decides a request from local memory: see counters.Table.Take.
func (e *Engine) Take(now time.Time, limits []counters.Limit, cost int64) (counters.Decision, error) {
	return e.table.Take(e.clock.at(now), limits, cost)
}

// TakeAgain decides again a request whose decision was pending: see
// counters.Table.TakeAgain.
func (e *Engine) TakeAgain(now time.Time, limits []counters.Limit, cost int64) (counters.Decision, error) {
	return e.table.TakeAgain(e.clock.at(now), limits, cost)
}

// WakeOn says when a pending decision (counters.Decision.Pending) of
// limits may change, so that it is decided again then and not at every
// call's end: it appends to dst the owners of their series in the current
// membership view (each once; the store's name with a central store),
// whose answers bring what it waits for, and reports every when each call's
// end may matter: a sliding tier, whose previous window slides out with
// the time alone, or a series this member owns, merged with no call. A
// round's end decides every waiting request again in any case.
func (e *Engine) WakeOn(limits []counters.Limit, dst []string) (owners []string, every bool) {
	if e.cfg.Central != "" {
		return append(dst, e.cfg.Central), false
	}
	owner := e.ring.OwnerFunc()
	start := len(dst)
	for i := range limits {
		every = every || limits[i].Algorithm == counters.Sliding
		o, ok := owner(limits[i].Hash())
		if !ok || o == e.cfg.Name {
			every = true
			continue
		}
		if !slices.Contains(dst[start:], o) {
			dst = append(dst, o)
		}
	}
	return dst, every
}

// SetMembers installs a new membership view: the names of the members alive
// now (self is added if missing). It rebuilds the ring, the static shares
// (counting members gone for less than MaxPeriod, who may still be serving
// behind a partition) and the owner's reserves.
func (e *Engine) SetMembers(now time.Time, alive []string) {
	now = e.clock.at(now)
	e.mu.Lock()
	e.given = slices.Clone(alive)
	e.mu.Unlock()
	e.setMembers(now, alive, true)
}

// Refused tells the engine that a connection to member name was refused
// at now: nothing listens at its address, so its process has stopped (a
// crash, a kill) and admits nothing any more. Unless name is heard from
// again, the view leaves it out at once (its series get a new owner
// without waiting for the gossip to notice), and owners reserve nothing
// for it in the windows that begin from now on (counters.Owner.SetMembersStopped):
// the survivors get its budget in the next window, not after
// ReserveWindows or the majority rule's term. Only a member this one has
// heard from counts (one that joins refuses calls until it serves); a
// message from it afterwards (it was not stopped, or it restarted) takes
// it back. A firewall that rejects instead of dropping makes a member cut
// off look stopped: Config.IgnoreRefusals. Lease policy only: under the
// others a member sends batches only to owners, so a restarted member
// whose series this one does not own would never be heard from. It
// reports whether it took name for stopped now (not already).
func (e *Engine) Refused(now time.Time, name string) bool {
	if name == e.cfg.Name || e.cfg.Policy != PolicyLease || e.cfg.Central != "" {
		return false // only the lease policy sends every member a batch each interval, and so hears of a restart
	}
	now = e.clock.at(now)
	e.runsMu.Lock()
	_, heard := e.runs[name]
	e.runsMu.Unlock()
	e.mu.Lock()
	_, known := e.lastSeen[name]
	_, already := e.dead[name]
	if !heard || !known || already || e.departed[name] || len(e.dead) >= MaxMembers {
		e.mu.Unlock()
		return false
	}
	e.dead[name] = now.UnixNano()
	e.nDead.Store(int32(len(e.dead)))
	given := slices.Clone(e.given)
	e.mu.Unlock()
	e.setMembers(now, given, true)
	return true
}

// heardFrom takes member name back if it was found stopped (Refused).
func (e *Engine) heardFrom(now time.Time, name string) {
	if e.nDead.Load() == 0 {
		return
	}
	e.mu.Lock()
	_, was := e.dead[name]
	if !was {
		e.mu.Unlock()
		return
	}
	delete(e.dead, name)
	e.nDead.Store(int32(len(e.dead)))
	given := slices.Clone(e.given)
	e.mu.Unlock()
	e.setMembers(now, given, true)
}

// setMembers is SetMembers; held says the view is one this member holds
// from now on, whose ownership the owner records (counters.Owner.SetOwnership).
func (e *Engine) setMembers(now time.Time, alive []string, held bool) {
	e.viewMu.Lock()
	defer e.viewMu.Unlock()
	nowNs := now.UnixNano()
	a := slices.Clone(alive)
	if !slices.Contains(a, e.cfg.Name) {
		a = append(a, e.cfg.Name)
	}
	sort.Strings(a)
	a = slices.Compact(a)

	e.mu.Lock()
	a = slices.DeleteFunc(a, func(m string) bool { _, d := e.dead[m]; return d })
	// Members leaving the view were alive until now; members in it are alive.
	for _, m := range e.alive {
		e.lastSeen[m] = nowNs
	}
	for _, m := range a {
		if e.departed[m] && !slices.Contains(e.alive, m) {
			delete(e.departed, m) // it left, and now it is back
		}
		e.lastSeen[m] = nowNs
	}
	gone, dead := map[string]int64{}, map[string]int64{}
	recent := slices.Clone(a)
	for m, t := range e.lastSeen {
		if slices.Contains(a, m) {
			continue
		}
		if e.departed[m] { // left for good: nothing to reserve
			delete(e.lastSeen, m)
			delete(e.departed, m)
			continue
		}
		if nowNs-t > e.memory() { // long gone: forget (bounded memory)
			delete(e.lastSeen, m)
			delete(e.dead, m)
			continue
		}
		gone[m] = t
		if d, ok := e.dead[m]; ok {
			dead[m] = d
		}
		// Static shares count the members that may still be serving: those
		// seen within MaxPeriod, or under the majority rule every member
		// remembered, which the owners reserve for.
		if nowNs-t <= int64(e.cfg.MaxPeriod) || e.cfg.Partition == PartitionMajority {
			recent = append(recent, m)
		}
	}
	e.nDead.Store(int32(len(e.dead)))
	e.mu.Unlock()

	sort.Strings(recent)
	e.ring.Set(a)
	e.table.SetShare(len(recent), slices.Index(recent, e.cfg.Name))
	e.owner.SetMembersStopped(now, a, gone, dead)
	if held {
		owner, self := e.ring.OwnerFunc(), e.cfg.Name
		e.owner.SetOwnership(now, func(h uint64) bool { o, _ := owner(h); return o == self })
	}
	e.view.Store(counters.ViewDigest(a))
	e.updateLinks(nowNs, a, gone)
	e.pruneDicts(a, gone)
	// Publish the view last, so that whoever sees it also sees its ring.
	e.mu.Lock()
	e.alive = a
	e.mu.Unlock()
}

// memory is how long a lost member is remembered (Unix ns): 2 x MaxPeriod,
// or QuorumMemory under the majority rule if longer.
func (e *Engine) memory() int64 {
	m := 2 * e.cfg.MaxPeriod
	if e.cfg.Partition == PartitionMajority {
		m = max(m, e.cfg.QuorumMemory)
	}
	return int64(m)
}

// updateLinks keeps a link to every member alive or recently gone: a new
// one counts as answered when first seen, so that a member falls back to
// its static share only after it has heard nothing from an owner for
// counters.FallbackAfter. The map is replaced, never changed in place: the
// decision path reads it without a lock.
func (e *Engine) updateLinks(now int64, alive []string, gone map[string]int64) {
	old := *e.links.Load()
	next := make(map[string]*link, len(alive)+len(gone))
	keep := func(m string) {
		if m == e.cfg.Name {
			return
		}
		l := old[m]
		if l == nil {
			l = &link{}
			l.lastAnswer.Store(now)
		}
		next[m] = l
	}
	for _, m := range alive {
		keep(m)
	}
	for m := range gone {
		keep(m)
	}
	e.links.Store(&next)
}

// Members returns the alive members of the current view, sorted.
func (e *Engine) Members() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.alive)
}

func (e *Engine) isMember(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.lastSeen[name]
	return ok
}

// Handle answers a batch from another member: it validates the batch,
// adds every report to the owner's totals and returns one total per report.
func (e *Engine) Handle(now time.Time, req *peerpb.SyncRequest) (*peerpb.SyncResponse, error) {
	at := e.clock.at(now)
	if req != nil && req.Origin != e.cfg.Name {
		e.heardFrom(at, req.Origin)
	}
	resp, err := e.handle(at, req)
	if resp != nil {
		resp.Clock = now.UnixNano() // this member's own clock, for the sender's estimate
		if req.Origin != e.cfg.Name {
			resp.PreviousRunMs = e.noteRun(req.Origin, req.Incarnation, at)
		}
	}
	return resp, err
}

// noteRun records that member name was heard from at now in its run inc,
// and returns when an earlier run of it was last heard from (Unix ms), 0
// if none was: the member restarted since (SyncResponse.previous_run_ms).
func (e *Engine) noteRun(name string, inc uint64, now time.Time) int64 {
	e.runsMu.Lock()
	defer e.runsMu.Unlock()
	r, ok := e.runs[name]
	if !ok && len(e.runs) >= MaxMembers {
		return 0
	}
	ms := now.UnixMilli()
	switch {
	case inc > r.inc:
		if r.inc != 0 {
			r.prevAt = r.at
		}
		r.inc, r.at = inc, ms
	case inc == r.inc:
		r.at = ms
	}
	e.runs[name] = r
	return r.prevAt
}

// runSeen is what a member knows of another's runs (noteRun).
type runSeen struct {
	inc        uint64 // the newest run heard from
	at, prevAt int64  // when it and the run before it were last heard from (Unix ms)
}

func (e *Engine) handle(now time.Time, req *peerpb.SyncRequest) (*peerpb.SyncResponse, error) {
	if err := e.validate(req); err != nil {
		return nil, err
	}
	if req.Session != 0 || req.PackedCount != 0 || len(req.Packed) > 0 || len(req.Dict) > 0 {
		resp, err := e.handlePacked(now, req)
		if err != nil || resp.Resync != 0 {
			return resp, err
		}
		if req.Leaving && req.Origin != e.cfg.Name {
			e.depart(now, req.Origin)
		}
		return resp, nil
	}
	resp := &peerpb.SyncResponse{Totals: make([]*peerpb.Total, len(req.Reports)), Incarnation: e.cfg.Incarnation, PackedOk: true}
	resp.Seq = e.owner.Hello(now, req.Origin)
	e.owner.PeerMembers(now, req.Origin, int(req.Members))
	for i, w := range req.Reports {
		r := fromWire(w)
		r.Ack, r.Final = req.Ack, req.Leaving
		if e.cfg.Central == "" {
			owner, _ := e.ring.Owner(r.Key.SeriesHash())
			if r.Stray = owner != e.cfg.Name; r.Stray {
				stray(resp, i, owner)
			}
		}
		a := e.owner.Report(now, req.Origin, req.Incarnation, &r)
		resp.Totals[i] = &peerpb.Total{Global: a.Global, Grant: a.Grant, HasGrant: a.HasGrant, Carry: a.Carry, Spare: a.Spare, Prompt: a.Prompt}
	}
	e.owner.Acknowledge(now, req.Origin, req.Ack, req.View, req.AckCovers) // after the reports: see counters.Owner.Acknowledge
	if req.Leaving && req.Origin != e.cfg.Name {
		e.depart(now, req.Origin)
	}
	return resp, nil
}

// depart records that a member announced its graceful leave: once it is
// out of the view, nobody reserves budget or a static share for it.
func (e *Engine) depart(now time.Time, name string) {
	e.mu.Lock()
	e.departed[name] = true
	alive := slices.Clone(e.alive)
	e.mu.Unlock()
	e.setMembers(now, alive, true)
}

func (e *Engine) validate(req *peerpb.SyncRequest) error {
	if req == nil {
		return fmt.Errorf("%w: empty request", ErrBadBatch)
	}
	if req.Origin == "" || len(req.Origin) > MaxOriginSize {
		return fmt.Errorf("%w: origin must be 1..%d bytes", ErrBadBatch, MaxOriginSize)
	}
	if !e.isMember(req.Origin) {
		return fmt.Errorf("%w: origin %q is not a member", ErrBadBatch, req.Origin)
	}
	if len(req.Reports) > e.cfg.MaxBatch {
		return fmt.Errorf("%w: %d reports, max %d", ErrBadBatch, len(req.Reports), e.cfg.MaxBatch)
	}
	if req.Members > MaxMembers {
		return fmt.Errorf("%w: members %d, max %d", ErrBadBatch, req.Members, MaxMembers)
	}
	for i, r := range req.Reports {
		if err := validReport(r); err != nil {
			return fmt.Errorf("%w: report %d: %v", ErrBadBatch, i, err)
		}
	}
	return nil
}

func validReport(r *peerpb.Report) error {
	switch {
	case r == nil:
		return errors.New("missing")
	case len(r.Tenant)+len(r.Endpoint)+len(r.Method) > MaxKeyBytes:
		return fmt.Errorf("key longer than %d bytes", MaxKeyBytes)
	case r.PeriodMs <= 0 || r.PeriodMs > MaxPeriodMs:
		return fmt.Errorf("period_ms %d out of range 1..%d", r.PeriodMs, MaxPeriodMs)
	case r.WindowStartMs%r.PeriodMs != 0:
		return fmt.Errorf("window_start_ms %d is not a multiple of period_ms %d", r.WindowStartMs, r.PeriodMs)
	case r.Own < 0 || r.Own > MaxCount:
		return fmt.Errorf("own %d out of range 0..%d", r.Own, MaxCount)
	case r.Demand < 0 || r.Demand > MaxCount:
		return fmt.Errorf("demand %d out of range 0..%d", r.Demand, MaxCount)
	case len(r.KnownFrom) > MaxOriginSize || len(r.CapFrom) > MaxOriginSize:
		return fmt.Errorf("known_from or cap_from longer than %d bytes", MaxOriginSize)
	case r.Cap < 0 || r.Cap > MaxCount:
		return fmt.Errorf("cap %d out of range 0..%d", r.Cap, MaxCount)
	case r.KnownGlobal < 0 || r.KnownGlobal > MaxCount || r.KnownAcked < 0 || r.KnownAcked > r.KnownGlobal:
		return fmt.Errorf("known_global %d / known_acked %d out of range", r.KnownGlobal, r.KnownAcked)
	case r.Threshold < 0 || r.Threshold > MaxCount:
		return fmt.Errorf("threshold %d out of range 0..%d", r.Threshold, MaxCount)
	case r.Algorithm != peerpb.Algorithm_ALGORITHM_FIXED && r.Algorithm != peerpb.Algorithm_ALGORITHM_SLIDING:
		return fmt.Errorf("unknown algorithm %d", r.Algorithm)
	}
	return nil
}

func toWire(r *counters.Report) *peerpb.Report {
	return &peerpb.Report{
		Tenant:        r.Key.Tenant,
		Endpoint:      r.Key.Endpoint,
		Method:        r.Key.Method,
		PeriodMs:      r.Key.Period.Milliseconds(),
		WindowStartMs: r.Key.WindowStart / int64(time.Millisecond),
		Threshold:     r.Threshold,
		Algorithm:     peerpb.Algorithm(r.Algorithm),
		Own:           r.Own,
		Demand:        r.Demand,
		Cap:           r.Cap,
		HasGrant:      r.HasGrant,
		KnownGlobal:   r.KnownGlobal,
		KnownAcked:    r.KnownAcked,
		Carry:         r.Carry,

		KnownFrom:            r.KnownFrom,
		KnownFromIncarnation: r.KnownFromIncarnation,
		CapFrom:              r.CapFrom,
		CapFromIncarnation:   r.CapFromIncarnation,
	}
}

func fromWire(w *peerpb.Report) counters.Report {
	return counters.Report{
		Key: counters.Key{
			Tenant: w.Tenant, Endpoint: w.Endpoint, Method: w.Method,
			Period:      time.Duration(w.PeriodMs) * time.Millisecond,
			WindowStart: w.WindowStartMs * int64(time.Millisecond),
		},
		Threshold: w.Threshold,
		Algorithm: counters.Algorithm(w.Algorithm),
		Own:       w.Own,
		Demand:    w.Demand,
		Cap:       w.Cap,
		HasGrant:  w.HasGrant,
		Carry:     w.Carry,

		CapFrom:              w.CapFrom,
		CapFromIncarnation:   w.CapFromIncarnation,
		KnownGlobal:          w.KnownGlobal,
		KnownAcked:           w.KnownAcked,
		KnownFrom:            w.KnownFrom,
		KnownFromIncarnation: w.KnownFromIncarnation,
	}
}

// Sweep drops expired windows from the table and the owner.
func (e *Engine) Sweep(now time.Time) {
	now = e.clock.at(now)
	e.table.Sweep(now)
	e.owner.Sweep(now)
}
