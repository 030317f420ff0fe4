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
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long Start and Restart wait for redis-server to
// answer PING.
const startTimeout = 10 * time.Second

// readyLine is what redis-server logs once it accepts connections (Redis 6
// and 7 both start the line with it).
const readyLine = "Ready to accept connections"

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
	proc *process // nil after Kill
}

// process is one run of redis-server.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	log  *tail         // the last lines it wrote
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
		port, err := freePort()
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
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(startTimeout):
		s.tb.Fatalf("redistest: redis-server (pid %d) did not exit within %v of SIGKILL", p.cmd.Process.Pid, startTimeout)
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
	if err := s.proc.cmd.Process.Signal(sig); err != nil {
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
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// launch starts redis-server on s.port and waits until it is ready. On
// failure the process is gone and the error carries its last log lines.
func (s *Server) launch() (*process, error) {
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", "", // log to stdout, which we watch for readiness
		"--loglevel", "notice",
	)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{}), log: &tail{}}
	ready := make(chan struct{})
	go func() {
		// Read the log to the end (so redis-server never blocks on a full
		// pipe), report readiness once, then reap the process.
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			p.log.add(line)
			if !signalled && strings.Contains(line, readyLine) {
				close(ready)
				signalled = true
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()

	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	select {
	case <-ready:
	case <-p.done:
		return nil, fmt.Errorf("redis-server exited before it was ready (%v); log:\n%s", cmd.ProcessState, p.log)
	case <-deadline.C:
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		return nil, fmt.Errorf("redis-server not ready within %v; log:\n%s", startTimeout, p.log)
	}
	if err := ping(s.Addr(), startTimeout); err != nil {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		return nil, fmt.Errorf("redis-server logged ready but PING failed: %w; log:\n%s", err, p.log)
	}
	return p, nil
}

// ping sends one inline PING and expects +PONG.
func ping(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return errors.New("unexpected reply " + strconv.Quote(line))
	}
	return nil
}

// freePort asks the OS for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail keeps the last few log lines of a process for error messages.
type tail struct {
	mu    sync.Mutex
	lines []string
}

const tailLines = 20

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == tailLines {
		copy(t.lines, t.lines[1:])
		t.lines = t.lines[:tailLines-1]
	}
	t.lines = append(t.lines, line)
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b bytes.Buffer
	for _, l := range t.lines {
		b.WriteString("  ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}
