// Command sim runs peerlimit's partition simulator: the real node sync code
// (node.Engine and counters) for N simulated instances on virtual time, under
// the scenarios in sim/testdata.
//
//	go run ./cmd/sim -list
//	go run ./cmd/sim -scenario partition-2-1 -policy all -seed 1 -out /tmp/sim
//	go run ./cmd/sim -matrix -seed 1
//	go run ./cmd/sim -scenario speed -policy lease -stats
//	go run ./cmd/sim -explore 500 -seed 1 -explore-out /tmp/worst
//
// -out writes DIR/results.json and the plot DIR/NAME.svg (or .png with
// -plot png): admitted per window against the limit, one line per policy,
// with faults marked.
//
// -explore N generates N random scenarios from -seed (sim.GenerateScenario),
// runs each under every policy, and prints the distribution of overshoot,
// undershoot (plain and against the partition-safe reference), wrongly
// denied and wrongly admitted requests over all complete windows, the
// windows where lease did worse than static, and the lease policy's worst
// scenarios with the file text that reproduces each (or, with -explore-out
// DIR, writes them to DIR/NAME.txt). -explore-noskew runs the same
// scenarios with their clocks in step, to tell what clock skew adds;
// -explore-median counts their windows on the members' median clock, the
// one the engines enforce, to tell the windows the cluster let over its
// limit from a cluster clock that is off the simulator's.
// -explore-print I prints scenario I's file, to run it alone with -file:
//
//	go run ./cmd/sim -seed 1 -explore-print 207 > explore-1-207.txt
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/peerlimit/peerlimit/sim"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	var (
		name   = fs.String("scenario", "", "built-in scenario name (see -list); with -matrix, a comma-separated subset")
		file   = fs.String("file", "", "scenario file to run instead of a built-in one")
		policy = fs.String("policy", "all", "optimistic, static, lease, central or all")
		seed   = fs.Uint64("seed", 1, "random seed: the same seed gives the same results.json")
		out    = fs.String("out", "", "directory for results.json and NAME.svg (none: print a summary)")
		list   = fs.Bool("list", false, "list the built-in scenarios")
		matrix = fs.Bool("matrix", false, "run every scenario under every policy and print a markdown table")
		stats  = fs.Bool("stats", false, "print decisions per second of real time and other run statistics")
		format = fs.String("plot", "svg", "plot format: svg or png")

		explore      = fs.Int("explore", 0, "generate and run this many random scenarios from -seed and print their distribution")
		exploreOut   = fs.String("explore-out", "", "with -explore: write the worst scenarios to DIR/NAME.txt instead of printing them")
		exploreWorst = fs.Int("explore-worst", 3, "with -explore: how many of lease's worst scenarios to keep per metric")
		turning      = fs.Bool("explore-turning", false, "with -explore: half the groups of tenants that move between instances move every 1 to 6 s, through 2 to 5 instances in turn, instead of 2 to 4 times in the run")
		noSkew       = fs.Bool("explore-noskew", false, "with -explore: run the scenarios with their clocks in step (no skew line), to tell what clock skew adds")
		median       = fs.Bool("explore-median", false, "with -explore: count every scenario's windows on its members' median clock, the one the engines enforce, instead of the simulator's (the measure median line), to tell the windows the cluster let over from a cluster clock off the simulator's")
		explorePrint = fs.Int("explore-print", -1, "print the file of the explorer's scenario I of -seed, as -explore runs it (with -explore-noskew and -explore-median too), and exit")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sim: unexpected arguments %q", fs.Args())
	}
	if *format != "svg" && *format != "png" {
		return fmt.Errorf("sim: -plot must be svg or png, got %q", *format)
	}
	policies, err := parsePolicies(*policy)
	if err != nil {
		return err
	}
	switch {
	case *list:
		scs, err := sim.Scenarios()
		if err != nil {
			return err
		}
		for _, sc := range scs {
			fmt.Fprintf(stdout, "%-22s %s\n", sc.Name, sc.Desc)
		}
		return nil
	case *matrix:
		return runMatrix(stdout, *name, policies, *seed, *stats)
	case *explorePrint >= 0:
		_, src := sim.ExploreConfig{Seed: *seed, NoSkew: *noSkew, MedianClock: *median, Turning: *turning}.Scenario(*explorePrint)
		_, err := stdout.Write(src)
		return err
	case *explore != 0:
		if *explore < 0 || *exploreWorst < 1 {
			return errors.New("sim: -explore and -explore-worst must be positive")
		}
		return runExplore(stdout, sim.ExploreConfig{Seed: *seed, Scenarios: *explore, Policies: policies, Worst: *exploreWorst, NoSkew: *noSkew, MedianClock: *median, Turning: *turning}, *exploreOut, *stats)
	}
	var sc *sim.Scenario
	switch {
	case *file != "":
		src, err := os.ReadFile(*file)
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		sc, err = sim.ParseScenario(strings.TrimSuffix(filepath.Base(*file), filepath.Ext(*file)), src)
		if err != nil {
			return err
		}
	case *name != "":
		sc, err = sim.LoadScenario(*name)
		if err != nil {
			return err
		}
	default:
		return errors.New("sim: want -scenario NAME, -file PATH, -list or -matrix")
	}
	rep := &sim.Report{Scenario: sc.Name, Seed: *seed}
	for _, p := range policies {
		r, err := sim.Run(sc, p, *seed)
		if err != nil {
			return err
		}
		rep.Results = append(rep.Results, r)
		fails, misses := sc.Check(r)
		fmt.Fprintf(stdout, "%-10s overshoot %7.3f%%  undershoot %7.3f%%  false denials %7.3f%% (%d)  messages %8d  bytes %10d\n",
			p, r.MaxOvershootPct, r.MaxUndershootPct, r.MaxFalseDenialPct, r.FalseDenials, r.SyncMessages, r.SyncBytes)
		for _, f := range fails {
			fmt.Fprintf(stdout, "  FAILS %s\n", f)
		}
		for _, m := range misses {
			fmt.Fprintf(stdout, "  KNOWN MISS %s\n", m)
		}
		if *stats {
			printStats(stdout, r.Stats)
		}
	}
	if *out == "" {
		return nil
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	js, err := rep.JSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "results.json"), js, 0o644); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	svg := filepath.Join(*out, sc.Name+"."+*format)
	if err := plotReport(sc, rep, svg); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s\n", filepath.Join(*out, "results.json"), svg)
	return nil
}

