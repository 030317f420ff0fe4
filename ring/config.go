package ring

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalidConfig is wrapped by every error that [Config.Validate] and [New]
// return for a bad Config.
var ErrInvalidConfig = errors.New("invalid config")

// Bounds enforced by [Config.Validate].
const (
	minPartitionCount    = 1
	maxPartitionCount    = 1 << 16
	minReplicationFactor = 2
	maxReplicationFactor = 1000
	minLoad              = 1.1
)

// Config sets the shape of a [Ring]. Every node of a cluster must use the
// same Config, or they will disagree on owners.
//
// The zero value is not valid; start from [DefaultConfig]. A Config is a plain
// value: copy it freely.
type Config struct {
	// PartitionCount is the number of slices the key space is cut into; a
	// key's partition is keyHash % PartitionCount and each partition has one
	// owner. Unit: partitions. Default: 1021 (a prime, as consistent
	// recommends). Valid: 1 to 65536.
	//
	// Keep it well above the largest member count you expect (10× or more):
	// the finer the partitions, the closer each member's share is to 1/N and
	// the smaller the lumps that move on a membership change. With more
	// members than partitions, some members own nothing. The cost is a
	// rebuild time and a snapshot size (16 bytes per partition) that grow
	// linearly with it. 271 (consistent's default) does well up to ~10
	// members; at 30 it moves about twice the ideal share of keys per join
	// or leave, against 1.24× with 1021 (README.md, TestMovementNameSets).
	PartitionCount int

	// ReplicationFactor is the number of points (virtual nodes) each member
	// has on the hash ring. Unit: points per member. Default: 20. Valid: 2 to
	// 1000.
	//
	// More points even out the arcs members own before the load bound has to
	// step in, so fewer partitions move between members that stayed on a
	// join or leave: at 10↔11 members, 100 points move 1.01× the ideal share
	// of keys on average, 20 points 1.11× (README.md). The cost is rebuild
	// time: consistent sorts the ring once per member added, so a rebuild
	// grows with members² × ReplicationFactor (BenchmarkSet: 100 members
	// take ~7 ms with 20 points, ~50 ms with 100).
	ReplicationFactor int

	// Load bounds how many partitions a member may own, as a multiple of the
	// average: no member owns more than ceil(Load × PartitionCount / members).
	// Unit: ratio. Default: 1.25. Valid: 1.1 or more, finite.
	//
	// In practice the busiest member owns close to the bound (1.2 to 1.3×
	// the average at 1.25). Lower values balance ownership more tightly but
	// move more keys between members that stayed when membership changes (a
	// partition whose ring successor is full spills to the next member): at
	// 10↔11 members, 2.55% of keys on average at 1.1 against 1.08% at 1.25.
	// Below 1.1 the headroom is too small to be useful; below 1 consistent
	// can run out of room and panic.
	Load float64
}

// DefaultConfig returns the recommended Config: PartitionCount 1021,
// ReplicationFactor 20, Load 1.25.
func DefaultConfig() Config {
	return Config{
		PartitionCount:    1021,
		ReplicationFactor: 20,
		Load:              1.25,
	}
}

// Validate reports the first field of c that is out of range. The error names
// the field and wraps [ErrInvalidConfig].
func (c Config) Validate() error {
	if c.PartitionCount < minPartitionCount || c.PartitionCount > maxPartitionCount {
		return fmt.Errorf("ring: Config.PartitionCount = %d, want %d to %d: %w",
			c.PartitionCount, minPartitionCount, maxPartitionCount, ErrInvalidConfig)
	}
	if c.ReplicationFactor < minReplicationFactor || c.ReplicationFactor > maxReplicationFactor {
		return fmt.Errorf("ring: Config.ReplicationFactor = %d, want %d to %d: %w",
			c.ReplicationFactor, minReplicationFactor, maxReplicationFactor, ErrInvalidConfig)
	}
	if math.IsNaN(c.Load) || math.IsInf(c.Load, 0) || c.Load < minLoad {
		return fmt.Errorf("ring: Config.Load = %v, want a finite value >= %v: %w",
			c.Load, minLoad, ErrInvalidConfig)
	}
	return nil
}
