package node

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/gossip"
)

// 10. Decisions outside Start..Close are errors, not silent admissions;
// Health and Members follow the lifecycle.
func TestDecisionsOutsideLifecycle(t *testing.T) {
	l := counters.Limit{Tenant: "t", Endpoint: "/p", Method: "GET", Period: time.Minute, Threshold: 100}
	ctx := context.Background()
	cfg := LocalConfig("x")
	cfg.Logger = slog.New(slog.DiscardHandler)
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := n.Allow(ctx, l); !errors.Is(err, ErrNotStarted) || d.Allowed {
		t.Errorf("Allow before Start = %+v, %v; want ErrNotStarted", d, err)
	}
	if err := n.Wait(ctx, l); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Wait before Start = %v", err)
	}
	if err := n.Health(); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Health before Start = %v", err)
	}
	if n.Members() != nil {
		t.Errorf("Members before Start = %v", n.Members())
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := n.Allow(ctx, l); err != nil || !d.Allowed {
		t.Errorf("Allow while running = %+v, %v", d, err)
	}
	if err := n.Health(); err != nil {
		t.Errorf("Health while running = %v", err)
	}
	if ms := n.Members(); len(ms) != 1 || ms[0].Name != "x" || ms[0].Addr != n.GossipAddr() || ms[0].GRPCAddr != n.GRPCAddr() {
		t.Errorf("Members = %+v; want x at %s, gRPC %s", ms, n.GossipAddr(), n.GRPCAddr())
	}
	if err := n.Start(ctx); err == nil {
		t.Error("a second Start succeeded")
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := n.Allow(ctx, l); !errors.Is(err, ErrClosed) || d.Allowed {
		t.Errorf("Allow after Close = %+v, %v; want ErrClosed", d, err)
	}
	if err := n.Health(); !errors.Is(err, ErrClosed) {
		t.Errorf("Health after Close = %v", err)
	}
	if err := n.Start(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
	if err := n.Close(ctx); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// 10. Members: every node's view, with gossip and gRPC addresses.
func TestMembers(t *testing.T) {
	c := startCluster(t, 3, clusterOpts{policy: PolicyLease})
	for _, n := range c.nodes {
		ms := n.Members()
		if len(ms) != 3 {
			t.Fatalf("%s: Members = %v", n.Name(), ms)
		}
		for i, m := range ms {
			other := c.nodes[i] // n0, n1, n2: sorted by name
			if m.Name != other.Name() || m.Addr != other.GossipAddr() || m.GRPCAddr != other.GRPCAddr() || m.Proto != ProtoVersion {
				t.Errorf("%s sees %+v; want %s at %s, gRPC %s", n.Name(), m, other.Name(), other.GossipAddr(), other.GRPCAddr())
			}
		}
		ms[0].Name = "changed" // a copy
		if n.Members()[0].Name == "changed" {
			t.Errorf("Members returned the node's own slice")
		}
	}
}

// 10. Close with a context that is already cancelled — the README's
// `defer n.Close(ctx)` with ctx from signal.NotifyContext — still flushes
// the node's counts to their owner and leaves. (Before: the flush failed at
// once and the counts were lost.)
func TestCloseWithCancelledContextFlushes(t *testing.T) {
	var nodes []*Node
	for _, name := range []string{"a", "b"} {
		cfg := LocalConfig(name)
		cfg.Policy = PolicyOptimistic // admit locally, without a sync
		cfg.SyncInterval = time.Hour  // nothing syncs but Close's flush
		cfg.CallTimeout = time.Second
		// The production profile notices a crash only after seconds, so
		// that seeing a leave within 2 s below proves a graceful one.
		cfg.Gossip.Profile = gossip.ProfileLAN
		if len(nodes) > 0 {
			cfg.Gossip.Seeds = []string{nodes[0].GossipAddr()}
		}
		n, _ := startLogged(t, cfg)
		nodes = append(nodes, n)
	}
	a, b := nodes[0], nodes[1]
	c := &testCluster{t: t, nodes: nodes}
	c.waitMembers(10*time.Second, a, b)
	l := ownedBy(t, a, "b")
	for i := 0; i < 5; i++ {
		if d, err := a.Allow(context.Background(), l); err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
	}
	if w := b.Engine().Owner().Stats().Windows; w != 0 {
		t.Fatalf("the owner has %d windows before the flush", w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // as signal.NotifyContext's, by the time the deferred Close runs
	start := time.Now()
	if err := a.Close(ctx); err != nil {
		t.Errorf("Close = %v", err)
	}
	t.Logf("Close with a cancelled context took %v", time.Since(start).Round(time.Millisecond))
	if w := b.Engine().Owner().Stats().Windows; w == 0 {
		t.Error("the flush did not reach the owner")
	}
	waitFor(t, 2*time.Second, "b to see a graceful leave", func() bool {
		return slices.Equal(b.Engine().Members(), []string{"b"})
	})
}

// The lifecycle's defaults: slog.Default() for logs, 5 s for Close.
func TestLifecycleDefaults(t *testing.T) {
	cfg := LocalConfig("x")
	cfg.CloseTimeout = -time.Second
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "Config.CloseTimeout") {
		t.Errorf("Validate() = %v, want an error naming Config.CloseTimeout", err)
	}
	n, err := New(LocalConfig("x"))
	if err != nil {
		t.Fatal(err)
	}
	if n.cfg.Logger.Handler() != slog.Default().Handler() || n.cfg.CloseTimeout != DefaultCloseTimeout {
		t.Errorf("defaults: Logger %v, CloseTimeout %v; want slog.Default(), %v", n.cfg.Logger, n.cfg.CloseTimeout, DefaultCloseTimeout)
	}
}
