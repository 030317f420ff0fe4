package counters

import (
	"maps"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/peerlimit/peerlimit/internal/prefetch"
)

// Report is what one origin tells a key's owner about one window, once per
// sync interval.
type Report struct {
	Key       Key
	Threshold int64
	Algorithm Algorithm
	// Own is the origin's cumulative admitted count in the window.
	Own int64
	// Demand is the cost the origin was offered since its previous report.
	Demand int64
	// Cap is the own count the origin may currently reach: its grant when
	// HasGrant is set, else its static share if it is falling back to it,
	// else its own count. The owner must assume the origin can spend up to
	// Cap until the answer to this report arrives.
	Cap      int64
	HasGrant bool
	// Carry says the grant the origin holds carries into the next window.
	Carry bool
	// CapFrom and CapFromIncarnation name the owner (and its run) that
	// granted Cap ("" without a grant).
	CapFrom            string
	CapFromIncarnation uint64
	// Stray says the key is not this owner's in its own view of the
	// membership: the origin's view differs (one of the two has not seen a
	// change yet). The owner adds the counts up but grants nothing, since
	// the owner of its view may be granting too; the origin keeps what it
	// holds until the views agree. Set by the receiver, never sent.
	Stray bool
	// Ack is the newest answer of this owner the origin had applied when it
	// made the report (its batch's acknowledgement, see Acknowledge), 0 if
	// none: Own counts what it admitted under the caps of that answer and
	// the ones before.
	Ack uint64
	// KnownGlobal and KnownAcked are the last global total the origin
	// learnt for the window and the part of its own count that total
	// included; KnownFrom and KnownFromIncarnation the owner (and its run)
	// that answered it. They let a new owner keep the counts of origins that
	// will never report to it (they left or crashed): see Owner.
	KnownGlobal          int64
	KnownAcked           int64
	KnownFrom            string
	KnownFromIncarnation uint64
	// KnownHead is the Head of the answer that brought KnownGlobal: what
	// that owner could still admit itself beyond it. An owner that reads a
	// total its own earlier run answered holds it back too (see hidden).
	KnownHead int64
	// Final says the origin's count is final in its incarnation: the
	// report is part of its graceful leave. Set by the receiver, never
	// sent.
	Final bool
	// Local, set by an owner merging its own windows (Origin is Self), is
	// its table's entry of the series: between two merges the owner reads
	// its own count there when it answers another origin, so that the
	// totals others learn (and hand a successor as KnownGlobal) hold what
	// the owner admitted until then, not until its last merge. A crashed
	// owner so loses at most what it admitted since its last answer, as
	// any member loses what it admitted since its last report.
	Local *Entry
	// Series, if not nil, is the handle of Key's series on this owner that
	// an earlier Report left here: it spares the owner finding the series
	// by its key's strings. Report sets it to the series' handle (nil if
	// it aggregates nothing for the key), for a caller that reports the
	// series again to keep; a handle the owner no longer holds (the series
	// was swept) is looked up by key again. A handle names one series of
	// one owner: pass it only with the key it was returned with, to the
	// owner that returned it.
	Series *OwnerSeries
}

// Answer is the owner's reply to one Report.
type Answer struct {
	// Global is the sum of every origin's own count for the window.
	Global int64
	// Grant, when HasGrant is set, is the own count the origin may reach.
	Grant    int64
	HasGrant bool
	// Carry says the grant stays valid into the next window until the
	// origin reports there (the owner reserves it meanwhile). The owner
	// lets the grants of origins that admitted something in the window
	// carry, so that a busy origin does not wait at every window start.
	Carry bool
	// Spare is budget the origin may still get at its next reports, as the
	// owner sees it: what no origin is expected to need before the window
	// ends, and what is held back for a sync interval after a membership
	// change. While Spare > 0, an origin that spent its grant should wait
	// for its next answer rather than refuse.
	Spare int64
	// Head is what the owner may still admit itself in the window beyond
	// Global: the headroom of the cap it granted itself, at most what its
	// own demand spends in a sync interval (its rate, with one unit to
	// spare). The origin hands it back with Global (Report.KnownHead). If
	// the owner crashes, it admitted up to its head after this answer, in
	// about the interval before the origin's next call failed; a restarted
	// run, which remembers none of it, holds that back (see hidden).
	Head int64
	// Prompt asks the origin to report the window again at once rather
	// than at its next interval: the answer lowered the cap the origin
	// reported holding, while another member in contact waits for budget
	// in the window, and the owner counts the old cap as the origin's
	// until a report made after this answer says it has the new one
	// (capNow). Only members whose traffic seems to have moved away are
	// asked: the answer is to a report without demand that leaves them
	// some of their cap beyond their count, or to their second such
	// report in a row after a busy spell (see prompt).
	Prompt bool
}

// OwnerConfig configures an Owner.
type OwnerConfig struct {
	// MaxWindows bounds the windows an owner aggregates; past it, reports
	// for new windows are answered from the report alone (no aggregation)
	// and counted in Stats. Default 200,000.
	MaxWindows int
	// Grace keeps a window after its end, for late reports. Default 2 s.
	Grace time.Duration
	// Lease turns on grants (the lease policy). Without it the owner only
	// sums.
	Lease bool
	// ReserveWindows is for how many windows after it was last seen a
	// member that became unreachable is still reserved for: it may be
	// serving on the other side of a partition. Longer keeps both sides of
	// a longer partition within the limit; shorter wastes less budget after
	// a crash (a graceful leave is released at once). Default 3: a partition
	// of up to two whole windows (plus the parts of the windows where it
	// starts and heals) stays within the limit.
	ReserveWindows int
	// ReserveMin is the least time after it was last seen that such a
	// member is reserved for, however short the tier: memberlist takes
	// seconds to notice a partition, and three windows of a 1 s tier
	// after that were over before a partition of a few seconds healed
	// (then each side granted its own members the whole limit). Default 10 s: over the
	// explorer's 500 scenarios (go run ./cmd/sim -explore 500 -seed 1)
	// lease's windows over the limit went from 547 to 359, those under the
	// safe reference from 11,737 to 12,138 (a crash costs short tiers the
	// dead member's share that long).
	ReserveMin time.Duration
	// Majority replaces ReserveWindows with the majority rule (see
	// MinoritySpan): every member the node still remembers may spend
	// budget, and while this owner can reach a majority (SetMajority), a
	// member it has not been in contact with since Term plus Contact
	// before a window began is reserved only its safe share there, the
	// fraction SafeShare of its static share (0: nothing).
	Majority  bool
	Term      time.Duration
	SafeShare float64
	// Self and SelfIncarnation identify this owner, so that it can tell
	// knowledge it handed out itself from a predecessor's.
	Self            string
	SelfIncarnation uint64
	// Settle is how long after a membership change this owner assumes that
	// a reachable member that has not reported yet in a window it took over
	// may hold a cap another owner granted. A member that holds a cap in a
	// window reports it within a sync interval; set Settle to a few sync
	// intervals. Default 2 s.
	Settle time.Duration
	// Interval is the members' sync interval: how often an origin with
	// traffic reports. The owner measures an origin's first demand in a
	// window over it, and lets an origin's rate decay over five intervals
	// once its demand stops. Default 200 ms.
	Interval time.Duration
	// Contact is how long a member stays in contact after the newest answer
	// of this owner that it acknowledged was sent (see Owner.Acknowledge). A
	// member out of contact is reserved what it may spend without asking:
	// what it holds, and its static share in windows that began after it
	// lost contact (members fall back to their static share only then; see
	// FallbackAfter). It must cover a sync interval, a slow call and the
	// next interval. Default 2 s.
	Contact time.Duration
}

