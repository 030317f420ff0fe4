package main

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/peerlimit/peerlimit/internal/testutil"
)

// process is one peerlimit process started by startProcess.
type process struct {
	instance
	cmd    *exec.Cmd
	stderr *testutil.SyncBuffer
	exited chan struct{}
}

// startProcess runs the peerlimit binary bin as member name on 127.0.0.1
// with the configuration directory dir, seeded with seed (none if empty)
// and the flags extra, and waits for its ready line. The process gets
// SIGTERM at the end of the test, and its log is printed if the test
// failed.
func startProcess(t *testing.T, bin, name, dir, seed string, extra ...string) *process {
	t.Helper()
	args := []string{"-local", "-name", name, "-config-dir", dir, "-rls-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-log-level", "warn"}
	if seed != "" {
		args = append(args, "-seeds", seed)
	}
	args = append(args, extra...)
	p := &process{cmd: exec.Command(bin, args...), stderr: &testutil.SyncBuffer{}, exited: make(chan struct{})}
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdout := &testutil.SyncBuffer{}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			stdout.Write(append(sc.Bytes(), '\n'))
		}
		p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			t.Errorf("%s did not exit within 10 s of SIGTERM", name)
		}
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, p.stderr.String())
		}
	})
	testutil.WaitFor(t, 20*time.Second, name+"'s ready line", func() bool {
		select {
		case <-p.exited:
			t.Fatalf("%s exited before it was ready: %s", name, p.stderr.String())
		default:
		}
		m := ready.FindStringSubmatch(stdout.String())
		if m == nil {
			return false
		}
		p.rls, p.http, p.gossip = m[1], m[2], m[3]
		return true
	})
	return p
}

