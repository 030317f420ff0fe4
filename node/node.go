package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/gossip"
	"github.com/peerlimit/peerlimit/internal/logevery"
	"github.com/peerlimit/peerlimit/peerpb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Lifecycle states of a Node.
const (
	stateNew int32 = iota
	stateRunning
	stateClosed
)

// Node is one instance of a peerlimit cluster, embedded in a service: it
// decides requests from local memory and, in the background, gossips
// membership and syncs counts with the owners of its keys.
//
// Lifecycle: New (starts nothing), Start, then Close. A Node decides
// requests only between Start and Close: before, Take returns
// ErrNotStarted, after (or after a failed Start), ErrClosed. All methods
// are safe for concurrent use. The zero value is not usable.
type Node struct {
	cfg    Config
	log    *slog.Logger
	engine *Engine
	m      *metrics
	gossip *gossip.Gossip
	auth   *peerAuth
	// running is gossip once started, for the gRPC server's goroutines.
	running atomic.Pointer[gossip.Gossip]

	// syncHook, if set, runs first in every inbound Sync (tests: an owner
	// that holds a call unanswered).
	syncHook atomic.Pointer[func(context.Context, *peerpb.SyncRequest)]

	grpcServer *grpc.Server
	health     *health.Server
	lis        net.Listener

	peersMu sync.Mutex
	peers   map[string]*peer // by member name

	decisions atomic.Uint64 // for sampling the latency metric
	roundMu   sync.Mutex
	roundDone chan struct{} // closed when the running (or next) sync round ends
	// callWaiters lists, by owner, the waiting requests to wake when a
	// call to that owner ends (see nextCall); a round's end wakes them all
	// through roundDone, and forgets the lists.
	callWaiters map[string][]*callWaiter
	storeDown   atomic.Bool
	syncCalls   atomic.Uint64
	syncBytes   atomic.Uint64

	state   atomic.Int32 // stateNew, stateRunning, stateClosed
	stop    chan struct{}
	kick    chan struct{} // a sync is wanted now (one slot: kicks coalesce)
	loopsWG sync.WaitGroup
	lifeMu  sync.Mutex // serialises Start, Close and Kill

	warn    *logevery.Limiter
	failMu  sync.Mutex
	failing map[string]failStreak // by owner: sync calls failing since

	healthMu     sync.Mutex // serialises checkHealth
	lastProblems string     // problem labels at the last checkHealth
}

type peer struct {
	addr   string
	conn   *grpc.ClientConn
	client peerpb.PeerClient
}

// New validates cfg and builds a node. It opens no socket and starts no
// goroutine. It registers the node's metrics with Config.Registry, and
// fails if that registry holds another node's already.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ownRegistry := registerer(cfg.Registry) == nil
	cfg = cfg.withDefaults()
	central := ""
	if cfg.Store != nil {
		central = "store"
	}
	eng, err := NewEngine(EngineConfig{
		Name:           cfg.Name,
		Incarnation:    uint64(cfg.Clock().UnixNano()),
		Policy:         cfg.Policy,
		Table:          cfg.Table,
		Ring:           cfg.Ring,
		MaxBatch:       cfg.MaxBatch,
		MaxPeriod:      cfg.MaxPeriod,
		OwnerWindows:   cfg.OwnerWindows,
		ReserveWindows: cfg.ReserveWindows,
		ReserveMin:     cfg.ReserveMin,
		Partition:      cfg.Partition,
		SafeShare:      cfg.SafeShare,
		QuorumTerm:     cfg.QuorumTerm,
		QuorumMemory:   cfg.QuorumMemory,
		SyncInterval:   cfg.SyncInterval,
		CallTimeout:    cfg.CallTimeout,
		Central:        central,
	})
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:    cfg,
		log:    cfg.Logger.With("node", cfg.Name),
		engine: eng,
		peers:  map[string]*peer{},
		stop:   make(chan struct{}),
		kick:   make(chan struct{}, 1),

		roundDone:   make(chan struct{}),
		callWaiters: map[string][]*callWaiter{},
		warn:        logevery.New(warnInterval),
		failing:     map[string]failStreak{},
	}
	n.auth = newPeerAuth(n.authKeys)
	if ownRegistry {
		if err := RegisterRuntimeMetrics(cfg.Registry); err != nil {
			return nil, err
		}
	}
	if n.m, err = newMetrics(cfg.Registry, n); err != nil {
		return nil, err
	}
	return n, nil
}