// Contact timing of the lease policy, from an owner's OwnerConfig.Contact.
// What a member may spend in a window without asking depends on when it
// last heard from the key's owner before the window began:
//
//   - within Contact: a grant the owner let carry caps it there until it
//     reports (CarryWithin);
//   - earlier (it cannot reach the owner): with no grant, it falls back to
//     its static share (FallbackAfter).
//
// The owner reserves for each member what these rules let it spend, judged
// from the newest answer the member acknowledged, which is never later than
// the newest the member heard: a carried grant while the member's
// acknowledgements reached it within CarryWithin plus Contact before the
// window began (a member acknowledges an answer within Contact of its
// sending), and the static share once they stopped more than Contact less
// one sync interval before (the interval covers members' views of the
// membership starting a little apart). Both may apply: the owner reserves
// the larger.
func CarryWithin(contact time.Duration) time.Duration { return contact }

// FallbackAfter: see CarryWithin. It equals CarryWithin, so that a member
// cut off before a window begins either carries its grant into it or falls
// back to its static share there.
func FallbackAfter(contact time.Duration) time.Duration { return contact }

// Owner aggregates, for the windows whose series this instance owns, the
// cumulative counts every origin reports, and (with Lease) hands each origin
// a share of the budget left. It is a pure state machine: time is an
// argument and it does no I/O. It is safe for concurrent use. The zero value
// is not usable; call NewOwner.
//
// Counts are a G-counter: per origin (name and incarnation) the owner keeps
// the largest cumulative count it saw, so a retried, duplicated or reordered
// report never counts twice, and an origin that restarts (a new incarnation)
// adds to what its previous run admitted.
type Owner struct {
	mu  sync.Mutex
	cfg OwnerConfig
	// series holds the series this owner aggregates windows of, by series
	// hash; series whose hashes collide are chained (OwnerSeries.next), so
	// a collision costs a comparison of keys, never a count.
	series   map[uint64]*OwnerSeries
	nWindows int // the windows of every series
	// expiring holds every window by when it expires (ownerWindow.expires),
	// for Sweep: windows of one period that began together share a list.
	expiring map[int64][]*ownerWindow
	// bucketMask is applied to a series hash to place it in series: ^0;
	// tests narrow it to make series collide.
	bucketMask uint64
	members    ownerMembers
	contacts   map[string]*contact
	view       uint64 // ViewDigest of the alive members
	majority   bool   // this owner reaches a majority (SetMajority)
	// ownership holds the views this owner held recently, newest last:
	// from when each held, and whether it made this owner the owner of a
	// series (by its hash). See SetOwnership.
	ownership []ownView
	// firstView is when this owner got its first membership view (Unix
	// ns): it knows nothing of the windows that began before (see grant).
	firstView int64
	// counted counts the changes to what the members said they count
	// that may change mostCounted before the time alone would
	// (countedCache): a new number, one said again after falling out of
	// the contact period, a record attached to a member. countedAt is the
	// latest time a result was kept at.
	counted   uint64
	countedAt int64
	// left holds the members that left the view gracefully (neither alive
	// nor gone), and when: the members this owner saw are those of
	// members.sorted and these (see unseen). At most maxLeft, the oldest
	// forgotten first.
	left map[string]int64
	// prevRun is when an earlier run of this member was last heard from
	// (Unix ns), 0 if none is known (see PreviousRun).
	prevRun int64
	dropped uint64
	scratch grantScratch
	quiet   quietCache
	noQuiet bool // tests: every grant walks the members (see othersQuiet)
	noKeep  bool // tests: every grant with kept slots walks them (see keepSums)
	// decayDt and decayOf are decay's last argument and result.
	decayDt int64
	decayOf float64
}

type ownerMembers struct {
	alive map[string]bool
	// gone maps members no longer alive to when they were last seen alive
	// (Unix ns): they may still be spending their share of windows that
	// began before that, on the other side of a partition.
	gone map[string]int64
	// sorted lists every known member, alive or gone; index maps a name to
	// its place there, and isAlive and contact follow the same order (the
	// member's contact record, nil until it has one), so that a grant
	// walks the members without a map lookup per member.
	sorted  []string
	index   map[string]int
	isAlive []bool
	contact []*contact
	// deadAt is, by place, when the member was known to have stopped
	// (Unix ns; 0: it was not). See SetMembersStopped.
	deadAt []int64
	// changedAt is when the set of alive members last changed (Unix ns),
	// leftAt when a member last left gracefully (it went out of view
	// without counting as gone).
	changedAt, leftAt int64
	// gen counts the calls of SetMembers: the places of memberWindows
	// taken under another are not this one's.
	gen uint64
	// vers counts the changes of each member's contact record (by place,
	// as contact): a grant's record of a member (memberSlot) is up to date
	// while its count is the same.
	vers []uint64
	// records counts the changes of any member's contact record (vers
	// added up, and records made): see quietCache.
	records uint64
	// changes lists the places of the members whose contact record
	// changed, in order (one entry per change counted in vers), the first
	// being change number changesBase: kept sums apply them (keepSums).
	// It keeps the last few per member.
	changes     []int32
	changesBase uint64
	// windows caches window() by its argument until the next SetMembers.
	windows map[int64]*memberWindow
}

// memberWindow is the members that may spend budget in a window, sorted:
// their names, their places in ownerMembers.sorted (at) and their
// positions in names by name (pos).
type memberWindow struct {
	names []string
	at    []int
	pos   map[string]int
	// counted keeps what mostCounted found of these members, settled.
	counted countedCache
	// place is, by place in ownerMembers.sorted, the member's position in
	// names, -1 if it is not in the window (see placeOf).
	place []int32
}

// placeOf returns the window's positions by place in the membership's
// sorted members, of which there are n, made at its first call.
func (w *memberWindow) placeOf(n int) []int32 {
	if w.place == nil {
		w.place = make([]int32, n)
		for i := range w.place {
			w.place[i] = -1
		}
		for i, at := range w.at {
			w.place[at] = int32(i)
		}
	}
	return w.place
}

// countedCache is the most members a member of a member window said it
// counts, settled (Owner.mostCounted), as found at from: it holds for the
// times in [from, until), until the first moment a number said falls out
// of the contact period or one unsettled settles, while no member says a
// new number or comes back after saying none for that long (ver, see
// Owner.counted) and this owner's first view stays the same. The zero
// value holds for no time (until 0).
type countedCache struct {
	ver         uint64
	firstView   int64
	from, until int64
	most        int
}

// window returns the members that may spend budget in a window whose
// reserve horizon starts at since: those alive, and those last seen alive
// after since. The result is cached until the membership changes; the
// owner's lock must be held.
func (m *ownerMembers) window(since int64) *memberWindow {
	if w := m.windows[since]; w != nil {
		return w
	}
	w := &memberWindow{pos: make(map[string]int, len(m.sorted))}
	for i, name := range m.sorted {
		if m.isAlive[i] || m.gone[name] >= since {
			w.pos[name] = len(w.names)
			w.names = append(w.names, name)
			w.at = append(w.at, i)
		}
	}
	if m.windows == nil || len(m.windows) > 64 { // a few windows are live at once
		m.windows = map[int64]*memberWindow{}
	}
	m.windows[since] = w
	return w
}

