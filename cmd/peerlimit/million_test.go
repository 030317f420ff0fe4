package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/peerlimit/peerlimit/internal/cputime"
	"github.com/peerlimit/peerlimit/internal/testutil"
)

// TestMillionTenants runs many active tenants through three peerlimit
// processes (the binary, built here) on 127.0.0.1: real memberlist, real
// gRPC sync, the lease policy, one limit of millionLimit requests per
// window (an hour, or a day when less than the run's time is left in the
// hour). Each tenant of the bulk sends one request, to one process (tenant
// i to process i mod 3, as a load balancer with tenant affinity would), so
// that every tenant is active in the window; then a sample of tenants is
// offered twice the limit, round-robin over the three processes. It
// reports each process's resident memory, its CPU per sync interval while
// the tenants stay active and no request comes (the sync of every active
// series, gossip and the collector), and the worst over and under of the
// sample, and fails if a bulk request is refused, a series is evicted, or
// the sample leaves the spec's bounds (over 1% + 1, under 5%).
//
// CI runs 30,000 tenants; PEERLIMIT_MILLION=1000000 runs the full size
// (README, issue 13): go test ./cmd/peerlimit -run TestMillionTenants -v
// -timeout 40m with it set, and PEERLIMIT_MILLION_SYNC (default 1s) for
// another sync interval.
func TestMillionTenants(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts three processes")
	}
	tenants := 30_000
	if v := os.Getenv("PEERLIMIT_MILLION"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 3 {
			t.Fatalf("PEERLIMIT_MILLION=%q: want a number of tenants, at least 3", v)
		}
		tenants = n
	}
	const (
		sample = 100 // tenants offered twice the limit
		quiet  = 10  // sync rounds measured with no request
	)
	// The sync interval (a sync call's timeout is twice that): 1 s, or
	// PEERLIMIT_MILLION_SYNC.
	interval := time.Second
	if v := os.Getenv("PEERLIMIT_MILLION_SYNC"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("PEERLIMIT_MILLION_SYNC=%q: want a duration", v)
		}
		interval = d
	}
	// The run must end in the window it starts in: a tenant whose window
	// turns sees its counts start again.
	need := 3*time.Minute + time.Duration(tenants/1000)*time.Second
	unit, period := "hour", time.Hour
	if left := period - time.Duration(time.Now().UnixNano()%int64(period)); left < need {
		unit, period = "day", 24*time.Hour
		if left := period - time.Duration(time.Now().UnixNano()%int64(period)); left < need {
			testutil.WaitFor(t, left+time.Minute, "the next day (a window that holds the run)", func() bool {
				return time.Now().UnixNano()%int64(period) < int64(time.Minute)
			})
		}
	}
	dir := t.TempDir()
	writeConfig(t, dir, "million.yaml", fmt.Sprintf("domain: million\ndescriptors:\n  - key: tenant\n    rate_limit:\n      unit: %s\n      requests_per_unit: %d\n", unit, millionLimit))
	bin := filepath.Join(t.TempDir(), "peerlimit")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// Each process holds its third of the bulk and the sample, and owns
	// about a third of every series: both bounds leave room for an uneven
	// ring.
	perNode := tenants/3 + sample
	flags := []string{"-sync-interval", interval.String(),
		"-max-entries", strconv.Itoa(perNode + perNode/2 + 1000), "-owner-windows", strconv.Itoa(perNode + perNode/2 + 1000)}
	ps := []*process{startProcess(t, bin, "m0", dir, "", flags...)}
	ps = append(ps, startProcess(t, bin, "m1", dir, ps[0].gossip, flags...), startProcess(t, bin, "m2", dir, ps[0].gossip, flags...))
	waitMembers(t, &ps[0].instance, &ps[1].instance, &ps[2].instance)
	var clients []rlsv3.RateLimitServiceClient
	for _, p := range ps {
		c, _ := dialRLS(t, &p.instance)
		clients = append(clients, c)
	}

	// The bulk: calls of 32 tenants (the most descriptors a call takes),
	// many at once per process, since a tenant's first request waits for
	// its first lease. A refused tenant (its wait for the lease ran out)
	// goes again in a later call.
	cpu0 := make([]time.Duration, len(ps))
	for i, p := range ps {
		cpu0[i] = cputime.Of(p.cmd.Process.Pid)
	}
	start := time.Now()
	deadline := start.Add(need)
	var calls atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(ps))
	for node := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- activate(clients[node], node, len(ps), tenants, interval, deadline, &calls)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	var cpu time.Duration
	for i, p := range ps {
		cpu += cputime.Of(p.cmd.Process.Pid) - cpu0[i]
	}
	t.Logf("%d tenants active in %v (%d calls, %.0f tenants/s; the processes' CPU %v, %v per tenant)", tenants, took.Round(time.Millisecond),
		calls.Load(), float64(tenants)/took.Seconds(), cpu.Round(time.Millisecond), (cpu / time.Duration(tenants)).Round(100*time.Nanosecond))

	// Quiet: every active series is synced each interval. Measured over
	// quiet rounds of each process's sync (its sync calls to the two
	// others), so that a round slower than the interval counts as one.
	type stat struct {
		cpu    time.Duration
		calls  float64
		at     time.Time
		keys   float64
		owned  float64
		evicts float64
	}
	read := func(p *process) stat {
		m := get(t, "http://"+p.http+"/metrics")
		return stat{cpu: cputime.Of(p.cmd.Process.Pid), calls: metric(m, `peerlimit_sync_calls_total{result="ok"}`), at: time.Now(),
			keys: metric(m, "peerlimit_keys_cached"), owned: metric(m, "peerlimit_windows_owned"), evicts: metric(m, "peerlimit_evictions_total")}
	}
	before := make([]stat, len(ps))
	for i, p := range ps {
		before[i] = read(p)
	}
	after := make([]stat, len(ps))
	// Polled once an interval: each poll reads the metrics of the
	// processes not done yet, which costs them a little CPU too.
	testutil.WaitForEvery(t, quiet*10*interval+time.Minute, interval, fmt.Sprintf("%d quiet sync rounds of every process", quiet), func() bool {
		for i, p := range ps {
			if after[i].calls < before[i].calls+2*quiet {
				after[i] = read(p)
				if after[i].calls < before[i].calls+2*quiet {
					return false
				}
			}
		}
		return true
	})
	var owned float64
	for i, p := range ps {
		rss, hwm := memOf(t, p.cmd.Process.Pid)
		rounds := (after[i].calls - before[i].calls) / 2
		cpu := after[i].cpu - before[i].cpu
		t.Logf("%s: %d series held, %d windows owned; RSS %d MiB (peak %d MiB); sync CPU %v per round (%.0f rounds in %v)",
			fmt.Sprintf("m%d", i), int(after[i].keys), int(after[i].owned), rss>>20, hwm>>20,
			(cpu / time.Duration(rounds)).Round(time.Millisecond), rounds, after[i].at.Sub(before[i].at).Round(time.Millisecond))
		if after[i].evicts != 0 {
			t.Errorf("m%d evicted %v live series", i, after[i].evicts)
		}
		owned += after[i].owned
	}
	if owned < float64(tenants) {
		t.Errorf("the owners aggregate %v windows in all, want every tenant's (%d)", owned, tenants)
	}

	// The sample: each tenant offered twice the limit, round-robin over
	// the processes, the tenants at once, within a bounded time.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+40*interval)
	defer cancel()
	admitted := make([]int, sample)
	var answered atomic.Int64
	var sw sync.WaitGroup
	for s := range sample {
		sw.Add(1)
		go func() {
			defer sw.Done()
			req := tenantReq("million", fmt.Sprintf("s%04d", s))
			for i := range 2 * millionLimit {
				r, err := clients[(s+i)%len(clients)].ShouldRateLimit(ctx, req)
				if err != nil {
					return // the sample's time is up
				}
				answered.Add(1)
				if r.OverallCode == rlsv3.RateLimitResponse_OK {
					admitted[s]++
				}
			}
		}()
	}
	sw.Wait()
	if n := answered.Load(); n < 2*millionLimit*sample {
		t.Fatalf("sample: %d of %d requests answered in %v (admitted %d)", n, 2*millionLimit*sample, 2*time.Minute+40*interval, sum(admitted))
	}
	var over, under int
	for _, a := range admitted {
		over, under = max(over, a-millionLimit), max(under, millionLimit-a)
	}
	t.Logf("sample of %d tenants offered %d each (twice the limit of %d per %s) over 3 processes: worst over %d, worst under %d", sample, 2*millionLimit, millionLimit, unit, over, under)
	if over > millionLimit/100+1 || under > millionLimit*5/100 {
		t.Errorf("sample: worst over %d, under %d of a limit of %d: want at most 1%% + 1 over and 5%% under", over, under, millionLimit)
	}
}

