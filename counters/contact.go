package counters

import (
	"math"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"
)

// contact is what an owner knows of one member's link to it: whether the
// member gets its answers. A member is in contact while it acknowledges
// answers sent recently (OwnerConfig.Contact); requests that arrive while
// the answers do not (a one-way cut) do not count.
type contact struct {
	since  int64  // when this owner first saw the member (Unix ns)
	seq    uint64 // seq of the newest answer sent to it
	sent   [contactRing]int64
	acked  int64  // send time of the newest answer it acknowledged
	ackSeq uint64 // and its number
	// coveredAck is the newest answer acknowledged by a batch that covers
	// it (Acknowledge): the member's counts here include what it admitted
	// under its caps before that answer reached it.
	coveredAck uint64
	// synced is when the member last sent a batch under the same
	// membership view as this owner's (Unix ns), and syncedAck the send
	// time of the newest answer such a batch acknowledged.
	synced, syncedAck int64
	// The newest gap in contact: no answer sent between gapFrom (the send
	// time of the last one acknowledged before it, or since) and gapAck
	// (the first acknowledged after it) was acknowledged, and the two are
	// at least Contact apart, so the member was out of contact between
	// them (a partition that healed). 0: none seen.
	gapFrom, gapAck int64
	self            bool // the record of this owner itself, always in contact
	// members is how many members the member said it counts (PeerMembers),
	// membersAt when (Unix ns), and membersSince since when it has said
	// that number.
	members                 int
	membersAt, membersSince int64
	// at is the member's place in ownerMembers.sorted, -1 if it is not
	// there: Acknowledge counts the record's changes in ownerMembers.vers[at].
	at int
}

// contactRing is how many recent answers' send times an owner keeps per
// member. A member acknowledges the newest answer it has when it sends its
// next batch, one sync interval later: a few slots are plenty.
const contactRing = 16

// Hello records that origin sent a batch at now and returns the number of
// the answer to it, to be sent back with it. Numbers start from the time
// this owner first saw the member, so that an acknowledgement meant for
// another run of this owner never matches. Call it once per batch, before
// its reports, and Acknowledge once they are counted.
func (o *Owner) Hello(now time.Time, origin string) uint64 {
	nowNs := now.UnixNano()
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.contact(nowNs, origin)
	c.seq++
	c.sent[c.seq%contactRing] = nowNs
	return c.seq
}

// PeerMembers records that a batch origin sent at now says it counts n
// members in its static shares (its alive members and those it lost
// lately; 0: it did not say). Call it with Hello, before the batch's
// reports. See grant: an owner that joined during a window and hears of
// more members than it knows cannot know who held that window's budget.
func (o *Owner) PeerMembers(now time.Time, origin string, n int) {
	if n <= 0 {
		return
	}
	nowNs := now.UnixNano()
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.contact(nowNs, origin)
	if n != c.members {
		c.membersSince = nowNs
	}
	// See countedCache: a number said again while no kept result has
	// taken it for out of the contact period changes nothing.
	if n != c.members || c.membersAt+int64(o.cfg.Contact) <= max(nowNs, o.countedAt) || nowNs < c.membersAt {
		o.counted++
	}
	c.members, c.membersAt = n, nowNs
}

// knowsFewer reports whether a member in mw said, within the contact
// period before now, that it counts more members than mw holds. The lock
// must be held.
func (o *Owner) knowsFewer(now int64, mw *memberWindow) bool {
	return o.mostCounted(now, mw, false) > len(mw.names)
}

// mostCounted returns the most members a member in mw said, within the
// contact period before now, that it counts (0 if none said). With
// settled, only numbers a member has said since Settle before now, or
// since within Settle of this owner's first view, count: a member that
// joined is counted by some members a little before the others see it.
// The lock must be held.
//
// Settled, it is kept in the member window (countedCache) while it holds:
// a grant asks for it, and it changes far less often than grants come.
func (o *Owner) mostCounted(now int64, mw *memberWindow, settled bool) int {
	cc := &mw.counted
	if settled && cc.ver == o.counted && cc.firstView == o.firstView && now >= cc.from && now < cc.until {
		return cc.most
	}
	most, until := 0, int64(math.MaxInt64)
	contactT, settle := int64(o.cfg.Contact), int64(o.cfg.Settle)
	for i := range mw.names {
		c := o.members.contact[mw.at[i]]
		if c == nil || now-c.membersAt >= contactT {
			continue
		}
		until = min(until, c.membersAt+contactT)
		if settled && c.membersSince > now-settle && c.membersSince > o.firstView+settle {
			until = min(until, c.membersSince+settle)
			continue
		}
		most = max(most, c.members)
	}
	if settled {
		*cc = countedCache{ver: o.counted, firstView: o.firstView, from: now, until: until, most: most}
		o.countedAt = max(o.countedAt, now)
	}
	return most
}