// OwnerSeries is an owner's handle on one series (tenant, endpoint, method,
// period) it aggregates windows of: see Report.Series. Its fields are the
// owner's, guarded by its lock; the zero value is not used.
type OwnerSeries struct {
	owner *Owner
	key   Key // WindowStart 0
	hash  uint64
	next  *OwnerSeries // another series with the same hash
	// wins are the series' windows (a few: the current one, the one
	// before, late or early ones within the grace).
	wins []*ownerWindow
	gone bool // swept: its handles look the series up again
	// local is this member's own entry of the series (Report.Local), nil
	// if it has merged none or the entry left its table.
	local *Entry
	// waitAt is when a member in contact last asked in vain in the window
	// starting at waitStart (see prompt).
	waitAt, waitStart int64
}

// window returns the series' window starting at start, or nil.
func (s *OwnerSeries) window(start int64) *ownerWindow {
	for _, w := range s.wins {
		if w.start == start {
			return w
		}
	}
	return nil
}

// lookup returns the series of k (its window start ignored), or nil.
func (o *Owner) lookup(k Key, hash uint64) *OwnerSeries {
	for s := o.series[hash&o.bucketMask]; s != nil; s = s.next {
		if s.hash == hash && s.key.Period == k.Period && s.key.Tenant == k.Tenant && s.key.Endpoint == k.Endpoint && s.key.Method == k.Method {
			return s
		}
	}
	return nil
}

// window returns k's window, or nil. The lock must be held.
func (o *Owner) window(k Key) *ownerWindow {
	if s := o.lookup(k, k.SeriesHash()); s != nil {
		return s.window(k.WindowStart)
	}
	return nil
}

type ownerWindow struct {
	series    *OwnerSeries
	start     int64 // the window's start (Unix ns)
	threshold int64
	alg       Algorithm
	// inherited says a membership change came during the window (or within
	// Settle before it) and before this owner first heard of it, or that it
	// first heard of it in a stray report: another owner may have granted
	// caps in it that this one learns only as members report. A member
	// reporting a cap another owner granted in the window says the same
	// (see grant).
	inherited bool
	// ownedThroughout says this owner owned the window's series in every membership
	// view it held since Settle before the window began (SetOwnership): no
	// other owner can have granted caps in the window then, whatever the
	// membership change that made it inherited.
	ownedThroughout bool
	expires         int64
	created         int64          // when this owner first heard of the window (Unix ns)
	mine            *originState   // this owner's own state in the window (nil until it merges there)
	origins         []*originState // one per instance that reported
	// slab holds the origins' states, allocated a few at a time so that a
	// window's lie together in memory (a grant reads every one of them);
	// a full slab is left as it is and a new one started, so that no
	// state moves.
	slab []originState
	// originsBuf is origins' first backing array, in the window itself.
	originsBuf [3]*originState
	// first is the state of the first origin to report, in the window
	// itself: a series whose traffic reaches one instance (a client kept
	// on one connection) has no other, and the state lies next to the
	// window's own fields.
	first   originState
	byName  map[string]*originState // origins by name, once there are more than originsScan
	view    *windowView             // see aligned
	counted int64                   // the origins' cumulative counts added up
	// snaps is how many origins have a predecessor's knowledge
	// (snapFrom); nForeign how many reported holding a cap another owner
	// granted in the window (hasForeign), and foreignCaps is the sum of
	// the smallest such caps (foreignCap). Both counts are of origins,
	// which are members: 32 bits, side by side in one word.
	snaps, nForeign int32
	// last is when this owner last had a report in the window (Unix ns);
	// regained says it lost the series to another owner since a report and
	// got it back (see lost); lastStray that the last report was stray.
	last                int64
	regained, lastStray bool
	// prevRunKnown says an origin brought a total that an earlier run of
	// this member answered as the window's owner (see PreviousRun).
	prevRunKnown bool
	// otherSide says an origin reported holding another owner's cap in the
	// window although it had been out of contact with this owner since
	// before the window began: another side of a partition had an owner of
	// its own (see sideBound).
	otherSide bool
	// cutSide says an origin that was in contact with this owner when the
	// window began reported holding another owner's cap in it: it went
	// over to another owner during the window (a partition, or the ring
	// moved the series), see grantContext.cutSide. (The flags lie together
	// so that they share a word.)
	cutSide bool
	// ghost is what earlier runs of the origins may have admitted after
	// their last reports (unreported): not counted, reserved.
	ghost       int64
	foreignCaps int64
}

// originState is one origin's state in a window. Its fields are ordered
// so that it spans few cache lines (a grant reads every origin's): the
// flags share a word, and what is read on every report comes first.
type originState struct {
	name        string
	incarnation uint64
	base        int64   // own counts of earlier incarnations
	own         int64   // current incarnation's largest cumulative count
	mean, peak  float64 // demand per ns: a moving average, and a decaying peak of bursts (see rate)
	instant     float64 // demand per ns since the last report (an interval at least)
	lastSeen    int64
	heldGrant   bool // the cap held is a grant (not its count or static share)
	heldCarry   bool // and whether that cap carries into the next window
	hasGiven    bool
	final       bool   // its count is final in its incarnation (Report.Final)
	carry       bool   // the last grant carries into the next window
	hadShare    bool   // a grant beyond its count was given in this window
	hasForeign  bool   // see foreignCap
	self        bool   // the origin is this owner itself
	moved       bool   // its traffic seems to have moved away (see moved)
	vpos        int32  // its place in its window's view, if it has one (see aligned)
	held        int64  // cap the origin reported holding
	given       int64  // cap the owner last granted
	givenSeq    uint64 // the number of the answer that carried it (Hello); without Lease, of the last answer
	reportAck   uint64 // the Ack of the origin's last report of the window
	firstSeq    uint64 // and of the first answer with a grant in this window
	// foreignCap is the smallest cap granted by another owner that the
	// origin reported holding in this window (hasForeign says there was
	// one): what a previous owner had given it, which bounds what that
	// owner could have given everyone else.
	foreignCap int64
	// cutShare is, once the origin reported another owner's cap after it
	// lost contact with this owner during the window, the most this owner
	// had let it hold before: what the other owner counted it as holding
	// of this owner's, and took its side's budget from (see
	// grantContext.cutSide).
	cutShare int64
	// What the origin last knew from another owner: the others' total
	// (KnownGlobal - KnownAcked), its own part (KnownAcked), and from whom.
	snapOthers, snapOwn int64
	// snapHead is the Head of that total when an earlier run of this owner
	// answered it (KnownHead): what that run may have admitted itself
	// after it, which no total holds.
	snapHead int64
	snapInc  uint64
	snapFrom string
	// told is the most this owner's run told the origin's run of the
	// others' counts in the window (a total it answered less the
	// origin's part of it) in an answer the origin applied: one it
	// acknowledged (givenOthers, when the report's Ack is givenSeq), or
	// one whose total it reported back; snapTold is what it was when a
	// snapshot from another owner was taken, if this owner had told the
	// origin something before (see hidden). givenOthers is the others'
	// counts in the answer numbered givenSeq.
	told, snapTold, givenOthers int64
	// snapRun is the origin's incarnation when it reported that knowledge:
	// its KnownAcked counts that run's admissions only.
	snapRun uint64
	// lost is the origin's count here when this owner got the series back
	// after another owner had it (regained): that owner's total includes
	// it, as it learnt what this owner had counted from the members that
	// brought this owner's answers over. lostRun is the origin's
	// incarnation then, and lostBase the part of lost its earlier runs
	// admitted.
	lost, lostBase int64
	lostRun        uint64
	// otherPart is the most another owner acknowledged of the origin's
	// counts, as the origin reported it without a snapshot being taken
	// (this owner kept counting it): part of that owner's total that a
	// newer origin's snapshot holds too.
	otherPart int64
}

