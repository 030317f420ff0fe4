package node

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/internal/testutil"
	"github.com/peerlimit/peerlimit/peerpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// testCA issues the test certificates.
type testCA struct{ *testutil.CA }

func newCA(t *testing.T) *testCA { return &testCA{testutil.NewCA(t)} }

func (ca *testCA) configs(t *testing.T, name string) (server, client *tls.Config) {
	c := ca.Issue(t, name)
	server = &tls.Config{Certificates: []tls.Certificate{c}, ClientCAs: ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	client = &tls.Config{Certificates: []tls.Certificate{c}, RootCAs: ca.Pool, MinVersion: tls.VersionTLS13}
	return server, client
}

// TestMutualTLSBetweenPeers: two nodes sync over mTLS; a client without a
// certificate from the cluster's CA is refused.
func TestMutualTLSBetweenPeers(t *testing.T) {
	ca := newCA(t)
	var nodes []*Node
	for i, name := range []string{"t0", "t1"} {
		cfg := LocalConfig(name)
		cfg.SyncInterval = 50 * time.Millisecond
		cfg.ServerTLS, cfg.ClientTLS = ca.configs(t, name)
		// Combined with a gossip key: sync is encrypted by TLS and each
		// call authenticated by the key's tag as well.
		cfg.Gossip.SecretKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
		if i > 0 {
			cfg.Gossip.Seeds = []string{nodes[0].GossipAddr()}
		}
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(context.Background()) })
		nodes = append(nodes, n)
	}
	c := &testCluster{t: t, nodes: nodes}
	c.waitMembers(10*time.Second, nodes...)
	if !nodes[0].auth.on() {
		t.Fatal("sync not authenticated with a gossip key set")
	}
	l := counters.Limit{Tenant: "tls", Endpoint: "/p", Method: "GET", Period: time.Hour, Threshold: 1000}
	for _, n := range nodes { // a joiner is pending until its first lease: retry
		got := 0
		waitFor(t, 5*time.Second, n.Name()+" to admit 5", func() bool {
			for got < 5 {
				if d, _ := n.Allow(context.Background(), l); !d.Allowed {
					return false
				}
				got++
			}
			return true
		})
	}
	waitFor(t, 5*time.Second, "totals synced over mTLS", func() bool {
		for _, n := range nodes {
			if g, _ := globalOf(n, l); g != 10 {
				return false
			}
		}
		return true
	})

	// A stranger with its own CA cannot even complete the handshake.
	other := newCA(t)
	_, strangerTLS := other.configs(t, "mallory")
	strangerTLS.RootCAs = ca.Pool // trusts the server, but the server does not trust it
	conn, err := grpc.NewClient(nodes[0].GRPCAddr(), grpc.WithTransportCredentials(credentials.NewTLS(strangerTLS)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = peerpb.NewPeerClient(conn).Sync(ctx, &peerpb.SyncRequest{Origin: "t1"})
	if err == nil {
		t.Fatal("a client with an untrusted certificate was served")
	}
}

// TestInboundValidationOverGRPC: a batch from a non-member, or larger than
// the message limit, is refused with a clear error and changes nothing.
func TestInboundValidationOverGRPC(t *testing.T) {
	cfg := LocalConfig("v0")
	cfg.MaxMessageBytes = 64 << 10
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := peerpb.NewPeerClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rep := &peerpb.Report{Tenant: "t", Endpoint: "/p", Method: "GET", PeriodMs: 1000, WindowStartMs: 1000, Threshold: 10, Own: 1}

	_, err = client.Sync(ctx, &peerpb.SyncRequest{Origin: "mallory", Reports: []*peerpb.Report{rep}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "not a member") {
		t.Fatalf("stranger: err = %v, want InvalidArgument naming the origin", err)
	}
	big := &peerpb.SyncRequest{Origin: "v0"}
	for i := 0; i < 2000; i++ {
		big.Reports = append(big.Reports, &peerpb.Report{Tenant: strings.Repeat("x", 40), Endpoint: "/p", Method: "GET", PeriodMs: 1000, WindowStartMs: 1000, Threshold: 10, Own: 1})
	}
	_, err = client.Sync(ctx, big)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized batch: err = %v, want ResourceExhausted", err)
	}
	if w := n.Engine().Owner().Stats().Windows; w != 0 {
		t.Fatalf("rejected batches created %d windows", w)
	}
	// The node itself still works.
	if _, err := client.Sync(ctx, &peerpb.SyncRequest{Origin: "v0", Reports: []*peerpb.Report{rep}}); err != nil {
		t.Fatalf("valid batch: %v", err)
	}
}

func TestConfigValidateNamesField(t *testing.T) {
	for _, tc := range []struct {
		mod   func(*Config)
		field string
	}{
		{func(c *Config) { c.Name = "" }, "Name"},
		{func(c *Config) { c.SyncInterval = time.Microsecond }, "SyncInterval"},
		{func(c *Config) { c.CallTimeout = -1 }, "CallTimeout"},
		{func(c *Config) { c.Policy = "yolo" }, "Policy"},
	} {
		cfg := LocalConfig("x")
		tc.mod(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Validate() = %v, want an error naming %s", err, tc.field)
		}
		if _, err := New(cfg); err == nil {
			t.Errorf("New accepted a config with a bad %s", tc.field)
		}
	}
}
