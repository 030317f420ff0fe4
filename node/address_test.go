package node

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/gossip"
	"github.com/peerlimit/peerlimit/internal/testutil"
)

// 6. Gossip on a routable address, the gRPC host left to its default: the
// gRPC address published is the gossip one, so peers on other hosts (a
// dialer that refuses loopback) sync, and a node that just joined admits
// its first request. (Before: 127.0.0.1:<port> was published, every sync
// call failed and the joiner denied its whole first window.) One node
// derives its addresses from Config.Addr, the other from Gossip.BindAddr.
func TestGRPCAddrFollowsRoutableGossipAddr(t *testing.T) {
	ip := testutil.RoutableIP(t).String()
	base := func(name string) Config {
		cfg := DefaultConfig()
		cfg.Name = name
		cfg.Gossip.Profile = LocalConfig(name).Gossip.Profile
		cfg.Gossip.BindPort = 0
		cfg.GRPCAddr = ":0" // the port only: the host is left to the node
		cfg.SyncInterval = 100 * time.Millisecond
		cfg.Dialer = otherHostDialer
		return cfg
	}
	cfg := base("a")
	cfg.Addr = ip
	a, _ := startLogged(t, cfg)
	cfg = base("b")
	cfg.Gossip.BindAddr = ip
	cfg.Gossip.Seeds = []string{a.GossipAddr()}
	b, bLogs := startLogged(t, cfg)
	c := &testCluster{t: t, nodes: []*Node{a, b}}
	c.waitMembers(10*time.Second, a, b)

	for _, n := range []*Node{a, b} {
		for _, m := range n.Members() {
			gh, _, _ := net.SplitHostPort(m.Addr)
			rh, _, _ := net.SplitHostPort(m.GRPCAddr)
			if gh != ip || rh != ip {
				t.Errorf("%s sees %s at gossip %s, gRPC %s; want both on %s", n.Name(), m.Name, m.Addr, m.GRPCAddr, ip)
			}
		}
	}
	l := ownedBy(t, b, "a")
	d, err := b.Allow(context.Background(), l)
	if err != nil || !d.Allowed {
		t.Fatalf("the joiner's first request, owned by the other node: %+v, %v; want admitted\nlogs:\n%s", d, err, bLogs)
	}
	if ok := metricValue(t, b.Registry(), "peerlimit_sync_calls_total", "result", "ok"); ok == 0 {
		t.Errorf("no sync call succeeded")
	}
	for _, n := range []*Node{a, b} {
		if err := n.Health(); err != nil {
			t.Errorf("%s: Health = %v, want nil", n.Name(), err)
		}
	}
}

// 6, the other way: a loopback gRPC address set beside a routable gossip
// address is refused at Start, with an error that names the field.
func TestLoopbackGRPCAddrRefused(t *testing.T) {
	ip := testutil.RoutableIP(t).String()
	cfg := DefaultConfig()
	cfg.Name = "a"
	cfg.Gossip.Profile = LocalConfig("a").Gossip.Profile
	cfg.Gossip.BindAddr, cfg.Gossip.BindPort = ip, 0
	cfg.GRPCAddr = "127.0.0.1:0" // the old default
	n, _, err := tryStart(t, cfg)
	if !errors.Is(err, ErrUnreachableGRPCAddr) || !strings.Contains(err.Error(), "GRPCAddr") {
		t.Fatalf("Start = %v, want ErrUnreachableGRPCAddr naming GRPCAddr", err)
	}
	t.Logf("Start: %v", err)
	if _, err := n.Allow(context.Background(), counters.Limit{Tenant: "t", Endpoint: "/p", Method: "GET", Period: time.Second, Threshold: 1}); !errors.Is(err, ErrClosed) {
		t.Errorf("Allow after a failed Start = %v, want ErrClosed", err)
	}
}

// 7. DefaultConfig, as the README's snippet uses it, listens on every
// interface and publishes the host's private address for gossip and gRPC
// alike, so that instances on different hosts form one cluster. (Before:
// gossip and gRPC on 127.0.0.1.)
func TestDefaultConfigReachableFromOtherHosts(t *testing.T) {
	d := DefaultConfig()
	if d.Addr != "" || d.Gossip.BindAddr != "" || d.Gossip.BindPort != 7946 || d.GRPCAddr != ":7947" || d.CloseTimeout != DefaultCloseTimeout {
		t.Fatalf("DefaultConfig: Addr %q, Gossip %s:%d, GRPCAddr %q, CloseTimeout %v", d.Addr, d.Gossip.BindAddr, d.Gossip.BindPort, d.GRPCAddr, d.CloseTimeout)
	}
	testutil.RoutableIP(t)
	d.Name = "api-1"
	d.Gossip.BindPort, d.GRPCAddr = 0, ":0" // the ports only, so that tests may run in parallel
	n, _, err := tryStart(t, d)
	if err != nil {
		if errors.Is(err, gossip.ErrNoAdvertiseAddr) {
			t.Skipf("this host has no private address: %v", err)
		}
		t.Fatal(err)
	}
	self := n.Members()[0]
	gh, _, _ := net.SplitHostPort(self.Addr)
	rh, _, _ := net.SplitHostPort(self.GRPCAddr)
	if ip := net.ParseIP(gh); ip == nil || ip.IsLoopback() || ip.IsUnspecified() || gh != rh {
		t.Fatalf("published gossip %s and gRPC %s; want one routable address for both", self.Addr, self.GRPCAddr)
	}
	t.Logf("published gossip %s, gRPC %s (listening on %s)", self.Addr, self.GRPCAddr, n.GRPCAddr())
}

// Validate names the address fields.
func TestConfigValidateAddresses(t *testing.T) {
	for _, tc := range []struct {
		mod   func(*Config)
		field string
	}{
		{func(c *Config) { c.Addr = "api-1.internal" }, "Addr"},
		{func(c *Config) { c.Addr = "0.0.0.0" }, "Addr"},
		{func(c *Config) { c.GRPCAddr = "7947" }, "GRPCAddr"},
		{func(c *Config) { c.GRPCAddr = ":http" }, "GRPCAddr"},
		{func(c *Config) { c.GRPCAdvertiseAddr = "10.0.0.1" }, "GRPCAdvertiseAddr"},
	} {
		cfg := LocalConfig("x")
		tc.mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "Config."+tc.field) {
			t.Errorf("Validate() = %v, want an error naming Config.%s", err, tc.field)
		}
	}
}
