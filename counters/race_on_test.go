//go:build race

package counters

// raceEnabled reports whether the tests run under the race detector, which
// changes allocation sizes and slows large fills.
const raceEnabled = true
