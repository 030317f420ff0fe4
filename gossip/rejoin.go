package gossip

import (
	"slices"
	"time"
)

// rejoinSet remembers the gossip addresses of members that failed or left,
// so that the rejoin loop can try them again after a partition heals. It is
// bounded by count (max, oldest forgotten first) and by age (forget).
//
// Time is passed in. The zero value is not usable; use newRejoinSet. It is
// not safe for concurrent use (Gossip guards it with a leaf mutex).
type rejoinSet struct {
	max    int
	forget time.Duration
	byName map[string]failedMember
}

type failedMember struct {
	addr string
	at   time.Time
}

func newRejoinSet(max int, forget time.Duration) *rejoinSet {
	return &rejoinSet{max: max, forget: forget, byName: make(map[string]failedMember)}
}

// failed records that member name, last seen at addr, failed or left at now.
func (r *rejoinSet) failed(name, addr string, now time.Time) {
	r.byName[name] = failedMember{addr: addr, at: now}
	for len(r.byName) > r.max {
		oldest := ""
		var at time.Time
		for n, f := range r.byName {
			if oldest == "" || f.at.Before(at) || (f.at.Equal(at) && n < oldest) {
				oldest, at = n, f.at
			}
		}
		delete(r.byName, oldest)
	}
}

// alive records that member name is alive again: nothing to rejoin.
func (r *rejoinSet) alive(name string) { delete(r.byName, name) }

// len reports how many addresses are remembered.
func (r *rejoinSet) len() int { return len(r.byName) }

// targets forgets entries older than forget, then returns the addresses to
// join: the seeds (in order) then the remembered addresses (sorted), without
// duplicates, without self and without addresses in alive.
func (r *rejoinSet) targets(now time.Time, seeds []string, self string, alive map[string]bool) []string {
	for n, f := range r.byName {
		if now.Sub(f.at) > r.forget {
			delete(r.byName, n)
		}
	}
	seen := map[string]bool{self: true}
	var out []string
	add := func(a string) {
		if !seen[a] && !alive[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, s := range seeds {
		add(s)
	}
	remembered := make([]string, 0, len(r.byName))
	for _, f := range r.byName {
		remembered = append(remembered, f.addr)
	}
	slices.Sort(remembered)
	for _, a := range remembered {
		add(a)
	}
	return out
}
