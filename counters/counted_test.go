package counters

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// mostCountedWalk is mostCounted without its kept result: the walk of
// every member's record.
func (o *Owner) mostCountedWalk(now int64, mw *memberWindow) int {
	most := 0
	for i := range mw.names {
		c := o.members.contact[mw.at[i]]
		if c == nil || now-c.membersAt >= int64(o.cfg.Contact) {
			continue
		}
		if c.membersSince > now-int64(o.cfg.Settle) && c.membersSince > o.firstView+int64(o.cfg.Settle) {
			continue
		}
		most = max(most, c.members)
	}
	return most
}

// TestMostCountedKeptMatchesWalk checks the result mostCounted keeps
// (countedCache) against a walk of the members at every step of random
// histories: members saying numbers, again or new, falling silent for
// longer than the contact period, the membership changing, and the time
// going back a little now and then (the members' clock is a median that
// moves).
func TestMostCountedKeptMatchesWalk(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		o := NewOwner(OwnerConfig{Lease: true, Self: "o", Contact: time.Second, Settle: 400 * time.Millisecond})
		names := []string{"o"}
		for i := 0; i < 2+r.IntN(8); i++ {
			names = append(names, "m"+strconv.Itoa(i))
		}
		now := base
		o.SetMembers(now, names, nil)
		checks := 0
		for step := 0; step < 3000; step++ {
			d := time.Duration(r.IntN(60)) * time.Millisecond
			if r.IntN(20) == 0 {
				d = -time.Duration(r.IntN(30)) * time.Millisecond
			}
			if r.IntN(100) == 0 {
				d = time.Duration(500+r.IntN(1500)) * time.Millisecond // some fall out of the contact period
			}
			now = now.Add(d)
			switch k := r.IntN(10); {
			case k < 2:
				n := len(names) - 1 + r.IntN(3)
				if r.IntN(8) > 0 {
					n = len(names)
				}
				o.PeerMembers(now, names[r.IntN(len(names))], n)
			case k == 5 && r.IntN(10) == 0:
				if len(names) > 3 && r.IntN(2) == 0 {
					names = names[:len(names)-1]
				} else {
					names = append(names, "m"+strconv.Itoa(100+step))
				}
				o.SetMembers(now, names, nil)
			default:
				o.mu.Lock()
				since := base.UnixNano() - int64(time.Minute) // two member windows, each keeping its own
				if r.IntN(2) == 0 {
					since = base.UnixNano()
				}
				mw := o.members.window(since)
				got, want := o.mostCounted(now.UnixNano(), mw, true), o.mostCountedWalk(now.UnixNano(), mw)
				o.mu.Unlock()
				if got != want {
					t.Fatalf("seed %d step %d: mostCounted %d, the walk %d", seed, step, got, want)
				}
				checks++
			}
		}
		if checks < 500 {
			t.Fatalf("seed %d: only %d checks", seed, checks)
		}
	}
}
