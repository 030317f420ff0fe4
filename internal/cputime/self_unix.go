//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Self returns the CPU time (user + system, every thread: the garbage
// collector's work included) this process has used so far, or 0 if it
// cannot be read.
func Self() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
