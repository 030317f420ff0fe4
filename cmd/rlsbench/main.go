// Command rlsbench measures peerlimit's rate limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, served by
// rls.Server on real nodes) against a null service that answers OK at once,
// in the same process and the same run, over gRPC on 127.0.0.1. The ratio
// of the two is the figure to read: most of a call's cost is gRPC and the
// kernel, which both pay.
//
// Each pair runs the null service, then peerlimit, with the same client
// built on go-control-plane's RateLimitServiceClient: closed loop
// (-workers goroutines on one connection per server, each sending its next
// request when the answer arrives, for -duration), then open loop (-rate
// requests per second on a fixed schedule, each latency measured from the
// time the request was due, so a slow answer delays nothing unseen). Every
// request names one of -values descriptor values, each under its limit.
// With -nodes 3 the client spreads its requests over three nodes of one
// cluster, and a last phase checks that a limit of 1000 holds cluster-wide.
//
//	go run ./cmd/rlsbench                      # 3 pairs of 5 s each way
//	go run ./cmd/rlsbench -nodes 3             # a 3-node cluster
//	go run ./cmd/rlsbench -pairs 1 -duration 1s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/peerlimit/peerlimit/node"
	"github.com/peerlimit/peerlimit/rls"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rlsbench:", err)
		os.Exit(1)
	}
}

// config is the limits every node serves: a tenant limit far above the
// load, and the hot key of the cluster check.
const config = `domain: bench
descriptors:
  - key: tenant
    rate_limit: {unit: day, requests_per_unit: 1000000000}
  - key: hot
    rate_limit: {unit: day, requests_per_unit: 1000}
`

type options struct {
	workers, values, pairs, nodes int
	duration                      time.Duration
	rate                          float64
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("rlsbench", flag.ContinueOnError)
	var o options
	fs.IntVar(&o.workers, "workers", 32, "closed loop: concurrent callers")
	fs.IntVar(&o.values, "values", 1000, "distinct descriptor values, each under its limit")
	fs.IntVar(&o.pairs, "pairs", 3, "alternating (null, peerlimit) pairs of runs")
	fs.IntVar(&o.nodes, "nodes", 1, "peerlimit nodes in the cluster (the client spreads its requests over them)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "length of each run")
	fs.Float64Var(&o.rate, "rate", 5000, "open loop: requests per second")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.workers < 1 || o.values < 1 || o.pairs < 1 || o.nodes < 1 || o.duration <= 0 || o.rate <= 0 {
		return errors.New("-workers, -values, -pairs, -nodes, -duration and -rate must be positive")
	}
	cfg, err := rls.Parse("bench.yaml", []byte(config))
	if err != nil {
		return err
	}
	null, err := serve(nullService{})
	if err != nil {
		return err
	}
	defer null.close()
	var targets []*server
	var nodes []*node.Node
	for i := range o.nodes {
		nc := node.LocalConfig(fmt.Sprintf("b%d", i))
		nc.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		for _, n := range nodes {
			nc.Gossip.Seeds = append(nc.Gossip.Seeds, n.GossipAddr())
		}
		n, err := node.New(nc)
		if err != nil {
			return err
		}
		if err := n.Start(context.Background()); err != nil {
			return err
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n.Close(ctx)
		}()
		nodes = append(nodes, n)
		s, err := serve(rls.NewServer(n, cfg))
		if err != nil {
			return err
		}
		defer s.close()
		targets = append(targets, s)
	}
	if err := waitMembers(nodes); err != nil {
		return err
	}
	reqs := make([]*rlsv3.RateLimitRequest, o.values)
	for i := range reqs {
		reqs[i] = request("tenant", fmt.Sprintf("t%d", i))
	}
	// Warm up: every value's series exists and holds a lease on every node.
	for _, t := range targets {
		for _, r := range reqs {
			if _, err := t.client.ShouldRateLimit(context.Background(), r); err != nil {
				return err
			}
		}
	}

	fmt.Fprintf(out, "rlsbench: %d peerlimit node(s), %d workers, %d values, %v per run, open loop at %.0f/s, GOMAXPROCS %d\n\n",
		o.nodes, o.workers, o.values, o.duration, o.rate, runtimeProcs())
	fmt.Fprintln(out, "| pair | server | closed rps | closed p50 | closed p99 | open p50 | open p99 | CPU per call | errors |")
	fmt.Fprintln(out, "|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	var closedRatio, openRatio []float64
	var errs int64
	for p := 1; p <= o.pairs; p++ {
		var res [2]result
		for k, s := range [][]*server{{null}, targets} {
			name := [2]string{"null", "peerlimit"}[k]
			cpu0 := cpuTime()
			c := closedLoop(s, reqs, o.workers, o.duration)
			cpu := cpuTime() - cpu0
			op := openLoop(s, reqs, o.rate, o.duration)
			c.openP50, c.openP99, c.errors = op.openP50, op.openP99, c.errors+op.errors
			c.cpuPerCall = cpu / time.Duration(max(c.calls, 1))
			res[k] = c
			errs += c.errors
			fmt.Fprintf(out, "| %d | %s | %.0f | %v | %v | %v | %v | %v | %d |\n", p, name, c.rps, c.p50, c.p99, c.openP50, c.openP99, c.cpuPerCall, c.errors)
		}
		closedRatio = append(closedRatio, res[0].rps/res[1].rps)
		openRatio = append(openRatio, float64(res[1].openP99)/float64(res[0].openP99))
	}
	fmt.Fprintf(out, "\nmedian over %d pairs: closed loop, null / peerlimit throughput = %.2f (target <= 1.3); open loop, peerlimit p99 / null p99 = %.2f (target <= 1.3)\n",
		o.pairs, median(closedRatio), median(openRatio))
	if o.nodes > 1 {
		ok, err := clusterLimit(targets, o.workers)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "cluster-wide: %d of 2000 requests of one key over %d nodes admitted, against its limit of 1000\n", ok, o.nodes)
		if ok > 1011 || ok < 950 {
			return fmt.Errorf("the cluster admitted %d of 2000 against a limit of 1000", ok)
		}
	}
	if errs > 0 {
		return fmt.Errorf("%d calls failed", errs)
	}
	return nil
}

func request(key, value string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}},
	}}}
}

