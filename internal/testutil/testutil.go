// Package testutil holds the small helpers the project's tests share:
// waiting for a condition with a deadline (never a sleep standing in for
// synchronisation), a log sink safe for concurrent writers and readers,
// a free loopback port and this host's routable address.
package testutil

import (
	"bytes"
	"log/slog"
	"net"
	"os"
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

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago:
// nobody listens there now (a seed with a typo, or a port a test binds
// later).
func FreePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// RoutableIP returns a non-loopback, non-link-local IPv4 address of this
// host. Without one the test is skipped, but fails when the CI environment
// variable is set: there a skip would hide a test that must run.
func RoutableIP(tb testing.TB) net.IP {
	tb.Helper()
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
				return ipn.IP.To4()
			}
		}
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("this host has no routable IPv4 address (interfaces: %v) and CI is set", err)
	}
	tb.Skipf("this host has no routable IPv4 address (interfaces: %v)", err)
	return nil
}
