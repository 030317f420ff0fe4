package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/internal/cputime"
)

// result is one design's figures from one run.
type result struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	Note string `json:"note"`
	// Skipped, if set, says why the design did not run.
	Skipped string `json:"skipped,omitempty"`

	// Throughput phase: Workers goroutines deciding as fast as they can.
	Decisions         uint64  `json:"decisions"`
	Errors            uint64  `json:"errors"`
	AdmittedFraction  float64 `json:"admitted_fraction"`
	DecisionsPerSec   float64 `json:"decisions_per_sec"`
	P50Ns             float64 `json:"p50_ns"`
	P99Ns             float64 `json:"p99_ns"`
	AllocsPerDecision float64 `json:"allocs_per_decision"`
	// CPU time per decision in the throughput phase: this process (the
	// instances, their background work and the harness), and redis-server.
	CPUPerDecisionNs      float64 `json:"cpu_per_decision_ns"`
	RedisCPUPerDecisionNs float64 `json:"redis_cpu_per_decision_ns"`
	// Calls to the coordinator per second (gRPC sync calls between peers,
	// Redis round trips), flat out and in the paced accuracy phase.
	CoordPerSecFlat  float64 `json:"coord_calls_per_sec_flat_out"`
	CoordPerSecPaced float64 `json:"coord_calls_per_sec_paced"`

	// Accuracy phase: 2x the limit per tenant, round-robin over instances.
	Windows          int     `json:"windows"`
	OfferedPerWindow float64 `json:"offered_per_tenant_window"`  // mean
	Admitted         float64 `json:"admitted_per_tenant_window"` // mean
	Overshoot        float64 `json:"overshoot_max"`              // max over tenant-windows of max(0, a-L)/L
	OvershootMean    float64 `json:"overshoot_mean"`
	Undershoot       float64 `json:"undershoot_max"` // max over tenant-windows of max(0, min(o,L)-a)/min(o,L)
	AccuracyErrors   uint64  `json:"accuracy_errors"`
	PacingDropped    uint64  `json:"pacing_dropped"` // requests the pacers fell too far behind to offer
	// CoordErrors counts failed calls to the coordinator over both phases:
	// failed sync calls (the node then falls back to its static share) or
	// failed Redis round trips.
	CoordErrors uint64 `json:"coord_errors"`
	// CPU used during the accuracy phase, in cores (CPU seconds per second):
	// this process (harness pacers included) and redis-server.
	PacedCores      float64 `json:"paced_cores"`
	PacedRedisCores float64 `json:"paced_redis_cores"`
}

// runDesign builds a design, measures it in both phases and closes it.
func runDesign(ctx context.Context, spec designSpec, e env, log io.Writer) (result, error) {
	r := result{Key: spec.key, Name: spec.name, Note: spec.note}
	fmt.Fprintf(log, "bench: %s: starting\n", spec.key)
	d, err := spec.build(ctx, e)
	if err != nil {
		return r, fmt.Errorf("bench: %s: %w", spec.key, err)
	}
	defer d.close()
	if !spec.redis {
		e.redisPID = 0 // an idle Redis's own housekeeping is not this design's
	}
	errs0 := d.coordErrors()
	T := e.opts.Tenants
	// Disjoint tenants per phase: the accuracy phase starts from fresh
	// limiters whatever the throughput phase did to its own.
	fmt.Fprintf(log, "bench: %s: throughput phase, %v, %d workers\n", spec.key, e.opts.Duration, e.opts.Workers)
	if err := throughput(ctx, d, e, 0, &r); err != nil {
		return r, err
	}
	fmt.Fprintf(log, "bench: %s: accuracy phase, %d windows of %v at 2x the limit\n", spec.key, e.opts.Windows, e.opts.Period)
	if err := accuracy(ctx, d, e, T, &r); err != nil {
		return r, err
	}
	r.CoordErrors = d.coordErrors() - errs0
	fmt.Fprintf(log, "bench: %s: %.0f decisions/s, p50 %.0f ns, p99 %.0f ns, overshoot %.1f%%\n",
		spec.key, r.DecisionsPerSec, r.P50Ns, r.P99Ns, 100*r.Overshoot)
	return r, nil
}

// sampleEvery: the throughput phase times one decision in this many (two
// clock reads cost about as much as a local decision).
const sampleEvery = 16

// reservoirSize bounds the latency samples kept per worker.
const reservoirSize = 1 << 15

type workerStats struct {
	decisions, errors, admitted uint64
	seen                        uint64
	rnd                         uint64
	lat                         []int64
	_                           [64]byte // keep workers' counters off each other's cache lines
}

