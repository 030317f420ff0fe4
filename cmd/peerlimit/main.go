// Command peerlimit runs a peerlimit node as a rate limit server: it
// answers Envoy's rate limit service API
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) from the
// node's memory, with limits in envoyproxy/ratelimit's configuration
// format, and its instances share every limit with no store.
//
//	peerlimit -config-dir /etc/ratelimit/config -seeds ratelimit-0.ratelimit:7946
//
// Every flag may also be set by an environment variable: -config-dir by
// PEERLIMIT_CONFIG_DIR, -gossip-key by PEERLIMIT_GOSSIP_KEY, and so on (the
// flag's name in upper case, dashes as underscores). A flag given on the
// command line wins. SIGHUP reloads the configuration directory; SIGINT
// and SIGTERM leave the cluster gracefully.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/peerlimit/peerlimit/httpfilter"
	"github.com/peerlimit/peerlimit/node"
	"github.com/peerlimit/peerlimit/rls"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	// Here, not in run: the collector's settings are the process's, and
	// run also runs inside tests.
	gc, err := gcDefaults(os.Getenv, cgroupRoot)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerlimit: no soft memory limit set:", err)
	}
	gc.apply()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, hup, os.Stdout, os.Stderr))
}

// streamWorkers is the number of goroutines that serve gRPC calls of the
// rate limit service, more than the callers a server usually has at once.
const streamWorkers = 64

// maxCheckBytes bounds the body of a JSON check.
const maxCheckBytes = 1 << 20

// jsonCheck serves envoy ratelimit's /json endpoint: a RateLimitRequest in
// proto3 JSON in, the RateLimitResponse in proto3 JSON out, with 200 when
// the request may pass and 429 when a limit is exceeded (400 for a bad
// request).
func jsonCheck(srv *rls.Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCheckBytes))
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		var req rlsv3.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			http.Error(w, "peerlimit: not a RateLimitRequest in JSON: "+err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := srv.ShouldRateLimit(r.Context(), &req)
		if err != nil {
			code := http.StatusInternalServerError
			if status.Code(err) == codes.InvalidArgument {
				code = http.StatusBadRequest
			}
			http.Error(w, status.Convert(err).Message(), code)
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for _, h := range resp.GetResponseHeadersToAdd() {
			w.Header().Set(h.GetKey(), h.GetValue())
		}
		w.Header().Set("Content-Type", "application/json")
		if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		w.Write(out)
	})
}

