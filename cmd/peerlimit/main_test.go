package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/peerlimit/peerlimit/internal/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

type instance struct {
	rls, http, gossip string
	hup               chan os.Signal
	done              chan int
}

var ready = regexp.MustCompile(`peerlimit \S+: rls (\S+) http (\S+) gossip (\S+) domains`)

func start(t *testing.T, ctx context.Context, args []string, env map[string]string) *instance {
	t.Helper()
	out := &testutil.SyncBuffer{}
	in := &instance{hup: make(chan os.Signal, 1), done: make(chan int, 1)}
	go func() { in.done <- run(ctx, args, func(k string) string { return env[k] }, in.hup, out, io.Discard) }()
	testutil.WaitFor(t, 10*time.Second, "the ready line", func() bool {
		select {
		case code := <-in.done:
			t.Fatalf("peerlimit exited with %d", code)
		default:
		}
		m := ready.FindStringSubmatch(out.String())
		if m == nil {
			return false
		}
		in.rls, in.http, in.gossip = m[1], m[2], m[3]
		return true
	})
	return in
}

func writeConfig(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// dialRLS connects to an instance's rate limit service, until the end of
// the test.
func dialRLS(t *testing.T, in *instance) (rlsv3.RateLimitServiceClient, *grpc.ClientConn) {
	t.Helper()
	conn, err := grpc.NewClient(in.rls, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn), conn
}

// waitMembers waits until each instance's metrics count len(ins) members.
func waitMembers(t *testing.T, ins ...*instance) {
	t.Helper()
	want := fmt.Sprintf("\npeerlimit_members %d\n", len(ins))
	testutil.WaitFor(t, 10*time.Second, "every member in each one's metrics", func() bool {
		for _, in := range ins {
			if !strings.Contains(get(t, "http://"+in.http+"/metrics"), want) {
				return false
			}
		}
		return true
	})
}

// tenantReq is a request of domain with one descriptor, tenant=tenant.
func tenantReq(domain, tenant string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "tenant", Value: tenant}}}}}
}

// countOK sends req n times, in turn to each client, and returns how many
// answers were OK.
func countOK(t *testing.T, clients []rlsv3.RateLimitServiceClient, n int, req *rlsv3.RateLimitRequest) int {
	t.Helper()
	ok := 0
	for i := range n {
		r, err := clients[i%len(clients)].ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if r.OverallCode == rlsv3.RateLimitResponse_OK {
			ok++
		}
	}
	return ok
}

