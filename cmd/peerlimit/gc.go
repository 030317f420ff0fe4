package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
)

// Go's garbage collector, as this server sets it when the environment
// does not.
//
// The server's live heap is small (about 2 MB with a few thousand
// series) and every call allocates, so under Go's default GOGC=100 it
// collects every 2–3 MB allocated: some 40 times a second at 23k calls/s
// on 2 cores, with two stop-the-world pauses each. That cost a quarter to
// a third of the server's CPU per call and most of its open-loop p99:
// measured with cmd/rlsbench against a null gRPC server, a throughput
// ratio of 0.98–1.41 and an open-loop p99 ratio of 1.69–1.84, where issue
// 19 asks for at most 1.3. GOGC=400 lets the heap grow to 5 times its live
// size before a collection instead of 2 times; with it (and the stream
// workers in main.go) the throughput ratio was 0.89–1.12 in 10 runs and
// the p99 ratio within 1.3 in 6 of them (0.28–8.17: the tail swings on a
// shared machine), and the server's CPU per call 16.5–19.5 µs instead of
// 25.5 (README, "Server mode speed").
//
// The price is memory with many series: with 100,000 (-max-entries, full)
// the live heap is about 150 MB and the peak RSS was 819 MiB instead of
// 342 MiB. So the larger target comes with a soft memory limit where one
// is known: in a container (a cgroup with a memory limit) the collector
// works harder near the limit instead of letting the heap grow past it
// (GOMEMLIMIT=230MiB held that table at 246 MiB).
//
// Each default yields to Go's own variable: GOGC (a number, or off) and
// GOMEMLIMIT (such as 512MiB) in the environment are Go's and win.
const (
	// defaultGCPercent is GOGC when the environment sets none.
	defaultGCPercent = 400
	// memoryLimitShare is the share of the cgroup's memory limit set as
	// Go's soft memory limit when GOMEMLIMIT is unset. The limit counts
	// only memory the Go runtime maps; the rest (the binary, the page
	// cache of the config files, the kernel's socket buffers charged to
	// the cgroup) lives in the tenth left.
	memoryLimitShare = 0.9
)

// gcUsage ends the command's help.
const gcUsage = `
Go's garbage collector: GOGC=400 unless the environment sets GOGC (fewer
collections: the heap grows to 5 times its live size, not 2, before one),
and in a container with a memory limit, a soft memory limit (GOMEMLIMIT)
of 90% of it unless the environment sets GOMEMLIMIT.
`

// cgroupRoot is where the cgroup file system is mounted.
const cgroupRoot = "/sys/fs/cgroup"

// gcSettings are the collector's settings setGC applies: zero where the
// environment's (or Go's default) stands.
type gcSettings struct {
	percent     int   // GOGC to set
	memoryLimit int64 // soft memory limit to set, in bytes
	cgroupLimit int64 // the cgroup's memory limit it comes from, in bytes
}

// gcDefaults decides the collector's settings from the environment
// (getenv) and the cgroup memory limit under root (cgroupRoot; see
// cgroupMemoryLimit): GOGC=400 unless GOGC is set, and a soft memory
// limit of 90% of the cgroup's limit unless GOMEMLIMIT is set or there is
// no limit. An unreadable limit file is an error, with the GOGC setting
// still decided.
func gcDefaults(getenv func(string) string, root string) (gcSettings, error) {
	var s gcSettings
	if getenv("GOGC") == "" {
		s.percent = defaultGCPercent
	}
	if getenv("GOMEMLIMIT") != "" {
		return s, nil
	}
	limit, err := cgroupMemoryLimit(root)
	if err != nil || limit == 0 {
		return s, err
	}
	s.cgroupLimit = limit
	s.memoryLimit = int64(float64(limit) * memoryLimitShare)
	return s, nil
}

// apply sets the settings in the Go runtime.
func (s gcSettings) apply() {
	if s.percent != 0 {
		debug.SetGCPercent(s.percent)
	}
	if s.memoryLimit != 0 {
		debug.SetMemoryLimit(s.memoryLimit)
	}
}

// cgroupMemoryLimit is the memory limit, in bytes, of the cgroup this
// process sees at root (a container's own cgroup, where the cgroup
// namespace puts it): memory.max under cgroup v2, or
// memory/memory.limit_in_bytes under v1. It is 0 when there is no limit:
// neither file exists (outside a container), or the file says none ("max"
// in v2, a value near 2^63 in v1).
func cgroupMemoryLimit(root string) (int64, error) {
	for _, name := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("cgroup memory limit: %w", err)
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("cgroup memory limit: %s: %q is not a number of bytes", filepath.Join(root, name), v)
		}
		if n >= 1<<62 { // v1's "unlimited" is the largest page-aligned int64
			return 0, nil
		}
		return n, nil
	}
	return 0, nil
}

// gcState is the runtime's GOGC and soft memory limit, as log attributes.
func gcState() []any {
	ms := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(ms)
	gogc := "off"
	if p := int64(ms[0].Value.Uint64()); p >= 0 { // off reads as -1
		gogc = strconv.FormatInt(p, 10)
	}
	limit := "none"
	if l := ms[1].Value.Uint64(); l < math.MaxInt64 {
		limit = fmt.Sprintf("%dMiB", l>>20)
	}
	return []any{"GOGC", gogc, "GOMEMLIMIT", limit}
}