// Engine returns the node's sync engine (its counters, ring and owner).
func (n *Node) Engine() *Engine { return n.engine }

// Name returns the node's member name.
func (n *Node) Name() string { return n.cfg.Name }

// Registry returns the *prometheus.Registry the node's metrics are
// registered with: the one it created (Config.Registry nil), or
// Config.Registry if that is one. It is nil when Config.Registry is another
// prometheus.Registerer: use Registerer and Gatherer then.
func (n *Node) Registry() *prometheus.Registry {
	r, _ := n.cfg.Registry.(*prometheus.Registry)
	return r
}

// Registerer returns what the node's metrics are registered with
// (Config.Registry, or the registry the node created), for other series
// to join them (httpfilter.WithRegistry).
func (n *Node) Registerer() prometheus.Registerer { return n.cfg.Registry }

// Gatherer returns what MetricsHandler serves.
func (n *Node) Gatherer() prometheus.Gatherer { return n.cfg.Gatherer }

// MetricsHandler serves the node's metrics in the Prometheus format; mount
// it at /metrics. It serves Config.Gatherer: by default the node's own
// registry, with the peerlimit_*, go_* and process_* series.
func (n *Node) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(n.cfg.Gatherer, promhttp.HandlerOpts{Registry: n.cfg.Registry})
}

// Members returns a copy of the node's current view of the cluster, itself
// included, sorted by name: each member's name, gossip address, published
// gRPC address and protocol version. Members speaking another protocol
// version are listed but own no keys. Nil before Start.
func (n *Node) Members() []gossip.Member {
	if n.state.Load() == stateNew || n.gossip == nil { // nil: Start failed early
		return nil
	}
	return n.gossip.Members()
}

// GRPCAddr returns the address the peer server listens on (after Start):
// the listener's, such as "[::]:7947" on every interface. The address
// peers dial is in Members.
func (n *Node) GRPCAddr() string {
	if n.lis == nil {
		return ""
	}
	return n.lis.Addr().String()
}

// GossipAddr returns the gossip address (after Start), for seeds.
func (n *Node) GossipAddr() string {
	if n.gossip == nil {
		return ""
	}
	return n.gossip.LocalMember().Addr
}

// Gossip returns the node's gossip member (after Start), for key rotation.
func (n *Node) Gossip() *gossip.Gossip { return n.gossip }

// Take decides one request of the given cost against all its limits, from
// local memory: see counters.Table.Take. It makes no network call. Under
// the lease policy, a request this instance cannot admit yet although the
// limit has room (the decision is pending: it holds no grant for the key
// yet, or the owner said budget is spare) waits for the next answers of the
// sync, which it asks for at once, at most Config.PendingWait and never
// past ctx; it is then decided again. A pending decision that the wait does
// not settle is a denial whose RetryAfter is one sync interval.
//
// Before Start it returns ErrNotStarted, after Close (or Kill, or a failed
// Start) ErrClosed, and an empty, denying Decision: a node that is not in
// its cluster cannot decide for it.
func (n *Node) Take(ctx context.Context, limits []counters.Limit, cost int64) (counters.Decision, error) {
	switch n.state.Load() {
	case stateNew:
		return counters.Decision{}, ErrNotStarted
	case stateClosed:
		return counters.Decision{}, ErrClosed
	}
	sample := n.decisions.Add(1)%64 == 0
	var start time.Time
	if sample {
		start = time.Now()
	}
	d, err := n.engine.Take(n.cfg.Clock(), limits, cost)
	if err != nil {
		return d, err
	}
	if d.Pending {
		d, err = n.waitPending(ctx, limits, cost)
		if err != nil {
			return d, err
		}
	}
	if d.Allowed {
		n.m.allowed.Inc()
	} else {
		n.m.denied.Inc()
	}
	if sample {
		n.m.decisionSeconds.Observe(time.Since(start).Seconds())
	}
	return d, nil
}