func (o *originState) total() int64 { return o.base + o.own }

// head is the Head of an answer to origin in window w: what this owner
// may still admit itself there beyond the total it answers, as far as one
// sync interval of its own demand (its rate or its last interval's, the
// larger, plus one unit) can spend it. Zero in an answer to itself, and
// while it holds no grant of its own. The lock must be held.
func (o *Owner) head(w *ownerWindow, origin string) int64 {
	if origin == o.cfg.Self {
		return 0
	}
	self := w.mine
	if self == nil || !self.hasGiven {
		return 0
	}
	room := self.given - self.total()
	if room <= 0 {
		return 0
	}
	return min(room, int64(math.Ceil(max(self.rate(), self.instant)*float64(o.cfg.Interval)))+1)
}

// part is what a predecessor's total holds of the origin's counts that
// this owner counts too: what the predecessor acknowledged of it (the
// origin says so), or what this owner had of it when it got the series
// back from the predecessor, whichever is more. The origin's
// acknowledged count is of the run that reported it; what this owner had
// of earlier runs (earlierPart) adds to it.
func (o *originState) part() int64 {
	switch e := o.earlierPart(); {
	case e == 0:
		return max(o.snapOwn, o.lost, o.otherPart)
	case o.snapRun == o.lostRun:
		return e + max(o.snapOwn, o.lost-e)
	default:
		return e + o.snapOwn
	}
}

// earlierPart is what a predecessor's total holds of the origin's runs
// before the one that reported the predecessor's total: the counts of
// those runs this owner had when it got the series back (from lost), in
// the predecessor's total as another origin's or as hidden, and counted
// here in the origin's base. To that origin's own knowledge they are
// others' counts, but they are not hidden from this owner.
func (o *originState) earlierPart() int64 {
	switch {
	case o.snapFrom == "" || o.snapRun < o.lostRun:
		return 0
	case o.snapRun == o.lostRun:
		return o.lostBase
	default:
		return o.lost
	}
}

// unreported is what an earlier run of the origin may have admitted in
// the window after its last report here, once a new run reports: a run
// that ended without a graceful leave (it crashed, or was killed) last
// reported at most an interval or so before it ended, and may have
// admitted what it was offered since, at the rate of its last interval,
// within the cap this owner granted it. The owner reserves it for the
// rest of the window but does not count it: the totals stay what the
// members reported. Without it a restart within the window lost up to an
// interval of the origin's admissions (sim/testdata/kill-restart.txt).
// The lock must be held.
func (o *Owner) unreported(s *originState) int64 {
	if !s.hasGiven || s.final {
		return 0 // no cap of this owner's to spend (grants are the lease policy's), or a graceful leave
	}
	capv := max(s.base+s.held, s.given)
	return max(0, min(capv-s.total(), int64(math.Round(s.instant*float64(o.cfg.Interval)))))
}

// rate is the origin's demand rate per ns, as Report estimates it: the
// larger of its moving average and its decaying peak of bursts.
func (o *originState) rate() float64 { return max(o.mean, o.peak) }

// capNow is the most the origin may admit before it hears from this owner
// again: the cap it holds. Until the owner knows what it admitted before
// the answer that carried the last grant reached it (received), that is
// the larger of the grant and the cap it last reported holding; then, the
// grant. c is the origin's contact
// record (o.contacts[s.name]). The lock must be held.
func (o *Owner) capNow(s *originState, c *contact) int64 {
	if o.received(s, c) {
		return s.given
	}
	held := s.held
	if s.hasGiven && s.given > held {
		held = s.given
	}
	return held
}

// cutShare is what origin st, reporting another owner's cap for the first
// time in window w, may have held of this owner's grants when it went
// over to the other owner: the cap this owner last granted it in the
// window, or one it carried from the window before. The lock must be
// held.
func (o *Owner) cutShare(w *ownerWindow, st *originState, c *contact) int64 {
	var v int64
	if st.hasGiven {
		v = st.given
	}
	if p := w.prevOrigin(st.name); p != nil && p.hasGiven && !p.hasForeign && o.carries(p, c) {
		v = max(v, p.given) // not a cap another owner granted that this one took over
	}
	return v
}

// carries reports whether the origin may hold a cap that carries into the
// next window. The lock must be held.
func (o *Owner) carries(s *originState, c *contact) bool {
	if o.received(s, c) {
		return s.carry
	}
	return s.carry || s.heldCarry
}

// received reports whether the owner knows what the origin admitted
// before the answer that carried its last grant reached it: the origin
// reported the window after it had that answer (Report.Ack), or sent a
// batch that covers the answer (Acknowledge). That the origin acknowledged
// the answer is not enough: a batch that carries only some windows (the
// ones with requests waiting, or one cut at MaxBatch) acknowledges answers
// for the others too, whose counts may have grown under their previous,
// higher caps since their last reports. This owner's own windows are no
// different (their counts are read a little before their grants are
// applied, and requests are decided in between: see Merged), unless it
// merges them without a Hello: then their grants are taken as applied at
// once. The lock must be held.
func (o *Owner) received(s *originState, c *contact) bool {
	switch {
	case !s.hasGiven:
		return false
	case c == nil:
		return s.self
	}
	return seqAtLeast(s.reportAck, s.givenSeq) || seqAtLeast(c.coveredAck, s.givenSeq)
}

// seqAtLeast reports whether answer number a is seq or a later one.
func seqAtLeast(a, seq uint64) bool { return a >= seq && a-seq < 1<<62 }

// raise sets *at, an answer number (0: none yet), to seq if seq is a later
// one.
func raise(at *uint64, seq uint64) {
	if *at == 0 || seqAtLeast(seq, *at) {
		*at = seq
	}
}

// holdsGrant reports whether the origin acknowledged an answer of this
// owner that granted it a cap in the window: from then on it admits within
// this owner's grants, not its static share. The lock must be held.
func (o *Owner) holdsGrant(s *originState, c *contact) bool {
	return o.ackedSince(s, c, s.firstSeq)
}

// ackedSince reports whether the origin, given a grant in the window,
// acknowledged the answer numbered seq or a later one (this owner's own
// grants arrive at once). The lock must be held.
func (o *Owner) ackedSince(s *originState, c *contact, seq uint64) bool {
	if !s.hasGiven || s.self {
		return s.hasGiven
	}
	return c != nil && seqAtLeast(c.ackSeq, seq)
}

