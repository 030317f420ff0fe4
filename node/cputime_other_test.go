//go:build !unix

package node

import "time"

// cpuTime is not measured here: BenchmarkSyncCost reports 0.
func cpuTime() time.Duration { return 0 }
