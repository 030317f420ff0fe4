package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/peerlimit/peerlimit/httpfilter"
	"github.com/peerlimit/peerlimit/internal/faultnet"
	"github.com/peerlimit/peerlimit/node"
	"github.com/prometheus/client_golang/prometheus"
)

// Headers the node process adds to every API response, for the load
// generator's ground truth.
const (
	// HeaderAt is the node's clock (Unix nanoseconds) just before the
	// rate-limit middleware ran: the window the request was charged to.
	HeaderAt = "X-Demo-At"
	// HeaderNode is the name of the node that served the request.
	HeaderNode = "X-Demo-Node"
)

// APIPattern is the path of the seeds' sample API, served for GET and PUT.
const APIPattern = "/v1/organizations/{orgId}/product/{id}"

// NodeConfig configures one node process (RunNode). Start from
// DefaultNodeConfig.
type NodeConfig struct {
	// Name is this node's name; it must be in Plan. Required.
	Name string
	// Plan is every node's addresses. This node listens on its own and
	// registers everyone's in its partition table. Required.
	Plan Plan
	// Policy is the admission policy. Default node.PolicyLease.
	Policy node.Policy
	// SyncInterval is the node's sync interval. Default 200 ms (see
	// node.Config.SyncInterval for the trade-off).
	SyncInterval time.Duration
	// Limits gives the limits in force: a *httpfilter.Reloader (a file
	// that may change) or a *httpfilter.Limits. Required.
	Limits httpfilter.LimitsSource
	// Partition is the partition spec in force at start ("" = none), so
	// that a node restarted during a partition stays on its side.
	Partition string
	// Logger receives the node's logs. Default: discard.
	Logger *slog.Logger
	// GossipKey, if set, is the cluster's secret key (16, 24 or 32 bytes):
	// it encrypts gossip and authenticates sync (node.Config.Gossip).
	GossipKey []byte
}

// DefaultNodeConfig returns a NodeConfig with the defaults filled in;
// Name, Plan and Limits still need to be set.
func DefaultNodeConfig() NodeConfig {
	return NodeConfig{Policy: node.PolicyLease, SyncInterval: 200 * time.Millisecond}
}

// Validate reports the first invalid field.
func (c NodeConfig) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("demo: NodeConfig.Name: required")
	case len(c.Plan) == 0:
		return errors.New("demo: NodeConfig.Plan: required")
	case c.Limits == nil:
		return errors.New("demo: NodeConfig.Limits: required")
	case c.SyncInterval < time.Millisecond:
		return fmt.Errorf("demo: NodeConfig.SyncInterval: must be >= 1ms, got %v", c.SyncInterval)
	}
	if _, err := c.Plan.Index(c.Name); err != nil {
		return fmt.Errorf("demo: NodeConfig.Name: %w", err)
	}
	if _, err := node.ParsePolicy(string(c.Policy)); err != nil {
		return fmt.Errorf("demo: NodeConfig.Policy: %w", err)
	}
	if _, err := ParsePartition(c.Partition, c.Plan.Names()); err != nil {
		return fmt.Errorf("demo: NodeConfig.Partition: %w", err)
	}
	return nil
}

// NodeState is what a node process reports at GET /admin/state.
type NodeState struct {
	Name           string   `json:"name"`
	PID            int      `json:"pid"`
	StartedUnixMs  int64    `json:"started_unix_ms"`
	Policy         string   `json:"policy"`
	SyncIntervalMs float64  `json:"sync_interval_ms"`
	Members        []string `json:"members"` // alive members as this node sees them
	SyncCalls      uint64   `json:"sync_calls"`
	SyncBytes      uint64   `json:"sync_bytes"`
	Partition      string   `json:"partition"`
	LimitsSource   string   `json:"limits_source"`
	// API responses by class since the process started.
	Served  uint64 `json:"served"`  // 2xx
	Limited uint64 `json:"limited"` // 429
	Other   uint64 `json:"other"`
	// Latency added by the rate-limit middleware: histogram buckets
	// ([index, count] pairs, see Counts.Sparse) and quantiles.
	LatencyHist [][2]uint64 `json:"latency_hist"`
	LatencyUs   Quantiles   `json:"latency_us"`
}

// nodeServer is one node process: the node, its partition table and its
// HTTP handlers.
type nodeServer struct {
	cfg     NodeConfig
	n       *node.Node
	table   *faultnet.Table
	log     *slog.Logger
	started time.Time

	hist    Histogram
	promLat prometheus.Histogram
	served  atomic.Uint64
	limited atomic.Uint64
	other   atomic.Uint64

	partMu    sync.Mutex
	partition Partition

	storeMu sync.Mutex
	store   map[string][]byte // the sample API's products, bounded
}

