//go:build linux

package cputime

import (
	"syscall"
	"time"
	"unsafe"
)

// clockThreadCPUTime is Linux's CLOCK_THREAD_CPUTIME_ID.
const clockThreadCPUTime = 3

// Thread returns the CPU time the calling OS thread has used so far, or 0
// if it cannot be read. Between two readings on a goroutine locked to its
// thread (runtime.LockOSThread) it is that goroutine's own work: neither
// the collector's nor the time slices other processes took.
func Thread() time.Duration {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
