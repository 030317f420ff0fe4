package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process states, as the supervisor sees them.
const (
	StateStarting = "starting" // process started, not serving yet
	StateUp       = "up"       // serving
	StateDown     = "down"     // not running (killed, stopped or crashed)
)

// ErrRunning is returned by Restart for a node that is running.
var ErrRunning = errors.New("demo: node is running")

// SupervisorConfig configures a Supervisor. Start from
// DefaultSupervisorConfig.
type SupervisorConfig struct {
	// Exe is the binary to run for each node (normally os.Executable():
	// the demo re-executes itself). Required.
	Exe string
	// Args are the arguments every node process gets; the supervisor
	// appends -name, -plan and -partition. Required (at least the flag
	// that selects the node role).
	Args []string
	// Plan is the cluster's address plan. Required.
	Plan Plan
	// StopTimeout is how long a node gets to exit after SIGTERM before
	// SIGKILL. Default 5 s (a node flushes and leaves in well under 3 s).
	StopTimeout time.Duration
	// ReadyTimeout bounds the wait for a started node to serve HTTP.
	// Default 15 s.
	ReadyTimeout time.Duration
	// Logger receives the supervisor's own events (start, kill, exit,
	// partition). Default: discard.
	Logger *slog.Logger
	// Output receives the nodes' log lines, each prefixed with the node
	// name. Default: discarded.
	Output io.Writer
	// GossipKey is the secret key every node gets (in its environment,
	// GossipKeyEnv, hex): it encrypts gossip and authenticates sync.
	// Default: a random 32-byte key, made when the supervisor is created.
	GossipKey []byte
}

// GossipKeyEnv is the environment variable through which the supervisor
// hands its nodes the cluster's gossip key (hex), so that it appears in no
// command line.
const GossipKeyEnv = "PEERLIMIT_DEMO_GOSSIP_KEY"

// DefaultSupervisorConfig returns a SupervisorConfig with the defaults
// filled in; Exe, Args and Plan still need to be set.
func DefaultSupervisorConfig() SupervisorConfig {
	return SupervisorConfig{StopTimeout: 5 * time.Second, ReadyTimeout: 15 * time.Second}
}

// Validate reports the first invalid field.
func (c SupervisorConfig) Validate() error {
	switch {
	case c.Exe == "":
		return errors.New("demo: SupervisorConfig.Exe: required")
	case len(c.Args) == 0:
		return errors.New("demo: SupervisorConfig.Args: required")
	case len(c.Plan) == 0:
		return errors.New("demo: SupervisorConfig.Plan: required")
	case c.StopTimeout <= 0:
		return fmt.Errorf("demo: SupervisorConfig.StopTimeout: must be > 0, got %v", c.StopTimeout)
	case c.ReadyTimeout <= 0:
		return fmt.Errorf("demo: SupervisorConfig.ReadyTimeout: must be > 0, got %v", c.ReadyTimeout)
	}
	return nil
}

// Supervisor runs the node processes: start, kill (SIGKILL), restart on the
// same ports, partition and heal (through each node's admin endpoint), and
// stop (SIGTERM, then SIGKILL). Nodes also exit by themselves if the
// supervisor's process dies (see RunNodeMain).
//
// Create it with NewSupervisor; the zero value is not usable. It is safe
// for concurrent use.
type Supervisor struct {
	cfg    SupervisorConfig
	log    *slog.Logger
	client *http.Client

	mu        sync.Mutex
	procs     []*proc // by plan index; nil before the first start
	partition Partition
	stopping  bool
}

type proc struct {
	idx         int
	cmd         *exec.Cmd
	stdin       io.WriteCloser
	done        chan struct{} // closed once the process has exited and been reaped
	state       string        // guarded by Supervisor.mu
	incarnation int
	killed      bool  // by Kill or Stop: an expected exit
	exitErr     error // set before done is closed
	started     time.Time
}

// NewSupervisor validates cfg. It starts nothing.
func NewSupervisor(cfg SupervisorConfig) (*Supervisor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Output == nil {
		cfg.Output = io.Discard
	}
	if len(cfg.GossipKey) == 0 {
		cfg.GossipKey = make([]byte, 32)
		if _, err := rand.Read(cfg.GossipKey); err != nil {
			return nil, fmt.Errorf("demo: gossip key: %w", err)
		}
	}
	return &Supervisor{
		cfg:    cfg,
		log:    cfg.Logger,
		client: &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 2 * time.Second},
		procs:  make([]*proc, len(cfg.Plan)),
	}, nil
}

// Plan returns the address plan.
func (s *Supervisor) Plan() Plan { return s.cfg.Plan }

// URL returns the base URL of node i.
func (s *Supervisor) URL(i int) string { return "http://" + s.cfg.Plan[i].HTTP }

