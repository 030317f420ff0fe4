// Command demo-cluster runs a local peerlimit cluster you can watch and
// break: 3 nodes as separate processes on 127.0.0.1, gossiping with
// memberlist and syncing over gRPC, each serving the seeds' sample API
// (GET and PUT /v1/organizations/{orgId}/product/{id}) behind the
// httpfilter middleware, with the seeds' limits (1000 GETs and 100 PUTs per
// 10 s per organization). A built-in load generator reproduces the seed's
// test (25 tenants, 1000 req/s over 3 instances) and keeps the ground
// truth of what was offered and admitted per tenant and window.
//
//	go run ./cmd/demo-cluster                 # live view + dashboard on http://127.0.0.1:8080
//	go run ./cmd/demo-cluster -duration 12s -report json
//	go run ./cmd/demo-cluster -no-load        # just the cluster; prints "node N http://..."
//	go run ./cmd/demo-cluster -faults "5s kill n3; 9s restart n3; 12s partition n1,n2|n3; 16s heal"
//
// The dashboard has buttons to kill (SIGKILL) and restart nodes, and to
// partition and heal the network. Ctrl-C stops everything; no node process
// outlives the demo.
package main

import (
	"context"
	_ "embed"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/peerlimit/peerlimit/httpfilter"
	"github.com/peerlimit/peerlimit/internal/demo"
	"github.com/peerlimit/peerlimit/node"
)

// limitsYAML is a copy of httpfilter/limits.yaml (go:embed cannot reach a
// parent directory); TestLimitsCopyIsIdentical keeps them equal.
//
//go:embed limits.yaml
var limitsYAML []byte

const limitsName = "built-in limits.yaml (the seeds')"

func main() {
	if len(os.Args) > 2 && os.Args[1] == "-role" && os.Args[2] == "node" {
		os.Exit(nodeMain(os.Args[3:]))
	}
	os.Exit(parentMain(os.Args[1:]))
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func parentMain(args []string) int {
	cfg := demo.DefaultConfig()
	fs := flag.NewFlagSet("demo-cluster", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: demo-cluster [flags]\n\nRuns a local peerlimit cluster (separate processes on 127.0.0.1) under the seed's load, with a live view and a web dashboard.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "number of node processes")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, fmt.Sprintf("total load, requests per second (at most %d), spread over the nodes as -clients says", demo.MaxRate))
	fs.IntVar(&cfg.Tenants, "tenants", cfg.Tenants, "number of tenants (one in five is pushed to 2-3x its limits)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "how long the load runs (0: until Ctrl-C)")
	fs.DurationVar(&cfg.SyncInterval, "sync", cfg.SyncInterval, "sync interval of every node")
	policy := fs.String("policy", string(cfg.Policy), "admission policy: lease, optimistic or static")
	fs.StringVar(&cfg.ConfigPath, "config", "", "limits file (default: the built-in copy of httpfilter/limits.yaml); nodes reload it when it changes")
	fs.BoolVar(&cfg.NoLoad, "no-load", false, `start the cluster only and print "node N http://127.0.0.1:PORT" per node, for any load tool`)
	fs.StringVar(&cfg.Report, "report", "", `"json": print a JSON report on stdout at the end (the live view goes to stderr)`)
	fs.StringVar(&cfg.Dashboard, "http", cfg.Dashboard, `dashboard address, loopback only ("off" to disable)`)
	fs.BoolVar(&cfg.Align, "align", cfg.Align, "start the load at the next window boundary, so that every window it covers fully is complete")
	fs.StringVar(&cfg.Faults, "faults", "", `fault script, timed from the load's start: "5s kill n3; 9s restart n3; 12s partition n1,n2|n3; 16s heal"`)
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the load's random choices")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "concurrent requests of the load generator at most")
	clients := fs.String("clients", string(cfg.Clients), "how the load reaches the nodes: round-robin (each request to the next node), pinned (each tenant to one node, as a keep-alive client behind a load balancer) or moving (each tenant to one node at a time, moving every -move-every)")
	fs.DurationVar(&cfg.MoveEvery, "move-every", cfg.MoveEvery, "with -clients moving: how long a tenant's client stays on a node")
	fs.BoolVar(&cfg.View, "view", cfg.View, "show the live view (refreshed every second)")
	fs.StringVar(&cfg.LogFile, "log", "", "write every event and node log line to this file")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "nodes' log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "demo-cluster: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg.Policy = node.Policy(*policy)
	cfg.Clients = demo.Clients(*clients)
	cfg.LimitsData, cfg.LimitsName = limitsYAML, limitsName
	cfg.Out, cfg.Err = os.Stdout, os.Stderr
	cfg.OutTTY, cfg.ErrTTY = isTerminal(os.Stdout), isTerminal(os.Stderr)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "demo-cluster: %v\n", err)
		return 1
	}
	return 0
}

// nodeMain runs one node process (started by the parent with -role node).
// It stops on SIGTERM/SIGINT, and when its stdin — a pipe the parent holds
// — reaches EOF, which happens when the parent dies, however it dies.
func nodeMain(args []string) int {
	cfg := demo.DefaultNodeConfig()
	fs := flag.NewFlagSet("demo-cluster -role node", flag.ContinueOnError)
	fs.StringVar(&cfg.Name, "name", "", "node name (in the plan)")
	plan := fs.String("plan", "", "address plan: n1=HTTP/GOSSIP/GRPC,...")
	policy := fs.String("policy", string(cfg.Policy), "admission policy")
	fs.DurationVar(&cfg.SyncInterval, "sync", cfg.SyncInterval, "sync interval")
	configPath := fs.String("config", "", "limits file (default: built in)")
	fs.StringVar(&cfg.Partition, "partition", "", "partition in force at start")
	level := fs.String("log-level", "info", "log level")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(os.Stderr, "node: -log-level: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	cfg.Logger = logger
	cfg.Policy = node.Policy(*policy)
	var err error
	if k := os.Getenv(demo.GossipKeyEnv); k != "" {
		if cfg.GossipKey, err = hex.DecodeString(k); err != nil {
			logger.Error("bad "+demo.GossipKeyEnv, "err", err)
			return 2
		}
	}
	if cfg.Plan, err = demo.ParsePlan(*plan); err != nil {
		logger.Error("bad -plan", "err", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the parent's death closes our stdin
		_, _ = io.Copy(io.Discard, os.Stdin)
		logger.Info("stdin closed: the parent is gone, stopping")
		cancel()
	}()
	go func() { // never outlive a stuck shutdown
		<-ctx.Done()
		<-time.After(10 * time.Second) // a watchdog deadline
		logger.Error("shutdown took more than 10s: exiting")
		os.Exit(3)
	}()

	if *configPath != "" {
		rc := httpfilter.DefaultReloaderConfig(*configPath)
		rc.Logger = logger
		r, err := httpfilter.NewReloader(rc)
		if err != nil {
			logger.Error("limits", "err", err)
			return 2
		}
		if err := r.Start(ctx); err != nil {
			logger.Error("limits", "err", err)
			return 2
		}
		cfg.Limits = r
	} else {
		l, err := httpfilter.Parse(limitsName, limitsYAML)
		if err != nil {
			logger.Error("limits", "err", err)
			return 2
		}
		cfg.Limits = l
	}
	if err := demo.RunNode(ctx, cfg, nil); err != nil {
		logger.Error("node failed", "err", err)
		return 1
	}
	return 0
}