// peerTLS builds mutual TLS for the peer plane from the -peer-tls-* files:
// each node presents its certificate and accepts only peers whose
// certificate the CA signed. Peers are dialled by address, so the
// certificates need the nodes' IP addresses (or names) as SANs. All three
// files or none.
func peerTLS(o *options) (server, client *tls.Config, err error) {
	if o.peerCert == "" && o.peerKey == "" && o.peerCA == "" {
		return nil, nil, nil
	}
	if o.peerCert == "" || o.peerKey == "" || o.peerCA == "" {
		return nil, nil, errors.New("-peer-tls-cert, -peer-tls-key and -peer-tls-ca go together: set all three or none")
	}
	cert, err := tls.LoadX509KeyPair(o.peerCert, o.peerKey)
	if err != nil {
		return nil, nil, fmt.Errorf("-peer-tls-cert, -peer-tls-key: %w", err)
	}
	pem, err := os.ReadFile(o.peerCA)
	if err != nil {
		return nil, nil, fmt.Errorf("-peer-tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("-peer-tls-ca: no PEM certificate in %s", o.peerCA)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}
	return server, client, nil
}

// watchDir calls reload every interval in which a file of dir appeared,
// went, or changed size or time, until ctx ends.
func watchDir(ctx context.Context, dir string, interval time.Duration, reload func()) {
	last := dirStamp(dir)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if st := dirStamp(dir); st != last {
			last = st
			reload()
		}
	}
}

// dirStamp is the names, sizes and modification times of a directory's
// files: it changes when one is added, removed or rewritten.
func dirStamp(dir string) string {
	es, err := os.ReadDir(dir)
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	for _, e := range es {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s %d %d\n", e.Name(), fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

// loadDir reads envoy ratelimit's directory: nil when none is set.
func loadDir(dir string) (*rls.Config, error) {
	if dir == "" {
		return nil, nil
	}
	return rls.LoadDir(dir)
}

// options are the command's settings.
type options struct {
	name, configDir, limitsFile, rlsAddr, httpAddr, addr, seeds, gossipKey, logLevel, policy, label string
	peerCert, peerKey, peerCA, partition                                                            string
	gossipPort, peerPort, maxEntries, ownerWindows                                                  int
	syncInterval, joinTimeout, reloadInterval, quorumTerm                                           time.Duration
	safeShare                                                                                       float64
	local, ignoreRefusals                                                                           bool
}

func parse(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	o := &options{}
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("peerlimit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.name, "name", host, "member name, unique in the cluster")
	fs.StringVar(&o.configDir, "config-dir", "", "directory of envoy ratelimit configuration files (*.yaml, *.yml), for the rate limit service")
	fs.StringVar(&o.limitsFile, "limits", "", "the HTTP middleware's limits file (YAML), for POST /v1/check")
	fs.StringVar(&o.rlsAddr, "rls-addr", ":8081", "gRPC address of the rate limit service (with health and reflection)")
	fs.StringVar(&o.httpAddr, "http-addr", ":8080", "HTTP address of /metrics and /healthz")
	fs.StringVar(&o.addr, "addr", "", "address to bind the peer ports to and publish (default: every interface, published at the host's private address)")
	fs.IntVar(&o.gossipPort, "gossip-port", 7946, "gossip port (UDP and TCP)")
	fs.IntVar(&o.peerPort, "peer-port", node.DefaultGRPCPort, "peer sync gRPC port")
	fs.StringVar(&o.seeds, "seeds", "", "comma-separated gossip addresses (host:port) of members to join")
	fs.StringVar(&o.gossipKey, "gossip-key", "", "base64 secret key (16, 24 or 32 bytes): encrypts gossip and authenticates sync")
	fs.StringVar(&o.peerCert, "peer-tls-cert", "", "PEM certificate of this node for mutual TLS between peers (with -peer-tls-key and -peer-tls-ca)")
	fs.StringVar(&o.peerKey, "peer-tls-key", "", "PEM private key of -peer-tls-cert")
	fs.StringVar(&o.peerCA, "peer-tls-ca", "", "PEM certificates of the CA that signs every peer's certificate: peers without one are refused")
	fs.DurationVar(&o.reloadInterval, "reload-interval", 2*time.Second, "how often the configuration files are checked for changes (0: reload on SIGHUP only)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.policy, "policy", string(node.PolicyLease), "admission policy: lease, optimistic or static")
	fs.StringVar(&o.partition, "partition", string(node.PartitionReserve), "how a lost member is told from a partition (lease): reserve (its share kept for 3 windows, at least 10 s) or majority (a member that reaches no majority admits only -safe-share after -quorum-term)")
	fs.DurationVar(&o.quorumTerm, "quorum-term", 30*time.Second, "majority rule: how long a member cut off from the majority keeps its lease, and the majority waits before taking its share back")
	fs.BoolVar(&o.ignoreRefusals, "ignore-refusals", false, "do not take a peer that refuses connections for stopped (set where firewalls between the nodes reject rather than drop packets)")
	fs.Float64Var(&o.safeShare, "safe-share", 0, "majority rule: the fraction of its static share a member cut off from the majority admits after the term (0: none)")
	fs.DurationVar(&o.syncInterval, "sync-interval", 200*time.Millisecond, "how often each instance syncs with the owners of its keys")
	fs.IntVar(&o.maxEntries, "max-entries", 100_000, "counter series held per instance")
	fs.IntVar(&o.ownerWindows, "owner-windows", 200_000, "windows this instance aggregates as the owner of their series (a share of the cluster's active series, one per tier and window): reports of new windows past it are answered without aggregation, so size it for the cluster's series over the members, with room")
	fs.StringVar(&o.label, "gossip-label", "", "cluster label: nodes with another label never join")
	fs.DurationVar(&o.joinTimeout, "join-timeout", 0, "fail at start if no seed answers within this (0: run alone and keep trying)")
	fs.BoolVar(&o.local, "local", false, "run on 127.0.0.1 (peers on OS-chosen ports, -rls-addr and -http-addr on 127.0.0.1 unless they name a host) with the fast local gossip profile (tests, trying it out)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage of peerlimit:")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), gcUsage)
	}
	set := map[string]bool{}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := "PEERLIMIT_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(env); v != "" && !set[f.Name] {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", env, v, err))
			}
		}
	})
	if o.configDir == "" && o.limitsFile == "" {
		errs = append(errs, errors.New("-config-dir (or PEERLIMIT_CONFIG_DIR), -limits (or PEERLIMIT_LIMITS) or both are required"))
	}
	return o, errors.Join(errs...)
}

