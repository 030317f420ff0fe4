// Command bench runs one workload, in one process, through four ways of
// rate limiting the instances of a service, side by side:
//
//  1. golang.org/x/time/rate: every instance limits alone with the full
//     limit (no coordination: the local floor, and what a naive deployment
//     does);
//  2. peerlimit with peer owners, policies lease and optimistic (real
//     node.Node, memberlist and gRPC on 127.0.0.1);
//  3. Redis per request (redisstore.PerRequest, seed 001's style);
//  4. Redis per interval (node.Node with Config.Store = redisstore.Store,
//     seed 000's style).
//
// It starts its own redis-server on a free loopback port for 3 and 4 (and
// skips them, saying so, when redis-server is missing).
//
// Each design gets two phases. Throughput: -workers goroutines decide as
// fast as they can for -duration, round-robin over instances and tenants,
// timing one decision in 16 (latency), counting heap allocations
// (runtime.MemStats.Mallocs, process-wide, background work included) and
// coordinator calls. Accuracy: each tenant is offered twice its limit,
// evenly paced, round-robin over the instances, for -windows whole windows;
// overshoot is the worst max(0, admitted-limit)/limit over tenant-windows,
// undershoot the worst max(0, min(offered,limit)-admitted)/min(offered,limit).
//
//	go run ./cmd/bench                 # markdown table, about a minute
//	go run ./cmd/bench -json           # the same figures as JSON
//	go run ./cmd/bench -runs 3         # medians of three runs
//	go run ./cmd/bench -designs rate,lease -duration 1s
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/peerlimit/peerlimit/node"
)

// options is the workload. The zero value is not valid; start from
// defaultOptions.
type options struct {
	Duration    time.Duration `json:"duration"`  // throughput phase, per design
	Tenants     int           `json:"tenants"`   // per phase
	Workers     int           `json:"workers"`   // throughput goroutines (and accuracy pacers)
	Instances   int           `json:"instances"` // instances of the service
	Limit       int64         `json:"limit"`     // per tenant per window
	Period      time.Duration `json:"period"`    // the window
	Windows     int           `json:"windows"`   // accuracy phase length
	Sync        time.Duration `json:"sync"`      // peerlimit sync interval
	Runs        int           `json:"runs"`
	Designs     []string      `json:"designs"`
	RedisServer string        `json:"-"`
}

// defaultOptions: sized so that one run of the five designs takes about a
// minute on a 2-core machine.
func defaultOptions() options {
	return options{
		Duration:    3 * time.Second,
		Tenants:     200,
		Workers:     8,
		Instances:   3,
		Limit:       100,
		Period:      time.Second,
		Windows:     4,
		Sync:        node.DefaultConfig().SyncInterval,
		Runs:        1,
		Designs:     []string{"rate", "lease", "optimistic", "redis-request", "redis-interval"},
		RedisServer: "redis-server",
	}
}

func (o options) validate() error {
	switch {
	case o.Duration <= 0:
		return errors.New("bench: -duration must be > 0")
	case o.Tenants < 1:
		return errors.New("bench: -tenants must be >= 1")
	case o.Workers < 1:
		return errors.New("bench: -workers must be >= 1")
	case o.Instances < 1:
		return errors.New("bench: -instances must be >= 1")
	case o.Limit < 1:
		return errors.New("bench: -limit must be >= 1")
	case o.Period < time.Millisecond:
		return errors.New("bench: -period must be >= 1ms")
	case o.Windows < 1:
		return errors.New("bench: -windows must be >= 1")
	case o.Sync < time.Millisecond:
		return errors.New("bench: -sync must be >= 1ms")
	case o.Runs < 1:
		return errors.New("bench: -runs must be >= 1")
	}
	known := map[string]bool{}
	for _, s := range designSpecs() {
		known[s.key] = true
	}
	for _, d := range o.Designs {
		if !known[d] {
			return fmt.Errorf("bench: unknown design %q in -designs", d)
		}
	}
	return nil
}

