package httpfilter

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const grpcLimits = `
slas:
  - id: health-check
    match: {grpcMethods: [/grpc.health.v1.Health/Check]}
    tenant: {metadata: x-tenant-id}
    tiers:
      - {period: 10, threshold: 2}
      - {period: 1, threshold: 5}
  - id: health-watch
    match: {grpcMethods: [/grpc.health.v1.Health/Watch]}
    tenant: {func: account}
    tiers: [{period: 10, threshold: 1}]
  - id: http-only
    match: {pathPattern: "/v1/{t}"}
    tiers: [{period: 10, threshold: 1}]
`

// startGRPC serves the health service behind f's interceptors on
// 127.0.0.1 and returns a client.
func startGRPC(t *testing.T, f *Filter) healthpb.HealthClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(f.UnaryServerInterceptor()), grpc.StreamInterceptor(f.StreamServerInterceptor()))
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func newGRPCFilter(t *testing.T) (*Filter, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	f, err := New(Local(newTable(t)), mustParse(t, y(grpcLimits)), WithClock(clk.Now),
		WithGRPCTenantFunc("account", func(ctx context.Context, fullMethod string) (string, bool) {
			if fullMethod != "/grpc.health.v1.Health/Watch" {
				return "", false
			}
			v := metadata.ValueFromIncomingContext(ctx, "x-account")
			if len(v) == 0 {
				return "", false
			}
			return v[0], true
		}))
	if err != nil {
		t.Fatal(err)
	}
	return f, clk
}

func mdGet(md metadata.MD, k string) string {
	if v := md.Get(k); len(v) == 1 {
		return v[0]
	}
	return ""
}

func TestGRPCUnary(t *testing.T) {
	f, _ := newGRPCFilter(t)
	client := startGRPC(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	acme := metadata.AppendToOutgoingContext(ctx, "x-tenant-id", "acme")
	const policy = `"health-check";q=2;w=10, "health-check-1s";q=5;w=1`
	for i := range 2 {
		var hdr, tr metadata.MD
		res, err := client.Check(acme, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr), grpc.Trailer(&tr))
		if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("call %d: %v %v", i, res, err)
		}
		rem := itoa(1 - i)
		if mdGet(hdr, "x-ratelimit-limit") != "2" || mdGet(hdr, "x-ratelimit-remaining") != rem || mdGet(hdr, "x-ratelimit-reset") != "10" ||
			mdGet(hdr, "ratelimit-policy") != policy || mdGet(hdr, "ratelimit") != `"health-check";r=`+rem+`;t=10` {
			t.Errorf("call %d: header metadata %v", i, hdr)
		}
		if len(hdr.Get("retry-after")) != 0 {
			t.Errorf("call %d: retry-after on an admitted call", i)
		}
	}
	var hdr, tr metadata.MD
	_, err := client.Check(acme, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr), grpc.Trailer(&tr))
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("third call: %v", err)
	}
	if mdGet(tr, "retry-after") != "10" || mdGet(tr, "x-ratelimit-limit") != "2" || mdGet(tr, "x-ratelimit-remaining") != "0" ||
		mdGet(tr, "x-ratelimit-reset") != "10" || mdGet(tr, "ratelimit-policy") != policy || mdGet(tr, "ratelimit") != `"health-check";r=0;t=10` {
		t.Errorf("trailer metadata %v", tr)
	}
	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			retry = d
		case *errdetails.QuotaFailure:
			quota = d
		}
	}
	if retry == nil || retry.RetryDelay.AsDuration() != 10*time.Second || quota == nil || quota.Violations[0].Subject != "health-check" {
		t.Errorf("details %v", st.Details())
	}
	// Another tenant has its own budget; no tenant is InvalidArgument.
	if _, err := client.Check(metadata.AppendToOutgoingContext(ctx, "x-tenant-id", "globex"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("no tenant: %v", err)
	}
	if got := counterValue(t, f.m.decisions.WithLabelValues("grpc", "health-check", "denied")); got != 1 {
		t.Errorf("denied metric %v", got)
	}
	if got := counterValue(t, f.m.decisions.WithLabelValues("grpc", "health-check", "allowed")); got != 3 {
		t.Errorf("allowed metric %v", got)
	}
}

