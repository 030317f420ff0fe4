// Package redistest runs a real, throwaway redis-server for tests: one
// process per [Start], on a free loopback port, with a temporary directory
// and no persistence. Tests that exercise Redis failure can kill it
// ([Server.Kill]), freeze it ([Server.Pause]) and bring it back on the same
// address ([Server.Restart]).
//
// redis-server must be on PATH. Without it, Start skips the test, except when
// the CI environment variable is set: there a skipped Redis test would hide a
// broken machine, so Start fails the test instead.
package redistest

import (
	"github.com/peerlimit/peerlimit/internal/redisproc"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long Start and Restart wait for redis-server to
// answer PING.
const startTimeout = 10 * time.Second

// Server is one redis-server process owned by a test. The zero value is not
// usable; get one from [Start]. Its methods are safe for concurrent use, but
// Kill, Pause, Resume and Restart are meant to be called from the test's own
// goroutine.
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	port int

	mu   sync.Mutex
	proc *redisproc.Proc // nil after Kill
}

// Start launches redis-server on a free 127.0.0.1 port with `--save ""
// --appendonly no` in a temporary directory, waits until it answers PING,
// and registers a cleanup that kills it.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("redistest: redis-server not found on PATH and CI is set (install redis-server): %v", err)
		}
		tb.Skipf("redistest: redis-server not found on PATH: %v", err)
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir()}
	tb.Cleanup(s.stop)

	// The port is chosen by the OS, released, then handed to redis-server;
	// another process can grab it in between, so try a few times.
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := redisproc.FreePort()
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		s.port = port
		p, err := s.launch()
		if err == nil {
			s.mu.Lock()
			s.proc = p
			s.mu.Unlock()
			return s
		}
		lastErr = err
	}
	tb.Fatalf("redistest: start redis-server: %v", lastErr)
	return nil
}

// Addr returns the server's "127.0.0.1:port". It stays the same across
// Restart.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Kill sends SIGKILL to the server and waits until the process is gone. Its
// data is lost (persistence is off). Killing a server that is not running
// does nothing.
func (s *Server) Kill() {
	s.tb.Helper()
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.Signal(syscall.SIGKILL)
	select {
	case <-p.Done():
	case <-time.After(startTimeout):
		s.tb.Fatalf("redistest: redis-server (pid %d) did not exit within %v of SIGKILL", p.PID(), startTimeout)
	}
}

// Pause freezes the server with SIGSTOP: it keeps its socket and its data,
// accepts TCP connections (the kernel does) and answers nothing, which is
// what an overloaded or wedged Redis looks like to a client. Resume undoes it.
func (s *Server) Pause() {
	s.signal(syscall.SIGSTOP)
}

// Resume continues a server frozen by Pause with SIGCONT.
func (s *Server) Resume() {
	s.signal(syscall.SIGCONT)
}

func (s *Server) signal(sig syscall.Signal) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		s.tb.Fatalf("redistest: %v: redis-server is not running", sig)
	}
	if err := s.proc.Signal(sig); err != nil {
		s.tb.Fatalf("redistest: %v: %v", sig, err)
	}
}

// Restart kills the server if it is running and starts a fresh, empty one on
// the same address, waiting until it answers PING.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	p, err := s.launch()
	if err != nil {
		s.tb.Fatalf("redistest: restart redis-server on %s: %v", s.Addr(), err)
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
}

// stop is the cleanup: kill without failing the test.
func (s *Server) stop() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	p.Kill()
}

// launch starts redis-server on s.port and waits until it is ready.
func (s *Server) launch() (*redisproc.Proc, error) {
	return redisproc.Launch(s.bin, s.dir, s.port, startTimeout)
}