// waitPending waits for sync calls to end, asking for a round at once,
// and decides the request again after each, until it is no longer pending
// or PendingWait has passed. After each call, not each round: the answer
// of the series' owner may be in while a call to another member is slow
// or lost, which would hold the request until that call times out.
func (n *Node) waitPending(ctx context.Context, limits []counters.Limit, cost int64) (counters.Decision, error) {
	n.m.pending.Inc()
	start := time.Now()
	defer func() { n.m.pendingSeconds.Observe(time.Since(start).Seconds()) }()
	var timeout <-chan time.Time
	if n.cfg.PendingWait > 0 && n.state.Load() == stateRunning {
		// Waiting: the request is decided again after each sync round.
		t := time.NewTimer(n.cfg.PendingWait)
		defer t.Stop()
		timeout = t.C
	}
	var owners []string
	var every bool
	for timeout != nil {
		// Woken when an owner of its series answers, or the round ends:
		// another owner's answer brings it nothing, unless the time alone
		// may change its decision (Engine.WakeOn).
		owners, every = n.engine.WakeOn(limits, owners[:0])
		call, round := n.nextCall(owners, every)
		n.kickSync()
		select {
		case <-call:
		case <-round:
		case <-timeout:
			timeout = nil
		case <-ctx.Done():
			timeout = nil
		}
		d, err := n.engine.TakeAgain(n.cfg.Clock(), limits, cost)
		if err != nil || !d.Pending {
			if err == nil && d.Allowed {
				n.m.pendingAdmitted.Inc()
			}
			return d, err
		}
	}
	d, err := n.engine.TakeAgain(n.cfg.Clock(), limits, cost)
	if err == nil && d.Pending {
		// Budget may still come with the next answers: say so, and ask.
		n.kickSync()
		d.Pending, d.RetryAfter = false, n.cfg.SyncInterval
	}
	return d, err
}

// nextRound returns a channel closed when a sync round ends.
func (n *Node) nextRound() <-chan struct{} {
	n.roundMu.Lock()
	defer n.roundMu.Unlock()
	return n.roundDone
}

// callWaiter is a waiting request's wake-up by a call's end: ch is closed
// at the first end of a call to one of the owners it waits for (or of
// any call).
type callWaiter struct {
	ch    chan struct{}
	woken bool
}

// nextCall returns a channel closed when a sync call to one of owners
// ends (every: any call), and one closed when the sync round ends (which
// may have had no call).
func (n *Node) nextCall(owners []string, every bool) (call, round <-chan struct{}) {
	n.roundMu.Lock()
	defer n.roundMu.Unlock()
	if every {
		owners = anyCallOnly
	}
	if len(owners) == 0 {
		return nil, n.roundDone
	}
	w := &callWaiter{ch: make(chan struct{})}
	for _, o := range owners {
		n.callWaiters[o] = append(n.callWaiters[o], w)
	}
	return w.ch, n.roundDone
}

// anyCall lists in Node.callWaiters the requests woken at any call's end:
// no member is named "".
const anyCall = ""

// anyCallOnly is the owners of a waiter woken at any call's end.
var anyCallOnly = []string{anyCall}

// endRound wakes whoever waits for the end of a sync round or call.
func (n *Node) endRound() {
	n.roundMu.Lock()
	renew(&n.roundDone)
	clear(n.callWaiters) // woken by roundDone
	n.roundMu.Unlock()
}

// endCall wakes whoever waits for the end of a sync call to owner, or of
// any call.
func (n *Node) endCall(owner string) {
	n.roundMu.Lock()
	for _, o := range [2]string{owner, anyCall} {
		for _, w := range n.callWaiters[o] {
			if !w.woken {
				w.woken = true
				close(w.ch)
			}
		}
		delete(n.callWaiters, o)
	}
	n.roundMu.Unlock()
}

// renew closes *ch, waking its waiters, and puts a new one in its place.
func renew(ch *chan struct{}) {
	close(*ch)
	*ch = make(chan struct{})
}

// kickSync asks the sync loop to run a round now: a channel send that never
// blocks (kicks coalesce). A kicked round reports only the series with
// requests waiting (Engine.PrepareAsking), and the loop runs kicked rounds
// at least a hundredth of the interval apart (2 ms at the default 200 ms),
// so that a waiting request gets its answer within a round trip or so and
// a stream of them cannot make the loop spin.
func (n *Node) kickSync() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// Allow is Take with a cost of 1.
func (n *Node) Allow(ctx context.Context, limits ...counters.Limit) (counters.Decision, error) {
	return n.Take(ctx, limits, 1)
}