// nullService answers OK at once: the floor of a gRPC rate limit service.
type nullService struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (nullService) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, nil
}

// server is a rate limit service on a loopback listener and a client of it.
type server struct {
	gs     *grpc.Server
	conn   *grpc.ClientConn
	client rlsv3.RateLimitServiceClient
}

func serve(svc rlsv3.RateLimitServiceServer) (*server, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, svc)
	go gs.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		gs.Stop()
		return nil, err
	}
	return &server{gs: gs, conn: conn, client: rlsv3.NewRateLimitServiceClient(conn)}, nil
}

func (s *server) close() {
	s.conn.Close()
	s.gs.Stop()
}

func waitMembers(nodes []*node.Node) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		all := true
		for _, n := range nodes {
			all = all && len(n.Engine().Members()) == len(nodes)
		}
		if all {
			return nil
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
	return errors.New("the nodes did not form one cluster within 10 s")
}

type result struct {
	calls, errors    int64
	rps              float64
	p50, p99         time.Duration
	openP50, openP99 time.Duration
	cpuPerCall       time.Duration
}

// closedLoop runs workers callers for d, each on the next server in turn.
func closedLoop(ss []*server, reqs []*rlsv3.RateLimitRequest, workers int, d time.Duration) result {
	var calls, errs atomic.Int64
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := w
			for {
				t := time.Now()
				if t.After(end) {
					return
				}
				if _, err := ss[i%len(ss)].client.ShouldRateLimit(context.Background(), reqs[i%len(reqs)]); err != nil {
					errs.Add(1)
				}
				if i%4 == 0 { // a sample of the latencies
					lat[w] = append(lat[w], time.Since(t))
				}
				calls.Add(1)
				i += workers
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	all := slices.Concat(lat...)
	return result{calls: calls.Load(), errors: errs.Load(), rps: float64(calls.Load()) / el.Seconds(), p50: quantile(all, 0.5), p99: quantile(all, 0.99)}
}

// openLoop sends rate requests per second for d on a fixed schedule; each
// latency counts from the time its request was due.
func openLoop(ss []*server, reqs []*rlsv3.RateLimitRequest, rate float64, d time.Duration) result {
	n := int(rate * d.Seconds())
	lat := make([]time.Duration, n)
	var errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait) // the schedule itself, not synchronisation
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := ss[i%len(ss)].client.ShouldRateLimit(context.Background(), reqs[i%len(reqs)]); err != nil {
				errs.Add(1)
			}
			lat[i] = time.Since(due)
		}()
	}
	wg.Wait()
	return result{errors: errs.Load(), openP50: quantile(lat, 0.5), openP99: quantile(lat, 0.99)}
}

// clusterLimit sends 2000 requests of one key, limited to 1000 a day, from
// workers callers spread over the nodes, and returns how many were OK.
func clusterLimit(ss []*server, workers int) (int64, error) {
	req := request("hot", fmt.Sprintf("k%d", time.Now().UnixNano()))
	var ok, errs atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= 2000 {
					return
				}
				r, err := ss[i%int64(len(ss))].client.ShouldRateLimit(context.Background(), req)
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
		return 0, fmt.Errorf("%d calls of the cluster check failed", errs.Load())
	}
	return ok.Load(), nil
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))].Round(time.Microsecond)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// cpuTime is the CPU time this process has used (user and system): client
// and servers together.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