// NewOwner returns an empty owner.
func NewOwner(cfg OwnerConfig) *Owner {
	if cfg.MaxWindows <= 0 {
		cfg.MaxWindows = 200_000
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 2 * time.Second
	}
	if cfg.ReserveWindows <= 0 {
		cfg.ReserveWindows = DefaultReserveWindows
	}
	if cfg.ReserveMin <= 0 {
		cfg.ReserveMin = DefaultReserveMin
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 2 * time.Second
	}
	if cfg.Contact <= 0 {
		cfg.Contact = 2 * time.Second
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 200 * time.Millisecond
	}
	return &Owner{cfg: cfg, series: make(map[uint64]*OwnerSeries), expiring: map[int64][]*ownerWindow{}, bucketMask: ^uint64(0), contacts: map[string]*contact{}}
}

// The defaults of OwnerConfig.ReserveWindows and ReserveMin.
const (
	DefaultReserveWindows = 3
	DefaultReserveMin     = 10 * time.Second
)

// SetMembers tells the owner, at now, who can spend budget: alive are the
// members it can reach now, gone those it lost, with when each was last
// seen alive. A
// gone member is reserved for in the windows that began less than
// ReserveWindows periods after it was last seen (it may still be serving on
// the other side of a partition) and in none after, so scaling down does
// not leak budget for long. A member that left gracefully should not be in
// gone at all. Both are copied.
func (o *Owner) SetMembers(now time.Time, alive []string, gone map[string]int64) {
	o.SetMembersStopped(now, alive, gone, nil)
}

// StoppedClockSlack is how far apart the members' clocks may read when
// they tell where a window begins, as the owners use it for the members
// found stopped (SetMembersStopped): a window that begins at least this
// long after the time a member was found stopped, on the owner's clock,
// began after the member stopped on its own clock too. The engines read
// time on the members' median clock (node/clock.go), which agree within
// half a call's asymmetry, under a millisecond on a LAN: 50 ms leaves
// room for far worse. It was a sync interval (200 ms by default, up to
// 1 s in the explorer), which kept a stopped member's share in the next
// window whenever it was found stopped within an interval of its start:
// at explorer seed 1 (go run ./cmd/sim -explore 500 -seed 1 -policy
// lease), 9,007 windows under the reference against 9,146, 12,726
// wrongly denied against 12,807, and as many over (432).
const StoppedClockSlack = 50 * time.Millisecond

// SetMembersStopped is SetMembers, with the members of gone known to have
// stopped, and since when (Unix ns): their process no longer listens (the
// node's dial was refused) and none of them was heard from since. A
// stopped member admits nothing in a window that begins after that, so the
// owner reserves for it there only what it counted, not the cap it could
// have carried nor the static share it could have fallen back to: the
// survivors of a crash get its budget from the next window that begins
// StoppedClockSlack or more after it was found stopped on, where a
// member merely out of reach (a partition) is reserved for ReserveWindows
// windows or the majority rule's term. In the window it stopped in, what
// it may have spent is reserved: its cap, or less when its demand bounds
// what it admitted after its last report (StoppedDemandFactor). The owner
// trusts it only while it reaches a majority (SetMajority). stopped is
// not kept.
func (o *Owner) SetMembersStopped(now time.Time, alive []string, gone, stopped map[string]int64) {
	m := ownerMembers{alive: make(map[string]bool, len(alive)), gone: make(map[string]int64, len(gone))}
	for _, a := range alive {
		m.alive[a] = true
		m.sorted = append(m.sorted, a)
	}
	for g, t := range gone {
		if !m.alive[g] {
			m.gone[g] = t
			m.sorted = append(m.sorted, g)
		}
	}
	sort.Strings(m.sorted)
	m.index = make(map[string]int, len(m.sorted))
	m.isAlive = make([]bool, len(m.sorted))
	m.deadAt = make([]int64, len(m.sorted))
	for i, name := range m.sorted {
		m.index[name] = i
		m.isAlive[i] = m.alive[name]
		if !m.isAlive[i] {
			m.deadAt[i] = stopped[name]
		}
	}
	o.mu.Lock()
	if o.firstView == 0 {
		o.firstView = now.UnixNano()
	}
	m.changedAt = o.members.changedAt
	m.leftAt = o.members.leftAt
	for _, name := range o.members.sorted {
		if _, known := m.index[name]; !known {
			m.leftAt = now.UnixNano() // neither alive nor gone: it left
			o.rememberLeft(name, m.leftAt)
		}
	}
	for _, name := range m.sorted {
		delete(o.left, name)
	}
	m.gen = o.members.gen + 1
	if !maps.Equal(m.alive, o.members.alive) {
		m.changedAt = now.UnixNano()
	}
	o.members = m
	o.counted++
	o.view = ViewDigest(alive)
	o.seeMembers(now.UnixNano(), alive)
	o.members.contact = make([]*contact, len(m.sorted))
	o.members.vers = make([]uint64, len(m.sorted))
	for i, name := range m.sorted {
		if c := o.contacts[name]; c != nil {
			o.members.contact[i], c.at = c, i
		}
	}
	o.mu.Unlock()
}

// maxLeft bounds Owner.left.
const maxLeft = 1024

// rememberLeft records that member name left gracefully at t. The lock
// must be held.
func (o *Owner) rememberLeft(name string, t int64) {
	if o.left == nil {
		o.left = map[string]int64{}
	}
	if len(o.left) >= maxLeft {
		oldest, at := "", int64(math.MaxInt64)
		for n, lt := range o.left {
			if lt < at {
				oldest, at = n, lt
			}
		}
		delete(o.left, oldest)
	}
	o.left[name] = t
}

// PreviousRun tells the owner that an earlier run of this member (before
// it restarted under the same name) was heard from at at: in a window that
// began before then, that run may have admitted and granted itself
// budget as an owner that no other member knows of (a tenant all of whose
// traffic reached it), so the owner grants nothing in such a window
// unless a member brings a total that run answered, or another owner's
// total holding counts no member reported here (see grant):
// sim/testdata/owner-restart-pinned.txt.
func (o *Owner) PreviousRun(at time.Time) {
	o.mu.Lock()
	o.prevRun = max(o.prevRun, at.UnixNano())
	o.mu.Unlock()
}

// SetMajority tells the owner whether its node reaches a majority of the
// members it knew recently: only then does it take back the budget of the
// members it cannot reach (the majority rule, OwnerConfig.Majority), and
// of those found stopped (SetMembersStopped), under either rule.
func (o *Owner) SetMajority(ok bool) {
	o.mu.Lock()
	o.majority = ok
	o.mu.Unlock()
}

// Report records r from origin (name and incarnation) at now and returns the
// answer: the global total and, with Lease, the origin's new grant.
func (o *Owner) Report(now time.Time, origin string, incarnation uint64, r *Report) Answer {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.report(now.UnixNano(), origin, incarnation, o.contacts[origin], r)
}

// ReportAll records reports of one origin, each as Report does, and
// writes their answers to out, which must be as long as rs. It is
// Report's equal for a batch: the owner's lock is taken once for a few
// reports, and the state of a few is read from memory at once, which a
// series at a time would wait for one after the other.
func (o *Owner) ReportAll(now time.Time, origin string, incarnation uint64, rs []Report, out []Answer) {
	nowNs := now.UnixNano()
	const chunk = 16
	touchSeries(rs[:min(len(rs), chunk)])
	for len(rs) > 0 {
		n := min(len(rs), chunk)
		o.mu.Lock()
		o.touch(rs[:n])
		// The next chunk's series are on their way while this one is
		// worked on, so that its touch does not wait for them.
		touchSeries(rs[n:min(len(rs), n+chunk)])
		c := o.contacts[origin]
		for i := range rs[:n] {
			out[i] = o.report(nowNs, origin, incarnation, c, &rs[i])
		}
		o.mu.Unlock()
		rs, out = rs[n:], out[n:]
	}
}

