// Package testutil holds the small helpers the project's tests share:
// waiting for a condition with a deadline (never a sleep standing in for
// synchronisation), and a log sink safe for concurrent writers and readers.
package testutil

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// Poll is how often WaitFor checks its condition.
const Poll = 10 * time.Millisecond

// WaitFor checks cond every Poll until it holds, and fails tb if it does not
// within timeout. It returns how long it waited. what names the condition in
// the failure message.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	tb.Helper()
	return WaitForEvery(tb, timeout, Poll, what, cond)
}

// WaitForEvery is WaitFor with its own poll interval, for conditions that
// are costly to check (another process's state over HTTP, say).
func WaitForEvery(tb testing.TB, timeout, poll time.Duration, what string, cond func() bool) time.Duration {
	tb.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	t := time.NewTicker(poll)
	defer t.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-t.C // the poll interval; cond is what synchronises
	}
	return time.Since(start)
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers and readers: a
// log sink a test can read while the code under test writes to it. The zero
// value is an empty buffer.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Logger returns a logger that writes Warn and above to tb's log: shown
// when the test fails or with -v, never in the middle of benchmark output.
// What is logged once the test's cleanups have run (by a goroutine that
// outlives it) is dropped.
func Logger(tb testing.TB) *slog.Logger {
	w := &tbWriter{tb: tb}
	tb.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tbWriter struct {
	mu   sync.Mutex
	tb   testing.TB
	done bool
}

func (w *tbWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.tb.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