// Wait blocks until a request of cost 1 is admitted by every limit, or ctx
// ends (then it returns ctx's error and charges nothing). This is the
// client-side use: a caller that paces itself instead of being refused.
func (n *Node) Wait(ctx context.Context, limits ...counters.Limit) error {
	for {
		d, err := n.Take(ctx, limits, 1)
		if err != nil || d.Allowed {
			return err
		}
		// Retry when the window allows, or sooner if a sync may bring a
		// bigger lease.
		wait := min(max(d.RetryAfter, time.Millisecond), n.cfg.SyncInterval)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Start listens for peers, joins the cluster and starts the sync loop.
//
// ctx bounds Start only — listening, the initial join and, with
// Config.Gossip.JoinTimeout, the wait for a seed. Cancelling it after Start
// has returned does nothing: the node runs until Close (or Kill).
//
// Start refuses, with an error that says what to change, what would make a
// cluster that only looks healthy: another live node with this node's name
// met while joining (ErrNameConflict), a loopback gRPC address beside a
// routable gossip address (ErrUnreachableGRPCAddr), and, with
// Config.Gossip.JoinTimeout, seeds of which none answers (ErrNoSeed). A
// Node whose Start failed is closed; build a new one.
func (n *Node) Start(ctx context.Context) error {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	switch n.state.Load() {
	case stateRunning:
		return errors.New("node: already started")
	case stateClosed:
		return ErrClosed
	}
	if err := n.start(ctx); err != nil {
		n.state.Store(stateClosed)
		return err
	}
	n.state.Store(stateRunning)
	n.checkHealth()
	n.loopsWG.Add(1)
	go n.syncLoop()
	n.log.Info("node started", "sync_authenticated", n.auth.on(), "grpc", n.gossip.LocalMember().GRPCAddr,
		"gossip", n.gossip.LocalMember().Addr, "grpc_listen", n.lis.Addr().String(), "policy", n.cfg.Policy)
	if !n.auth.on() && n.cfg.ServerTLS == nil && n.cfg.Store == nil {
		n.log.Warn("peer plane open: no gossip secret key (Config.Gossip.SecretKeys) and no TLS (Config.ServerTLS): "+
			"anyone who reaches the gossip and gRPC ports can join, read the membership and report counts in a member's name; "+
			"set a gossip key (it also authenticates sync) on any network that is not fully trusted",
			"gossip", n.gossip.LocalMember().Addr, "grpc", n.lis.Addr().String())
	}
	return nil
}

// start is Start's work: the gRPC server, then gossip. On error it leaves
// nothing running.
func (n *Node) start(ctx context.Context) error {
	lis := n.cfg.GRPCListener
	if lis == nil {
		addr := n.cfg.listenAddr()
		var err error
		lis, err = net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("node: listen for gRPC on %s (Config.GRPCAddr %q): %w", addr, n.cfg.GRPCAddr, err)
		}
	}
	n.lis = lis
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(n.cfg.MaxMessageBytes),
		grpc.MaxSendMsgSize(n.cfg.MaxMessageBytes),
		// Clients ping every 10 s; allow that (MinTime <= client Time).
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
	if n.cfg.ServerTLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(n.cfg.ServerTLS)))
	}
	n.grpcServer = grpc.NewServer(opts...)
	peerpb.RegisterPeerServer(n.grpcServer, &server{n: n})
	n.health = health.NewServer()
	healthpb.RegisterHealthServer(n.grpcServer, n.health)
	go func() {
		if err := n.grpcServer.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			n.log.Error("grpc server stopped", "err", err)
		}
	}()

	published := n.cfg.GRPCAdvertiseAddr
	if published == "" {
		published = lis.Addr().String() // an unspecified host takes the gossip address
	}
	gc := n.cfg.gossipConfig(published)
	gc.OnMembers = n.onMembers
	gc.OnConflict = n.onConflict
	g, err := gossip.New(gc)
	if err != nil {
		n.grpcServer.Stop()
		return fmt.Errorf("node: %w", err)
	}
	n.gossip = g
	n.running.Store(g)
	if err := g.Start(ctx); err != nil {
		n.grpcServer.Stop()
		switch {
		case errors.Is(err, gossip.ErrUnreachableGRPCAddr):
			return fmt.Errorf("node: %w; in node.Config: leave GRPCAddr's host empty (it then listens on Addr), or set GRPCAdvertiseAddr", err)
		case errors.Is(err, gossip.ErrNoAdvertiseAddr):
			return fmt.Errorf("node: %w; in node.Config: set Addr to the address other hosts reach this one at", err)
		}
		return fmt.Errorf("node: %w", err)
	}
	return nil
}