// Merged records that a member merging its own windows (this owner's,
// with no call) applied the grants of the merge Hello numbered seq: rs are
// the merge's reports as ReportAll left them, with Own raised to what each
// window had admitted by the time its grant was applied. Their counts
// were read a little before, and requests were decided in between under
// the caps held before: until Merged, the owner holds those caps for the
// member (see received), and with it, it has the counts they reached.
func (o *Owner) Merged(now time.Time, origin string, incarnation, seq uint64, rs []Report) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range rs {
		r := &rs[i]
		ser := r.Series
		if ser == nil || ser.owner != o || ser.gone {
			continue
		}
		w := ser.window(r.Key.WindowStart)
		if w == nil {
			continue
		}
		st := w.find(origin)
		if st == nil || st.incarnation != incarnation {
			continue
		}
		w.raiseOwn(st, r.Own)
		raise(&st.reportAck, seq)
		o.refreshSlot(w, st)
	}
}

// touch reads the states the reports' handles lead to, every cache line
// of each, with no other work in between, so that their loads from memory
// overlap: the windows (with their first origins' states), and the other
// origins' states of windows with few (a window with many reads them in a
// grant one after the other anyway, which a read here would only double).
// Each step reads what the one before asked for, for every report before
// the next step, since a pointer cannot be followed before its line
// arrives: the series (touchSeries, which the caller asked for a chunk
// before), the arrays of their windows, the windows, the other states.
// The lock must be held.
func (o *Owner) touch(rs []Report) {
	var x byte
	for i := range rs {
		if s := rs[i].Series; s != nil && s.owner == o && len(s.wins) > 0 {
			x ^= prefetch.Lines(unsafe.Pointer(unsafe.SliceData(s.wins)), uintptr(len(s.wins))*unsafe.Sizeof(s.wins[0]))
		}
	}
	for i := range rs {
		if s := rs[i].Series; s != nil && s.owner == o {
			for _, w := range s.wins {
				x ^= prefetch.Lines(unsafe.Pointer(w), unsafe.Sizeof(*w)) // the first origin's state with it
			}
		}
	}
	for i := range rs {
		if s := rs[i].Series; s != nil && s.owner == o {
			for _, w := range s.wins {
				if n := len(w.origins); n > 1 && n <= originsScan {
					for _, st := range w.origins[1:] {
						x ^= prefetch.Lines(unsafe.Pointer(st), unsafe.Sizeof(*st))
					}
				}
			}
		}
	}
	runtime.KeepAlive(x)
}

// touchSeries asks for the series the reports' handles name: the first
// step of touch, taken a chunk ahead (see ReportAll).
func touchSeries(rs []Report) {
	var x byte
	for i := range rs {
		if s := rs[i].Series; s != nil {
			x ^= prefetch.Lines(unsafe.Pointer(s), unsafe.Sizeof(*s))
		}
	}
	runtime.KeepAlive(x)
}