func parsePolicies(s string) ([]sim.Policy, error) {
	if s == "all" {
		return sim.Policies(), nil
	}
	var out []sim.Policy
	for _, p := range strings.Split(s, ",") {
		pol, err := sim.ParsePolicy(p)
		if err != nil {
			return nil, err
		}
		out = append(out, pol)
	}
	return out, nil
}

func printStats(w io.Writer, s sim.Stats) {
	fmt.Fprintf(w, "  %d decisions, %d events in %v: %.0f decisions/s; lost %d, cut %d, duplicates %d, timeouts %d, rejected %d, apply errors %d\n",
		s.Decisions, s.Events, s.Wall.Round(1e6), s.DecisionsPerSecond(), s.Lost, s.Cut, s.Duplicates, s.Timeouts, s.Rejected, s.ApplyErrors)
	if s.Retries > 0 {
		fmt.Fprintf(w, "  %d denied requests retried after their Retry-After: %d denied again, %d of them while their window had room\n",
			s.Retries, s.RetriesDenied, s.RetriesWronglyDenied)
	}
	if s.Pending > 0 {
		fmt.Fprintf(w, "  %d requests waited for the owner (%d then admitted): mean wait %v, longest %v\n",
			s.Pending, s.PendingAdmitted, (s.PendingWait / time.Duration(s.Pending)).Round(time.Microsecond), s.PendingWaitMax.Round(time.Microsecond))
	}
}

// runMatrix prints scenario x policy -> overshoot %, undershoot %, messages,
// for every built-in scenario or those named in only (comma-separated).
func runMatrix(w io.Writer, only string, policies []sim.Policy, seed uint64, stats bool) error {
	var scs []*sim.Scenario
	if only == "" {
		all, err := sim.Scenarios()
		if err != nil {
			return err
		}
		for _, sc := range all {
			if sc.Name != "speed" { // a load test, not an accuracy scenario (run it with -stats)
				scs = append(scs, sc)
			}
		}
	} else {
		for _, n := range strings.Split(only, ",") {
			sc, err := sim.LoadScenario(n)
			if err != nil {
				return err
			}
			scs = append(scs, sc)
		}
	}
	fmt.Fprintf(w, "| scenario |")
	for _, p := range policies {
		fmt.Fprintf(w, " %s over %% | %s under %% | %s msgs |", p, p, p)
	}
	fmt.Fprintf(w, "\n|---|")
	for range policies {
		fmt.Fprintf(w, "---:|---:|---:|")
	}
	fmt.Fprintln(w)
	var misses []string
	var total sim.Stats
	for _, sc := range scs {
		fmt.Fprintf(w, "| %s |", sc.Name)
		for _, p := range policies {
			r, err := sim.Run(sc, p, seed)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, " %.2f | %.2f | %d |", r.MaxOvershootPct, r.MaxUndershootPct, r.SyncMessages)
			_, m := sc.Check(r)
			misses = append(misses, m...)
			total.Decisions += r.Stats.Decisions
			total.Wall += r.Stats.Wall
		}
		fmt.Fprintln(w)
	}
	for _, m := range misses {
		fmt.Fprintf(w, "\nKNOWN MISS %s", m)
	}
	if len(misses) > 0 {
		fmt.Fprintln(w)
	}
	if stats {
		fmt.Fprintf(w, "\n%d decisions in %v: %.0f decisions/s\n", total.Decisions, total.Wall.Round(1e6), total.DecisionsPerSecond())
	}
	return nil
}

// runExplore runs the explorer and prints its summary and the worst
// scenarios' files (or writes them to dir).
func runExplore(w io.Writer, cfg sim.ExploreConfig, dir string, stats bool) error {
	start := time.Now()
	e, err := sim.Explore(cfg)
	if err != nil {
		return err
	}
	if err := e.Summary(w); err != nil {
		return err
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
	}
	for _, c := range e.WorstCases() {
		text := e.CaseText(c)
		if dir == "" {
			fmt.Fprintf(w, "\n==> %s.txt <==\n%s", c.Name, text)
			continue
		}
		path := filepath.Join(dir, c.Name+".txt")
		if err := os.WriteFile(path, text, 0o644); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		fmt.Fprintf(w, "wrote %s\n", path)
	}
	if stats {
		fmt.Fprintf(w, "\n%d scenarios in %v (%v of CPU in the runs)\n", cfg.Scenarios, time.Since(start).Round(time.Millisecond), e.CPU.Round(time.Millisecond))
	}
	return nil
}
