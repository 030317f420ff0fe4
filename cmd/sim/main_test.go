package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/peerlimit/peerlimit/sim"
)

func TestList(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-list"}, &out); err != nil {
		t.Fatal(err)
	}
	scs, err := sim.Scenarios()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(scs) {
		t.Fatalf("%d lines for %d scenarios:\n%s", len(lines), len(scs), out.String())
	}
	for i, sc := range scs {
		if f := strings.Fields(lines[i]); len(f) < 2 || f[0] != sc.Name || !strings.Contains(lines[i], sc.Desc) {
			t.Errorf("line %q, want %s and its description", lines[i], sc.Name)
		}
	}
}

func TestRunWritesResultsAndPlot(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run([]string{"-scenario", "partition-heal", "-policy", "lease,static", "-seed", "3", "-out", dir, "-stats"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "decisions/s") {
		t.Errorf("-stats printed no decisions/s:\n%s", out.String())
	}
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The exact format: these keys, nothing else.
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if k := keys(doc); !slices.Equal(k, []string{"results", "scenario", "seed"}) {
		t.Errorf("top-level keys %v", k)
	}
	var results []map[string]json.RawMessage
	if err := json.Unmarshal(doc["results"], &results); err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 {
		t.Fatalf("%d results, want 2 (lease, static)", len(results))
	}
	if k := keys(results[0]); !slices.Equal(k, []string{"false_denials", "max_false_denial_pct", "max_overshoot_pct", "max_undershoot_pct", "policy", "sync_bytes", "sync_messages", "windows"}) {
		t.Errorf("result keys %v", k)
	}
	var windows []map[string]json.RawMessage
	if err := json.Unmarshal(results[0]["windows"], &windows); err != nil || len(windows) == 0 {
		t.Fatalf("windows: %v (%d)", err, len(windows))
	}
	if k := keys(windows[0]); !slices.Equal(k, []string{"admitted", "charged", "limit", "offered", "sla", "tenant", "window_start"}) {
		t.Errorf("window keys %v", k)
	}
	var rep sim.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Scenario != "partition-heal" || rep.Seed != 3 || rep.Results[0].Policy != sim.Lease || rep.Results[1].Policy != sim.Static {
		t.Errorf("report %s seed %d policies %s %s", rep.Scenario, rep.Seed, rep.Results[0].Policy, rep.Results[1].Policy)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "partition-heal.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "lease", "static", "limit", "partition n0,n1,n2 | n3,n4", "heal"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("plot lacks %q", want)
		}
	}
}

func TestRunFileAndPNG(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mine.txt")
	src := "desc mine\ninstances 2\nsync 200ms\nduration 20s\nsla api fixed:5s:100\ntraffic tenants=a sla=api rate=2x\nat 12s crash n1\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run([]string{"-file", file, "-policy", "optimistic", "-out", dir, "-plot", "png"}, &out); err != nil {
		t.Fatal(err)
	}
	png, err := os.ReadFile(filepath.Join(dir, "mine.png"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Error("mine.png is not a PNG")
	}
}

func TestMatrix(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-matrix", "-scenario", "acc-3n-1s-even,burst", "-seed", "1"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 4 || !strings.HasPrefix(lines[0], "| scenario | optimistic over % |") || !strings.HasPrefix(lines[1], "|---|") {
		t.Fatalf("not a markdown table:\n%s", out.String())
	}
	for i, name := range []string{"acc-3n-1s-even", "burst"} {
		cells := strings.Split(strings.Trim(lines[2+i], "|"), "|")
		if strings.TrimSpace(cells[0]) != name || len(cells) != 1+3*len(sim.Policies()) {
			t.Errorf("row %q: want %s and %d figures", lines[2+i], name, 3*len(sim.Policies()))
		}
	}
}

func TestExplore(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-explore", "1", "-seed", "11", "-explore-worst", "1"}, &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"explored 1 scenarios (generator seed 11", "| lease | all |", "undershoot vs safe", "lease: the worst scenarios per metric", "==> explore-11-0.txt"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// Each worst scenario's file follows its header, and parses.
	files := strings.Split(text, "\n==> ")[1:]
	if len(files) == 0 {
		t.Fatalf("no scenario file printed:\n%s", text)
	}
	for _, f := range files {
		head, src, _ := strings.Cut(f, " <==\n")
		if _, err := sim.ParseScenario(strings.TrimSuffix(head, ".txt"), []byte(src)); err != nil {
			t.Errorf("%s: %v", head, err)
		}
	}

	dir := t.TempDir()
	out.Reset()
	if err := run([]string{"-explore", "1", "-seed", "11", "-explore-worst", "1", "-explore-out", dir, "-policy", "lease,static"}, &out); err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "explore-11-*.txt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("-explore-out wrote %v (%v):\n%s", paths, err, out.String())
	}
	for _, p := range paths {
		if !strings.Contains(out.String(), "wrote "+p) {
			t.Errorf("output does not name %s", p)
		}
		var again bytes.Buffer
		if err := run([]string{"-file", p, "-policy", "lease"}, &again); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if strings.Contains(out.String(), "| optimistic |") {
		t.Error("-policy lease,static ran optimistic too")
	}
}

// TestExplorePrint: -explore-print writes a generated scenario's file, as
// the explorer runs it, which -file runs again.
func TestExplorePrint(t *testing.T) {
	for _, cfg := range []sim.ExploreConfig{{Seed: 1}, {Seed: 1, NoSkew: true}, {Seed: 1, MedianClock: true}} {
		args := []string{"-seed", "1", "-explore-print", "207"}
		if cfg.NoSkew {
			args = append(args, "-explore-noskew")
		}
		if cfg.MedianClock {
			args = append(args, "-explore-median")
		}
		var out bytes.Buffer
		if err := run(args, &out); err != nil {
			t.Fatal(err)
		}
		_, want := cfg.Scenario(207)
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("%v printed:\n%s\nwant:\n%s", args, out.String(), want)
		}
		if skew := strings.Contains(out.String(), "\nskew "); skew == cfg.NoSkew {
			t.Errorf("%v: skew line printed %v", args, skew)
		}
		sc, err := sim.ParseScenario("explore-1-207", out.Bytes())
		if err != nil {
			t.Errorf("%v: %v", args, err)
		} else if sc.MedianClock != cfg.MedianClock {
			t.Errorf("%v: measured on the median clock: %v", args, sc.MedianClock)
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-scenario", "nope"},
		{"-scenario", "steady", "-policy", "fast"},
		{"-scenario", "steady", "-plot", "gif"},
		{"-file", "/does/not/exist"},
		{"-scenario", "steady", "extra"},
		{"-explore", "-1"},
		{"-explore", "2", "-explore-worst", "0"},
	} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