// maxProducts bounds the sample API's in-memory store.
const maxProducts = 10000

// RunNode runs one node process until ctx ends: it starts a peerlimit node
// gossiping and syncing on the plan's ports (through a faultnet table, so
// that /admin/partition can cut it from chosen peers), serves the sample
// API behind the httpfilter middleware plus /metrics and /admin/*, then
// shuts down gracefully (flush, leave) within a few seconds. ready, if not
// nil, is called once the node serves HTTP.
func RunNode(ctx context.Context, cfg NodeConfig, ready func()) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	s, lis, err := startNode(ctx, cfg)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.routes(), ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	s.log.Info("node serving", "http", "http://"+lis.Addr().String(), "pid", os.Getpid())
	if ready != nil {
		ready()
	}
	select {
	case <-ctx.Done():
	case err = <-served:
		err = fmt.Errorf("demo: node %s: http server: %w", cfg.Name, err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if cerr := s.n.Close(sctx); cerr != nil {
		s.log.Warn("close", "err", cerr)
	}
	s.log.Info("node stopped")
	return err
}

func startNode(ctx context.Context, cfg NodeConfig) (*nodeServer, net.Listener, error) {
	self := cfg.Plan[must(cfg.Plan.Index(cfg.Name))]
	part, _ := ParsePartition(cfg.Partition, cfg.Plan.Names()) // validated
	s := &nodeServer{
		cfg:       cfg,
		table:     faultnet.New(),
		log:       cfg.Logger.With("node", cfg.Name),
		started:   time.Now(),
		partition: part,
		store:     map[string][]byte{},
	}
	for _, a := range cfg.Plan {
		s.table.Register(a.Name, a.Gossip, a.GRPC)
	}
	part.Cut(s.table.Cut)

	lis, err := net.Listen("tcp", self.HTTP)
	if err != nil {
		return nil, nil, fmt.Errorf("demo: node %s: listen http: %w", cfg.Name, err)
	}
	_, gport, _ := net.SplitHostPort(self.Gossip)
	port, _ := strconv.Atoi(gport)
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{"127.0.0.1"},
		BindPort:  port,
		Logger:    slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	})
	if err != nil {
		lis.Close()
		return nil, nil, fmt.Errorf("demo: node %s: gossip port %d: %w", cfg.Name, port, err)
	}
	tr := faultnet.WrapTransport(nt, s.table, self.Gossip)

	nc := node.LocalConfig(cfg.Name)
	nc.Policy = cfg.Policy
	nc.SyncInterval = cfg.SyncInterval
	nc.GRPCAddr = self.GRPC
	nc.Gossip.Transport = tr
	nc.Gossip.AdvertiseAddr, nc.Gossip.AdvertisePort = "127.0.0.1", port
	for _, a := range cfg.Plan {
		if a.Name != cfg.Name {
			nc.Gossip.Seeds = append(nc.Gossip.Seeds, a.Gossip)
		}
	}
	nc.Dialer = faultnet.Dialer(s.table, cfg.Name)
	if len(cfg.GossipKey) > 0 {
		nc.Gossip.SecretKeys = [][]byte{cfg.GossipKey}
	}
	nc.Logger = cfg.Logger
	n, err := node.New(nc)
	if err == nil {
		s.n = n
		err = n.Start(ctx)
	}
	if err != nil {
		lis.Close()
		tr.Shutdown()
		return nil, nil, fmt.Errorf("demo: node %s: %w", cfg.Name, err)
	}
	s.promLat = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "peerlimit",
		Subsystem: "demo",
		Name:      "filter_added_seconds",
		Help:      "Time spent in the rate-limit middleware per API request (the handler's own time excluded).",
		Buckets:   prometheus.ExponentialBuckets(1e-6, 2, 16), // 1 us .. 33 ms
	})
	n.Registry().MustRegister(s.promLat)
	return s, lis, nil
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// routes builds the node's HTTP handler.
func (s *nodeServer) routes() http.Handler {
	filter, err := httpfilter.New(s.n, s.cfg.Limits, httpfilter.WithRegistry(s.n.Registry()), httpfilter.WithLogger(s.log))
	if err != nil {
		// The limits were parsed already; only a tenant func could fail.
		panic(fmt.Sprintf("demo: httpfilter: %v", err))
	}
	api := s.timed(filter.Middleware, http.HandlerFunc(s.product))
	mux := http.NewServeMux()
	mux.Handle("GET "+APIPattern, api)
	mux.Handle("PUT "+APIPattern, api)
	mux.Handle("GET /metrics", s.n.MetricsHandler())
	mux.HandleFunc("GET /admin/state", s.handleState)
	mux.HandleFunc("POST /admin/partition", s.handlePartition)
	mux.HandleFunc("POST /admin/heal", s.handleHeal)
	return mux
}