func run(ctx context.Context, args []string, getenv func(string) string, hup <-chan os.Signal, stdout, stderr io.Writer) int {
	o, err := parse(args, getenv, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "peerlimit:", err)
		}
		return 2
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.logLevel)); err != nil {
		fmt.Fprintln(stderr, "peerlimit: -log-level:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	log.Info("garbage collector", gcState()...)
	cfg, err := loadDir(o.configDir)
	if err != nil {
		fmt.Fprintln(stderr, "peerlimit:", err)
		return 1
	}
	// The middleware's limits file, held and reloaded by the middleware's
	// own Reloader: every -reload-interval if it changed, and on SIGHUP.
	chk := &checker{}
	if o.limitsFile != "" {
		if chk.limits, err = httpfilter.NewReloader(httpfilter.ReloaderConfig{Path: o.limitsFile, Interval: o.reloadInterval, Logger: log}); err != nil {
			fmt.Fprintln(stderr, "peerlimit:", err)
			return 1
		}
	}

	nc := node.DefaultConfig()
	if o.local {
		nc = node.LocalConfig(o.name)
		// -local serves on 127.0.0.1 too, unless told a host.
		for _, a := range []*string{&o.rlsAddr, &o.httpAddr} {
			if strings.HasPrefix(*a, ":") {
				*a = "127.0.0.1" + *a
			}
		}
	} else {
		nc.Addr = o.addr
		nc.Gossip.BindPort = o.gossipPort
		nc.GRPCAddr = fmt.Sprintf(":%d", o.peerPort)
	}
	nc.Name = o.name
	nc.Logger = log
	nc.Policy = node.Policy(o.policy)
	nc.SyncInterval = o.syncInterval
	nc.Partition, nc.QuorumTerm, nc.SafeShare = node.Partition(o.partition), o.quorumTerm, o.safeShare
	nc.IgnoreRefusals = o.ignoreRefusals
	nc.Table.MaxEntries = o.maxEntries
	nc.OwnerWindows = o.ownerWindows
	nc.Gossip.Label = o.label
	nc.Gossip.JoinTimeout = o.joinTimeout
	if o.seeds != "" {
		nc.Gossip.Seeds = strings.Split(o.seeds, ",")
	}
	if o.gossipKey != "" {
		key, err := base64.StdEncoding.DecodeString(o.gossipKey)
		if err != nil {
			fmt.Fprintln(stderr, "peerlimit: -gossip-key: not base64:", err)
			return 2
		}
		nc.Gossip.SecretKeys = [][]byte{key}
	}
	if nc.ServerTLS, nc.ClientTLS, err = peerTLS(o); err != nil {
		fmt.Fprintln(stderr, "peerlimit:", err)
		return 2
	}
	n, err := node.New(nc)
	if err != nil {
		fmt.Fprintln(stderr, "peerlimit:", err)
		return 2
	}
	if err := n.Start(ctx); err != nil {
		fmt.Fprintln(stderr, "peerlimit:", err)
		return 1
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), nc.CloseTimeout)
		defer cancel()
		_ = n.Close(cctx)
	}()

	srv := rls.NewServer(n, cfg)
	// Long-lived stream workers: a goroutine started per call grows its
	// stack afresh every time (runtime.newstack), a worker keeps its own.
	// Measured with cmd/rlsbench (6 pairs): 17.6 instead of 21.9 µs of
	// server CPU per call. When every worker is busy (calls waiting for a
	// lease, say), a call gets its own goroutine as before, so a slow call
	// holds none up. (Experimental in grpc-go.)
	gs := grpc.NewServer(grpc.NumStreamWorkers(streamWorkers))
	rlsv3.RegisterRateLimitServiceServer(gs, srv)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	rlsLis, err := net.Listen("tcp", o.rlsAddr)
	if err != nil {
		fmt.Fprintln(stderr, "peerlimit: -rls-addr:", err)
		return 1
	}
	go func() { _ = gs.Serve(rlsLis) }()
	defer gs.GracefulStop()

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", n.MetricsHandler())
	healthz := func(w http.ResponseWriter, _ *http.Request) {
		if err := n.Health(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	}
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /healthcheck", healthz) // envoy ratelimit's name
	mux.Handle("POST /json", jsonCheck(srv))    // envoy ratelimit's endpoint
	chk.n = n
	mux.Handle("POST /v1/check", chk)
	reloadDir := func() {
		c, err := rls.LoadDir(o.configDir)
		if err != nil {
			log.Error("reload refused; the previous configuration stays", "err", err)
			return
		}
		srv.Set(c)
		log.Info("configuration reloaded", "domains", c.Domains())
	}
	if o.reloadInterval > 0 {
		if chk.limits != nil {
			_ = chk.limits.Start(ctx) // started once: never ErrStarted
		}
		if o.configDir != "" {
			go watchDir(ctx, o.configDir, o.reloadInterval, reloadDir)
		}
	}
	httpLis, err := net.Listen("tcp", o.httpAddr)
	if err != nil {
		fmt.Fprintln(stderr, "peerlimit: -http-addr:", err)
		return 1
	}
	hsrv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hsrv.Serve(httpLis) }()
	defer hsrv.Close()

	// Health follows the node's: NOT_SERVING while it reports a problem.
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			st := healthpb.HealthCheckResponse_SERVING
			if n.Health() != nil {
				st = healthpb.HealthCheckResponse_NOT_SERVING
			}
			hs.SetServingStatus("", st)
			hs.SetServingStatus(rlsv3.RateLimitService_ServiceDesc.ServiceName, st)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()

	fmt.Fprintf(stdout, "peerlimit %s: rls %s http %s gossip %s domains %s\n", o.name, rlsLis.Addr(), httpLis.Addr(), n.GossipAddr(), strings.Join(cfg.Domains(), ","))
	for {
		select {
		case <-ctx.Done():
			log.Info("leaving")
			return 0
		case <-hup:
			if o.configDir != "" {
				reloadDir()
			}
			if chk.limits != nil {
				_ = chk.limits.Reload() // the Reloader logs the outcome
			}
		}
	}
}