// report is Report with the lock held, now in Unix ns and c the origin's
// contact record (o.contacts[origin]).
func (o *Owner) report(nowNs int64, origin string, incarnation uint64, c *contact, r *Report) Answer {
	ser := r.Series
	if ser == nil || ser.owner != o || ser.gone {
		ser = o.lookup(r.Key, r.Key.SeriesHash())
	}
	var w *ownerWindow
	if ser != nil {
		w = ser.window(r.Key.WindowStart)
	}
	if w == nil {
		if o.nWindows >= o.cfg.MaxWindows {
			o.dropped++
			r.Series = ser
			return Answer{Global: r.Own}
		}
		if ser == nil {
			ser = o.addSeries(r.Key)
		}
		w = &ownerWindow{
			series:  ser,
			start:   r.Key.WindowStart,
			expires: r.Key.WindowStart + 2*int64(r.Key.Period) + int64(o.cfg.Grace),
			created: nowNs,
			// A stray report (the key is another owner's in this owner's
			// view) starts a window that owner may be granting caps in: if
			// this owner takes the series over later in the window, it did
			// not grant them all.
			inherited: o.members.changedAt > r.Key.WindowStart-int64(o.cfg.Settle) || r.Stray,
		}
		w.origins = w.originsBuf[:0]
		if w.inherited {
			w.ownedThroughout = o.ownedSince(ser.hash, r.Key.WindowStart-int64(o.cfg.Settle))
		}
		ser.wins = append(ser.wins, w)
		o.expiring[w.expires] = append(o.expiring[w.expires], w)
		o.nWindows++
	}
	r.Series = ser
	w.threshold, w.alg = r.Threshold, r.Algorithm
	st := w.find(origin)
	fresh := st == nil
	// Lost and got back: by the views this owner held since its last report
	// in the window, or by a stray report followed by one that is not (the
	// ring said another owner, then this one). The second alone holds when
	// a view is timed before a report that came while it was being set.
	if w.last != 0 && (w.lastStray && !r.Stray || o.regainedSince(ser.hash, w.last)) {
		w.regained = true
		for _, x := range w.origins {
			if t := x.total(); t > x.lost {
				x.lost, x.lostBase, x.lostRun = t, x.base, x.incarnation
			}
		}
	}
	w.last, w.lastStray = nowNs, r.Stray
	if fresh {
		st = w.add(origin, origin == o.cfg.Self, len(o.members.sorted))
	}

	wasMoved := false // its traffic seemed to have moved away at its last report (see moved)
	before := st.total()
	switch {
	case incarnation > st.incarnation:
		w.ghost += o.unreported(st)
		st.base += st.own
		st.incarnation, st.own = incarnation, r.Own
		st.hasGiven, st.carry, st.final = false, false, false
	case incarnation == st.incarnation && r.Own > st.own:
		st.own = r.Own
	}
	if r.Final && incarnation == st.incarnation {
		st.final = true
	}
	w.counted += st.total() - before
	stale := incarnation < st.incarnation
	if !stale {
		// The origin's demand rate, the larger of two estimates, both
		// decaying over five intervals: a moving average of the demand
		// between reports, and the peak of the rates of reports that
		// carry more than one unit. One request in an interval is no
		// evidence of a rate of one per interval: held at its peak,
		// the rate of an origin with one request every few intervals
		// read as several times what it spends, and the origin held
		// that much of the limit while a busy member was refused
		// (TestOwnerSparseMembersHoldWhatTheyUse). A burst still
		// counts at once. An origin with sparse traffic keeps a share
		// between its requests, and one whose traffic moved away frees
		// its share within a second or so, or at its first report
		// without demand when budget is short (see moved). Both carry
		// over from the window before when the origin's first report
		// in a window carries demand; an origin idle at that report
		// starts from nothing (it asks again when its demand comes
		// back: its decision is pending until an answer that knows of
		// the demand). Reports come faster than the interval when a
		// member asks at once: measured over less than an interval,
		// one request would read as a burst.
		elapsed := int64(o.cfg.Interval)
		mean, peak, last := 0.0, 0.0, st.lastSeen
		if last != 0 {
			mean, peak = st.mean, st.peak
		} else if p := w.prevOrigin(origin); p != nil && r.Demand > 0 {
			mean, peak, last = p.mean, p.peak, p.lastSeen
		}
		decay := 0.0
		if last != 0 && nowNs > last {
			// The demand reported is the window's since the last report,
			// which may have been in the window before.
			elapsed = max(min(nowNs-last, nowNs-r.Key.WindowStart), elapsed)
			decay = o.decay(nowNs - last)
		}
		st.instant = float64(r.Demand) / float64(elapsed)
		st.mean = decay*mean + (1-decay)*st.instant
		burst := 0.0
		if r.Demand > 1 {
			burst = st.instant
		}
		st.peak = max(decay*peak, burst)
		st.lastSeen = nowNs
		// Offered nothing since its last report after a busy spell: its
		// traffic moved away, until it has some again (see moved).
		wasMoved = st.moved
		st.moved = r.Demand == 0 && (st.moved || moved(st.rate(), float64(o.cfg.Interval)))
		st.held, st.heldGrant, st.heldCarry = r.Cap, r.HasGrant, r.HasGrant && r.Carry
		if c != nil && c.answered(r.Ack) { // as Acknowledge takes them
			raise(&st.reportAck, r.Ack)
		}
		if r.HasGrant && o.foreign(r.CapFrom, r.CapFromIncarnation) && (!st.hasForeign || r.Cap < st.foreignCap) {
			if st.hasForeign {
				w.foreignCaps -= st.foreignCap
			} else {
				w.nForeign++
				st.cutShare = o.cutShare(w, st, c)
			}
			st.foreignCap, st.hasForeign = r.Cap, true
			w.foreignCaps += r.Cap
			// Out of contact with this owner since before the window
			// began, it was served by an owner on its side of a partition
			// (see sideBound); lost during the window, by one that split
			// what its side held of this owner's (see cutBound).
			if c == nil || !c.self {
				if o.outAtStart(contactBefore(c, r.Key.WindowStart, nowNs), r.Key.WindowStart) {
					w.otherSide = true
				} else {
					w.cutSide = true
				}
			}
		}
		// What this owner told the origin of the others' counts, in an
		// answer the origin applied (see told).
		if incarnation == st.incarnation {
			if r.KnownFrom == o.cfg.Self && r.KnownFromIncarnation == o.cfg.SelfIncarnation {
				st.told = max(st.told, r.KnownGlobal-r.KnownAcked)
			}
			if c != nil && r.Ack != 0 && r.Ack == st.givenSeq {
				st.told = max(st.told, st.givenOthers)
			}
		}
		// A predecessor's knowledge matters only for origins this owner had
		// no history of in this window: an owner that kept its per-origin
		// counts (say, through a partition and its heal) needs none. Unless
		// it lost the series and got it back: the other owner's total may
		// hold counts that reached it only, of origins this one knew too.
		if o.foreign(r.KnownFrom, r.KnownFromIncarnation) && (fresh || st.snapFrom != "" || w.regained) {
			// A snapshot of another owner's total after this one told the
			// origin something is bounded by it (see hidden); what this
			// owner's total holds as hidden is read before the snapshot
			// replaces the origin's last, and only then: it walks the
			// window's origins.
			bound := r.KnownFrom != o.cfg.Self && !w.regained && st.told > 0
			var hiddenBefore int64
			if bound {
				hiddenBefore = w.hidden()
			}
			if st.snapFrom == "" {
				w.snaps++
			}
			st.snapOthers, st.snapOwn = r.KnownGlobal-r.KnownAcked, r.KnownAcked
			st.snapFrom, st.snapInc, st.snapRun = r.KnownFrom, r.KnownFromIncarnation, incarnation
			st.snapHead, st.snapTold = 0, 0
			if bound && st.snapOthers >= st.told && st.told > hiddenBefore {
				// What this owner told the origin held what its total
				// held as hidden then, which this snapshot replaces.
				st.snapTold = st.told - hiddenBefore
			}
			if r.KnownFrom == o.cfg.Self {
				w.prevRunKnown = true // a total an earlier run of this member answered
				st.snapHead = r.KnownHead
			}
		} else if o.foreign(r.KnownFrom, r.KnownFromIncarnation) && st.base == 0 {
			// An origin this owner kept counting brings another owner's
			// total (the members' views named that owner for a while):
			// no snapshot of its own (see above), but what that owner
			// holds of it is not hidden from this one (see otherPart).
			st.otherPart = max(st.otherPart, r.KnownAcked)
		}
	}
	switch {
	case origin == o.cfg.Self:
		if r.Local != nil && incarnation == o.cfg.SelfIncarnation {
			ser.local = r.Local
		}
	case ser.local != nil:
		o.ownNow(w)
	}
	global := w.total()
	if !o.cfg.Lease {
		if c != nil {
			st.givenSeq, st.givenOthers = c.seq, global-r.Own // see told
		}
		return Answer{Global: global}
	}
	if stale || r.Stray {
		o.refreshSlot(w, st)
		return Answer{Global: global}
	}
	grant, spare := o.grant(nowNs, r.Key, w, st)
	prompt := o.prompt(nowNs, c, ser, r, grant-st.base, spare, wasMoved)
	// A grant carries into the next window when the origin admitted
	// something in this one: a busy origin keeps admitting across the
	// window start, and reports there within a sync interval; an idle one
	// asks again when it needs to, and is reserved nothing meanwhile.
	first := !st.hasGiven
	st.given, st.hasGiven, st.carry = grant, true, st.total() > 0
	if c != nil {
		st.givenSeq = c.seq // the answer Hello numbered for this batch
		st.givenOthers = global - r.Own
		if first {
			st.firstSeq = c.seq
		}
	}
	o.refreshSlot(w, st)
	// The cap is on the origin's estimate in its current incarnation.
	return Answer{Global: global, Grant: grant - st.base, HasGrant: true, Carry: st.carry, Spare: spare, Head: o.head(w, origin), Prompt: prompt}
}

// prompt reports whether the answer to r, which lets the origin reach g
// (in its incarnation) and tells it spare, asks for a report at once
// (Answer.Prompt), and records r if it is an ask in vain: a member in
// contact with demand whose grant lets it admit nothing more, told that
// budget may come. Its request waits for that budget, which the cap of a
// member whose traffic moved away holds until that member acknowledges a
// lower one, an interval later if it waits for its next report (issue
// 12, sim/testdata/clients-move-midwindow, explorer scenario
// explore-1-295). An origin whose report without demand comes after a
// busy spell is asked only if the answer leaves it some of its cap beyond
// its count, or if its traffic seemed to have moved away at its last
// report already (moved): one whose traffic only paused for an interval
// gets it back at once, and cut to its count and asked at once, it gave
// its last unit away and, with a small limit, was refused while a unit
// stayed unallocated (cmd/peerlimit's TestThreeProcesses, 30 requests
// round robin over three processes for a limit of 20: 19 were admitted
// in every run). The lock must be held.
func (o *Owner) prompt(nowNs int64, c *contact, ser *OwnerSeries, r *Report, g, spare int64, wasMoved bool) bool {
	start := r.Key.WindowStart
	if r.Demand > 0 {
		if g <= r.Own && spare > 0 && c != nil && o.inContact(c, nowNs) {
			ser.waitAt, ser.waitStart = nowNs, start
		}
		return false
	}
	return (wasMoved || g > r.Own) && r.HasGrant && g < r.Cap && ser.waitAt != 0 && ser.waitStart == start && nowNs-ser.waitAt < int64(o.cfg.Interval)
}

