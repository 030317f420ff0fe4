package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Report is the content of results.json: one scenario, one seed, the
// results of every policy run. A plain value; not safe for concurrent
// mutation.
type Report struct {
	Scenario string    `json:"scenario"`
	Seed     uint64    `json:"seed"`
	Results  []*Result `json:"results"`
}

// JSON returns the report as indented JSON with a final newline. The same
// report always gives the same bytes.
func (r *Report) JSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return b.Bytes(), nil
}

// Result is what one policy did in one scenario. Run returns a new one;
// it is a plain value, safe to read from several goroutines.
type Result struct {
	Policy Policy `json:"policy"`
	// MaxOvershootPct is the largest max(0, admitted-limit)/limit over the
	// measured windows, in percent; MaxUndershootPct the largest
	// max(0, min(offered, limit)-admitted)/min(offered, limit).
	MaxOvershootPct  float64 `json:"max_overshoot_pct"`
	MaxUndershootPct float64 `json:"max_undershoot_pct"`
	// FalseDenials counts the requests of measured windows wrongly denied:
	// in each window, as many of the denied requests as the limit still had
	// room for when the window ended (Window.FalseDenials).
	// MaxFalseDenialPct is the largest share of a window's offered requests
	// wrongly denied, in percent.
	FalseDenials      int64   `json:"false_denials"`
	MaxFalseDenialPct float64 `json:"max_false_denial_pct"`
	// SyncMessages counts every message put on the simulated wire, whether
	// it arrived or not: each sync request (each copy of a duplicated one)
	// and each answer (to the peer protocol or the central store); SyncBytes
	// the sum of their proto.Size. Local merges of a member's own keys are
	// not messages.
	SyncMessages int64 `json:"sync_messages"`
	SyncBytes    int64 `json:"sync_bytes"`
	// Windows are the measured windows: complete (inside the run) and not
	// starting before the warm-up ends, per tenant and SLA tier.
	Windows []Window `json:"windows"`
	// Stats are the run's cost (not in results.json: they vary).
	Stats Stats `json:"-"`
	// Shift is how far the clock the windows were counted on is ahead of
	// virtual time: the members' median clock offset under
	// Scenario.MedianClock, else 0.
	Shift time.Duration `json:"-"`
}

// Window is the ground truth of one window of one tier of one tenant,
// counted by the simulator across all instances, by virtual (true) time,
// or by the members' median clock under Scenario.MedianClock. A plain
// value.
type Window struct {
	Tenant string `json:"tenant"`
	// SLA is the SLA id and the tier's period: "api/10s".
	SLA string `json:"sla"`
	// WindowStart is in seconds since the start of the run.
	WindowStart float64 `json:"window_start"`
	Limit       int64   `json:"limit"`
	// Offered counts the requests that arrived in the window and that no
	// other tier of the SLA denied; Admitted those admitted. Charged counts
	// the requests admitted and charged to the window: a request that
	// waited for the owner's answer across the window's start arrived in
	// the window before.
	Offered  int64 `json:"offered"`
	Admitted int64 `json:"admitted"`
	Charged  int64 `json:"charged"`
	// before is what the tier charged to the window before this one
	// (measured or not): what a sliding tier weighs at this window's
	// start, which the partition-safe reference holds back.
	before int64
	// siblingRoom bounds what the window could have admitted beyond what
	// it charged, when the SLA has other tiers: a request is charged to
	// every tier or to none, so one more admitted here takes one more of
	// each other tier's windows that overlap this one. It is, over the
	// other tiers, the least of the room their overlapping windows ended
	// with (limit minus charged, summed over the windows), if siblings
	// (the SLA has other tiers).
	siblingRoom int64
	siblings    bool
}

// overshootBeyond reports whether the window charged more than pct percent
// of its limit beyond it, with at least one request of slack when pct > 0:
// the rule of an expect line's overshoot<= bound, and of the explorer's
// overshoot target (pct 1).
func (w Window) overshootBeyond(pct float64) bool {
	allowed := pct / 100 * float64(w.Limit)
	if pct > 0 {
		allowed = max(allowed, 1)
	}
	return float64(w.Charged-w.Limit) > allowed+1e-9
}

// FalseDenials returns how many of the window's denied requests the limit
// had room for: min(offered-admitted, max(0, limit-charged)), and, when
// the SLA has other tiers, no more than the room their windows that
// overlap this one ended with: a request they had no room for was not
// wrongly denied, whichever tier the decision named.
func (w Window) FalseDenials() int64 {
	n := min(w.Offered-w.Admitted, w.Limit-w.Charged)
	if w.siblings {
		n = min(n, w.siblingRoom)
	}
	return max(0, n)
}

// FalseDenialShare returns FalseDenials / offered, or 0 when nothing was
// offered.
func (w Window) FalseDenialShare() float64 {
	if w.Offered <= 0 {
		return 0
	}
	return float64(w.FalseDenials()) / float64(w.Offered)
}

// Overshoot returns max(0, charged-limit)/limit.
func (w Window) Overshoot() float64 {
	return float64(max(0, w.Charged-w.Limit)) / float64(w.Limit)
}

