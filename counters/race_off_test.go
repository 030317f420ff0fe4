//go:build !race

package counters

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = false