// ownNow raises this owner's own count in w to what its entry of the
// series holds now (see Report.Local), before it answers another origin:
// its grant and total then count what this owner admitted until now, as
// they count another origin's admissions until its report. The lock must
// be held; the entry's is taken inside it (nothing takes the owner's lock
// holding an entry's).
func (o *Owner) ownNow(w *ownerWindow) {
	ser := w.series
	st := w.mine
	if st == nil || st.incarnation != o.cfg.SelfIncarnation {
		return // not merged in this window yet: the next merge counts it
	}
	en := ser.local
	var buf Slot
	en.mu.Lock()
	s, dead := en.Slot(w.start, &buf), en.dead
	var own int64
	if s != nil && !dead {
		own = s.Own
		if s.CountedBy(own) { // counted here from now on
			en.Store(s)
		}
	}
	en.mu.Unlock()
	if dead {
		ser.local = nil
		return
	}
	if w.raiseOwn(st, own) {
		o.refreshSlot(w, st)
	}
}

// raiseOwn raises st's own count in w to own if that is more, and reports
// whether it did. The lock must be held.
func (w *ownerWindow) raiseOwn(st *originState, own int64) bool {
	if own <= st.own {
		return false
	}
	w.counted += own - st.own
	st.own = own
	return true
}

// addSeries adds k's series (its window start ignored), which the owner
// does not hold. The lock must be held.
func (o *Owner) addSeries(k Key) *OwnerSeries {
	k.WindowStart = 0
	s := &OwnerSeries{owner: o, key: k, hash: k.SeriesHash()}
	s.next = o.series[s.hash&o.bucketMask]
	o.series[s.hash&o.bucketMask] = s
	return s
}

// decay returns how much of an origin's rate is left after dt ns: it
// decays over five sync intervals. The last result is kept: the reports of
// a batch were all made at one time, as were those of the batch before, so
// that most of them ask for the same dt. The lock must be held.
func (o *Owner) decay(dt int64) float64 {
	if dt != o.decayDt || o.decayDt == 0 {
		o.decayDt, o.decayOf = dt, math.Exp(-float64(dt)/float64(5*o.cfg.Interval))
	}
	return o.decayOf
}

// foreign reports whether an owner name and incarnation are another
// owner's (or another run of this one), not "" and not this run.
func (o *Owner) foreign(from string, inc uint64) bool {
	return from != "" && (from != o.cfg.Self || inc != o.cfg.SelfIncarnation)
}

// prevOrigin returns the origin's state in the window before w, if this
// owner has one.
func (w *ownerWindow) prevOrigin(name string) *originState {
	if p := w.series.window(w.start - int64(w.series.key.Period)); p != nil {
		return p.find(name)
	}
	return nil
}

// add adds origin name's state to the window, which has none; self says
// the origin is the owner itself, and members is how many members the
// owner knows, which sizes a new slab.
func (w *ownerWindow) add(name string, self bool, members int) *originState {
	var s *originState
	if len(w.origins) == 0 {
		w.first = originState{name: name, self: self}
		s = &w.first
	} else {
		if len(w.slab) == cap(w.slab) {
			w.slab = make([]originState, 0, min(max(members-len(w.origins), 1), originsScan))
		}
		w.slab = append(w.slab, originState{name: name, self: self})
		s = &w.slab[len(w.slab)-1]
	}
	w.origins = append(w.origins, s)
	if self {
		w.mine = s
	}
	if w.byName != nil {
		w.byName[name] = s
	} else if len(w.origins) > originsScan {
		w.byName = make(map[string]*originState, 2*len(w.origins))
		for _, o := range w.origins {
			w.byName[o.name] = o
		}
	}
	return s
}

// originsScan is how many origins a window finds by scanning; past it, by
// a map (an owner's work per report stays linear in the members).
const originsScan = 8

func (w *ownerWindow) find(name string) *originState {
	if w.byName != nil {
		return w.byName[name]
	}
	for _, s := range w.origins {
		if s.name == name {
			return s
		}
	}
	return nil
}

// total is the window's global count: the sum of the origins' cumulative
// counts, plus the counts only a predecessor owner saw.
func (w *ownerWindow) total() int64 { return w.counted + w.hidden() }

// hidden estimates the counts of origins that reported to a previous owner
// and will never report here (they left or crashed). An origin o that last
// heard from a previous owner knew the others' total there; every other
// origin that reports here accounts for its part of it (see part: after a
// partition heals, the two sides' owners each knew part of the other side,
// and the origins of both sides report here; an owner that gets a series
// back knew part of what its successor counted); the rest is hidden. The
// largest such estimate is kept. Only knowledge from another owner is
// used, so this owner's own answers never feed back into it. A total an
// earlier run of this owner answered comes with that run's head
// (snapHead): what it may have admitted itself after the answer is hidden
// too (sim/testdata/owner-restart-quick).
func (w *ownerWindow) hidden() int64 {
	if w.snaps == 0 {
		return 0
	}
	var part int64
	for _, x := range w.origins {
		part += x.part()
	}
	var h int64
	for _, o := range w.origins {
		if o.snapFrom == "" {
			continue
		}
		e := o.snapOthers + o.snapHead - (part - o.part()) - o.earlierPart()
		if o.snapTold > 0 {
			// The other owner served the origin after this one had told it
			// the others' counts, which it took over as a snapshot (a
			// concurrent owner across a partition, or one that took the
			// series for a while): those counts are in this owner's total
			// already, counted or hidden, and all but what the other owner
			// added since are (snapTold is what it told less what was
			// hidden then, see report).
			e = min(e, o.snapOthers-o.snapTold)
		}
		h = max(h, e)
	}
	return h
}

// Sweep drops windows that ended more than a period plus the grace ago,
// and returns how many it dropped. It visits only those: the windows are
// kept by when they expire (Owner.expiring), so that an owner of a few
// hundred thousand series does not walk them all every second (in
// TestMillionTenants that walk was an eighth of each process's sync CPU).
func (o *Owner) Sweep(now time.Time) int {
	nowNs := now.UnixNano()
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for at, ws := range o.expiring {
		if at >= nowNs {
			continue
		}
		for _, w := range ws {
			if o.drop(w) {
				n++
			}
		}
		delete(o.expiring, at)
	}
	o.nWindows -= n
	return n
}

// drop removes window w from its series, and the series from the owner if
// it has no window left, and reports whether w was there. The lock must be
// held.
func (o *Owner) drop(w *ownerWindow) bool {
	s := w.series
	i := slices.Index(s.wins, w)
	if i < 0 {
		return false
	}
	s.wins = slices.Delete(s.wins, i, i+1)
	if len(s.wins) > 0 {
		return true
	}
	s.gone = true // its handles look the series up again
	h := s.hash & o.bucketMask
	if head := o.series[h]; head == s {
		if s.next == nil {
			delete(o.series, h)
		} else {
			o.series[h] = s.next
		}
	} else {
		for p := head; p != nil; p = p.next {
			if p.next == s {
				p.next = s.next
				break
			}
		}
	}
	return true
}

// OwnerStats reports an owner's size.
type OwnerStats struct {
	Windows int
	// Dropped counts reports for new windows refused because MaxWindows
	// was reached.
	Dropped uint64
}

// Stats returns the owner's size and drops.
func (o *Owner) Stats() OwnerStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return OwnerStats{Windows: o.nWindows, Dropped: o.dropped}
}
