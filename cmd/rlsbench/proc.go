package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/peerlimit/peerlimit/internal/cputime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// nullEnv, set in its environment, makes this program the null server:
// rlsbench re-executes itself with it.
const nullEnv = "RLSBENCH_NULL_SERVER"

// nullReady is the null server's ready line, and peerReady cmd/peerlimit's.
var (
	nullReady = regexp.MustCompile(`rlsbench null: rls (\S+)`)
	peerReady = regexp.MustCompile(`peerlimit \S+: rls (\S+) http (\S+) gossip (\S+) domains`)
)

// serveNull serves a RateLimitService that answers OK at once on
// 127.0.0.1, with gRPC's default server settings (cmd/peerlimit adds
// stream workers: the null server is issue 19's floor, a plain gRPC
// server), prints its ready line, and returns when it is told to stop
// (SIGINT, SIGTERM) or its parent's end of stdin closes.
func serveNull(stdin io.Reader, stdout io.Writer) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, nullService{})
	go gs.Serve(lis)
	defer gs.Stop()
	fmt.Fprintf(stdout, "rlsbench null: rls %s\n", lis.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { io.Copy(io.Discard, stdin); stop() }()
	<-ctx.Done()
	return nil
}

// nullService answers OK at once: the floor of a gRPC rate limit service.
type nullService struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (nullService) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, nil
}

// proc is a server process (the null server or cmd/peerlimit) and the
// client's connection to it.
type proc struct {
	name              string
	cmd               *exec.Cmd
	stdin             io.Closer
	stderr            *syncBuffer
	exited            chan struct{}
	rls, http, gossip string // addresses from the ready line; http and gossip are peerlimit's
	conn              *grpc.ClientConn
	client            rlsv3.RateLimitServiceClient
}

// startProc runs name with args and env added to this process's, waits
// for a line matching ready on its stdout (whose submatches it keeps), and
// dials the first submatch, the RLS address.
func startProc(name, bin string, args, env []string, ready *regexp.Regexp) (*proc, error) {
	p := &proc{name: name, cmd: exec.Command(bin, args...), stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p.stderr
	p.cmd.SysProcAttr = childAttr()
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	p.stdin = stdin
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	lines := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		found := false
		for sc.Scan() {
			if m := ready.FindStringSubmatch(sc.Text()); m != nil && !found {
				lines <- m
				found = true
			}
		}
		p.cmd.Wait()
		close(p.exited)
	}()
	var m []string
	select {
	case m = <-lines:
	case <-p.exited:
		return nil, fmt.Errorf("%s exited before it was ready: %s", name, p.stderr.String())
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, fmt.Errorf("%s: no ready line within 30 s: %s", name, p.stderr.String())
	}
	p.rls = m[1]
	if len(m) > 3 {
		p.http, p.gossip = m[2], m[3]
	}
	p.conn, err = grpc.NewClient(p.rls, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		p.stop()
		return nil, err
	}
	p.client = rlsv3.NewRateLimitServiceClient(p.conn)
	return p, nil
}

// stop closes the connection, asks the process to leave (SIGTERM) and
// waits for it, killing it after 10 s.
func (p *proc) stop() {
	if p.conn != nil {
		p.conn.Close()
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// cpu is the CPU time the process has used so far (0 where unknown).
func (p *proc) cpu() time.Duration { return cputime.Of(p.cmd.Process.Pid) }

// startNull re-executes this program as a null server.
func startNull(name string, env []string) (*proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return startProc(name, self, nil, append(env, nullEnv+"=1"), nullReady)
}

// startPeers runs n cmd/peerlimit processes (bin) in one cluster on
// 127.0.0.1, each serving the configuration directory dir, and waits
// until each counts every member.
func startPeers(bin, dir string, n int, env []string) ([]*proc, error) {
	var ps []*proc
	for i := range n {
		args := []string{"-local", "-name", fmt.Sprintf("p%d", i), "-config-dir", dir,
			"-rls-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-log-level", "warn"}
		if i > 0 {
			args = append(args, "-seeds", ps[0].gossip)
		}
		p, err := startProc(fmt.Sprintf("peerlimit p%d", i), bin, args, env, peerReady)
		if err != nil {
			stopAll(ps)
			return nil, err
		}
		ps = append(ps, p)
	}
	if err := waitMembers(ps); err != nil {
		stopAll(ps)
		return nil, err
	}
	return ps, nil
}

func stopAll(ps []*proc) {
	for _, p := range ps {
		p.stop()
	}
}

// waitMembers waits until every process's metrics count every member.
func waitMembers(ps []*proc) error {
	want := fmt.Sprintf("\npeerlimit_members %d\n", len(ps))
	deadline := time.Now().Add(20 * time.Second)
	for {
		all := true
		for _, p := range ps {
			resp, err := http.Get("http://" + p.http + "/metrics")
			if err != nil {
				return err
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			all = all && err == nil && bytes.Contains(b, []byte(want))
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the peerlimit processes did not form one cluster within 20 s")
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}

// buildPeerlimit builds cmd/peerlimit into dir, from the module this
// command runs in.
func buildPeerlimit(dir string) (string, error) {
	bin := filepath.Join(dir, "peerlimit")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/peerlimit/peerlimit/cmd/peerlimit").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building cmd/peerlimit (run inside the module, or pass -peerlimit): %v: %s", err, strings.TrimSpace(string(out)))
	}
	return bin, nil
}

// syncBuffer is a bytes.Buffer safe for one writer and many readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
