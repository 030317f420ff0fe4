package gossip

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/peerlimit/peerlimit/internal/faultnet"
	"github.com/peerlimit/peerlimit/internal/testutil"
)

func TestClusterConverges(t *testing.T) {
	for _, size := range []int{3, 5} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			nodes := startCluster(t, size, nil)
			for _, n := range nodes {
				snap := n.snapshot()
				for _, m := range snap {
					if m.GRPCAddr != grpcAddrOf(m.Name) || m.Proto != 3 {
						t.Errorf("%s sees %s with gRPC %q proto %d, want %q proto 3",
							n.name, m.Name, m.GRPCAddr, m.Proto, grpcAddrOf(m.Name))
					}
					if _, _, err := net.SplitHostPort(m.Addr); err != nil {
						t.Errorf("%s sees %s at bad gossip address %q", n.name, m.Name, m.Addr)
					}
				}
				if got := n.g.Members(); !slices.Equal(got, snap) {
					t.Errorf("%s: Members() = %v, last snapshot %v", n.name, got, snap)
				}
				self := n.g.LocalMember()
				if !slices.Contains(snap, self) {
					t.Errorf("%s: LocalMember %+v not in its own snapshot", n.name, self)
				}
				if self.Addr != net.JoinHostPort("127.0.0.1", strconv.Itoa(n.g.Port())) || n.g.Port() == 0 {
					t.Errorf("%s: Port() = %d, LocalMember.Addr = %s", n.name, n.g.Port(), self.Addr)
				}
			}
		})
	}
}

// detectRemoval stops the last node of a cluster of size (gracefully or
// not) and returns how long the others took to report the cluster without
// it.
func detectRemoval(t *testing.T, size int, graceful bool) time.Duration {
	nodes := startCluster(t, size, nil)
	victim, rest := nodes[size-1], nodes[:size-1]
	start := time.Now()
	if graceful {
		if err := victim.g.Leave(time.Second); err != nil {
			t.Fatalf("Leave: %v", err)
		}
	}
	if err := victim.g.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	var names []string
	for _, n := range rest {
		names = append(names, n.name)
	}
	waitConverged(t, rest, names, 10*time.Second)
	return time.Since(start)
}

func TestCrashDetected(t *testing.T) {
	for _, size := range []int{3, 5} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			d := detectRemoval(t, size, false)
			t.Logf("crash (Shutdown without Leave) noticed by all %d survivors after %v", size-1, d.Round(time.Millisecond))
			if d > 5*time.Second {
				t.Errorf("crash detection took %v, want < 5s with ProfileLocal", d)
			}
		})
	}
}

func TestGracefulLeaveDetected(t *testing.T) {
	d := detectRemoval(t, 3, true)
	t.Logf("graceful leave noticed by both survivors after %v", d.Round(time.Millisecond))
	if d > 2*time.Second {
		t.Errorf("graceful leave took %v to propagate, want < 2s", d)
	}
}

func TestMetadataUpdatePropagates(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	const moved = "127.0.0.1:29999"
	if err := nodes[1].g.UpdateGRPCAddr(moved, time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "every node to see n1's new gRPC address", func() bool {
		for _, n := range nodes {
			i := slices.IndexFunc(n.snapshot(), func(m Member) bool { return m.Name == "n1" })
			if i < 0 || n.snapshot()[i].GRPCAddr != moved {
				return false
			}
		}
		return true
	})
	if got := nodes[1].g.LocalMember().GRPCAddr; got != moved {
		t.Fatalf("LocalMember().GRPCAddr = %q", got)
	}
	if err := nodes[1].g.UpdateGRPCAddr("nonsense", time.Second); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("UpdateGRPCAddr(nonsense) = %v", err)
	}
}

// startFaultCluster starts nodes over faultnet-wrapped transports, all
// seeded with the first, and waits for them to converge.
func startFaultCluster(t *testing.T, tb *faultnet.Table, names []string) []*testNode {
	t.Helper()
	return startFaultClusterProfile(t, tb, names, ProfileLocal)
}

