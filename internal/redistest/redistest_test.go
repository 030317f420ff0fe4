package redistest

import (
	"github.com/peerlimit/peerlimit/internal/redisproc"
	"net"
	"testing"
	"time"
)

func TestLifecycle(t *testing.T) {
	s := Start(t)
	addr := s.Addr()
	if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" {
		t.Fatalf("Addr() = %q, want 127.0.0.1:port", addr)
	}
	if err := redisproc.Ping(addr, time.Second); err != nil {
		t.Fatalf("PING after Start: %v", err)
	}

	s.Kill()
	if err := redisproc.Ping(addr, time.Second); err == nil {
		t.Fatal("PING after Kill succeeded")
	}
	s.Kill() // idempotent

	s.Restart()
	if s.Addr() != addr {
		t.Fatalf("Addr() after Restart = %q, want %q", s.Addr(), addr)
	}
	if err := redisproc.Ping(addr, time.Second); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}

	s.Pause()
	if err := redisproc.Ping(addr, 200*time.Millisecond); err == nil {
		t.Fatal("PING answered while paused")
	}
	s.Resume()
	if err := redisproc.Ping(addr, time.Second); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}

	s.Restart() // from running
	if err := redisproc.Ping(addr, time.Second); err != nil {
		t.Fatalf("PING after second Restart: %v", err)
	}
}

func TestTwoServers(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("two servers share %s", a.Addr())
	}
	a.Kill()
	if err := redisproc.Ping(b.Addr(), time.Second); err != nil {
		t.Fatalf("killing one server broke the other: %v", err)
	}
}
