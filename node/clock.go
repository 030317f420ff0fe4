package node

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The members' clocks, brought together.
//
// A window begins at floor(now / period) * period on each member's own
// clock. Members whose clocks differ by δ disagree on where windows begin
// for δ: a member whose clock is ahead spends its grant of the next window
// while the others still spend the current one's, and a request that
// waited for its owner across a window's end is decided there the moment
// the fast member's next window begins. Each window's caps add up to the
// limit, but the requests of two windows' caps then fall into one window of
// real time: over the explorer's 500 scenarios, clock skew of a few to a
// hundred milliseconds caused most of lease's windows over the limit.
//
// So the engine reads every time it is given on a common clock: its own
// plus a shift that takes it to the median of the members' clocks (its own
// counting as one). Each answer of an owner carries the owner's clock as it
// read it (SyncResponse.clock); the member takes the owner's offset as that
// minus the middle of the call (NTP's estimate, off by at most half the
// call's asymmetry), from the shortest of the peer's last clockSamples
// calls. At each full round it sets the shift to the median of the offsets
// of the members alive, less a dead band of clockDeadBand (clocks that
// agree within it stay as they are). Every member computes the median over
// the same members, so their common clocks agree within the estimates'
// error and the band whatever the skew, and one member's clock that is far
// off moves nobody else. A member that has heard no clock (a single node,
// a store, owners of an older version) keeps its own.

// maxClockOffset bounds the offset a peer's answer may show: beyond it (or
// from a call that took longer than maxClockRTT) the sample is ignored.
// Members whose clocks differ by more fail the authentication of their
// calls anyway (see Config.Gossip.SecretKeys).
const (
	maxClockOffset = 30 * time.Second
	maxClockRTT    = time.Second
)

// clockSamples is how many of a peer's recent answers its offset is
// chosen among: the one of the shortest call, whose two ways were the most
// alike (NTP's clock filter).
const clockSamples = 8

// clockDeadBand is how far the median may be from this member's clock
// before it shifts: clocks that agree within it are taken as in step (the
// estimates are not better than that), and beyond it the shift stops that
// much short, so that it does not jump as the median moves across it.
const clockDeadBand = time.Millisecond

// clockSync estimates the peers' clock offsets and the shift to the
// members' median clock.
type clockSync struct {
	shift atomic.Int64 // ns added to every time the engine is given

	mu    sync.Mutex
	peers map[string]*peerClock
	buf   []int64
}

// peerClock is a peer's recent clock samples, a ring.
type peerClock struct {
	off, rtt [clockSamples]int64
	n        int
}

// best returns the offset of the sample of the shortest call.
func (p *peerClock) best() int64 {
	k := 0
	for i := 1; i < min(p.n, clockSamples); i++ {
		if p.rtt[i] < p.rtt[k] {
			k = i
		}
	}
	return p.off[k]
}

// at returns t on the common clock.
func (c *clockSync) at(t time.Time) time.Time {
	if d := c.shift.Load(); d != 0 {
		return t.Add(time.Duration(d))
	}
	return t
}

// sample records an answer from peer that read its clock at peerNs, to a
// call sent at sent and answered at recv on this member's own clock.
func (c *clockSync) sample(peer string, peerNs int64, sent, recv time.Time) {
	rtt := recv.Sub(sent)
	if peerNs == 0 || sent.IsZero() || rtt < 0 || rtt > maxClockRTT {
		return
	}
	off := peerNs - (sent.UnixNano() + rtt.Nanoseconds()/2)
	if off > int64(maxClockOffset) || off < -int64(maxClockOffset) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.peers == nil {
		c.peers = make(map[string]*peerClock)
	}
	p := c.peers[peer]
	if p == nil {
		p = &peerClock{}
		c.peers[peer] = p
	}
	i := p.n % clockSamples
	p.off[i], p.rtt[i] = off, rtt.Nanoseconds()
	p.n++
}

// update sets the shift to the median of the offsets of the members alive
// (sorted; self, at 0, among them) and forgets the offsets of the others.
func (c *clockSync) update(self string, alive []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf[:0], 0)
	for _, m := range alive {
		if p := c.peers[m]; p != nil && m != self {
			c.buf = append(c.buf, p.best())
		}
	}
	for m := range c.peers {
		if _, ok := slices.BinarySearch(alive, m); !ok {
			delete(c.peers, m)
		}
	}
	median := Median(c.buf)
	switch band := int64(clockDeadBand); {
	case median > band:
		median -= band
	case median < -band:
		median += band
	default:
		median = 0
	}
	c.shift.Store(median)
}

// Median returns the median of offsets, sorting them in place: the mean
// of the two middle ones for an even count, 0 for none. A member's shift
// takes it to the median of the members' clock offsets (update); the
// simulator counts windows on the same clock (sim's "measure median").
func Median(offsets []int64) int64 {
	slices.Sort(offsets)
	n := len(offsets)
	switch {
	case n == 0:
		return 0
	case n%2 == 1:
		return offsets[n/2]
	}
	return offsets[n/2-1] + (offsets[n/2]-offsets[n/2-1])/2
}

// ClockShift returns what the engine adds to every time it is given: the
// distance from this member's clock to the median of the members' clocks,
// as estimated from the owners' answers (see clock.go).
func (e *Engine) ClockShift() time.Duration { return time.Duration(e.clock.shift.Load()) }