// onMembers is gossip's membership callback (serial, outside memberlist's
// lock): it installs the new view and drops connections to departed peers.
func (n *Node) onMembers(ms []gossip.Member) {
	names := make([]string, 0, len(ms))
	addrs := make(map[string]string, len(ms))
	for _, m := range ms {
		if m.Proto != ProtoVersion {
			n.log.Warn("ignoring member with another protocol version", "member", m.Name, "proto", m.Proto)
			continue
		}
		names = append(names, m.Name)
		addrs[m.Name] = m.GRPCAddr
	}
	n.engine.SetMembers(n.cfg.Clock(), names)
	n.m.members.Set(float64(len(names)))
	n.forgetFailures(addrs)
	n.peersMu.Lock()
	for name, p := range n.peers {
		if addrs[name] != p.addr { // gone, or moved
			p.conn.Close()
			delete(n.peers, name)
		}
	}
	n.peersMu.Unlock()
	n.log.Debug("membership", "members", names)
}

// peer returns the client of a member, dialling it once.
func (n *Node) peer(name string) (*peer, error) {
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	if p := n.peers[name]; p != nil {
		return p, nil
	}
	addr := n.memberAddr(name)
	if addr == "" {
		return nil, fmt.Errorf("node: no address for member %q", name)
	}
	creds := insecure.NewCredentials()
	if n.cfg.ClientTLS != nil {
		creds = credentials.NewTLS(n.cfg.ClientTLS)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(n.cfg.MaxMessageBytes), grpc.MaxCallSendMsgSize(n.cfg.MaxMessageBytes)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
	}
	opts = append(opts, grpc.WithContextDialer(n.dialer(name)))
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("node: dial %s (%s): %w", name, addr, err)
	}
	p := &peer{addr: addr, conn: conn, client: peerpb.NewPeerClient(conn)}
	n.peers[name] = p
	return p, nil
}

// dialer dials member name's gRPC address with Config.Dialer (or TCP),
// and tells the engine when the connection is refused: nothing listens
// there, so the member's process has stopped (Engine.Refused).
func (n *Node) dialer(name string) func(ctx context.Context, addr string) (net.Conn, error) {
	dial := n.cfg.Dialer
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := dial(ctx, addr)
		if err != nil && !n.cfg.IgnoreRefusals && errors.Is(err, syscall.ECONNREFUSED) && n.engine.Refused(n.cfg.Clock(), name) {
			n.log.Warn("peer refuses connections: taken for stopped until it is heard from again", "peer", name, "addr", addr)
			n.m.peersStopped.Inc()
		}
		return c, err
	}
}

func (n *Node) syncLoop() {
	defer n.loopsWG.Done()
	t := time.NewTicker(n.cfg.SyncInterval)
	defer t.Stop()
	sweepEvery := max(1, int(time.Second/n.cfg.SyncInterval))
	var last, lastFull time.Time // when the last round and the last full round started
	for i := 1; ; i++ {
		kicked := false
		select {
		case <-n.stop:
			return
		case <-t.C:
		case <-n.kick:
			kicked = true
			if wait := n.cfg.SyncInterval/100 - time.Since(last); wait > 0 {
				gap := time.NewTimer(wait)
				select {
				case <-n.stop:
					gap.Stop()
					return
				case <-gap.C:
				}
			}
		}
		last = time.Now()
		// A kicked round reports the waiting series only, unless the full
		// round is due: waiting requests never starve the interval's sync.
		if kicked && time.Since(lastFull) < n.cfg.SyncInterval {
			n.syncAsking()
			n.endRound()
			continue
		}
		lastFull = last
		n.SyncOnce(context.Background())
		n.endRound()
		if i%sweepEvery == 0 {
			n.engine.Sweep(n.cfg.Clock())
			n.checkHealth()
		}
	}
}

// syncAsking runs a sync round asked for by pending decisions: only the
// series that have requests waiting for their owner (Engine.PrepareAsking).
func (n *Node) syncAsking() {
	n.sendAll(context.Background(), n.engine.PrepareAsking(n.cfg.Clock()))
}

// SyncOnce runs one sync interval: one call per owner (or one to the store)
// with every changed window, all in parallel, each within CallTimeout. The
// sync loop calls it every SyncInterval; Close calls it once more to flush.
func (n *Node) SyncOnce(ctx context.Context) {
	n.sendAll(ctx, n.engine.Prepare(n.cfg.Clock()))
}

