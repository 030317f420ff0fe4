//go:build unix

package node

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time this process has used so far (user and
// system, every thread: the collector's work included).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
