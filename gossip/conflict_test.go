package gossip

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/internal/testutil"
)

// conflictLog records what OnConflict reports.
type conflictLog struct {
	mu   sync.Mutex
	seen []Conflict
}

func (l *conflictLog) record(c Conflict) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, c)
}

func (l *conflictLog) selfConflicts() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.seen {
		if c.Self && c.Live {
			n++
		}
	}
	return n
}

func localAddr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// Two nodes named alike, each listing the other as its seed: the first
// starts alone, the second's Start meets the first and fails, naming the
// conflict; the first reports it (OnConflict, Health, a warning).
func TestNameConflictFailsStart(t *testing.T) {
	port := testutil.FreePort(t)
	var firstLog conflictLog
	cfg := localConfig("x", localAddr(port))
	cfg.OnConflict = firstLog.record
	first := startNode(t, cfg)

	second := localConfig("x", first.g.LocalMember().Addr)
	second.BindPort = port
	second.GRPCAddr = "127.0.0.1:20999"
	secondLogs := &syncBuffer{}
	second.Logger = slog.New(slog.NewTextHandler(secondLogs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	g, err := New(second)
	if err != nil {
		t.Fatal(err)
	}
	err = g.Start(context.Background())
	if !errors.Is(err, ErrNameConflict) {
		_ = g.Shutdown()
		t.Fatalf("second Start with a taken name = %v, want ErrNameConflict", err)
	}
	t.Logf("second Start: %v", err)
	if !strings.Contains(err.Error(), first.g.LocalMember().Addr) || !strings.Contains(err.Error(), "Config.Name") {
		t.Errorf("the error should name the other node's address and the field to change: %v", err)
	}
	if _, err := g.Join(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("after a failed Start, Join = %v, want ErrClosed", err)
	}

	waitFor(t, 5*time.Second, "the first node to report the conflict", func() bool {
		return firstLog.selfConflicts() > 0 && errors.Is(first.g.Health(), ErrNameConflict)
	})
	t.Logf("first node's Health: %v", first.g.Health())
	for name, logs := range map[string]*syncBuffer{"first": first.logs, "second": secondLogs} {
		if !strings.Contains(logs.String(), "name conflict") {
			t.Errorf("%s: no warning about the conflict in:\n%s", name, logs)
		}
		if strings.Contains(logs.String(), "Conflicting address") {
			t.Errorf("%s: memberlist's own line got through at Warn or above:\n%s", name, logs)
		}
	}
}

// A conflict that can only show after Start: the second node starts alone
// (its seed is not up yet) and the first starts later at that address,
// without seeds. The rejoin loop brings them together; both report the
// conflict within seconds, and neither is quietly healthy.
func TestNameConflictAfterStartReported(t *testing.T) {
	port := testutil.FreePort(t)
	early := startNode(t, localConfig("x", localAddr(port)))
	if err := early.g.Health(); !errors.Is(err, ErrNoSeed) {
		t.Errorf("alone with an unreachable seed: Health = %v, want ErrNoSeed", err)
	}
	cfg := localConfig("x")
	cfg.BindPort = port
	cfg.GRPCAddr = "127.0.0.1:20999"
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Skipf("could not bind the reserved port again: %v", err)
	}
	t.Cleanup(func() { _ = g.Shutdown() })
	took := waitFor(t, 10*time.Second, "both nodes to report the conflict", func() bool {
		return errors.Is(early.g.Health(), ErrNameConflict) && errors.Is(g.Health(), ErrNameConflict)
	})
	t.Logf("both reported the conflict %v after the second started: %v", took.Round(time.Millisecond), g.Health())
}

// With JoinTimeout, Start fails when no seed answers, and succeeds when
// one does.
func TestJoinTimeout(t *testing.T) {
	typo := localAddr(testutil.FreePort(t))
	cfg := localConfig("b", typo)
	cfg.JoinTimeout = 500 * time.Millisecond
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = g.Start(context.Background())
	took := time.Since(start)
	if !errors.Is(err, ErrNoSeed) || !strings.Contains(err.Error(), typo) || !strings.Contains(err.Error(), "Config.Seeds") {
		t.Fatalf("Start with an unreachable seed and JoinTimeout = %v, want ErrNoSeed naming %s and Config.Seeds", err, typo)
	}
	if took < cfg.JoinTimeout {
		t.Errorf("Start gave up after %v, before JoinTimeout %v", took, cfg.JoinTimeout)
	}
	t.Logf("Start failed after %v: %v", took.Round(time.Millisecond), err)
	if _, err := g.Join(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("after a failed Start, Join = %v, want ErrClosed", err)
	}

	a := startNode(t, localConfig("a"))
	ok := localConfig("c", a.g.LocalMember().Addr)
	ok.JoinTimeout = 5 * time.Second
	c := startNode(t, ok)
	if !slices.Contains(memberNames(c.g.Members()), "a") {
		t.Fatalf("after Start with JoinTimeout, c lists %v", memberNames(c.g.Members()))
	}
	if err := c.g.Health(); err != nil {
		t.Errorf("Health = %v, want nil", err)
	}
}

// A gRPC address with an empty or unspecified host is published with the
// gossip address; a loopback one beside a routable gossip address is
// refused.
func TestGRPCAddrPublished(t *testing.T) {
	ip := testutil.RoutableIP(t)
	for _, tc := range []struct{ grpc, want string }{
		{":7070", net.JoinHostPort(ip.String(), "7070")},
		{"0.0.0.0:7070", net.JoinHostPort(ip.String(), "7070")},
		{"[::]:7070", net.JoinHostPort(ip.String(), "7070")},
		{"10.1.2.3:7070", "10.1.2.3:7070"},
	} {
		cfg := localConfig("p")
		cfg.BindAddr = ip.String()
		cfg.GRPCAddr = tc.grpc
		n := startNode(t, cfg)
		if got := n.g.LocalMember().GRPCAddr; got != tc.want {
			t.Errorf("GRPCAddr %q published as %q, want %q", tc.grpc, got, tc.want)
		}
		_ = n.g.Shutdown()
	}
	for _, grpc := range []string{"127.0.0.1:7070", "localhost:7070", "[::1]:7070"} {
		cfg := localConfig("p")
		cfg.BindAddr = ip.String()
		cfg.GRPCAddr = grpc
		g, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = g.Start(context.Background())
		if !errors.Is(err, ErrUnreachableGRPCAddr) || !strings.Contains(err.Error(), grpc) {
			_ = g.Shutdown()
			t.Errorf("gossip on %s, GRPCAddr %s: Start = %v, want ErrUnreachableGRPCAddr naming it", ip, grpc, err)
		}
	}
	// On loopback, a loopback gRPC address is what it should be.
	n := startNode(t, localConfig("l"))
	if got := n.g.LocalMember().GRPCAddr; got != grpcAddrOf("l") {
		t.Errorf("loopback node published %q", got)
	}
}