type nextTimeKey struct{}

// timed wraps handler behind mw and records, per request, the time spent
// in mw: the whole request's time minus the time spent in handler.
func (s *nodeServer) timed(mw func(http.Handler) http.Handler, handler http.Handler) http.Handler {
	inner := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		handler.ServeHTTP(w, r)
		if d, ok := r.Context().Value(nextTimeKey{}).(*time.Duration); ok {
			*d = time.Since(start)
		}
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		h := w.Header()
		h[HeaderAt] = []string{strconv.FormatInt(at.UnixNano(), 10)}
		h[HeaderNode] = []string{s.cfg.Name}
		var inNext time.Duration
		r = r.WithContext(context.WithValue(r.Context(), nextTimeKey{}, &inNext))
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		start := time.Now()
		inner.ServeHTTP(sw, r)
		added := time.Since(start) - inNext
		s.hist.Record(added)
		s.promLat.Observe(added.Seconds())
		switch {
		case sw.code >= 200 && sw.code < 300:
			s.served.Add(1)
		case sw.code == http.StatusTooManyRequests:
			s.limited.Add(1)
		default:
			s.other.Add(1)
		}
	})
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code    int
	written bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.written {
		w.code, w.written = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.written = true
	return w.ResponseWriter.Write(b)
}

// product is the seeds' sample API: GET returns a product, PUT stores one.
func (s *nodeServer) product(w http.ResponseWriter, r *http.Request) {
	org, id := r.PathValue("orgId"), r.PathValue("id")
	key := org + "/" + id
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPut {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		s.storeMu.Lock()
		if len(s.store) >= maxProducts {
			for k := range s.store { // evict one, arbitrary
				delete(s.store, k)
				break
			}
		}
		s.store[key] = body
		s.storeMu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"organization": org, "id": id, "stored": len(body), "node": s.cfg.Name})
		return
	}
	s.storeMu.Lock()
	body, ok := s.store[key]
	s.storeMu.Unlock()
	resp := map[string]any{"organization": org, "id": id, "name": "product " + id, "node": s.cfg.Name}
	if ok {
		resp["stored"] = json.RawMessage(validJSONOr(body))
	}
	_ = json.NewEncoder(w).Encode(resp)
}

func validJSONOr(b []byte) []byte {
	if json.Valid(b) {
		return b
	}
	q, _ := json.Marshal(string(b))
	return q
}

func (s *nodeServer) state() NodeState {
	calls, bytes := s.n.SyncStats()
	lat := s.hist.Snapshot()
	s.partMu.Lock()
	part := s.partition.String()
	s.partMu.Unlock()
	return NodeState{
		Name:           s.cfg.Name,
		PID:            os.Getpid(),
		StartedUnixMs:  s.started.UnixMilli(),
		Policy:         string(s.n.Engine().Policy()),
		SyncIntervalMs: float64(s.cfg.SyncInterval) / float64(time.Millisecond),
		Members:        s.n.Engine().Members(),
		SyncCalls:      calls,
		SyncBytes:      bytes,
		Partition:      part,
		LimitsSource:   s.cfg.Limits.Limits().Source,
		Served:         s.served.Load(),
		Limited:        s.limited.Load(),
		Other:          s.other.Load(),
		LatencyHist:    lat.Sparse(),
		LatencyUs:      lat.Quantiles(),
	}
}

func (s *nodeServer) handleState(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.state())
}

// handlePartition applies the partition spec in the body (or the form
// value "groups"): this node drops gossip and gRPC traffic to every node
// outside its group. The parent posts the same spec to every node, so that
// both ends of each cut pair drop traffic.
func (s *nodeServer) handlePartition(w http.ResponseWriter, r *http.Request) {
	spec := r.FormValue("groups")
	if spec == "" {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		spec = string(b)
	}
	p, err := ParsePartition(spec, s.cfg.Plan.Names())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	s.setPartition(p)
	writeJSON(w, http.StatusOK, s.state())
}

func (s *nodeServer) handleHeal(w http.ResponseWriter, r *http.Request) {
	s.setPartition(nil)
	writeJSON(w, http.StatusOK, s.state())
}

func (s *nodeServer) setPartition(p Partition) {
	s.partMu.Lock()
	defer s.partMu.Unlock()
	s.table.Heal()
	p.Cut(s.table.Cut)
	s.partition = p
	s.log.Info("partition", "groups", p.String())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