// sendAll sends batches in parallel and waits for every answer or failure.
func (n *Node) sendAll(ctx context.Context, batches []*Batch) {
	var wg sync.WaitGroup
	for _, b := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.send(ctx, b)
		}()
	}
	wg.Wait()
}

func (n *Node) send(ctx context.Context, b *Batch) {
	timeout := n.cfg.CallTimeout
	if n.cfg.Store == nil {
		timeout = n.engine.CallDeadline(b) // a peer: given up early (calltimer.go)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	size := proto.Size(b.Req)
	n.m.syncBytes.Add(float64(size))
	n.syncBytes.Add(uint64(size))
	n.syncCalls.Add(1)
	n.m.batchReports.Observe(float64(b.Len()))
	start := time.Now()
	resp, err := n.call(ctx, b)
	took := time.Since(start)
	n.m.syncSeconds.Observe(took.Seconds())
	if n.cfg.Store == nil { // the deadline's estimate is of peers' calls
		switch {
		case err == nil:
			n.engine.CallAnswered(b, took)
		case ctx.Err() == context.DeadlineExceeded && parent.Err() == nil:
			n.engine.CallGivenUp()
		}
	}
	now := n.cfg.Clock()
	reports := b.Len()
	if err == nil {
		err = n.engine.Apply(now, b, resp)
		if n.engine.Prompted() {
			n.kickSync()
		}
	} else {
		n.engine.Fail(now, b)
	}
	n.engine.Release(b)
	n.endCall(b.Owner)
	if err != nil {
		n.m.syncError.Inc()
		n.log.Debug("sync call failed", "owner", b.Owner, "reports", reports, "took", took, "deadline", timeout, "err", err)
		n.noteSync(b.Owner, err)
		n.storeHealth(err)
		return
	}
	n.m.syncOK.Inc()
	n.noteSync(b.Owner, nil)
	n.storeHealth(nil)
}

func (n *Node) call(ctx context.Context, b *Batch) (*peerpb.SyncResponse, error) {
	if n.cfg.Store != nil {
		totals, err := n.cfg.Store.Sync(ctx, b.Req.Origin, b.Req.Incarnation, b.Req.Reports)
		if err != nil {
			return nil, err
		}
		return &peerpb.SyncResponse{Totals: totals}, nil
	}
	p, err := n.peer(b.Owner)
	if err != nil {
		return nil, err
	}
	if !n.auth.on() {
		return p.client.Sync(ctx, b.Req)
	}
	v, reqTag, err := n.auth.signRequest(n.cfg.Clock(), b.Req)
	if err != nil {
		return nil, err
	}
	var hdr metadata.MD
	resp, err := p.client.Sync(metadata.AppendToOutgoingContext(ctx, authHeader, v), b.Req, grpc.Header(&hdr))
	if err != nil {
		return nil, err
	}
	if err := n.auth.verifyResponse(reqTag, resp, oneValue(hdr.Get(authHeader))); err != nil {
		n.m.authRefused.Inc()
		return nil, fmt.Errorf("%w (from %s)", err, b.Owner)
	}
	return resp, nil
}

// authKeys returns the gossip keyring's keys, primary first: those of the
// running gossip, or before it runs, the configured ones.
func (n *Node) authKeys() [][]byte {
	if g := n.running.Load(); g != nil {
		return g.Keys()
	}
	return n.cfg.Gossip.SecretKeys
}

// storeHealth switches the admission rule while the store is down: the
// instance's static share (fail open) or nothing (fail closed).
func (n *Node) storeHealth(err error) {
	if n.cfg.Store == nil {
		return
	}
	down := err != nil
	if n.storeDown.Swap(down) == down {
		return
	}
	if down {
		n.m.storeDown.Set(1)
		var p counters.Policy = counters.Static{}
		mode := "open (static share)"
		if n.cfg.FailClosed {
			p, mode = counters.Closed{}, "closed (deny all)"
		}
		n.engine.Table().SetPolicy(p)
		n.log.Warn("store unreachable: failing "+mode, "err", err)
		return
	}
	n.m.storeDown.Set(0)
	n.engine.Table().SetPolicy(n.cfg.Policy.rule())
	n.log.Info("store reachable again")
}

// SyncStats returns the sync calls sent and their request bytes so far.
func (n *Node) SyncStats() (calls, bytes uint64) { return n.syncCalls.Load(), n.syncBytes.Load() }

// Close flushes the node's unreported counts to their owners, hands every
// window to the owner it will have without this node, leaves the cluster
// gracefully, and stops everything. Then Take returns ErrClosed.
//
// Close takes at most Config.CloseTimeout (default 5 s), or until ctx's
// deadline if ctx has one that is earlier and not yet past. It ignores
// ctx's cancellation: `defer n.Close(ctx)` with a ctx that is cancelled by
// the time it runs (the one from signal.NotifyContext, at shutdown) still
// flushes and leaves. Closing a node that is not running only marks it
// closed.
func (n *Node) Close(ctx context.Context) error {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if n.state.Swap(stateClosed) != stateRunning {
		return nil
	}
	bound := n.cfg.CloseTimeout
	if d, ok := ctx.Deadline(); ok && ctx.Err() == nil {
		bound = min(bound, time.Until(d))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	n.health.Shutdown() // NOT_SERVING from now on
	close(n.stop)
	n.loopsWG.Wait()
	n.SyncOnce(ctx) // flush to the current owners
	n.endRound()
	// And hand every window to the owner it will have without this node.
	var wg sync.WaitGroup
	for _, b := range n.engine.Handoff(n.cfg.Clock()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.send(ctx, b)
		}()
	}
	wg.Wait()
	var errs []error
	// What is left of the bound, but never 0, which memberlist takes as
	// "wait for the broadcast forever".
	d, _ := ctx.Deadline()
	if err := n.gossip.Leave(max(time.Until(d), 100*time.Millisecond)); err != nil {
		errs = append(errs, err)
	}
	if err := n.gossip.Shutdown(); err != nil {
		errs = append(errs, err)
	}
	n.shutdownGRPC(ctx)
	return errors.Join(errs...)
}

// Kill stops the node abruptly, as a crash would: no flush, no leave. For
// tests and the demo's fault injection.
func (n *Node) Kill() {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if n.state.Swap(stateClosed) != stateRunning {
		return
	}
	close(n.stop)
	n.loopsWG.Wait()
	n.gossip.Shutdown()
	n.grpcServer.Stop()
	n.closePeers()
}

func (n *Node) shutdownGRPC(ctx context.Context) {
	done := make(chan struct{})
	go func() { n.grpcServer.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		n.grpcServer.Stop()
	}
	n.closePeers()
}

func (n *Node) closePeers() {
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	for name, p := range n.peers {
		p.conn.Close()
		delete(n.peers, name)
	}
}

// server is the node's peer gRPC service.
type server struct {
	peerpb.UnimplementedPeerServer
	n *Node
}

func (s *server) Sync(ctx context.Context, req *peerpb.SyncRequest) (*peerpb.SyncResponse, error) {
	if h := s.n.syncHook.Load(); h != nil {
		(*h)(ctx, req)
	}
	if err := ctx.Err(); err != nil {
		// The caller has given the call up (its deadline, which gRPC
		// carries here, has passed): it discards any answer and sends the
		// counts again, cumulative, in its next round.
		return nil, status.FromContextError(err).Err()
	}
	now := s.n.cfg.Clock()
	var reqTag []byte
	if s.n.auth.on() {
		t, err := s.n.auth.verifyRequest(now, req, oneValue(metadata.ValueFromIncomingContext(ctx, authHeader)))
		if err != nil {
			s.n.m.authRefused.Inc()
			from := "unknown"
			if p, ok := grpcpeer.FromContext(ctx); ok && p.Addr != nil {
				from = p.Addr.String()
			}
			if s.n.warn.Allow("auth "+from, now) {
				s.n.log.Warn("refused unauthenticated sync call", "from", from, "claimed_origin", req.GetOrigin(), "err", err)
			}
			return nil, status.Error(codes.Unauthenticated, err.Error())
		}
		reqTag = t
	}
	resp, err := s.n.engine.Handle(now, req)
	if err != nil {
		s.n.m.inboundRejected.Inc()
		s.n.log.Warn("rejected sync batch", "origin", req.GetOrigin(), "err", err)
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if reqTag != nil {
		v, err := s.n.auth.signResponse(reqTag, resp)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if err := grpc.SetHeader(ctx, metadata.Pairs(authHeader, v)); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	return resp, nil
}
