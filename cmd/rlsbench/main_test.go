package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestSmoke runs the benchmark briefly on a 3-node cluster, so that it
// cannot rot: both servers answer every call, a ratio is printed, and the
// cluster-wide limit check passes.
func TestSmoke(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-nodes", "3", "-pairs", "1", "-duration", "300ms", "-rate", "500", "-workers", "4", "-values", "50"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"| 1 | null |", "| 1 | peerlimit |", "null / peerlimit throughput =", "cluster-wide:"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if m := regexp.MustCompile(`\| (\d+) \|\n`).FindAllStringSubmatch(s, -1); len(m) != 2 || m[0][1] != "0" || m[1][1] != "0" {
		t.Errorf("errors column: %v\n%s", m, s)
	}
}

// TestBadFlags: nonsense settings are refused with a message.
func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-workers", "0"}, {"-rate", "-1"}, {"-nope"}} {
		var out bytes.Buffer
		if err := run(args, &out); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
