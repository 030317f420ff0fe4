// Package cputime reads how much CPU time a process has used, for the
// benchmarks and load harnesses that report CPU per operation.
package cputime

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is Linux's USER_HZ, the unit of /proc/PID/stat times (100 on
// every mainstream architecture).
const clockTick = 10 * time.Millisecond

// Of returns the CPU time (user + system, every thread) process pid has
// used, from /proc/PID/stat (Linux), or 0 if it cannot be read.
func Of(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// "pid (comm) state ppid ...": utime and stime are fields 14 and 15 of
	// the line, 12 and 13 after the command name (which may hold spaces).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * clockTick
}
