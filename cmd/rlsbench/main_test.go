package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMain serves as the null server when the benchmark re-executes the
// test binary as one.
func TestMain(m *testing.M) {
	if os.Getenv(nullEnv) != "" {
		if err := serveNull(os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRLSBenchSmoke runs the benchmark for a moment with a tiny load, on
// one node and on a 3-node cluster, so that it cannot rot: every call of
// both servers is answered OK, the table and the ratios are printed, and
// the limit check passes.
func TestRLSBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/peerlimit and starts server processes")
	}
	bin := filepath.Join(t.TempDir(), "peerlimit")
	if out, err := exec.Command("go", "build", "-o", bin, "../peerlimit").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	row := regexp.MustCompile(`(?m)^\| 1 \| (null|peerlimit) \| (\d+) \|.* \| (\d+) \|$`)
	for _, nodes := range []string{"1", "3"} {
		t.Run("nodes="+nodes, func(t *testing.T) {
			var out bytes.Buffer
			err := run([]string{"-peerlimit", bin, "-nodes", nodes, "-pairs", "1", "-duration", "250ms", "-rate", "200", "-workers", "4", "-values", "20"}, &out)
			s := out.String()
			if err != nil {
				t.Fatalf("%v\n%s", err, s)
			}
			t.Logf("\n%s", s)
			rows := row.FindAllStringSubmatch(s, -1)
			if len(rows) != 2 || rows[0][1] != "null" || rows[1][1] != "peerlimit" {
				t.Fatalf("want a row for null then peerlimit, got %q:\n%s", rows, s)
			}
			for _, r := range rows {
				if r[2] == "0" || r[3] != "0" {
					t.Errorf("%s: %s calls per second, %s errors:\n%s", r[1], r[2], r[3], s)
				}
			}
			for _, want := range []string{"null / peerlimit throughput:", "peerlimit p99 / null p99:", "limit check: "} {
				if !strings.Contains(s, want) {
					t.Errorf("output lacks %q:\n%s", want, s)
				}
			}
		})
	}
}

// TestBadFlags: nonsense settings are refused with a message.
func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-workers", "0"}, {"-rate", "-1"}, {"-server-procs", "-1"}, {"-peer-env", "GOGC"}, {"-nope"}, {"extra"}} {
		if _, err := parse(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
