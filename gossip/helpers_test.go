package gossip

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/internal/testutil"

	"github.com/hashicorp/memberlist"
	"github.com/peerlimit/peerlimit/internal/faultnet"
)

var waitFor = testutil.WaitFor

// testNode is a started Gossip that records what OnMembers reports.
type testNode struct {
	name string
	g    *Gossip
	logs *syncBuffer

	mu       sync.Mutex
	last     []Member
	calls    int
	inFlight atomic.Int32
	overlap  atomic.Bool // OnMembers ran concurrently with itself
}

func (n *testNode) snapshot() []Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.last)
}

// sees reports whether the last snapshot holds exactly these names.
func (n *testNode) sees(names ...string) bool {
	return slices.Equal(memberNames(n.snapshot()), names)
}

func memberNames(ms []Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

func grpcAddrOf(name string) string {
	// Distinct, valid, never dialled: gossip only carries it.
	return "127.0.0.1:" + strconv.Itoa(20000+int(name[len(name)-1]))
}

type syncBuffer = testutil.SyncBuffer

func localConfig(name string, seeds ...string) Config {
	cfg := DefaultConfig()
	cfg.Name = name
	cfg.BindAddr, cfg.BindPort = "127.0.0.1", 0
	cfg.Profile = ProfileLocal
	cfg.GRPCAddr = grpcAddrOf(name)
	cfg.Proto = 3
	cfg.Seeds = seeds
	cfg.Logger = slog.New(slog.DiscardHandler) // startNode logs to a buffer
	return cfg
}

// startNode starts a node; mod may adjust the config. It is shut down at the
// end of the test.
func startNode(t *testing.T, cfg Config) *testNode {
	t.Helper()
	n := &testNode{name: cfg.Name, logs: &syncBuffer{}}
	cfg.Logger = slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.OnMembers = func(ms []Member) {
		if n.inFlight.Add(1) > 1 {
			n.overlap.Store(true)
		}
		defer n.inFlight.Add(-1)
		// Calling back into the Gossip must not deadlock.
		_ = n.g.Members()
		n.mu.Lock()
		n.last = ms
		n.calls++
		n.mu.Unlock()
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.Name, err)
	}
	n.g = g
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Start(ctx); err != nil {
		t.Fatalf("Start(%s): %v", cfg.Name, err)
	}
	t.Cleanup(func() {
		_ = g.Shutdown()
		if n.overlap.Load() {
			t.Errorf("%s: OnMembers was called concurrently with itself", n.name)
		}
	})
	return n
}

// startCluster starts nodes named prefix0..prefixN-1, all seeded with the
// first, and waits until every node's OnMembers reports all of them.
func startCluster(t *testing.T, size int, mod func(*Config)) []*testNode {
	t.Helper()
	var nodes []*testNode
	var names []string
	for i := range size {
		name := fmt.Sprintf("n%d", i)
		names = append(names, name)
		var seeds []string
		if i > 0 {
			seeds = []string{nodes[0].g.LocalMember().Addr}
		}
		cfg := localConfig(name, seeds...)
		if mod != nil {
			mod(&cfg)
		}
		nodes = append(nodes, startNode(t, cfg))
	}
	waitConverged(t, nodes, names, 15*time.Second)
	return nodes
}

func waitConverged(t *testing.T, nodes []*testNode, names []string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("every node to report %v", names), func() bool {
		for _, n := range nodes {
			if !n.sees(names...) {
				return false
			}
		}
		return true
	})
}

// newFaultTransport starts a real NetTransport on 127.0.0.1:0, registers it
// as node in tb, and wraps it.
func newFaultTransport(t *testing.T, tb *faultnet.Table, node string) (memberlist.Transport, string) {
	t.Helper()
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{"127.0.0.1"},
		Logger:    log.New(io.Discard, "", 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(nt.GetAutoBindPort()))
	tb.Register(node, addr)
	return faultnet.WrapTransport(nt, tb, addr), addr
}