func sum(xs []int) (n int) {
	for _, x := range xs {
		n += x
	}
	return n
}

// millionLimit is TestMillionTenants' limit per tenant and window.
const millionLimit = 100

// activate sends one request for each bulk tenant of process node (tenant
// i with i mod nodes == node), 32 tenants a call, from many callers at
// once, until each was admitted once or the deadline passes. A call's
// tenants are decided one after the other, each waiting for its first
// lease, so the callers are many: each has one tenant waiting at a time,
// and a sync round asks the owners for all of them.
func activate(c rlsv3.RateLimitServiceClient, node, nodes, tenants int, interval time.Duration, deadline time.Time, calls *atomic.Int64) error {
	const callers, perCall = 2048, 32
	next := make(chan []string, callers)
	go func() {
		defer close(next)
		batch := make([]string, 0, perCall)
		for i := node; i < tenants; i += nodes {
			if batch = append(batch, fmt.Sprintf("t%07d", i)); len(batch) == perCall {
				next <- batch
				batch = make([]string, 0, perCall)
			}
		}
		if len(batch) > 0 {
			next <- batch
		}
	}()
	var wg sync.WaitGroup
	var failed atomic.Value
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range next {
				for len(batch) > 0 {
					if time.Now().After(deadline) {
						failed.Store(fmt.Errorf("process m%d: %s and others not admitted by the deadline", node, batch[0]))
						return
					}
					req := &rlsv3.RateLimitRequest{Domain: "million"}
					for _, tn := range batch {
						req.Descriptors = append(req.Descriptors, &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "tenant", Value: tn}}})
					}
					r, err := c.ShouldRateLimit(context.Background(), req)
					calls.Add(1)
					if err != nil {
						continue
					}
					var again []string
					for i, st := range r.Statuses {
						if st.Code != rlsv3.RateLimitResponse_OK {
							again = append(again, batch[i])
						}
					}
					if len(again) == len(batch) {
						// None admitted: their waits for a lease ran out,
						// the owners are behind. Not again before the next
						// sync round (a pause, not a synchronisation).
						<-time.After(interval)
					}
					batch = again
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	return nil
}

// metric is a sample's value in a Prometheus text exposition (0 if absent).
func metric(text, name string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

var memLine = regexp.MustCompile(`(?m)^(VmRSS|VmHWM):\s+(\d+) kB`)

// memOf returns a process's resident memory and its peak, in bytes, from
// /proc/PID/status (Linux).
func memOf(t *testing.T, pid int) (rss, hwm int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("resident memory: %v", err)
	}
	for _, m := range memLine.FindAllStringSubmatch(string(b), -1) {
		kb, _ := strconv.ParseInt(m[2], 10, 64)
		if m[1] == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	return rss, hwm
}
