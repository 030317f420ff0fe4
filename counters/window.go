package counters

import (
	"fmt"
	"time"
)

// Algorithm selects how a tier counts requests.
type Algorithm uint8

const (
	// Fixed counts requests in windows aligned to the Unix clock:
	// start = floor(now / period) * period. Every instance computes the same
	// window without talking to any other.
	Fixed Algorithm = iota
	// Sliding is the sliding-window counter: the current fixed window's count
	// plus the previous window's count weighted by the share of the previous
	// window still inside the sliding period. At 25% into the current window,
	// the previous window counts for 75%.
	Sliding
)

// String returns "fixed" or "sliding".
func (a Algorithm) String() string {
	switch a {
	case Fixed:
		return "fixed"
	case Sliding:
		return "sliding"
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// ParseAlgorithm maps "fixed" (or "") and "sliding" to an Algorithm.
func ParseAlgorithm(s string) (Algorithm, error) {
	switch s {
	case "", "fixed":
		return Fixed, nil
	case "sliding":
		return Sliding, nil
	}
	return 0, fmt.Errorf("counters: unknown algorithm %q (want fixed or sliding)", s)
}

// WindowStart returns the start of the window of length period that holds
// now, in Unix nanoseconds: floor(now / period) * period. Windows are aligned
// to the Unix epoch, so every instance agrees on them without coordination.
// period must be positive.
func WindowStart(now int64, period int64) int64 {
	s := now - now%period
	if now < 0 && now%period != 0 { // floor, not truncation, before 1970
		s -= period
	}
	return s
}

// Window returns the start and end of the window of length period that
// holds t: start = floor(t / period) * period, end = start + period.
func Window(t time.Time, period time.Duration) (start, end time.Time) {
	s := WindowStart(t.UnixNano(), int64(period))
	return time.Unix(0, s), time.Unix(0, s+int64(period))
}
