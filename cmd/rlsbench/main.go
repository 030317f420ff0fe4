// Command rlsbench measures peerlimit's rate limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, served by
// the cmd/peerlimit binary) against a null service that answers OK at once,
// in the same run, both as separate processes on 127.0.0.1. The ratio of
// the two is the figure to read: most of a call's cost is gRPC and the
// kernel, which both pay.
//
// The client is this process, built on go-control-plane's
// RateLimitServiceClient with one connection per server and GOMAXPROCS
// -client-procs. Each pair of runs measures the null server(s), then
// peerlimit: closed loop (-workers callers, each sending its next request
// when the answer arrives, for -duration), then open loop (-rate requests
// per second on a fixed schedule, each latency measured from the time the
// request was due, so that a slow answer delays nothing unseen). Every
// request names one of -values descriptor values, each under its limit; an
// answer other than OK counts as an error. Server CPU is read from
// /proc/PID/stat (Linux).
//
// -peer-env sets a variable for the peerlimit processes alone: Go's
// runtime settings, such as GOGC=100 (cmd/peerlimit sets 400 unless told
// otherwise), are a deployment's to choose, and the null servers keep the
// defaults, the floor the ratio is against.
//
// With -nodes 3, three peerlimit processes form one cluster (and three null
// servers stand against them); the client sends each request to the next
// server in turn. Last, a check sends 2000 requests of one key limited to
// 1000 a day over every node and fails if more than 1000×1.01+1 pass.
//
//	go run ./cmd/rlsbench                        # 3 pairs of 5 s runs
//	go run ./cmd/rlsbench -nodes 3               # a 3-node cluster
//	go run ./cmd/rlsbench -pairs 1 -duration 1s  # a quick look
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

func main() {
	if os.Getenv(nullEnv) != "" {
		if err := serveNull(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "rlsbench null:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rlsbench:", err)
		os.Exit(1)
	}
}

// config is the envoy ratelimit configuration every peerlimit node
// serves: a limit per tenant far above the load, and the key of the
// cluster-wide check.
var config = fmt.Sprintf(`domain: bench
descriptors:
  - key: tenant
    rate_limit: {unit: day, requests_per_unit: 1000000000}
  - key: hot
    rate_limit: {unit: day, requests_per_unit: %d}
`, hotLimit)

// target is the done criterion of issue 19: peerlimit within 1.3 times
// the null server, in throughput (closed loop) and p99 (open loop).
const target = 1.3

type options struct {
	workers, values, pairs, nodes, clientProcs, serverProcs int
	duration                                                time.Duration
	rate                                                    float64
	peerlimit                                               string
	peerEnv                                                 []string
}

