//go:build race

package main

// raceEnabled: the test binary runs under the race detector, so the demo
// binary under test is built with -race too.
const raceEnabled = true