func TestGRPCStream(t *testing.T) {
	f, clk := newGRPCFilter(t)
	client := startGRPC(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	acme := metadata.AppendToOutgoingContext(ctx, "x-account", "acme")

	wctx, wcancel := context.WithCancel(acme)
	stream, err := client.Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.Recv()
	if err != nil || msg.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first watch: %v %v", msg, err)
	}
	hdr, err := stream.Header()
	if err != nil || mdGet(hdr, "x-ratelimit-limit") != "1" || mdGet(hdr, "x-ratelimit-remaining") != "0" || mdGet(hdr, "ratelimit-policy") != `"health-watch";q=1;w=10` {
		t.Errorf("first watch header %v %v", hdr, err)
	}
	wcancel()

	clk.Advance(2500 * time.Millisecond)
	stream, err = client.Watch(acme, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second watch: %v", err)
	}
	tr := stream.Trailer()
	if mdGet(tr, "retry-after") != "8" || mdGet(tr, "ratelimit") != `"health-watch";r=0;t=8` {
		t.Errorf("second watch trailer %v", tr)
	}
	// The func found no account: InvalidArgument.
	stream, err = client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("watch without account: %v", err)
	}
}

// TestGRPCInvalidTenant: a tenant the filter cannot count, from metadata
// or a func, fails the call with InvalidArgument before anything is
// charged and before the handler runs.
func TestGRPCInvalidTenant(t *testing.T) {
	lim := newRecLimiter(t)
	f, err := New(lim, mustParse(t, y(grpcLimits)),
		WithGRPCTenantFunc("account", func(ctx context.Context, _ string) (string, bool) {
			v := metadata.ValueFromIncomingContext(ctx, "x-account")
			if len(v) == 0 {
				return "", false
			}
			return strings.ReplaceAll(v[0], "NUL", "\x00"), true
		}))
	if err != nil {
		t.Fatal(err)
	}
	// Through a real server (whose client only sends printable ASCII).
	client := startGRPC(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	long := strings.Repeat("a", MaxTenantLen+1)
	_, err = client.Check(metadata.AppendToOutgoingContext(ctx, "x-tenant-id", long), &healthpb.HealthCheckRequest{})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument ||
		st.Message() != "rate limit: sla health-check: invalid tenant id in metadata x-tenant-id: longer than 256 bytes" {
		t.Errorf("long metadata tenant: %v", err)
	}
	stream, err := client.Watch(metadata.AppendToOutgoingContext(ctx, "x-account", "acNULme"), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "func account: holds a control character") {
		t.Errorf("func tenant with NUL: %v", err)
	}
	// What a raw HTTP/2 client could send: the interceptor itself.
	unary := f.UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}
	for _, tenant := range []string{"\xff\xfe", "ac\x01me", "ac\u0085me"} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant-id", tenant))
		called := false
		_, err := unary(ctx, nil, info, func(context.Context, any) (any, error) { called = true; return nil, nil })
		if status.Code(err) != codes.InvalidArgument || called {
			t.Errorf("tenant %q: %v, handler called %v", tenant, err, called)
		}
	}
	if takes, _ := lim.snapshot(); takes != 0 {
		t.Errorf("%d Takes for refused tenants", takes)
	}
	if got := counterValue(t, f.m.decisions.WithLabelValues("grpc", "health-check", "invalid_tenant")); got != 4 {
		t.Errorf("invalid_tenant metric %v, want 4", got)
	}
}

// TestGRPCUnmatched: methods no SLA names pass without metadata; HTTP SLAs
// do not apply to gRPC calls.
func TestGRPCUnmatched(t *testing.T) {
	f, err := New(Local(newTable(t)), mustParse(t, y(`
slas:
  - id: other
    match: {grpcMethods: [/shop.v1.Orders/*]}
    tenant: {metadata: x-tenant-id}
    tiers: [{period: 10, threshold: 0}]
  - id: http-only
    match: {pathPattern: "/**"}
    tenant: none
    noTenant: shared
    tiers: [{period: 10, threshold: 0}]
`)))
	if err != nil {
		t.Fatal(err)
	}
	client := startGRPC(t, f)
	var hdr metadata.MD
	if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	for k := range hdr {
		if k == "x-ratelimit-limit" || k == "ratelimit" || k == "ratelimit-policy" {
			t.Errorf("unmatched call got %s", k)
		}
	}
}

func TestGRPCFuncMustBeRegistered(t *testing.T) {
	if _, err := New(Local(newTable(t)), mustParse(t, y(grpcLimits))); err == nil {
		t.Fatal("gRPC SLA with an unregistered func accepted")
	}
}
