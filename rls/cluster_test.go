package rls

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/peerlimit/peerlimit/internal/nodetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// startRLS starts a real 3-node cluster on 127.0.0.1 (memberlist and
// gRPC), each node serving the rate limit service with cfg on its own
// listener, and returns a client of each.
func startRLS(t *testing.T, cfg *Config) []rlsv3.RateLimitServiceClient {
	t.Helper()
	var clients []rlsv3.RateLimitServiceClient
	for _, n := range nodetest.Start(t, 3, nil) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gs := grpc.NewServer()
		rlsv3.RegisterRateLimitServiceServer(gs, NewServer(n, cfg))
		go gs.Serve(lis)
		t.Cleanup(gs.Stop)
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		clients = append(clients, rlsv3.NewRateLimitServiceClient(conn))
	}
	return clients
}

func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// TestShouldRateLimitOnACluster: Envoy's API answered by three nodes with
// no store. A tenant's 25 requests spread over the nodes get exactly its
// limit of 10 per day cluster-wide, each answer with its status and the
// middleware's headers; another tenant has its own counter; a value
// configured unlimited, a descriptor in shadow mode and an unknown domain
// are always OK; a request override sets its own limit.
func TestShouldRateLimitOnACluster(t *testing.T) {
	// The example, with the tenants' limit per day rather than per minute,
	// so that no window ends during the test.
	cfg, err := Parse("edge.yaml", []byte(strings.Replace(exampleConfig, "unit: minute", "unit: day", 1)))
	if err != nil {
		t.Fatal(err)
	}
	clients := startRLS(t, cfg)
	ctx := context.Background()
	ask := func(i int, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
		t.Helper()
		resp, err := clients[i%len(clients)].ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	ok := 0
	for i := range 25 {
		resp := ask(i, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "acme")}})
		st := resp.Statuses[0]
		if st.CurrentLimit.GetRequestsPerUnit() != 10 || st.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_DAY ||
			st.DurationUntilReset.AsDuration() <= 0 || st.DurationUntilReset.AsDuration() > 24*time.Hour {
			t.Fatalf("request %d: status %v", i, st)
		}
		if len(resp.ResponseHeadersToAdd) < 3 || resp.ResponseHeadersToAdd[0].Key != "X-Ratelimit-Limit" || resp.ResponseHeadersToAdd[0].Value != "10" {
			t.Fatalf("request %d: headers %v", i, resp.ResponseHeadersToAdd)
		}
		if resp.OverallCode == rlsv3.RateLimitResponse_OK {
			ok++
		}
	}
	if ok != 10 {
		t.Errorf("tenant acme: %d of 25 OK, want its limit of 10 across the cluster", ok)
	}
	if r := ask(0, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "globex")}}); r.OverallCode != rlsv3.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != 9 {
		t.Errorf("tenant globex's first request: %v, want OK with 9 remaining", r)
	}
	for i := range 12 {
		for _, req := range []*rlsv3.RateLimitRequest{
			{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "vip")}},
			{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "10.0.0.1")}},
			{Domain: "nowhere", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "acme")}},
		} {
			if r := ask(i, req); r.OverallCode != rlsv3.RateLimitResponse_OK {
				t.Fatalf("request %d %v: %v, want OK", i, req, r)
			}
		}
	}
	// Two descriptors: one over its limit makes the whole request over.
	r := ask(1, &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 1, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "initech"), desc("tenant", "acme")}})
	if r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || r.Statuses[0].Code != rlsv3.RateLimitResponse_OK || r.Statuses[1].Code != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("initech and acme: %v, want OK then OVER_LIMIT, overall OVER_LIMIT", r)
	}
	// An override: 3 per second for this descriptor, whatever the file says.
	over := desc("tenant", "hooli")
	over.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: 1 /* SECOND */}
	r = ask(2, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{over}})
	if r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 3 || r.Statuses[0].CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_SECOND {
		t.Errorf("override: %v", r)
	}
	// Bad requests are refused with InvalidArgument.
	for _, req := range []*rlsv3.RateLimitRequest{
		{Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "a")}},
		{Domain: "edge"},
		{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{{}}},
	} {
		if _, err := clients[0].ShouldRateLimit(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v, want InvalidArgument", req, err)
		}
	}
}

// TestReplacesOnACluster: envoy ratelimit's replaces. A request that
// matches a limit and one that replaces it is checked against the
// replacing limit only, and the replaced one is not counted; a request
// that matches only the first is limited by it.
func TestReplacesOnACluster(t *testing.T) {
	cfg, err := Parse("replace.yaml", []byte(`domain: replace
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: day, requests_per_unit: 3}
  - key: plan
    value: gold
    rate_limit: {unit: day, requests_per_unit: 6, replaces: [{name: per-user}]}
  - key: plan
    value: free
    rate_limit: {unit: day, requests_per_unit: 100}
`))
	if err != nil {
		t.Fatal(err)
	}
	clients := startRLS(t, cfg)
	count := func(n int, ds ...*ratelimitv3.RateLimitDescriptor) (ok int) {
		t.Helper()
		for i := range n {
			resp, err := clients[i%len(clients)].ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "replace", Descriptors: ds})
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) == 2 && ds[1].Entries[0].Value == "gold" && (resp.Statuses[0].CurrentLimit != nil || resp.Statuses[0].Code != rlsv3.RateLimitResponse_OK) {
				t.Fatalf("the replaced limit was applied: %v", resp.Statuses[0])
			}
			if resp.OverallCode == rlsv3.RateLimitResponse_OK {
				ok++
			}
		}
		return ok
	}
	if got := count(8, desc("user", "bob"), desc("plan", "gold")); got != 6 {
		t.Errorf("bob on gold: %d of 8 OK, want the replacing limit's 6", got)
	}
	if got := count(4, desc("user", "bob")); got != 3 {
		t.Errorf("bob alone after his gold requests: %d of 4 OK, want 3 (the replaced limit counted nothing)", got)
	}
	if got := count(5, desc("user", "ann"), desc("plan", "free")); got != 3 {
		t.Errorf("ann on free: %d of 5 OK, want her own limit's 3", got)
	}
}