func parse(args []string, out io.Writer) (*options, error) {
	fs := flag.NewFlagSet("rlsbench", flag.ContinueOnError)
	fs.SetOutput(out)
	o := &options{}
	fs.IntVar(&o.workers, "workers", 32, "closed loop: concurrent callers")
	fs.IntVar(&o.values, "values", 1000, "distinct descriptor values, each under its limit")
	fs.IntVar(&o.pairs, "pairs", 3, "alternating (null, peerlimit) pairs of runs")
	fs.IntVar(&o.nodes, "nodes", 1, "peerlimit processes in the cluster, and null servers against them")
	fs.IntVar(&o.clientProcs, "client-procs", 1, "GOMAXPROCS of the client (this process)")
	fs.IntVar(&o.serverProcs, "server-procs", 0, "GOMAXPROCS of each server process (0: Go's default, the machine's cores)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "length of each closed-loop and each open-loop run")
	fs.Float64Var(&o.rate, "rate", 5000, "open loop: requests per second")
	fs.StringVar(&o.peerlimit, "peerlimit", "", "the cmd/peerlimit binary (default: built from this module with go build)")
	fs.Func("peer-env", "`VAR=value` in the environment of the peerlimit processes only, such as GOGC=100 (repeatable)", func(v string) error {
		if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
			return fmt.Errorf("%q is not VAR=value", v)
		}
		o.peerEnv = append(o.peerEnv, v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.workers < 1 || o.values < 1 || o.pairs < 1 || o.nodes < 1 || o.clientProcs < 1 || o.serverProcs < 0 || o.duration <= 0 || o.rate <= 0 {
		return nil, errors.New("-workers, -values, -pairs, -nodes, -client-procs, -duration and -rate must be positive, -server-procs at least 0")
	}
	return o, nil
}

func run(args []string, out io.Writer) error {
	o, err := parse(args, out)
	if err != nil {
		return err
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.clientProcs))
	tmp, err := os.MkdirTemp("", "rlsbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "config")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.yaml"), []byte(config), 0o644); err != nil {
		return err
	}
	bin := o.peerlimit
	if bin == "" {
		if bin, err = buildPeerlimit(tmp); err != nil {
			return err
		}
	}
	var env []string
	if o.serverProcs > 0 {
		env = append(env, fmt.Sprintf("GOMAXPROCS=%d", o.serverProcs))
	}
	var nulls []*proc
	defer func() { stopAll(nulls) }()
	for i := range o.nodes {
		p, err := startNull(fmt.Sprintf("null %d", i), env)
		if err != nil {
			return err
		}
		nulls = append(nulls, p)
	}
	peers, err := startPeers(bin, dir, o.nodes, slices.Concat(env, o.peerEnv))
	if err != nil {
		return err
	}
	defer stopAll(peers)

	reqs := make([]*rlsv3.RateLimitRequest, o.values)
	for i := range reqs {
		reqs[i] = request("tenant", fmt.Sprintf("t%d", i))
	}
	// Warm up: every value's series exists on every node, with a lease,
	// and each side has run a while under load.
	for _, p := range slices.Concat(nulls, peers) {
		for _, r := range reqs {
			if call(p, r) {
				return fmt.Errorf("%s: the warm-up call of %v failed or was refused", p.name, r.Descriptors[0].Entries[0])
			}
		}
	}
	for _, ps := range [][]*proc{nulls, peers} {
		closedLoop(ps, reqs, o.workers, min(o.duration, time.Second))
	}

	fmt.Fprintf(out, "rlsbench: %d peerlimit process(es)%s against %d null server(s), client GOMAXPROCS %d, servers' %s, %d workers, %d values, %v per run, open loop at %.0f/s\n\n",
		o.nodes, envName(o.peerEnv), o.nodes, o.clientProcs, procsName(o.serverProcs), o.workers, o.values, o.duration, o.rate)
	fmt.Fprintln(out, "| pair | server | closed rps | p50 ms | p99 ms | server cores | server µs/call | open p50 ms | open p99 ms | server µs/call | errors |")
	fmt.Fprintln(out, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var closedRatio, openRatio []float64
	var errs int64
	for pair := 1; pair <= o.pairs; pair++ {
		var rps, p99 [2]float64
		for k, ps := range [][]*proc{nulls, peers} {
			c := closedLoop(ps, reqs, o.workers, o.duration)
			op := openLoop(ps, reqs, o.rate, o.duration)
			fmt.Fprintf(out, "| %d | %s | %.0f | %.2f | %.2f | %.2f | %.1f | %.2f | %.2f | %.1f | %d |\n", pair, [2]string{"null", "peerlimit"}[k],
				c.rps(), ms(c.p50), ms(c.p99), c.cores(), us(c.perCall()), ms(op.p50), ms(op.p99), us(op.perCall()), c.errors+op.errors)
			errs += c.errors + op.errors
			rps[k], p99[k] = c.rps(), float64(op.p99)
		}
		closedRatio = append(closedRatio, rps[0]/rps[1])
		openRatio = append(openRatio, p99[1]/p99[0])
	}
	fmt.Fprintf(out, "\nclosed loop, null / peerlimit throughput: %s -> median %.2f (target <= %.1f)\n", ratios(closedRatio), median(closedRatio), target)
	fmt.Fprintf(out, "open loop at %.0f/s, peerlimit p99 / null p99: %s -> median %.2f (target <= %.1f)\n", o.rate, ratios(openRatio), median(openRatio), target)

	ok, err := clusterLimit(peers, o.workers)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "limit check: %d of %d requests of one key limited to %d a day admitted over %d peerlimit process(es)\n", ok, 2*hotLimit, hotLimit, o.nodes)
	if ok > hotLimit*101/100+1 {
		return fmt.Errorf("the cluster admitted %d requests against a limit of %d", ok, hotLimit)
	}
	if errs > 0 {
		return fmt.Errorf("%d calls failed or were not OK", errs)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func ratios(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, " ")
}

func envName(env []string) string {
	if len(env) == 0 {
		return ""
	}
	return " (" + strings.Join(env, " ") + ")"
}

func procsName(n int) string {
	if n == 0 {
		return fmt.Sprintf("GOMAXPROCS %d (default)", runtime.NumCPU())
	}
	return fmt.Sprintf("GOMAXPROCS %d", n)
}