// startFaultClusterProfile is startFaultCluster under the given profile.
func startFaultClusterProfile(t *testing.T, tb *faultnet.Table, names []string, profile Profile) []*testNode {
	t.Helper()
	var nodes []*testNode
	var seed string
	for _, name := range names {
		tr, addr := newFaultTransport(t, tb, name)
		cfg := localConfig(name)
		cfg.Profile = profile
		cfg.Transport = tr
		// memberlist keeps gossiping to a dead node for GossipToTheDeadTime
		// (5 s in ProfileLocal) and so heals a short partition by itself.
		// Zero makes every partition look like a long one: dead nodes are
		// forgotten at once, and only the rejoin loop can merge the sides.
		cfg.tuneMemberlist = func(mc *memberlist.Config) { mc.GossipToTheDeadTime = 0 }
		if seed != "" {
			cfg.Seeds = []string{seed}
		} else {
			seed = addr
		}
		nodes = append(nodes, startNode(t, cfg))
	}
	waitConverged(t, nodes, names, 15*time.Second)
	return nodes
}

func TestPartitionHealsWithoutJoin(t *testing.T) {
	partitionThenHeal(t, ProfileLocal, 10*time.Second, 15*time.Second)
}

// TestLANPartitionTiming measures the production profile's timing that
// the simulator's "lan" profile models (sim.Profiles): a 2|1 partition is
// noticed after seconds (memberlist's suspicion), and once healed the
// rejoin loop merges the views within its period (DefaultRejoinIntervalLAN)
// and a round of gossip. Each side reserves the other's share of every
// limit until then, so the test fails if the merge takes more than two
// periods and 2 s.
func TestLANPartitionTiming(t *testing.T) {
	partitionThenHeal(t, ProfileLAN, 30*time.Second, 2*DefaultRejoinIntervalLAN+2*time.Second)
}

// partitionThenHeal cuts a 3-node cluster under profile 2|1, waits up to
// notice for each side to see only itself, heals it and waits up to merge
// for every node to see every other, and logs how long each took.
func partitionThenHeal(t *testing.T, profile Profile, notice, merge time.Duration) {
	tb := faultnet.New()
	names := []string{"a", "b", "c"}
	nodes := startFaultClusterProfile(t, tb, names, profile)
	a, b, c := nodes[0], nodes[1], nodes[2]

	start := time.Now()
	tb.Cut([]string{"a", "b"}, []string{"c"})
	waitFor(t, notice, "each side to see only itself", func() bool {
		return a.sees("a", "b") && b.sees("a", "b") && c.sees("c")
	})
	t.Logf("%v: partition {a,b}|{c} noticed on both sides after %v", profile, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	tb.Heal()
	waitConverged(t, nodes, names, merge)
	t.Logf("%v: after Heal, the rejoin loop merged the cluster in %v", profile, time.Since(start).Round(time.Millisecond))
}

// With the only seed gone, a partition heals through the remembered
// addresses of failed members.
func TestPartitionHealsWithoutSeed(t *testing.T) {
	tb := faultnet.New()
	nodes := startFaultCluster(t, tb, []string{"a", "b", "c"})
	b, c := nodes[1], nodes[2]
	if err := nodes[0].g.Shutdown(); err != nil { // the seed crashes for good
		t.Fatal(err)
	}
	waitConverged(t, nodes[1:], []string{"b", "c"}, 10*time.Second)

	tb.Cut([]string{"b"}, []string{"c"})
	waitFor(t, 10*time.Second, "b and c to see only themselves", func() bool {
		return b.sees("b") && c.sees("c")
	})
	start := time.Now()
	tb.Heal()
	waitConverged(t, nodes[1:], []string{"b", "c"}, 15*time.Second)
	t.Logf("without a live seed, the rejoin loop merged b and c in %v", time.Since(start).Round(time.Millisecond))
}

func TestSeedUnreachableAtStartIsNotFatal(t *testing.T) {
	// Reserve a port, release it, and point b's seed at it: nobody listens.
	port := testutil.FreePort(t)
	seed := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	b := startNode(t, localConfig("b", seed))
	waitFor(t, 5*time.Second, "b to report itself alone", func() bool { return b.sees("b") })
	if err := b.g.Health(); !errors.Is(err, ErrNoSeed) || !strings.Contains(err.Error(), seed) {
		t.Errorf("alone with an unreachable seed: Health = %v, want ErrNoSeed naming %s", err, seed)
	}
	if !strings.Contains(b.logs.String(), "WARN msg=\"alone: no seed answered") {
		t.Errorf("no warning that the node is alone:\n%s", b.logs)
	}

	// Now the seed comes up (if the port was grabbed meanwhile, skip).
	cfg := localConfig("a")
	cfg.BindPort = port
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Skipf("could not bind the reserved port again: %v", err)
	}
	t.Cleanup(func() { _ = g.Shutdown() })
	waitFor(t, 10*time.Second, "the rejoin loop to join the seed that came up", func() bool {
		return b.sees("a", "b")
	})
	if err := b.g.Health(); err != nil {
		t.Errorf("joined: Health = %v, want nil", err)
	}
}

