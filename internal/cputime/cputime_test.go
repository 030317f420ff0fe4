package cputime

import (
	"os"
	"runtime"
	"testing"
	"time"
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

// TestThreadCountsOwnWork: the thread's CPU time grows across a busy loop
// on a locked goroutine, and by no more than the process's.
func TestThreadCountsOwnWork(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the thread's CPU time is read on Linux only here")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0, s0 := Thread(), Self()
	for i := range 50_000_000 {
		sink ^= i * i
	}
	t1, s1 := Thread(), Self()
	if t1 <= t0 {
		t.Fatalf("Thread() went from %v to %v across a busy loop", t0, t1)
	}
	if t1-t0 > s1-s0+time.Millisecond {
		t.Fatalf("the thread used %v, the process %v", t1-t0, s1-s0)
	}
}
