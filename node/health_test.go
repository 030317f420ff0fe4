package node

// Helpers for the tests of what an operator can get wrong (issue 18): real
// nodes, memberlist and gRPC on 127.0.0.1 (and on this host's routable
// address where the mistake is about one), no mocks.

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/internal/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// startLogged starts a node from cfg, its logs (Info and above) in the
// returned buffer, and closes it at the end of the test.
func startLogged(t *testing.T, cfg Config) (*Node, *testutil.SyncBuffer) {
	t.Helper()
	n, logs, err := tryStart(t, cfg)
	if err != nil {
		t.Fatalf("Start(%s): %v", cfg.Name, err)
	}
	return n, logs
}

// tryStart is startLogged that returns Start's error instead of failing.
func tryStart(t *testing.T, cfg Config) (*Node, *testutil.SyncBuffer, error) {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		return n, logs, err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	return n, logs, nil
}

// freeAddr reserves a port on 127.0.0.1 and releases it: nobody listens
// there (a seed with a typo in its port).
func freeAddr(t *testing.T) (string, int) {
	port := testutil.FreePort(t)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port
}

// grpcHealth asks the node's peer port for the standard health status.
func grpcHealth(t *testing.T, n *Node) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("health check: %v", err)
	}
	return resp.GetStatus()
}

// problem reads the peerlimit_health_problem gauge.
func problem(t *testing.T, n *Node, label string) float64 {
	return metricValue(t, n.Registry(), "peerlimit_health_problem", "problem", label)
}

// reportsLoudly waits until n reports the problem want everywhere an
// operator looks: Health, the gauge, the gRPC health service and a warning
// containing warning.
func reportsLoudly(t *testing.T, n *Node, logs *testutil.SyncBuffer, want error, label, warning string) {
	t.Helper()
	waitFor(t, 10*time.Second, n.Name()+" to report "+label, func() bool {
		return errors.Is(n.Health(), want) && problem(t, n, label) == 1 &&
			grpcHealth(t, n) == healthpb.HealthCheckResponse_NOT_SERVING &&
			strings.Contains(logs.String(), "level=WARN msg=\""+warning)
	})
}

// otherHostDialer dials like a peer on another host: a loopback or
// unspecified address is that host itself, where nothing listens.
func otherHostDialer(ctx context.Context, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && (ip.IsLoopback() || ip.IsUnspecified())) {
		return nil, errors.New("connection refused (a loopback address, seen from another host)")
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// ownedBy returns a limit whose key the named member owns in n's ring.
func ownedBy(t *testing.T, n *Node, owner string) counters.Limit {
	t.Helper()
	for i := 0; i < 1000; i++ {
		l := counters.Limit{Tenant: "t" + strconv.Itoa(i), Endpoint: "/p", Method: "GET", Period: time.Minute, Threshold: 100}
		if o, _ := n.Engine().Ring().Owner(l.Hash()); o == owner {
			return l
		}
	}
	t.Fatalf("no key owned by %s", owner)
	return counters.Limit{}
}

// A peer whose gRPC address cannot be reached from here (a firewall, say):
// every sync call to it fails, and the node says so within seconds.
func TestUnreachablePeerReported(t *testing.T) {
	a, _ := startLogged(t, LocalConfig("a"))
	cfg := LocalConfig("b")
	cfg.SyncInterval = 100 * time.Millisecond
	cfg.Gossip.Seeds = []string{a.GossipAddr()}
	cfg.Dialer = otherHostDialer // every peer is on 127.0.0.1: unreachable
	b, bLogs := startLogged(t, cfg)
	c := &testCluster{t: t, nodes: []*Node{a, b}}
	c.waitMembers(10*time.Second, a, b)
	l := ownedBy(t, b, "a")
	waitFor(t, 10*time.Second, "b to report the unreachable peer", func() bool {
		b.Allow(context.Background(), l) // traffic, so that there is something to sync
		return errors.Is(b.Health(), ErrPeerUnreachable) && problem(t, b, "peer_unreachable") == 1 &&
			grpcHealth(t, b) == healthpb.HealthCheckResponse_NOT_SERVING &&
			strings.Contains(bLogs.String(), `level=WARN msg="sync calls to a peer keep failing`)
	})
	if err := b.Health(); !strings.Contains(err.Error(), a.Members()[0].GRPCAddr) {
		t.Errorf("Health = %v, want the unreachable address named", err)
	}
	t.Logf("Health: %v", b.Health())
}
