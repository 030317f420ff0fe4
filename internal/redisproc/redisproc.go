// Package redisproc runs a throwaway redis-server process on 127.0.0.1: no
// persistence, its log watched for readiness, then checked with PING. The
// test helper internal/redistest and the benchmark cmd/bench both use it.
package redisproc

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
	"time"
)

// readyLine is what redis-server logs once it accepts connections (Redis 6
// and 7 both start the line with it).
const readyLine = "Ready to accept connections"

// Proc is one run of redis-server. The zero value is not usable; get one
// from Launch. Its methods are safe for concurrent use.
type Proc struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	log  *tail         // the last lines it wrote
}

// Launch starts bin on 127.0.0.1:port with `--save "" --appendonly no` in
// dir, and waits at most timeout until it logs readiness and answers PING.
// On failure the process is gone and the error carries its last log lines.
func Launch(bin, dir string, port int, timeout time.Duration) (*Proc, error) {
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", "", // log to stdout, which is watched for readiness
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
	p := &Proc{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, done: make(chan struct{}), log: &tail{}}
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

	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case <-ready:
	case <-p.done:
		return nil, fmt.Errorf("redis-server exited before it was ready (%v); log:\n%s", cmd.ProcessState, p.log)
	case <-deadline.C:
		p.Kill()
		return nil, fmt.Errorf("redis-server not ready within %v; log:\n%s", timeout, p.log)
	}
	if err := Ping(p.addr, timeout); err != nil {
		p.Kill()
		return nil, fmt.Errorf("redis-server logged ready but PING failed: %w; log:\n%s", err, p.log)
	}
	return p, nil
}

// Addr returns "127.0.0.1:port".
func (p *Proc) Addr() string { return p.addr }

// PID returns the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Kill sends SIGKILL and waits until the process is gone.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Ping sends one inline PING to addr and expects +PONG within timeout.
func Ping(addr string, timeout time.Duration) error {
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

// FreePort asks the OS for a free TCP port on 127.0.0.1. Another process
// can take it before redis-server binds it: callers retry Launch a few times.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redisproc: find a free port: %w", err)
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