// TestTwoServersShareALimit: two peerlimit processes' worth of servers (in
// this test process, on 127.0.0.1), the second configured through the
// environment, form one cluster; an envoy ratelimit configuration
// directory loads unchanged; requests spread over both get the limit
// once; health and metrics answer; SIGHUP reloads the directory; the
// servers leave on cancel.
func TestTwoServersShareALimit(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "edge.yaml", "domain: edge\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: day, requests_per_unit: 7}\n")
	ctx, cancel := context.WithCancel(context.Background())
	a := start(t, ctx, []string{"-local", "-name", "a", "-config-dir", dir, "-rls-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-log-level", "warn"}, nil)
	b := start(t, ctx, []string{"-local", "-rls-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0"},
		map[string]string{"PEERLIMIT_NAME": "b", "PEERLIMIT_CONFIG_DIR": dir, "PEERLIMIT_SEEDS": a.gossip, "PEERLIMIT_LOG_LEVEL": "warn"})
	clA, conn := dialRLS(t, a)
	clB, _ := dialRLS(t, b)
	clients := []rlsv3.RateLimitServiceClient{clA, clB}
	waitMembers(t, a, b)
	// A client on a, then one on b: b refuses all of its requests only if
	// it knows what a spent.
	okA := countOK(t, clients[:1], 10, tenantReq("edge", "acme"))
	okB := countOK(t, clients[1:], 10, tenantReq("edge", "acme"))
	if okA != 7 || okB != 0 {
		t.Errorf("%d of 10 OK on a, then %d of 10 on b, want the limit of 7 on a and none on b", okA, okB)
	}
	// Requests in turn over both: never over the limit. Lease may leave a
	// unit of so small a limit unspent when two members ask in turn (a
	// known miss: sim/testdata/small-limit-turns, README "Known limits"),
	// so 6 is accepted there (CI got 6 once, on 20f9310).
	if ok := countOK(t, clients, 20, tenantReq("edge", "turns")); ok > 7 || ok < 6 {
		t.Errorf("%d of 20 OK over two servers in turn, want the limit of 7 (6 with the known miss)", ok)
	}
	h, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: rlsv3.RateLimitService_ServiceDesc.ServiceName})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health: %v %v", h, err)
	}
	if s := get(t, "http://"+a.http+"/healthz"); s != "ok\n" {
		t.Errorf("/healthz: %q", s)
	}
	// envoy ratelimit's /json endpoint: the same decision in JSON, 429 when over.
	for _, tc := range []struct {
		body, want string
		code       int
	}{
		{`{"domain":"edge","descriptors":[{"entries":[{"key":"tenant","value":"acme"}]}]}`, `"overallCode":"OVER_LIMIT"`, 429},
		{`{"domain":"edge","descriptors":[{"entries":[{"key":"tenant","value":"json"}]}]}`, `"limitRemaining":6`, 200},
		{`{"domain":"edge"}`, "descriptors must not be empty", 400},
		{`{"nope":1}`, "not a RateLimitRequest", 400},
	} {
		resp, err := http.Post("http://"+b.http+"/json", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(strings.ReplaceAll(string(body), " ", ""), strings.ReplaceAll(tc.want, " ", "")) {
			t.Errorf("POST /json %s: %d %s, want %d with %s", tc.body, resp.StatusCode, body, tc.code, tc.want)
		}
	}

	// A new domain, loaded on SIGHUP.
	writeConfig(t, dir, "db.yaml", "domain: db\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: hour, requests_per_unit: 1}\n")
	a.hup <- os.Interrupt // any signal value: the channel is the command's SIGHUP
	testutil.WaitFor(t, 5*time.Second, "domain db in force", func() bool {
		r, err := clients[0].ShouldRateLimit(context.Background(), tenantReq("db", "reload"))
		return err == nil && len(r.Statuses) == 1 && r.Statuses[0].CurrentLimit.GetRequestsPerUnit() == 1
	})
	cancel()
	for _, in := range []*instance{a, b} {
		select {
		case code := <-in.done:
			if code != 0 {
				t.Errorf("exit code %d", code)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("did not exit after cancel")
		}
	}
}

func TestBadSettings(t *testing.T) {
	dir, good, other := t.TempDir(), t.TempDir(), t.TempDir()
	writeConfig(t, dir, "bad.yaml", "domain: edge\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	writeConfig(t, good, "edge.yaml", "domain: edge\n")
	writeConfig(t, other, "limits.yaml", "slas:\n  - id: put\n    match: {methods: [PUT], pathPattern: \"/v1/{org}\"}\n    tenant: {fromPath: org}\n    tiers: [{period: fortnight, threshold: 1}]\n")
	for _, tc := range []struct {
		args []string
		env  map[string]string
		code int
		want string
	}{
		{nil, nil, 2, "-limits (or PEERLIMIT_LIMITS) or both are required"},
		{[]string{"-limits", filepath.Join(other, "limits.yaml")}, nil, 1, `limits.yaml:5: sla "put": tiers[0].period`},
		{[]string{"-config-dir", dir}, nil, 1, `bad.yaml:4: descriptors[0].rate_limit.unit: "fortnight" is not a unit`},
		{[]string{"-config-dir", dir}, map[string]string{"PEERLIMIT_GOSSIP_PORT": "many"}, 2, `PEERLIMIT_GOSSIP_PORT="many"`},
		{[]string{"-nope"}, nil, 2, "flag provided but not defined: -nope"},
		{[]string{"-h"}, nil, 2, "GOGC=400 unless the environment sets GOGC"},
		{[]string{"-config-dir", dir}, map[string]string{"PEERLIMIT_POLICY": "yolo"}, 1, `bad.yaml:4`}, // the file is read first
		{[]string{"-config-dir", t.TempDir()}, nil, 1, "no *.yaml or *.yml file"},
		{[]string{"-config-dir", good, "-local"}, map[string]string{"PEERLIMIT_POLICY": "yolo"}, 2, "Policy"},
		{[]string{"-config-dir", good, "-local", "-gossip-key", "!!"}, nil, 2, "-gossip-key: not base64"},
		{[]string{"-config-dir", good, "-local", "-peer-tls-cert", "c.pem"}, nil, 2, "go together"},
		{[]string{"-config-dir", good, "-local", "-peer-tls-cert", "c.pem", "-peer-tls-key", "k.pem", "-peer-tls-ca", "ca.pem"}, nil, 2, "-peer-tls-cert, -peer-tls-key: open c.pem"},
	} {
		var stderr testutil.SyncBuffer
		code := run(context.Background(), tc.args, func(k string) string { return tc.env[k] }, nil, io.Discard, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v %v: exit %d, stderr %q; want %d and %q", tc.args, tc.env, code, stderr.String(), tc.code, tc.want)
		}
	}
}

func get(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestGrpcurlOutsideClient: grpcurl, a client that knows nothing of
// peerlimit, finds the services by reflection and gets a decision.
func TestGrpcurlOutsideClient(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "grpcurl")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/fullstorydev/grpcurl/cmd/grpcurl").CombinedOutput(); err != nil {
		t.Fatalf("building grpcurl (a tool of go.mod): %v\n%s", err, out)
	}
	dir := t.TempDir()
	writeConfig(t, dir, "edge.yaml", "domain: edge\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: day, requests_per_unit: 7}\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := start(t, ctx, []string{"-local", "-name", "a", "-config-dir", dir, "-rls-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-log-level", "warn"}, nil)
	grpcurl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"-plaintext", "-max-time", "10"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	list := grpcurl(a.rls, "list")
	for _, svc := range []string{"envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health"} {
		if !strings.Contains(list, svc) {
			t.Errorf("grpcurl list: %q lacks %s", list, svc)
		}
	}
	out := grpcurl("-d", `{"domain":"edge","descriptors":[{"entries":[{"key":"tenant","value":"cli"}]}]}`, a.rls, "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
	for _, want := range []string{`"overallCode": "OK"`, `"requestsPerUnit": 7`, `"limitRemaining": 6`} {
		if !strings.Contains(out, want) {
			t.Errorf("grpcurl ShouldRateLimit: %s lacks %s", out, want)
		}
	}
	if out := grpcurl(a.rls, "grpc.health.v1.Health/Check"); !strings.Contains(out, "SERVING") {
		t.Errorf("grpcurl health: %s", out)
	}
}

// TestCheckWithTheLimitsFile: two servers configured with the HTTP
// middleware's limits file only answer POST /v1/check for services that
// are not Go: 12 checks of one tenant spread over both get its limit of 5
// a day (the 429s with Retry-After), another tenant its override, an
// endpoint no SLA matches is allowed without counting, and bad bodies are
// refused with 400.
func TestCheckWithTheLimitsFile(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "limits.yaml", `slas:
  - id: put-product
    match: {methods: [PUT], pathPattern: "/v1/organizations/{orgId}/product/{id}"}
    tenant: {fromPath: orgId}
    tiers: [{period: 24h, threshold: 5}]
    overrides:
      - tenants: [bigco]
        tiers: [{period: 24h, threshold: 8}]
`)
	limits := filepath.Join(dir, "limits.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := start(t, ctx, []string{"-local", "-name", "a", "-limits", limits, "-rls-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-log-level", "warn"}, nil)
	b := start(t, ctx, []string{"-local", "-rls-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0"},
		map[string]string{"PEERLIMIT_NAME": "b", "PEERLIMIT_LIMITS": limits, "PEERLIMIT_SEEDS": a.gossip, "PEERLIMIT_LOG_LEVEL": "warn"})
	waitMembers(t, a, b)
	check := func(in *instance, body string) (int, checkResponse, http.Header, string) {
		t.Helper()
		resp, err := http.Post("http://"+in.http+"/v1/check", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var cr checkResponse
		if resp.StatusCode == 200 || resp.StatusCode == 429 {
			if err := json.Unmarshal(raw, &cr); err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
		}
		return resp.StatusCode, cr, resp.Header, string(raw)
	}
	count := func(tenant string, n int) (ok int) {
		for i := range n {
			in := []*instance{a, b}[i%2]
			code, cr, h, raw := check(in, `{"tenant":"`+tenant+`","endpoint":"/v1/organizations/`+tenant+`/product/7","method":"put"}`)
			switch {
			case code == 200 && cr.Allowed:
				ok++
			case code == 429 && !cr.Allowed && h.Get("Retry-After") != "" && cr.RetryAfterSeconds > 0:
			default:
				t.Fatalf("check %d of %s: %d %s %v", i, tenant, code, raw, h)
			}
			if len(cr.SLAs) != 1 || cr.SLAs[0] != "put-product" || h.Get("X-Ratelimit-Limit") != strconv.FormatInt(cr.Limit, 10) {
				t.Fatalf("check %d of %s: %s %v", i, tenant, raw, h)
			}
		}
		return ok
	}
	if got := count("acme", 12); got != 5 {
		t.Errorf("acme: %d of 12 allowed over two servers, want its limit of 5", got)
	}
	if got := count("bigco", 12); got != 8 {
		t.Errorf("bigco: %d of 12 allowed, want its override's 8", got)
	}
	if code, cr, _, raw := check(a, `{"tenant":"acme","endpoint":"/v1/other","method":"GET","cost":3}`); code != 200 || !cr.Allowed || len(cr.SLAs) != 0 {
		t.Errorf("no SLA matches: %d %s, want allowed with no SLA", code, raw)
	}
	for _, body := range []string{
		`{"tenant":"","endpoint":"/v1/x","method":"GET"}`,
		`{"tenant":"a","endpoint":"v1/x","method":"GET"}`,
		`{"tenant":"a","endpoint":"/v1/x","method":"GET","cost":-1}`,
		`{"tenant":"a","endpoint":"/v1/x","method":"GET","extra":1}`,
		`{"tenant":"\xff","endpoint":"/v1/organizations/x/product/1","method":"PUT"}`,
		`not json`,
	} {
		if code, _, _, raw := check(b, body); code != 400 {
			t.Errorf("POST /v1/check %s: %d %s, want 400", body, code, raw)
		}
	}
}

var (
	syncOK     = regexp.MustCompile(`peerlimit_sync_calls_total\{result="ok"\} [1-9]`)
	syncFailed = regexp.MustCompile(`peerlimit_sync_calls_total\{result="error"\} [1-9]`)
)

// TestPeersOverMutualTLS: two servers with certificates from one CA share a
// limit over mutual TLS; a third with a certificate from another CA joins
// the gossip but every sync call it makes is refused.
func TestPeersOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "edge.yaml", "domain: edge\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: day, requests_per_unit: 7}\n")
	ca := testutil.NewCA(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := func(name string, ca *testutil.CA, seeds ...string) []string {
		caFile, cert, key := ca.WritePEM(t, t.TempDir(), name)
		a := []string{"-local", "-name", name, "-config-dir", dir, "-rls-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-log-level", "error",
			"-peer-tls-cert", cert, "-peer-tls-key", key, "-peer-tls-ca", caFile}
		if len(seeds) > 0 {
			a = append(a, "-seeds", strings.Join(seeds, ","))
		}
		return a
	}
	a := start(t, ctx, args("a", ca), nil)
	b := start(t, ctx, args("b", ca, a.gossip), nil)
	clA, _ := dialRLS(t, a)
	clB, _ := dialRLS(t, b)
	waitMembers(t, a, b)
	// A client pinned to a, then one pinned to b: the two admit the limit
	// once between them, and the answered calls checked below say they
	// shared it over mutual TLS. Requests in turn to a and b, as
	// TestTwoServersShareALimit sends them, admitted 6 of 7 now and then
	// on a loaded machine: a limit this small, split between two members
	// that both have requests waiting within one sync interval, can leave
	// its last unit unspent (README, Known limits, small-limit-turns);
	// that is the lease's, not the transport's.
	ok := countOK(t, []rlsv3.RateLimitServiceClient{clA}, 10, tenantReq("edge", "acme"))
	ok += countOK(t, []rlsv3.RateLimitServiceClient{clB}, 10, tenantReq("edge", "acme"))
	if ok != 7 {
		t.Errorf("%d of 20 OK over two servers on mutual TLS, want the limit of 7", ok)
	}
	// Calls answered over mutual TLS on both. A call may still fail
	// without the transport at fault: one that takes clearly longer than
	// calls have taken is given up and sent again (node/calltimer.go),
	// which a loaded machine does now and then.
	for _, in := range []*instance{a, b} {
		if m := get(t, "http://"+in.http+"/metrics"); !syncOK.MatchString(m) {
			var lines []string
			for _, l := range strings.Split(m, "\n") {
				if strings.HasPrefix(l, "peerlimit_sync_calls_total") {
					lines = append(lines, l)
				}
			}
			t.Errorf("sync over mutual TLS: want successful calls: %v", lines)
		}
	}
	stranger := start(t, ctx, args("s", testutil.NewCA(t), a.gossip), nil)
	testutil.WaitFor(t, 10*time.Second, "the stranger's sync calls to be refused", func() bool {
		return syncFailed.MatchString(get(t, "http://"+stranger.http+"/metrics"))
	})
}

// TestReloadOnFileChange: with -reload-interval, a changed envoy ratelimit
// file and a changed limits file are in force without a signal.
func TestReloadOnFileChange(t *testing.T) {
	dir, ldir := t.TempDir(), t.TempDir()
	writeConfig(t, dir, "edge.yaml", "domain: edge\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: day, requests_per_unit: 7}\n")
	limitsYAML := "slas:\n  - id: put\n    match: {methods: [PUT], pathPattern: \"/v1/{org}\"}\n    tenant: {fromPath: org}\n    tiers: [{period: 24h, threshold: %d}]\n"
	writeConfig(t, ldir, "limits.yaml", fmt.Sprintf(limitsYAML, 5))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := start(t, ctx, []string{"-local", "-name", "a", "-config-dir", dir, "-limits", filepath.Join(ldir, "limits.yaml"),
		"-reload-interval", "20ms", "-rls-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-log-level", "error"}, nil)
	client, _ := dialRLS(t, in)
	rlsLimit := func() uint32 {
		r, err := client.ShouldRateLimit(context.Background(), tenantReq("edge", "x"))
		if err != nil {
			t.Fatal(err)
		}
		return r.Statuses[0].CurrentLimit.GetRequestsPerUnit()
	}
	checkLimit := func() int64 {
		resp, err := http.Post("http://"+in.http+"/v1/check", "application/json", strings.NewReader(`{"tenant":"x","endpoint":"/v1/x","method":"PUT"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var cr checkResponse
		if err := json.NewDecoder(resp.Body).Decode(&cr); err != nil {
			t.Fatal(err)
		}
		return cr.Limit
	}
	if l, c := rlsLimit(), checkLimit(); l != 7 || c != 5 {
		t.Fatalf("before: limits %d and %d, want 7 and 5", l, c)
	}
	writeConfig(t, dir, "edge.yaml", "domain: edge\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: day, requests_per_unit: 70}\n")
	writeConfig(t, ldir, "limits.yaml", fmt.Sprintf(limitsYAML, 50))
	testutil.WaitFor(t, 10*time.Second, "both changes in force", func() bool { return rlsLimit() == 70 && checkLimit() == 50 })
}
