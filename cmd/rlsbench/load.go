package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// result is one run of one load against one set of servers.
type result struct {
	calls, errors int64 // errors: failed calls and answers other than OK
	elapsed       time.Duration
	p50, p99      time.Duration
	serverCPU     time.Duration // the server processes', together
}

func (r result) rps() float64 { return float64(r.calls) / r.elapsed.Seconds() }

// cores is the server processes' CPU over the run, in cores.
func (r result) cores() float64 { return r.serverCPU.Seconds() / r.elapsed.Seconds() }

// perCall is the server processes' CPU per call.
func (r result) perCall() time.Duration { return r.serverCPU / time.Duration(max(r.calls, 1)) }

func request(key, value string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}},
	}}}
}

// call sends req to p and reports whether it failed or was not OK.
func call(p *proc, req *rlsv3.RateLimitRequest) bool {
	r, err := p.client.ShouldRateLimit(context.Background(), req)
	return err != nil || r.GetOverallCode() != rlsv3.RateLimitResponse_OK
}

func serverCPU(ps []*proc) time.Duration {
	var sum time.Duration
	for _, p := range ps {
		sum += p.cpu()
	}
	return sum
}

// closedLoop runs workers callers for d, each sending its next request
// when the answer to the last arrives; call k of a worker goes to the next
// server in turn and names the next value.
func closedLoop(ps []*proc, reqs []*rlsv3.RateLimitRequest, workers int, d time.Duration) result {
	var errs atomic.Int64
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	cpu0 := serverCPU(ps)
	start := time.Now()
	end := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i += workers {
				t := time.Now()
				if t.After(end) {
					return
				}
				if call(ps[i%len(ps)], reqs[i%len(reqs)]) {
					errs.Add(1)
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	all := slices.Concat(lat...)
	return result{calls: int64(len(all)), errors: errs.Load(), elapsed: el, serverCPU: serverCPU(ps) - cpu0,
		p50: quantile(all, 0.5), p99: quantile(all, 0.99)}
}

// openLoop sends rate requests per second for d on a fixed schedule, each
// from its own goroutine whatever the answers before it; each latency
// counts from the time its request was due, so a stall of the server or
// of the client's sender shows in the figures instead of delaying the
// requests that would have seen it.
func openLoop(ps []*proc, reqs []*rlsv3.RateLimitRequest, rate float64, d time.Duration) result {
	n := max(int(rate*d.Seconds()), 1)
	lat := make([]time.Duration, n)
	var errs atomic.Int64
	var wg sync.WaitGroup
	cpu0 := serverCPU(ps)
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait) // the schedule itself, not synchronisation
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if call(ps[i%len(ps)], reqs[i%len(reqs)]) {
				errs.Add(1)
			}
			lat[i] = time.Since(due)
		}()
	}
	wg.Wait()
	return result{calls: int64(n), errors: errs.Load(), elapsed: time.Since(start), serverCPU: serverCPU(ps) - cpu0,
		p50: quantile(lat, 0.5), p99: quantile(lat, 0.99)}
}

// hotLimit is the limit per day of the key clusterLimit sends.
const hotLimit = 1000

// clusterLimit sends 2*hotLimit requests of one new key from workers
// callers, each request to the next server in turn, and returns how many
// were OK. A day's limit cannot reset within the check unless the day
// ends during it; then it is done again.
func clusterLimit(ps []*proc, workers int) (int64, error) {
	for {
		day := time.Now().UTC().YearDay()
		req := request("hot", fmt.Sprintf("k%d", time.Now().UnixNano()))
		var ok, errs, next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= 2*hotLimit {
						return
					}
					r, err := ps[i%int64(len(ps))].client.ShouldRateLimit(context.Background(), req)
					switch {
					case err != nil:
						errs.Add(1)
					case r.OverallCode == rlsv3.RateLimitResponse_OK:
						ok.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if errs.Load() > 0 {
			return 0, fmt.Errorf("%d calls of the cluster-wide check failed", errs.Load())
		}
		if time.Now().UTC().YearDay() == day {
			return ok.Load(), nil
		}
	}
}

// quantile is the q-quantile of ds (which it sorts), to the microsecond.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))].Round(time.Microsecond)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
