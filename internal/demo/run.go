package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/httpfilter"
	"github.com/peerlimit/peerlimit/node"
)

// DefaultDashboard is the dashboard's default address.
const DefaultDashboard = "127.0.0.1:8080"

// Config configures a demo run (the parent process). Start from
// DefaultConfig.
type Config struct {
	// Nodes is the number of node processes. Default 3 (the seed's test).
	Nodes int
	// Rate is the load's total rate, requests per second, at most MaxRate.
	// Default 1000 (the seed's test).
	Rate float64
	// Tenants is the number of tenants. Default 25 (the seed's test).
	Tenants int
	// Duration bounds the load (from its first request; with NoLoad, from
	// the cluster being ready). Default 0: until ctx ends (Ctrl-C).
	Duration time.Duration
	// SyncInterval is every node's sync interval. Default 200 ms (the
	// node default; the seed synced once per second).
	SyncInterval time.Duration
	// Policy is every node's admission policy. Default lease.
	Policy node.Policy
	// ConfigPath is a limits file; "" uses LimitsData. The nodes reload it
	// when it changes.
	ConfigPath string
	// LimitsData and LimitsName are the built-in limits (the seeds').
	LimitsData []byte
	LimitsName string
	// NoLoad starts the cluster only and prints one line per node
	// ("node 1 http://127.0.0.1:PORT") so that any load tool can drive it.
	NoLoad bool
	// Report "json" prints the JSON report on Out at the end (and sends the
	// live view to Err). Default "": no report.
	Report string
	// Dashboard is the dashboard's loopback address; "off" disables it.
	// Default DefaultDashboard; if that is busy, a free port is used.
	Dashboard string
	// Align starts the load at the next boundary of the longest window, so
	// that a run of one window and a bit holds one complete window.
	// Default true.
	Align bool
	// Faults is a fault script (see ParseFaults), timed from the load's
	// start. Default "".
	Faults string
	// Seed seeds the load's random choices. Default 1.
	Seed uint64
	// Workers bounds the load's concurrent requests. Default 64.
	Workers int
	// Clients is how the load reaches the nodes (see LoadConfig.Clients),
	// and MoveEvery how long a moving client stays on a node. Default
	// round-robin (the seed's test), 1.7 s.
	Clients   Clients
	MoveEvery time.Duration
	// View turns the live view on. Default true.
	View bool
	// LogFile, if set, receives every event and node log line.
	LogFile string
	// LogLevel is the nodes' log level (debug, info, warn, error). Default
	// info.
	LogLevel string
	// Exe is the binary the nodes run. Default os.Executable().
	Exe string
	// NodeArgs are the arguments that make Exe run one node. Default
	// ["-role", "node"].
	NodeArgs []string
	// Out and Err are the demo's stdout and stderr; OutTTY and ErrTTY
	// say whether they are terminals. Default os.Stdout and os.Stderr,
	// not terminals.
	Out, Err       io.Writer
	OutTTY, ErrTTY bool
}

// MaxRate is the highest Config.Rate, in requests per second: far more
// than one machine's loopback HTTP carries through the nodes' middleware
// (what the workers cannot send is counted as dropped), and low enough that
// a mistyped rate such as 1e12 is an error rather than a generator that
// only drops.
const MaxRate = 100_000