// Acknowledge records what a batch origin sent at now says of its link to
// this owner: that the member got the answer numbered ack (0: none yet),
// and whether the batch covers it. A batch covers an answer when, with the
// batches before it, it reports every window whose cap that answer or an
// earlier one lowered below what the member had admitted there when it
// arrived: then the counts here include what the member admitted under its
// old caps, and its grants up to that answer are what it holds (see
// received). A batch built under the membership view whose digest is view
// (ViewDigest), if it is this owner's, reports every window the member
// holds a cap in, which covers its acknowledgement too.
//
// Call it after the batch's reports are counted, never before: while a
// large batch is counted a chunk at a time, other members' batches come in
// between, and the member's windows not counted yet would be taken at
// their new caps with their older, lower counts; the others would be given
// what the member had already admitted (three processes at a million
// tenants admitted up to 110 of a limit of 100 that way).
func (o *Owner) Acknowledge(now time.Time, origin string, ack, view uint64, covers bool) {
	nowNs := now.UnixNano()
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.contact(nowNs, origin)
	valid := c.answered(ack)
	if valid && ack > c.ackSeq {
		prev, sent := max(c.since, c.acked), c.sent[ack%contactRing]
		if sent-prev >= int64(o.cfg.Contact) {
			c.gapFrom, c.gapAck = prev, sent
		}
		c.acked, c.ackSeq = max(c.acked, sent), ack
	}
	if view == o.view {
		c.synced = nowNs
		covers = true
		if valid {
			c.syncedAck = max(c.syncedAck, c.sent[ack%contactRing])
		}
	}
	if covers && valid {
		raise(&c.coveredAck, ack)
	}
	if c.at >= 0 {
		m := &o.members
		m.vers[c.at]++
		m.records++
		if len(m.changes) >= 8*len(m.sorted)+64 {
			// Kept sums that have not applied the older half weigh every
			// slot again.
			half := len(m.changes) / 2
			m.changes = m.changes[:copy(m.changes, m.changes[half:])]
			m.changesBase += uint64(half)
		}
		m.changes = append(m.changes, int32(c.at))
	}
}

// answered reports whether ack numbers one of the answers this run of the
// owner sent the member lately (the last contactRing).
func (c *contact) answered(ack uint64) bool {
	return ack != 0 && ack <= c.seq && c.seq-ack < contactRing
}

// contact returns origin's contact record, made if need be. The lock must
// be held.
func (o *Owner) contact(nowNs int64, origin string) *contact {
	c := o.contacts[origin]
	if c == nil {
		c = o.newContact(nowNs, origin)
		o.contacts[origin] = c
		if i, ok := o.members.index[origin]; ok {
			o.members.contact[i], c.at = c, i
			o.members.records++
			o.counted++
		}
	}
	return c
}

// ViewDigest is the digest of a membership view: the names of the alive
// members, in any order.
func ViewDigest(alive []string) uint64 {
	names := slices.Clone(alive)
	slices.Sort(names)
	names = slices.Compact(names)
	d := xxhash.New()
	for _, n := range names {
		d.WriteString(n)
		d.Write([]byte{0})
	}
	return d.Sum64()
}

func (o *Owner) newContact(now int64, name string) *contact {
	return &contact{since: now, seq: uint64(now), self: name == o.cfg.Self, at: -1}
}

// seeMembers starts contact tracking for members seen for the first time
// and forgets the members no longer known. The lock must be held.
func (o *Owner) seeMembers(now int64, alive []string) {
	for _, m := range alive {
		if o.contacts[m] == nil {
			o.contacts[m] = o.newContact(now, m)
		}
	}
	for m := range o.contacts {
		if !o.members.alive[m] {
			if _, gone := o.members.gone[m]; !gone {
				delete(o.contacts, m)
			}
		}
	}
}

// contactAt returns when the member was last known to be in contact: the
// send time of the newest answer it acknowledged, or when this owner first
// saw it. This owner itself is always in contact, as is a member it has no
// record of yet (c nil). c is the member's contact record (o.contacts[name]).
// The lock must be held.
func contactAt(c *contact, now int64) int64 {
	if c == nil || c.self {
		return now // a member without a record is new here
	}
	return max(c.since, c.acked)
}

// lastSent returns when this owner sent the member its newest answer, or
// first saw it if it sent none since: the member can have heard nothing of
// it later. This owner itself, or a member without a record (c nil), hears
// it now.
func lastSent(c *contact) int64 {
	if c == nil || c.self {
		return math.MaxInt64
	}
	return max(c.since, c.sent[c.seq%contactRing])
}

// contactBefore returns when the member was last known to be in contact at
// or before start (a window start), for windows that began up to now: as
// contactAt, but a gap in contact that ended after start (the member came
// back from a partition during the window) puts it back to the gap's
// beginning, since the member spent the window's beginning out of contact
// (with its static share, or caps of an owner on its side). The lock must
// be held.
func contactBefore(c *contact, start, now int64) int64 {
	if c != nil && !c.self && c.gapAck > start {
		return c.gapFrom
	}
	return contactAt(c, now)
}

// outAtStart reports whether a member last in contact at c (contactBefore)
// was out of contact when a window began at start, an interval's slack
// given: it may spend its static share in the window, which it falls back
// to when it reaches no owner (FallbackAfter) and an owner on its side of
// a partition splits with its side's members.
func (o *Owner) outAtStart(c, start int64) bool {
	return c < start-int64(o.cfg.Contact)+int64(o.cfg.Interval)
}

// synced reports whether the member sent a batch under this owner's view
// since the membership last changed: then it reported every window it
// holds a cap in for this owner's keys. This owner itself too, once it
// merged its own windows under the view (Acknowledge at the end of a full
// round): until then its windows of series it took over hold what the
// previous owner granted it, which nobody here has counted yet. One that
// never numbered a merge (Hello) is taken as synced. The lock must be
// held.
func (o *Owner) synced(name string, c *contact) bool {
	if c == nil {
		return name == o.cfg.Self
	}
	return c.synced >= o.members.changedAt
}

// InContact reports whether the member acknowledged an answer of this owner
// sent within the Contact period before now.
func (o *Owner) InContact(now time.Time, name string) bool {
	nowNs := now.UnixNano()
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.inContact(o.contacts[name], nowNs)
}

// inContact is InContact for the member whose contact record is c (nil:
// a member new here, or this owner itself), the lock held.
func (o *Owner) inContact(c *contact, nowNs int64) bool {
	return nowNs-contactAt(c, nowNs) < int64(o.cfg.Contact)
}
