package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/peerlimit/peerlimit/internal/redisproc"
)

// errNoRedis is returned by startRedis when the redis-server binary cannot
// be found; the Redis designs are then skipped.
var errNoRedis = errors.New("bench: redis-server not found")

// redisStartTimeout bounds how long startRedis waits for the server.
const redisStartTimeout = 10 * time.Second

// redisServer is a throwaway redis-server owned by the benchmark: a free
// 127.0.0.1 port, a temporary directory, no persistence.
type redisServer struct {
	*redisproc.Proc
	dir string
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
		port, err := redisproc.FreePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		p, err := redisproc.Launch(path, dir, port, redisStartTimeout)
		if err == nil {
			return &redisServer{Proc: p, dir: dir}, nil
		}
		lastErr = err
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("bench: start redis-server: %w", lastErr)
}

// stop kills the server and removes its directory.
func (s *redisServer) stop() {
	s.Kill()
	os.RemoveAll(s.dir)
}