// Undershoot returns max(0, min(offered, limit)-charged)/min(offered,
// limit), or 0 when nothing was offered: how much of the window's budget
// went unused while it was asked for.
func (w Window) Undershoot() float64 {
	m := min(w.Offered, w.Limit)
	if m <= 0 {
		return 0
	}
	return float64(max(0, m-w.Charged)) / float64(m)
}

func (w *world) result() *Result {
	r := &Result{Policy: w.policy, SyncMessages: w.messages, SyncBytes: w.bytes, Stats: w.stats, Windows: []Window{}, Shift: time.Duration(w.shift)}
	var over, under, fd float64
	for _, s := range w.series {
		for i, t := range s.sla.Tiers {
			per := int64(t.Period)
			tc := s.tiers[i]
			for k := range tc.offered {
				// Complete windows after the warm-up, on the clock they are
				// counted on: under Scenario.MedianClock the same windows as
				// by virtual time, though the last may end up to the shift
				// after the run (and lack that part of its traffic).
				start := int64(k) * per
				if start < int64(w.sc.Warmup) || start+per > w.end {
					continue
				}
				win := Window{
					Tenant:      s.tenant,
					SLA:         tierName(s.sla.ID, t.Period),
					WindowStart: time.Duration(start).Seconds(),
					Limit:       t.Threshold,
					Offered:     tc.offered[k],
					Admitted:    tc.admitted[k],
					Charged:     tc.charged[k],
				}
				if k > 0 {
					win.before = tc.charged[k-1]
				}
				win.siblingRoom, win.siblings = s.siblingRoom(i, start, start+per)
				over = max(over, win.Overshoot())
				under = max(under, win.Undershoot())
				fd = max(fd, win.FalseDenialShare())
				r.FalseDenials += win.FalseDenials()
				r.Windows = append(r.Windows, win)
			}
		}
	}
	// Retries denied again while their window had room left at its end:
	// the Retry-After they were given did not tell the truth.
	for _, s := range w.series {
		tc := s.tiers[0]
		for k, n := range tc.retriesDenied {
			r.Stats.RetriesWronglyDenied += min(n, max(0, s.sla.Tiers[0].Threshold-tc.charged[k]))
		}
	}
	r.MaxOvershootPct = round3(over * 100)
	r.MaxUndershootPct = round3(under * 100)
	r.MaxFalseDenialPct = round3(fd * 100)
	return r
}

// siblingRoom returns Window.siblingRoom for tier i's window [start, end),
// and whether the SLA has other tiers.
func (s *series) siblingRoom(i int, start, end int64) (room int64, ok bool) {
	for j, t := range s.sla.Tiers {
		if j == i {
			continue
		}
		per := int64(t.Period)
		var r int64
		for k := int(max(0, start/per)); k < len(s.tiers[j].charged) && int64(k)*per < end; k++ {
			r += max(0, t.Threshold-s.tiers[j].charged[k])
		}
		if !ok || r < room {
			room, ok = r, true
		}
	}
	return room, ok
}

func tierName(id string, period time.Duration) string { return id + "/" + period.String() }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// Check compares r with the scenario's expect lines for r's policy. It
// returns the bounds r breaks (failures) and the design targets it misses
// (known misses, recorded with a looser bound next to the target).
//
// overshoot<=X% holds when every measured window admits at most
// max(X% of the limit, 1 request) above its limit (just X% when X is 0);
// overshoot>=X% and the undershoot bounds compare the maximum percentages;
// messages compares SyncMessages.
func (sc *Scenario) Check(r *Result) (failures, misses []string) {
	for _, e := range sc.Expect {
		if e.Policy != r.Policy {
			continue
		}
		for _, b := range e.Bounds {
			if msg, ok := b.holds(r); !ok {
				failures = append(failures, fmt.Sprintf("%s:%d: %s: %s", sc.Name, e.Line, r.Policy, msg))
			}
		}
		for _, b := range e.Targets {
			if msg, ok := b.holds(r); !ok {
				misses = append(misses, fmt.Sprintf("%s:%d: %s: target %s", sc.Name, e.Line, r.Policy, msg))
			}
		}
	}
	return failures, misses
}

func (b Bound) holds(r *Result) (string, bool) {
	var got float64
	switch b.Metric {
	case "overshoot":
		got = r.MaxOvershootPct
		if b.Op == "<=" {
			for _, w := range r.Windows {
				if w.overshootBeyond(b.Value) {
					return fmt.Sprintf("%v: %s %s at %gs admitted %d of %d (%.3f%%)",
						b, w.Tenant, w.SLA, w.WindowStart, w.Charged, w.Limit, 100*w.Overshoot()), false
				}
			}
			return "", true
		}
	case "undershoot":
		got = r.MaxUndershootPct
	case "falsedeny":
		got = r.MaxFalseDenialPct
	case "messages":
		got = float64(r.SyncMessages)
	}
	ok := got <= b.Value
	if b.Op == ">=" {
		ok = got >= b.Value
	}
	if !ok {
		return fmt.Sprintf("%v: got %g", b, got), false
	}
	return "", true
}