func TestMalformedPeerMetadataIgnored(t *testing.T) {
	good := startNode(t, localConfig("good"))

	// A raw memberlist node publishing garbage metadata joins us.
	mc := profileConfig(ProfileLocal)
	mc.Name = "bad"
	mc.BindAddr = "127.0.0.1"
	mc.BindPort = 0
	mc.Delegate = rawMeta{0xff, 0x00, 0x13}
	mc.Logger = newMemberlistLogger(slog.New(slog.DiscardHandler), nil)
	bad, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bad.Shutdown() })
	if _, err := bad.Join([]string{good.g.LocalMember().Addr}); err != nil {
		t.Fatalf("raw join: %v", err)
	}
	waitFor(t, 5*time.Second, "a warning about the malformed metadata", func() bool {
		return strings.Contains(good.logs.String(), "malformed metadata") &&
			strings.Contains(good.logs.String(), "peer=bad")
	})
	if got := memberNames(good.g.Members()); !slices.Equal(got, []string{"good"}) {
		t.Fatalf("Members() = %v; the malformed peer must be ignored", got)
	}
	// OnMembers runs on its own goroutine: its first snapshot may come
	// after the warning. It must never include the malformed peer.
	waitFor(t, 5*time.Second, "OnMembers to report the good node alone", func() bool {
		return good.sees("good")
	})
	if n := strings.Count(good.logs.String(), "level=WARN msg=\"ignoring peer"); n != 1 {
		t.Errorf("warned %d times about the same metadata, want once", n)
	}
}

type rawMeta []byte

func (r rawMeta) NodeMeta(int) []byte           { return r }
func (rawMeta) NotifyMsg([]byte)                {}
func (rawMeta) GetBroadcasts(int, int) [][]byte { return nil }
func (rawMeta) LocalState(bool) []byte          { return nil }
func (rawMeta) MergeRemoteState([]byte, bool)   {}

func TestLifecycleErrors(t *testing.T) {
	g, err := New(localConfig("x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Join([]string{"127.0.0.1:1"}); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Join before Start = %v", err)
	}
	if err := g.Leave(time.Second); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Leave before Start = %v", err)
	}
	if g.Members() != nil || g.Port() != 0 || g.LocalMember().Name != "x" {
		t.Errorf("before Start: Members %v, Port %d, LocalMember %+v", g.Members(), g.Port(), g.LocalMember())
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start = %v", err)
	}
	if err := g.InstallKey(make([]byte, 16)); !errors.Is(err, ErrNoEncryption) {
		t.Errorf("InstallKey without encryption = %v", err)
	}
	if err := g.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := g.Shutdown(); err != nil {
		t.Errorf("second Shutdown = %v", err)
	}
	if err := g.Leave(time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("Leave after Shutdown = %v", err)
	}
	if err := g.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Shutdown = %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g2, _ := New(localConfig("y"))
	if err := g2.Start(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Start with a cancelled context = %v", err)
	}
}

func TestStartHonoursContextDuringInitialJoin(t *testing.T) {
	// A seed that accepts TCP connections and never answers: the join
	// hangs until memberlist's TCP timeout (1 s in ProfileLocal).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	defer func() {
		_ = ln.Close()
		for len(accepted) > 0 {
			_ = (<-accepted).Close()
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case accepted <- c: // held open, silent, until the test ends
			default:
				_ = c.Close()
			}
		}
	}()
	g, err := New(localConfig("x", ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = g.Start(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Start returned after %v", d)
	}
	if _, err := g.Join(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("after a failed Start, Join = %v, want ErrClosed", err)
	}
}