// DefaultConfig returns the defaults of the demo (the seed's test).
func DefaultConfig() Config {
	return Config{
		Nodes: 3, Rate: 1000, Tenants: 25, SyncInterval: 200 * time.Millisecond, Policy: node.PolicyLease,
		Dashboard: DefaultDashboard, Align: true, Seed: 1, Workers: 64, View: true, LogLevel: "info",
		Clients: ClientsRoundRobin, MoveEvery: 1700 * time.Millisecond,
		NodeArgs: []string{"-role", "node"},
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Nodes < 1 || c.Nodes > 32:
		return fmt.Errorf("demo: -nodes must be in 1..32, got %d", c.Nodes)
	case !c.NoLoad && !(c.Rate > 0 && c.Rate <= MaxRate):
		return fmt.Errorf("demo: -rate must be > 0 and at most %d requests per second, got %v", MaxRate, c.Rate)
	case c.Tenants < 1 || c.Tenants > 10000:
		return fmt.Errorf("demo: -tenants must be in 1..10000, got %d", c.Tenants)
	case c.Duration < 0:
		return fmt.Errorf("demo: -duration must be >= 0, got %v", c.Duration)
	case c.SyncInterval < time.Millisecond:
		return fmt.Errorf("demo: -sync must be >= 1ms, got %v", c.SyncInterval)
	case c.Report != "" && c.Report != "json":
		return fmt.Errorf("demo: -report must be json or empty, got %q", c.Report)
	case c.Workers < 1:
		return fmt.Errorf("demo: -workers must be >= 1, got %d", c.Workers)
	case c.MoveEvery <= 0:
		return fmt.Errorf("demo: -move-every must be > 0, got %v", c.MoveEvery)
	case c.ConfigPath == "" && len(c.LimitsData) == 0:
		return errors.New("demo: no limits: set -config")
	}
	if _, err := node.ParsePolicy(string(c.Policy)); err != nil {
		return fmt.Errorf("demo: -policy: %w", err)
	}
	if _, err := ParseClients(string(c.Clients)); err != nil {
		return fmt.Errorf("demo: -clients: %w", err)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.Dashboard != "off" && c.Dashboard != "" {
		if err := CheckLoopback(c.Dashboard); err != nil {
			return fmt.Errorf("demo: -http: %w", err)
		}
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("demo: -log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// LoadLimits loads the limits a Config names (its file, or the built-in
// data).
func (c Config) LoadLimits() (*httpfilter.Limits, error) {
	if c.ConfigPath != "" {
		return httpfilter.LoadFile(c.ConfigPath)
	}
	return httpfilter.Parse(c.LimitsName, c.LimitsData)
}

// Run runs the demo until ctx ends or Duration passes: it starts the node
// processes, the dashboard, the live view, the load and the fault script,
// then stops everything and, with Report "json", prints the report.
func Run(ctx context.Context, cfg Config) (err error) {
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if cfg.Err == nil {
		cfg.Err = os.Stderr
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	lim, err := cfg.LoadLimits()
	if err != nil {
		return fmt.Errorf("demo: limits: %w", err)
	}
	if cfg.Exe == "" {
		if cfg.Exe, err = os.Executable(); err != nil {
			return fmt.Errorf("demo: find own binary: %w", err)
		}
	}
	var work *Workload
	if !cfg.NoLoad {
		if work, err = BuildWorkload(lim, cfg.Tenants, cfg.Rate); err != nil {
			return err
		}
	}
	plan, err := NewPlan(cfg.Nodes)
	if err != nil {
		return err
	}
	faults, err := ParseFaults(cfg.Faults, plan.Names())
	if err != nil {
		return err
	}

	var tee io.Writer
	if cfg.LogFile != "" {
		f, err := os.Create(cfg.LogFile)
		if err != nil {
			return fmt.Errorf("demo: -log: %w", err)
		}
		defer f.Close()
		tee = &syncWriter{w: f}
	}
	events := NewEventLog(200, tee)
	logger := slog.New(slog.NewTextHandler(events, &slog.HandlerOptions{ReplaceAttr: dropTime}))

	args := append([]string{}, cfg.NodeArgs...)
	args = append(args, "-policy", string(cfg.Policy), "-sync", cfg.SyncInterval.String(), "-log-level", cfg.LogLevel)
	if cfg.ConfigPath != "" {
		abs, err := filepath.Abs(cfg.ConfigPath)
		if err != nil {
			return fmt.Errorf("demo: -config: %w", err)
		}
		args = append(args, "-config", abs)
	}
	scfg := DefaultSupervisorConfig()
	scfg.Exe, scfg.Args, scfg.Plan, scfg.Logger, scfg.Output = cfg.Exe, args, plan, logger, events
	sup, err := NewSupervisor(scfg)
	if err != nil {
		return err
	}

	run := RunInfo{Policy: string(cfg.Policy), SyncInterval: cfg.SyncInterval, Nodes: cfg.Nodes, Tenants: cfg.Tenants,
		Rate: cfg.Rate, Clients: string(cfg.Clients), Limits: lim.Source, Started: time.Now()}
	if cfg.NoLoad {
		run.Rate, run.Tenants, run.Clients = 0, 0, ""
	} else {
		run.Rate = math.Round(work.Rate*10) / 10
	}

	// Dashboard: listen first, so that a busy port fails before any node
	// starts.
	var dashLis net.Listener
	if cfg.Dashboard != "off" && cfg.Dashboard != "" {
		dashLis, err = net.Listen("tcp", cfg.Dashboard)
		if err != nil && cfg.Dashboard == DefaultDashboard {
			fmt.Fprintf(cfg.Err, "demo: %s is busy (%v); using a free port\n", cfg.Dashboard, err)
			dashLis, err = net.Listen("tcp", "127.0.0.1:0")
		}
		if err != nil {
			return fmt.Errorf("demo: -http %s: %w", cfg.Dashboard, err)
		}
		run.Dashboard = "http://" + dashLis.Addr().String()
	}
	mon := NewMonitor(sup, NewTruth(cfg.Nodes), work, events, run)

	// From here on, every exit path stops the nodes.
	defer sup.Stop()

	var refMu sync.Mutex
	var ref time.Time // faults are timed from here
	getRef := func() time.Time { refMu.Lock(); defer refMu.Unlock(); return ref }
	setRef := func(t time.Time) { refMu.Lock(); ref = t; refMu.Unlock() }

	if dashLis != nil {
		srv := &http.Server{Handler: (&Dashboard{Sup: sup, Mon: mon, Ref: getRef, Ctx: ctx}).Handler(), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(dashLis) }()
		defer srv.Close()
		fmt.Fprintf(cfg.Err, "dashboard %s\n", run.Dashboard)
	}

	fmt.Fprintf(cfg.Err, "starting %d nodes (policy %s, sync %v, limits %s)\n", cfg.Nodes, cfg.Policy, cfg.SyncInterval, lim.Source)
	if err := sup.StartAll(ctx); err != nil {
		for _, e := range events.Last(20) {
			fmt.Fprintln(cfg.Err, e.Text)
		}
		return err
	}
	if !waitMembers(ctx, sup, 20*time.Second) {
		fmt.Fprintln(cfg.Err, "demo: warning: the nodes do not all see each other yet")
	}
	for i, st := range sup.Poll(ctx, time.Second) {
		fmt.Fprintf(cfg.Err, "node %s %s pid %d\n", st.Name, sup.URL(i), st.PID)
	}
	if cfg.NoLoad {
		for i := range plan {
			fmt.Fprintf(cfg.Out, "node %d %s\n", i+1, sup.URL(i))
		}
	}

	// The live view.
	viewOut, ansi := cfg.Out, cfg.OutTTY
	if cfg.Report == "json" || !cfg.OutTTY {
		viewOut, ansi = cfg.Err, cfg.ErrTTY
	}
	loopCtx, stopLoop := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	mon.Step(ctx)
	go func() {
		defer close(loopDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-loopCtx.Done():
				return
			case <-t.C:
			}
			snap := mon.Step(loopCtx)
			if cfg.View {
				Render(viewOut, snap, ansi)
			}
		}
	}()

	// The load (or just the wait), and the fault script.
	faultCtx, stopFaults := context.WithCancel(ctx)
	faultsDone := make(chan struct{})
	startFaults := func(at time.Time) {
		setRef(at)
		go func() {
			defer close(faultsDone)
			RunFaults(faultCtx, sup, mon, at, faults)
		}()
	}
	if cfg.NoLoad {
		startFaults(time.Now())
		var timeout <-chan time.Time
		if cfg.Duration > 0 {
			t := time.NewTimer(cfg.Duration)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ctx.Done():
		case <-timeout:
		}
	} else {
		lc := DefaultLoadConfig()
		lc.Workload, lc.Truth, lc.Up, lc.Seed, lc.Workers = work, mon.truth, sup.Up, cfg.Seed, cfg.Workers
		lc.Clients, lc.MoveEvery = cfg.Clients, cfg.MoveEvery
		for i := range plan {
			lc.Targets = append(lc.Targets, sup.URL(i))
		}
		gen, err := NewGenerator(lc)
		if err != nil {
			stopFaults()
			stopLoop()
			return err
		}
		mon.SetGenerator(gen)
		start := time.Now()
		if cfg.Align {
			if p := work.MaxPeriod(); p > 0 {
				start = time.Unix(0, counters.WindowStart(start.UnixNano(), int64(p))+int64(p))
			}
		}
		var end time.Time
		if cfg.Duration > 0 {
			end = start.Add(cfg.Duration)
		}
		startFaults(start)
		gen.Run(ctx, start, end)
	}
	stopFaults()
	<-faultsDone
	stopLoop()
	<-loopDone

	// Final numbers, then stop the nodes, then the report.
	final := mon.Step(context.Background())
	if cfg.View {
		Render(viewOut, final, ansi)
	}
	report := mon.Report()
	sup.Stop()
	fmt.Fprintln(cfg.Err, "all nodes stopped")
	if cfg.Report == "json" {
		return WriteReport(cfg.Out, report)
	}
	return nil
}

// waitMembers waits until every node sees every node, or timeout.
func waitMembers(ctx context.Context, sup *Supervisor, timeout time.Duration) bool {
	want := strings.Join(sup.Plan().Names(), " ")
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond) // poll interval
	defer tick.Stop()
	for time.Now().Before(deadline) {
		ok := true
		for _, st := range sup.Poll(ctx, time.Second) {
			if st.Node == nil || strings.Join(st.Node.Members, " ") != want {
				ok = false
			}
		}
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return false
}

// dropTime removes slog's time attribute (events carry their own).
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
