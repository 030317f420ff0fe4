package cputime

import (
	"os"
	"runtime"
	"testing"
)

// TestCountsWork: after some work, this process's CPU time has grown, and
// on Linux /proc gives it too, to within the tick it counts in.
func TestCountsWork(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/PID/stat and getrusage are read on Linux only here")
	}
	before := Self()
	for i := range 50_000_000 {
		sink ^= i * i
	}
	self, proc := Self(), Of(os.Getpid())
	if self <= before {
		t.Fatalf("Self() went from %v to %v across a busy loop", before, self)
	}
	if proc <= 0 || proc > self+2*clockTick || proc < self-2*clockTick-self/10 {
		t.Fatalf("Of(self) = %v, Self() = %v", proc, self)
	}
	if Of(-1) != 0 {
		t.Fatal("Of(-1) should be 0")
	}
}

// sink keeps the busy loop from being optimised away.
var sink int