// StartAll starts every node and waits until each serves HTTP.
func (s *Supervisor) StartAll(ctx context.Context) error {
	var errs []error
	for i := range s.cfg.Plan {
		if err := s.spawn(i); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errc := make(chan error, len(s.cfg.Plan))
	for i := range s.cfg.Plan {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- s.waitReady(ctx, i)
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// spawn starts node i's process.
func (s *Supervisor) spawn(i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return errors.New("demo: supervisor is stopping")
	}
	if p := s.procs[i]; p != nil && p.state != StateDown {
		return fmt.Errorf("%w: %s", ErrRunning, s.cfg.Plan[i].Name)
	}
	name := s.cfg.Plan[i].Name
	args := append([]string{}, s.cfg.Args...)
	args = append(args, "-name", name, "-plan", s.cfg.Plan.String())
	if spec := s.partition.String(); spec != "" {
		args = append(args, "-partition", spec)
	}
	cmd := exec.Command(s.cfg.Exe, args...)
	cmd.SysProcAttr = childAttr()
	cmd.Stdout = &lineWriter{prefix: name + " | ", w: s.cfg.Output}
	cmd.Stderr = cmd.Stdout
	cmd.WaitDelay = time.Second
	cmd.Env = append(os.Environ(), GossipKeyEnv+"="+hex.EncodeToString(s.cfg.GossipKey))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("demo: start %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("demo: start %s: %w", name, err)
	}
	inc := 1
	if old := s.procs[i]; old != nil {
		inc = old.incarnation + 1
	}
	p := &proc{idx: i, cmd: cmd, stdin: stdin, done: make(chan struct{}), state: StateStarting, incarnation: inc, started: time.Now()}
	s.procs[i] = p
	s.log.Info("node started", "node", name, "pid", cmd.Process.Pid, "incarnation", inc)
	go s.reap(p)
	return nil
}

// reap waits for p's process to exit and records it.
func (s *Supervisor) reap(p *proc) {
	err := p.cmd.Wait()
	s.mu.Lock()
	p.state = StateDown
	p.exitErr = err
	expected := p.killed || s.stopping
	s.mu.Unlock()
	name := s.cfg.Plan[p.idx].Name
	if expected {
		s.log.Info("node exited", "node", name, "pid", p.cmd.Process.Pid, "status", exitText(err))
	} else {
		s.log.Warn("node exited unexpectedly", "node", name, "pid", p.cmd.Process.Pid, "status", exitText(err))
	}
	close(p.done)
}

func exitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// waitReady polls node i's /admin/state until it answers (then the node is
// up), the process exits, or the deadline passes.
func (s *Supervisor) waitReady(ctx context.Context, i int) error {
	s.mu.Lock()
	p := s.procs[i]
	s.mu.Unlock()
	name := s.cfg.Plan[i].Name
	deadline := time.NewTimer(s.cfg.ReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(25 * time.Millisecond) // poll interval
	defer tick.Stop()
	for {
		if _, err := s.fetchState(ctx, i, 200*time.Millisecond); err == nil {
			s.mu.Lock()
			if p.state == StateStarting {
				p.state = StateUp
			}
			s.mu.Unlock()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: wait for %s: %w", name, ctx.Err())
		case <-p.done:
			return fmt.Errorf("demo: node %s exited before serving: %s", name, exitText(p.exitErr))
		case <-deadline.C:
			return fmt.Errorf("demo: node %s not serving after %v", name, s.cfg.ReadyTimeout)
		case <-tick.C:
		}
	}
}

// Up reports whether node i is serving, for the load generator.
func (s *Supervisor) Up(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.procs[i]
	return p != nil && p.state == StateUp
}

// Kill sends SIGKILL to the named node, as a crash would (no flush, no
// leave), and waits for it to be reaped.
func (s *Supervisor) Kill(name string) error {
	i, err := s.cfg.Plan.Index(name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	p := s.procs[i]
	if p == nil || p.state == StateDown {
		s.mu.Unlock()
		return fmt.Errorf("demo: kill %s: not running", name)
	}
	p.killed = true
	p.state = StateDown // no more traffic from the load generator
	s.mu.Unlock()
	s.log.Info("killing node (SIGKILL)", "node", name, "pid", p.cmd.Process.Pid)
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("demo: kill %s: %w", name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(s.cfg.StopTimeout):
		return fmt.Errorf("demo: kill %s: process not reaped after %v", name, s.cfg.StopTimeout)
	}
}

// Restart starts the named node again, with the same name and ports (and
// on its side of the current partition), and waits until it serves.
func (s *Supervisor) Restart(ctx context.Context, name string) error {
	i, err := s.cfg.Plan.Index(name)
	if err != nil {
		return err
	}
	if err := s.spawn(i); err != nil {
		return err
	}
	return s.waitReady(ctx, i)
}

// Partition splits the cluster (see ParsePartition) by posting the spec to
// every running node; nodes started later get it on their command line.
func (s *Supervisor) Partition(ctx context.Context, spec string) error {
	p, err := ParsePartition(spec, s.cfg.Plan.Names())
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.partition = p
	s.mu.Unlock()
	s.log.Info("partition", "groups", p.String())
	return s.broadcast(ctx, "/admin/partition", p.String())
}

// Heal removes the partition on every running node.
func (s *Supervisor) Heal(ctx context.Context) error {
	s.mu.Lock()
	s.partition = nil
	s.mu.Unlock()
	s.log.Info("heal")
	return s.broadcast(ctx, "/admin/heal", "")
}

// CurrentPartition returns the partition in force ("" for none).
func (s *Supervisor) CurrentPartition() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.partition.String()
}

func (s *Supervisor) broadcast(ctx context.Context, path, body string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(s.cfg.Plan))
	for i := range s.cfg.Plan {
		if !s.running(i) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL(i)+path, strings.NewReader(body))
			if err != nil {
				errs[i] = err
				return
			}
			req.Header.Set("Content-Type", "text/plain")
			resp, err := s.client.Do(req)
			if err != nil {
				errs[i] = fmt.Errorf("demo: %s %s: %w", s.cfg.Plan[i].Name, path, err)
				return
			}
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs[i] = fmt.Errorf("demo: %s %s: %s: %s", s.cfg.Plan[i].Name, path, resp.Status, bytes.TrimSpace(msg))
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (s *Supervisor) running(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.procs[i]
	return p != nil && p.state != StateDown
}

// Stop stops every node: SIGTERM (and EOF on stdin), then SIGKILL for a
// node still running after StopTimeout; it returns once every process has
// been reaped. Nothing can be started afterwards.
func (s *Supervisor) Stop() {
	s.mu.Lock()
	s.stopping = true
	var live []*proc
	for _, p := range s.procs {
		if p != nil {
			live = append(live, p)
			if p.state != StateDown {
				p.killed = true
				p.state = StateDown
			}
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			_ = p.stdin.Close()
			select {
			case <-p.done:
				return
			case <-time.After(s.cfg.StopTimeout):
			}
			s.log.Warn("node did not stop in time: SIGKILL", "node", s.cfg.Plan[p.idx].Name)
			_ = p.cmd.Process.Kill()
			<-p.done
		}()
	}
	wg.Wait()
}

// ProcStatus is the supervisor's view of one node process.
type ProcStatus struct {
	Name        string     `json:"name"`
	URL         string     `json:"url"`
	State       string     `json:"state"`
	PID         int        `json:"pid"`
	Incarnation int        `json:"incarnation"`
	Exit        string     `json:"exit,omitempty"` // how the last process ended
	Node        *NodeState `json:"-"`              // its /admin/state, nil if it did not answer
}

// Poll returns every node's status, with the /admin/state of each running
// node that answers within timeout.
func (s *Supervisor) Poll(ctx context.Context, timeout time.Duration) []ProcStatus {
	out := make([]ProcStatus, len(s.cfg.Plan))
	var wg sync.WaitGroup
	s.mu.Lock()
	for i, a := range s.cfg.Plan {
		st := ProcStatus{Name: a.Name, URL: s.URL(i), State: StateDown}
		if p := s.procs[i]; p != nil {
			st.State, st.PID, st.Incarnation = p.state, p.cmd.Process.Pid, p.incarnation
			if p.state == StateDown {
				st.Exit = exitText(p.exitErr)
				if p.exitErr == nil && !isDone(p.done) {
					st.Exit = "killed"
				}
			}
		}
		out[i] = st
	}
	s.mu.Unlock()
	for i := range out {
		if out[i].State == StateDown {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ns, err := s.fetchState(ctx, i, timeout); err == nil {
				out[i].Node = ns
			}
		}()
	}
	wg.Wait()
	return out
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// PIDs returns the process ids of the node processes that have not been
// reaped yet.
func (s *Supervisor) PIDs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, p := range s.procs {
		if p != nil && !isDone(p.done) {
			out = append(out, p.cmd.Process.Pid)
		}
	}
	return out
}

func (s *Supervisor) fetchState(ctx context.Context, i int, timeout time.Duration) (*NodeState, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL(i)+"/admin/state", nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("demo: %s /admin/state: %s", s.cfg.Plan[i].Name, resp.Status)
	}
	var ns NodeState
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ns); err != nil {
		return nil, fmt.Errorf("demo: %s /admin/state: %w", s.cfg.Plan[i].Name, err)
	}
	return &ns, nil
}

// lineWriter writes complete lines to w, each with prefix. Safe for
// concurrent use (several node processes share the output).
type lineWriter struct {
	prefix string
	w      io.Writer
	mu     sync.Mutex
	in     lineBuffer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.in.write(p, func(line string) { _, _ = io.WriteString(l.w, l.prefix+line+"\n") })
	return len(p), nil
}