// entries is a descriptor of key, value pairs.
func entries(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// TestThreeProcesses: three peerlimit processes (the binary, built here)
// on 127.0.0.1 form a cluster with the example envoy ratelimit
// configuration (examples/envoy), and a client on go-control-plane's
// RateLimitServiceClient sends every request to the next process in turn.
// Each kind of rule of the example gets exactly its limit cluster-wide,
// with the codes and remaining counts envoy ratelimit gives: a limit per
// value, an unlimited value, nested descriptors, shadow mode, replaces.
func TestThreeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts three processes")
	}
	bin := filepath.Join(t.TempDir(), "peerlimit")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir, err := filepath.Abs("../../examples/envoy")
	if err != nil {
		t.Fatal(err)
	}
	p0 := startProcess(t, bin, "p0", dir, "")
	p1 := startProcess(t, bin, "p1", dir, p0.gossip)
	p2 := startProcess(t, bin, "p2", dir, p0.gossip)
	waitMembers(t, &p0.instance, &p1.instance, &p2.instance)
	var clients []rlsv3.RateLimitServiceClient
	for _, p := range []*process{p0, p1, p2} {
		c, _ := dialRLS(t, &p.instance)
		clients = append(clients, c)
	}
	next := 0
	call := func(ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
		t.Helper()
		resp, err := clients[next%len(clients)].ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "gateway", Descriptors: ds})
		next++
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Statuses) != len(ds) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(ds))
		}
		return resp
	}
	// Every limit of the example is per minute: each case starts early
	// enough in a minute to end in it (a case takes a few seconds).
	inOneMinute := func() {
		t.Helper()
		testutil.WaitFor(t, 30*time.Second, "the first 40 s of a minute", func() bool {
			return time.Now().Unix()%60 < 40
		})
	}
	// sendN sends ds n times and returns how many answers were OK overall.
	sendN := func(n int, ds ...*ratelimitv3.RateLimitDescriptor) (ok int, last []*rlsv3.RateLimitResponse) {
		t.Helper()
		for range n {
			r := call(ds...)
			if r.OverallCode == rlsv3.RateLimitResponse_OK {
				ok++
			}
			last = append(last, r)
		}
		return ok, last
	}

	t.Run("a limit per value", func(t *testing.T) {
		inOneMinute()
		ok, resps := sendN(30, entries("api_key", "alpha"))
		if ok != 20 {
			t.Errorf("api_key=alpha: %d of 30 OK over three processes, want the limit of 20", ok)
		}
		remaining := map[int]uint32{} // per process: it only goes down
		for i, r := range resps {
			st := r.Statuses[0]
			if st.CurrentLimit.GetRequestsPerUnit() != 20 || st.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE {
				t.Fatalf("answer %d: current_limit %v, want 20 per minute", i, st.CurrentLimit)
			}
			if d := st.DurationUntilReset.AsDuration(); d <= 0 || d > time.Minute {
				t.Errorf("answer %d: duration_until_reset %v, want within the minute", i, d)
			}
			if st.Code != r.OverallCode {
				t.Errorf("answer %d: descriptor code %v, overall %v", i, st.Code, r.OverallCode)
			}
			switch {
			case i == 0 && st.LimitRemaining != 19:
				t.Errorf("first answer: limit_remaining %d, want 19", st.LimitRemaining)
			case st.Code == rlsv3.RateLimitResponse_OVER_LIMIT && st.LimitRemaining != 0:
				t.Errorf("answer %d: OVER_LIMIT with limit_remaining %d, want 0", i, st.LimitRemaining)
			}
			if prev, seen := remaining[i%3]; seen && st.LimitRemaining > prev {
				t.Errorf("answer %d: limit_remaining went up from %d to %d on one process", i, prev, st.LimitRemaining)
			}
			remaining[i%3] = st.LimitRemaining
		}
		if got := resps[len(resps)-1].ResponseHeadersToAdd; len(got) == 0 {
			t.Error("no response_headers_to_add on an OVER_LIMIT answer")
		}
		// Another value has its own counter.
		if ok, _ := sendN(21, entries("api_key", "beta")); ok != 20 {
			t.Errorf("api_key=beta: %d of 21 OK, want its own 20", ok)
		}
	})

	t.Run("unlimited", func(t *testing.T) {
		ok, resps := sendN(45, entries("api_key", "internal-monitoring"))
		if ok != 45 {
			t.Errorf("the unlimited key: %d of 45 OK", ok)
		}
		if st := resps[0].Statuses[0]; st.CurrentLimit != nil {
			t.Errorf("the unlimited key has a current_limit: %v", st.CurrentLimit)
		}
	})

	t.Run("nested descriptors", func(t *testing.T) {
		inOneMinute()
		if ok, _ := sendN(15, entries("source_cluster", "edge", "remote_address", "10.0.0.1")); ok != 10 {
			t.Errorf("edge, 10.0.0.1: %d of 15 OK, want 10", ok)
		}
		if ok, _ := sendN(12, entries("source_cluster", "edge", "remote_address", "10.0.0.2")); ok != 10 {
			t.Errorf("edge, 10.0.0.2: %d of 12 OK, want its own 10", ok)
		}
		if ok, _ := sendN(15, entries("source_cluster", "other", "remote_address", "10.0.0.1")); ok != 15 {
			t.Errorf("another cluster: %d of 15 OK, want all (no rule)", ok)
		}
	})

	t.Run("shadow mode", func(t *testing.T) {
		inOneMinute()
		ok, resps := sendN(8, entries("path", "/upload"))
		if ok != 8 {
			t.Errorf("shadow mode: %d of 8 OK, want all", ok)
		}
		if st := resps[len(resps)-1].Statuses[0]; st.LimitRemaining != 0 || st.CurrentLimit.GetRequestsPerUnit() != 5 {
			t.Errorf("shadow mode, past the limit: %v, want limit 5 and none remaining (counted)", st)
		}
	})

	t.Run("replaces", func(t *testing.T) {
		inOneMinute()
		if ok, _ := sendN(6, entries("user", "u1")); ok != 4 {
			t.Errorf("user u1 alone: %d of 6 OK, want per_user's 4", ok)
		}
		ok, resps := sendN(15, entries("user", "u2"), entries("plan", "premium"))
		if ok != 12 {
			t.Errorf("user u2 on premium: %d of 15 OK, want the replacing limit's 12", ok)
		}
		for i, r := range resps {
			if st := r.Statuses[0]; st.CurrentLimit != nil || st.Code != rlsv3.RateLimitResponse_OK {
				t.Fatalf("answer %d: the replaced per_user limit was applied: %v", i, st)
			}
		}
		if ok, _ := sendN(6, entries("user", "u2")); ok != 4 {
			t.Errorf("user u2 alone after premium requests: %d of 6 OK, want 4 (the replaced limit counted nothing)", ok)
		}
	})
}
