//go:build race

package ring

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = true