func (w *workerStats) record(ns int64) {
	w.seen++
	if len(w.lat) < cap(w.lat) {
		w.lat = append(w.lat, ns)
		return
	}
	// Reservoir sampling (xorshift64).
	w.rnd ^= w.rnd << 13
	w.rnd ^= w.rnd >> 7
	w.rnd ^= w.rnd << 17
	if j := w.rnd % w.seen; j < uint64(len(w.lat)) {
		w.lat[j] = ns
	}
}

// throughput runs opts.Workers goroutines deciding as fast as they can for
// opts.Duration, round-robin over instances and the tenants [base,
// base+Tenants).
func throughput(ctx context.Context, d design, e env, base int, r *result) error {
	o := e.opts
	N, T, W := o.Instances, o.Tenants, o.Workers
	// Warm up: every series exists before the clock starts.
	for t := 0; t < T; t++ {
		for i := 0; i < N; i++ {
			if _, err := d.decide(ctx, i, base+t); err != nil {
				return fmt.Errorf("bench: warm-up: %w", err)
			}
		}
	}
	stats := make([]workerStats, W)
	for w := range stats {
		stats[w].lat = make([]int64, 0, reservoirSize)
		stats[w].rnd = uint64(w)*0x9E3779B97F4A7C15 + 1
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	calls0 := d.coordCalls()
	cpu0, rcpu0 := cputime.Self(), e.redisCPU()
	start := time.Now()
	timer := time.AfterFunc(o.Duration, func() { stop.Store(true) })
	defer timer.Stop()
	for w := 0; w < W; w++ {
		wg.Add(1)
		go func(s *workerStats) {
			defer wg.Done()
			i := uint64(w)
			for k := 0; !stop.Load(); k++ {
				inst, t := int(i%uint64(N)), base+int((i/uint64(N))%uint64(T))
				i += uint64(W)
				var ok bool
				var err error
				if k%sampleEvery == 0 {
					t0 := time.Now()
					ok, err = d.decide(ctx, inst, t)
					s.record(int64(time.Since(t0)))
				} else {
					ok, err = d.decide(ctx, inst, t)
				}
				s.decisions++
				if err != nil {
					s.errors++
				} else if ok {
					s.admitted++
				}
			}
		}(&stats[w])
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, rcpu1 := cputime.Self(), e.redisCPU()
	calls1 := d.coordCalls()
	runtime.ReadMemStats(&m1)
	if err := ctx.Err(); err != nil {
		return err
	}

	var lat []int64
	var admitted uint64
	for i := range stats {
		s := &stats[i]
		r.Decisions += s.decisions
		r.Errors += s.errors
		admitted += s.admitted
		lat = append(lat, s.lat...)
	}
	if r.Decisions == 0 {
		return fmt.Errorf("bench: no decision made in %v", elapsed)
	}
	r.DecisionsPerSec = float64(r.Decisions) / elapsed.Seconds()
	r.AdmittedFraction = float64(admitted) / float64(r.Decisions)
	r.P50Ns, r.P99Ns = percentile(lat, 0.50), percentile(lat, 0.99)
	r.AllocsPerDecision = float64(m1.Mallocs-m0.Mallocs) / float64(r.Decisions)
	r.CoordPerSecFlat = float64(calls1-calls0) / elapsed.Seconds()
	r.CPUPerDecisionNs = float64(cpu1-cpu0) / float64(r.Decisions)
	r.RedisCPUPerDecisionNs = float64(rcpu1-rcpu0) / float64(r.Decisions)
	return nil
}

// percentile returns the q-quantile of xs (nearest rank); it sorts xs.
func percentile(xs []int64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(q*float64(len(xs))+0.5) - 1
	i = min(max(i, 0), len(xs)-1)
	return float64(xs[i])
}

// pacerTick is how often a pacer issues the requests that came due.
const pacerTick = 2 * time.Millisecond

// maxInflight bounds the requests being decided at once in the paced
// phase.
const maxInflight = 256

// maxBacklog is the most a pacer catches up at once; requests further
// behind are dropped (and reported), so that a slow design is offered less
// rather than a burst.
const maxBacklog = 50 * time.Millisecond

// accuracy offers each tenant of [base, base+Tenants) twice its limit per
// period, spread evenly in time, each tenant's requests round-robin over the
// instances, for opts.Windows windows starting at a window boundary, and
// measures what each design admitted in each window.
func accuracy(ctx context.Context, d design, e env, base int, r *result) error {
	o := e.opts
	N, T, P := o.Instances, o.Tenants, int64(o.Period)
	perTenant := 2 * float64(o.Limit) / o.Period.Seconds() // requests per second
	G := min(o.Workers, T)

	// Start at the next window boundary (plus a millisecond, so that no
	// decision of the first window lands in the one before).
	first := counters.WindowStart(time.Now().UnixNano(), P) + P
	end := first + int64(o.Windows)*P
	select {
	case <-time.After(time.Until(time.Unix(0, first+int64(time.Millisecond)))):
	case <-ctx.Done():
		return ctx.Err()
	}

	offered := make([][]int64, T) // [tenant][window]
	admitted := make([][]int64, T)
	for t := range offered {
		offered[t] = make([]int64, o.Windows)
		admitted[t] = make([]int64, o.Windows)
	}
	var errs, dropped atomic.Uint64
	var mu sync.Mutex           // offered and admitted
	var inflight sync.WaitGroup // requests still being decided
	slots := make(chan struct{}, maxInflight)
	calls0 := d.coordCalls()
	cpu0, rcpu0 := cputime.Self(), e.redisCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < G; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []int // tenants of this pacer
			for t := g; t < T; t += G {
				mine = append(mine, t)
			}
			seq := make([]int, len(mine)) // per tenant, for round-robin over instances
			rateG := perTenant * float64(len(mine))
			backlog := rateG * maxBacklog.Seconds()
			tk := time.NewTicker(pacerTick)
			defer tk.Stop()
			last, acc, k := time.Now(), 0.0, 0
			for {
				select {
				case <-ctx.Done():
					return
				case now := <-tk.C:
					acc += rateG * now.Sub(last).Seconds()
					last = now
				}
				if acc > backlog {
					dropped.Add(uint64(acc - backlog))
					acc = backlog
				}
				for ; acc >= 1; acc-- {
					j := k % len(mine)
					k++
					inst := seq[j] % N
					seq[j]++
					ts := time.Now().UnixNano()
					if ts >= end {
						return
					}
					t := mine[j]
					// Each request on its own, as clients send them: a
					// decision that waits (a lease policy request waiting
					// for its owner's answer) holds up no other request.
					// At most maxInflight at once: a design slower than the
					// offered rate is offered less (counted as dropped).
					select {
					case slots <- struct{}{}:
					default:
						dropped.Add(1)
						continue
					}
					inflight.Add(1)
					go func() {
						defer func() { <-slots; inflight.Done() }()
						// The window is read as the decision starts, not
						// when the pacer made the request: on a loaded
						// machine this goroutine may start late, and a
						// request decided in one window but counted in
						// the one before shows as overshoot that no
						// instance admitted.
						win := int((time.Now().UnixNano() - first) / P)
						ok, err := d.decide(ctx, inst, base+t)
						if win >= len(offered[t]) {
							return
						}
						mu.Lock()
						defer mu.Unlock()
						offered[t][win]++
						if err != nil {
							errs.Add(1)
						} else if ok {
							admitted[t][win]++
						}
					}()
				}
			}
		}()
	}
	wg.Wait()
	inflight.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	elapsed := time.Since(start).Seconds()
	r.CoordPerSecPaced = float64(d.coordCalls()-calls0) / elapsed
	r.PacedCores = (cputime.Self() - cpu0).Seconds() / elapsed
	r.PacedRedisCores = (e.redisCPU() - rcpu0).Seconds() / elapsed
	r.AccuracyErrors = errs.Load()
	r.PacingDropped = dropped.Load()
	r.Windows = o.Windows
	acc := windowStats(offered, admitted, o.Limit)
	r.OfferedPerWindow, r.Admitted = acc.offered, acc.admitted
	r.Overshoot, r.OvershootMean, r.Undershoot = acc.overMax, acc.overMean, acc.underMax
	return nil
}

type accStats struct {
	offered, admitted           float64 // means per tenant-window
	overMax, overMean, underMax float64
}

// windowStats summarises per-tenant, per-window counts against limit:
// overshoot max(0, a-L)/L and undershoot max(0, min(o,L)-a)/min(o,L).
func windowStats(offered, admitted [][]int64, limit int64) accStats {
	var s accStats
	n := 0
	for t := range offered {
		for w := range offered[t] {
			o, a := offered[t][w], admitted[t][w]
			n++
			s.offered += float64(o)
			s.admitted += float64(a)
			over := float64(max(0, a-limit)) / float64(limit)
			s.overMax = max(s.overMax, over)
			s.overMean += over
			if want := min(o, limit); want > 0 {
				s.underMax = max(s.underMax, float64(max(0, want-a))/float64(want))
			}
		}
	}
	if n > 0 {
		s.offered /= float64(n)
		s.admitted /= float64(n)
		s.overMean /= float64(n)
	}
	return s
}
