package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// errNoRedis is returned by startRedis when the redis-server binary cannot
// be found; the Redis designs are then skipped.
var errNoRedis = errors.New("bench: redis-server not found")

// redisStartTimeout bounds how long startRedis waits for the server.
const redisStartTimeout = 10 * time.Second

// redisServer is a throwaway redis-server owned by the benchmark: a free
// 127.0.0.1 port, a temporary directory, no persistence. It is the start
// logic of internal/redistest, outside a test.
type redisServer struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
}

// startRedis launches bin (looked up on PATH) and waits until it answers
// PING.
func startRedis(bin string) (*redisServer, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", errNoRedis, err)
	}
	dir, err := os.MkdirTemp("", "peerlimit-bench-redis-")
	if err != nil {
		return nil, fmt.Errorf("bench: redis temp dir: %w", err)
	}
	// The port is chosen by the OS, released, then handed to redis-server;
	// another process can take it in between, so try a few times.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s, err := launchRedis(path, dir, port)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("bench: start redis-server: %w", lastErr)
}

func launchRedis(path, dir string, port int) (*redisServer, error) {
	cmd := exec.Command(path,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", "", // stdout, watched for readiness
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
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, cmd: cmd, done: make(chan struct{})}
	ready := make(chan struct{})
	var last []string
	go func() {
		// Read the log to the end so the server never blocks on a full
		// pipe; signal readiness once; then reap the process.
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			if !signalled {
				last = append(last, line)
				if strings.Contains(line, "Ready to accept connections") {
					signalled = true
					close(ready)
				}
			}
		}
		_ = cmd.Wait()
		close(s.done)
	}()
	deadline := time.NewTimer(redisStartTimeout)
	defer deadline.Stop()
	select {
	case <-ready:
	case <-s.done:
		return nil, fmt.Errorf("redis-server exited before it was ready: %s", strings.Join(last, " | "))
	case <-deadline.C:
		s.kill()
		return nil, fmt.Errorf("redis-server not ready within %v", redisStartTimeout)
	}
	if err := pingRedis(s.addr); err != nil {
		s.kill()
		return nil, fmt.Errorf("redis-server logged ready but PING failed: %w", err)
	}
	return s, nil
}

func (s *redisServer) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// stop kills the server and removes its directory.
func (s *redisServer) stop() {
	s.kill()
	os.RemoveAll(s.dir)
}

func pingRedis(addr string) error {
	c, err := net.DialTimeout("tcp", addr, redisStartTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(redisStartTimeout)); err != nil {
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
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("bench: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