// report is everything one invocation prints with -json.
type report struct {
	Options  options    `json:"options"`
	Machine  string     `json:"machine"`
	Redis    string     `json:"redis"`
	Results  []result   `json:"results"`           // medians over runs
	PerRun   [][]result `json:"per_run,omitempty"` // when runs > 1
	Baseline string     `json:"baseline"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := defaultOptions()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.Duration, "duration", o.Duration, "throughput phase per design")
	fs.IntVar(&o.Tenants, "tenants", o.Tenants, "tenants (each phase has its own set)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "goroutines deciding in the throughput phase (and pacers in the accuracy phase)")
	fs.IntVar(&o.Instances, "instances", o.Instances, "instances of the service, all in this process")
	fs.Int64Var(&o.Limit, "limit", o.Limit, "requests per tenant per window")
	fs.DurationVar(&o.Period, "period", o.Period, "the limit's window")
	fs.IntVar(&o.Windows, "windows", o.Windows, "whole windows in the accuracy phase")
	fs.DurationVar(&o.Sync, "sync", o.Sync, "peerlimit sync interval (peers and Redis per interval)")
	fs.IntVar(&o.Runs, "runs", o.Runs, "repeat everything this many times and report medians")
	designs := fs.String("designs", strings.Join(o.Designs, ","), "designs to run, comma-separated: rate, lease, optimistic, redis-request, redis-interval")
	fs.StringVar(&o.RedisServer, "redis-server", o.RedisServer, "redis-server binary (looked up on PATH)")
	asJSON := fs.Bool("json", false, "print JSON instead of a markdown table")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	o.Designs = strings.Split(*designs, ",")
	if err := o.validate(); err != nil {
		return err
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := bench(ctx, o, stderr)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	writeMarkdown(stdout, rep)
	return nil
}

// bench runs every selected design opts.Runs times.
func bench(ctx context.Context, o options, log io.Writer) (report, error) {
	rep := report{
		Options:  o,
		Machine:  fmt.Sprintf("%s/%s, %d CPUs (GOMAXPROCS %d), %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version()),
		Baseline: "rate",
	}
	tenants := make([]string, 2*o.Tenants)
	for i := range tenants {
		phase := "tp"
		if i >= o.Tenants {
			phase = "acc"
		}
		tenants[i] = fmt.Sprintf("%s-org-%d", phase, i%o.Tenants)
	}
	var specs []designSpec
	needRedis := false
	for _, s := range designSpecs() {
		if slices.Contains(o.Designs, s.key) {
			specs = append(specs, s)
			needRedis = needRedis || s.redis
		}
	}
	redisAddr, redisPID, skipRedis := "", 0, ""
	if needRedis {
		srv, err := startRedis(o.RedisServer)
		switch {
		case errors.Is(err, errNoRedis):
			skipRedis = fmt.Sprintf("skipped: %v; install redis-server to run it", err)
			fmt.Fprintf(log, "bench: %s: skipping the Redis designs\n", err)
			rep.Redis = "not found"
		case err != nil:
			return rep, err
		default:
			defer srv.stop()
			redisAddr, redisPID = srv.Addr(), srv.PID()
			rep.Redis = "redis-server on " + srv.Addr() + " (--save \"\" --appendonly no)"
		}
	}
	e := env{opts: o, tenants: tenants, redisAddr: redisAddr, redisPID: redisPID}
	for run := 0; run < o.Runs; run++ {
		var rs []result
		for _, s := range specs {
			if s.redis && skipRedis != "" {
				rs = append(rs, result{Key: s.key, Name: s.name, Note: s.note, Skipped: skipRedis})
				continue
			}
			// Each run uses fresh tenant names, so that nothing left in Redis
			// by an earlier run counts.
			if o.Runs > 1 {
				e.tenants = make([]string, len(tenants))
				for i, t := range tenants {
					e.tenants[i] = fmt.Sprintf("r%d-%s", run, t)
				}
			}
			r, err := runDesign(ctx, s, e, log)
			if err != nil {
				return rep, err
			}
			rs = append(rs, r)
		}
		rep.PerRun = append(rep.PerRun, rs)
	}
	rep.Results = medians(rep.PerRun)
	if o.Runs == 1 {
		rep.PerRun = nil
	}
	return rep, nil
}

// medians returns, per design, the median of every figure over runs.
func medians(runs [][]result) []result {
	if len(runs) == 0 {
		return nil
	}
	out := slices.Clone(runs[0])
	for i := range out {
		if out[i].Skipped != "" {
			continue
		}
		med := func(get func(r *result) float64) float64 {
			xs := make([]float64, 0, len(runs))
			for _, rs := range runs {
				xs = append(xs, get(&rs[i]))
			}
			slices.Sort(xs)
			if len(xs)%2 == 1 {
				return xs[len(xs)/2]
			}
			return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
		}
		r := &out[i]
		r.Decisions = uint64(med(func(r *result) float64 { return float64(r.Decisions) }))
		// Errors and drops: the worst run, not the median, so that the
		// notes under the table never hide one.
		worst := func(get func(r *result) uint64) uint64 {
			var m uint64
			for _, rs := range runs {
				m = max(m, get(&rs[i]))
			}
			return m
		}
		r.Errors = worst(func(r *result) uint64 { return r.Errors })
		r.AccuracyErrors = worst(func(r *result) uint64 { return r.AccuracyErrors })
		r.PacingDropped = worst(func(r *result) uint64 { return r.PacingDropped })
		r.CoordErrors = worst(func(r *result) uint64 { return r.CoordErrors })
		r.AdmittedFraction = med(func(r *result) float64 { return r.AdmittedFraction })
		r.DecisionsPerSec = med(func(r *result) float64 { return r.DecisionsPerSec })
		r.P50Ns = med(func(r *result) float64 { return r.P50Ns })
		r.P99Ns = med(func(r *result) float64 { return r.P99Ns })
		r.AllocsPerDecision = med(func(r *result) float64 { return r.AllocsPerDecision })
		r.CPUPerDecisionNs = med(func(r *result) float64 { return r.CPUPerDecisionNs })
		r.RedisCPUPerDecisionNs = med(func(r *result) float64 { return r.RedisCPUPerDecisionNs })
		r.PacedCores = med(func(r *result) float64 { return r.PacedCores })
		r.PacedRedisCores = med(func(r *result) float64 { return r.PacedRedisCores })
		r.CoordPerSecFlat = med(func(r *result) float64 { return r.CoordPerSecFlat })
		r.CoordPerSecPaced = med(func(r *result) float64 { return r.CoordPerSecPaced })
		r.OfferedPerWindow = med(func(r *result) float64 { return r.OfferedPerWindow })
		r.Admitted = med(func(r *result) float64 { return r.Admitted })
		r.Overshoot = med(func(r *result) float64 { return r.Overshoot })
		r.OvershootMean = med(func(r *result) float64 { return r.OvershootMean })
		r.Undershoot = med(func(r *result) float64 { return r.Undershoot })
	}
	return out
}

func writeMarkdown(w io.Writer, rep report) {
	o := rep.Options
	paced := float64(o.Tenants) * 2 * float64(o.Limit) / o.Period.Seconds()
	fmt.Fprintf(w, "Workload: %d tenants, %d instances in one process, limit %d per %v per tenant. "+
		"Throughput phase: %d workers deciding flat out for %v. Accuracy phase: %d windows with every tenant at 2x its limit (%s decisions/s in all), round-robin over the instances. "+
		"peerlimit sync interval %v. Machine: %s.",
		o.Tenants, o.Instances, o.Limit, o.Period, o.Workers, o.Duration, o.Windows, count(paced), o.Sync, rep.Machine)
	if o.Runs > 1 {
		fmt.Fprintf(w, " Medians of %d runs.", o.Runs)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| design | decisions/s | vs (1) | p50 | p99 | CPU/decision | allocs/decision | coordinator calls/s flat out | coordinator calls/s at 2x | CPU at 2x (cores) | overshoot | undershoot |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var base *result
	for i := range rep.Results {
		if rep.Results[i].Key == rep.Baseline && rep.Results[i].Skipped == "" {
			base = &rep.Results[i]
		}
	}
	ratio := func(v, b float64) string {
		if base == nil || b == 0 {
			return ""
		}
		return " (" + sig(v/b) + "×)"
	}
	var notes []string
	for i, r := range rep.Results {
		if r.Skipped != "" {
			fmt.Fprintf(w, "| %d. %s | %s | | | | | | | | | | |\n", i+1, r.Name, r.Skipped)
			continue
		}
		var b result
		if base != nil {
			b = *base
		}
		vs := ""
		if base != nil {
			vs = sig(r.DecisionsPerSec/b.DecisionsPerSec) + "×"
		}
		cpu := dur(r.CPUPerDecisionNs)
		if r.RedisCPUPerDecisionNs > 0 {
			cpu += " + " + dur(r.RedisCPUPerDecisionNs) + " Redis"
		}
		cores := fmt.Sprintf("%.2f", r.PacedCores)
		if r.PacedRedisCores > 0 {
			cores += fmt.Sprintf(" + %.2f Redis", r.PacedRedisCores)
		}
		fmt.Fprintf(w, "| %d. %s | %s | %s | %s%s | %s%s | %s | %.2f | %s | %s | %s | %.1f%% | %.1f%% |\n",
			i+1, r.Name, count(r.DecisionsPerSec), vs,
			dur(r.P50Ns), ratio(r.P50Ns, b.P50Ns), dur(r.P99Ns), ratio(r.P99Ns, b.P99Ns),
			cpu, r.AllocsPerDecision, count(r.CoordPerSecFlat), count(r.CoordPerSecPaced), cores,
			100*r.Overshoot, 100*r.Undershoot)
		if r.Errors > 0 || r.AccuracyErrors > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d decisions failed in the throughput phase, %d in the accuracy phase (counted as denied)%s.", r.Name, r.Errors, r.AccuracyErrors, worstOf(o.Runs)))
		} else if r.CoordErrors > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d sync calls failed (timeouts on the loaded machine; the nodes fell back to their static share until the next success)%s.", r.Name, r.CoordErrors, worstOf(o.Runs)))
		}
		if want := 2 * float64(o.Limit); r.OfferedPerWindow < 0.95*want {
			notes = append(notes, fmt.Sprintf("%s: the pacers offered only %.0f per tenant-window of the %.0f intended (%d requests dropped behind schedule).", r.Name, r.OfferedPerWindow, want, r.PacingDropped))
		}
	}
	fmt.Fprintln(w)
	for i, r := range rep.Results {
		fmt.Fprintf(w, "%d. %s: %s.\n", i+1, r.Key, r.Note)
	}
	if rep.Redis != "" {
		fmt.Fprintf(w, "\nRedis: %s.\n", rep.Redis)
	}
	for _, n := range notes {
		fmt.Fprintln(w, "\nNote: "+n)
	}
}

func worstOf(runs int) string {
	if runs > 1 {
		return fmt.Sprintf(", in the worst of %d runs", runs)
	}
	return ""
}

// sig formats a ratio with two significant figures or so.
func sig(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

func count(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.2f M", x/1e6)
	case x >= 1e4:
		return fmt.Sprintf("%.0f k", x/1e3)
	case x >= 1e3:
		return fmt.Sprintf("%.1f k", x/1e3)
	default:
		return fmt.Sprintf("%.0f", x)
	}
}

func dur(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	default:
		return fmt.Sprintf("%.0f ns", ns)
	}
}
