package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/gossip"
	"github.com/peerlimit/peerlimit/peerpb"
	"github.com/peerlimit/peerlimit/ring"
	"github.com/prometheus/client_golang/prometheus"
)

// ProtoVersion is the peer protocol version this node speaks, published in
// its gossip metadata.
const ProtoVersion = 1

// DefaultGRPCPort is the peer gRPC port of [DefaultConfig], next to
// gossip's 7946 ([gossip.DefaultPort]).
const DefaultGRPCPort = 7947

// DefaultCloseTimeout is the default of Config.CloseTimeout.
const DefaultCloseTimeout = 5 * time.Second

// Store is a central place to sum counts instead of peer owners (Redis, in
// seed 000's design). When Config.Store is set, every interval the node sends
// all its changed windows to the store in one call and caches the totals.
//
// A Store of your own implements Sync with the public peerpb types: for
// each report (one window of one series from origin, run incarnation), it
// keeps the largest Own per origin and incarnation (reports are cumulative
// and may be retried, duplicated or reordered, so a store that adds them up
// double counts), adds the Own of an origin's earlier incarnations, and
// returns one Total per report, in order, with Global the sum over
// origins. redisstore is the reference implementation; node's
// ExampleStore is a small one in memory.
type Store interface {
	Sync(ctx context.Context, origin string, incarnation uint64, reports []*peerpb.Report) ([]*peerpb.Total, error)
}

// Config configures a Node. Start from DefaultConfig.
type Config struct {
	// Name is this instance's unique name in the cluster. Required.
	Name string

	// Policy is the admission policy: PolicyLease (default), PolicyOptimistic
	// or PolicyStatic. Every node of a cluster should use the same.
	Policy Policy

	// SyncInterval is how often the node sends each owner one batch with its
	// changed counts. Default 200 ms: short enough that a lease moves to
	// where demand is within a fraction of a typical 1-10 s window and the
	// optimistic rule's overshoot (one interval of traffic per extra
	// instance) stays small; long enough that the cost — one call per peer
	// per interval, whatever the number of keys — is negligible. The seed
	// used 1 s.
	SyncInterval time.Duration

	// CallTimeout bounds each sync call. Default: twice SyncInterval, and at
	// least 500 ms, so that a busy machine (request goroutines starving the
	// sync loop) does not turn slow answers into failures. A call that
	// times out is retried at the next interval with nothing lost; the next
	// interval waits for the calls of the previous one. A call to a peer is
	// given up sooner once calls have been answered: when it has taken
	// clearly longer than they take (their smoothed duration plus four
	// mean deviations, scaled by the batch's size, at least MinCallRetry,
	// doubled after each call given up in a row), so that one lost message
	// does not hold up the requests waiting for an owner for an interval
	// or two (Engine.CallDeadline).
	CallTimeout time.Duration

	// PendingWait (lease policy) is how long a request may wait for the
	// key's owner when this instance cannot admit it yet although the limit
	// has room: it holds no grant for the key (its first request, or the
	// first after a quiet spell), or has spent its grant while budget is
	// spare elsewhere. The node asks for a sync at once and decides the
	// request again when the answers are in: a few milliseconds on a LAN,
	// at most a few sync intervals when budget moves from another
	// instance. Default 3 x SyncInterval. A negative value never waits:
	// such a request is denied with a RetryAfter of one sync interval.
	PendingWait time.Duration

	// Addr is the IP address other instances reach this node at, for
	// gossip and for gRPC alike: both listen on it (unless Gossip.BindAddr
	// or GRPCAddr's host says otherwise) and both are published at it.
	// Default "": listen on every interface and publish the host's
	// private address (memberlist's rule: the first RFC 6890 private
	// address on an interface with a default route; Start fails if there
	// is none) — right on a host with one private network, such as a
	// container or a VM. Set it on a host with several. LocalConfig sets
	// "127.0.0.1", which keeps a node on its host. It must be an IP
	// address, not 0.0.0.0.
	Addr string

	// Gossip configures membership (seeds, encryption key, label, timing
	// profile, ports). Name and GRPCAddr are filled in by the node. An
	// empty Gossip.BindAddr means Addr (every interface when Addr is
	// empty); set it, with Gossip.AdvertiseAddr, only for special cases
	// such as NAT. DefaultConfig's Gossip.BindPort is 7946; 0 lets the OS
	// choose (LocalConfig). Gossip.JoinTimeout makes Start fail when no
	// seed answers in time. Gossip.Logger defaults to Logger.
	Gossip gossip.Config

	// GRPCAddr is where the peer gRPC server listens, "host:port". An empty
	// host means Addr (every interface when Addr is empty). Default
	// ":7947" (DefaultGRPCPort), a fixed port that firewall rules can name;
	// ":0" lets the OS choose (LocalConfig), which suits several nodes on
	// one host. The port peers dial is published through gossip, with the
	// host peers reach gossip at when the listener is on every interface.
	// Start refuses a loopback host while gossip is published at a
	// routable address (gossip.ErrUnreachableGRPCAddr): peers on other
	// hosts would join and then fail every sync call. Ignored when
	// GRPCListener is set.
	GRPCAddr string
	// GRPCAdvertiseAddr is the "host:port" peers dial to reach the gRPC
	// server, when it is not where the server listens (NAT, a port
	// mapping). An empty host means the gossip address. Default "": the
	// listener's own address, under the rule of GRPCAddr.
	GRPCAdvertiseAddr string
	// GRPCListener, if set, is used instead of listening on GRPCAddr.
	GRPCListener net.Listener

	// ServerTLS and ClientTLS turn on TLS (mutual TLS when the server
	// requires client certificates) for peer gRPC traffic. Default nil:
	// plaintext, suitable only on a trusted network.
	ServerTLS *tls.Config
	ClientTLS *tls.Config

	// Dialer, if set, dials peers (tests use it to cut the network).
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// IgnoreRefusals: a peer that refuses connections (nothing listens at
	// its gRPC address) is not taken for stopped. By default it is: its
	// process crashed or was killed, so it admits nothing, and the
	// survivors take its budget back from the next window on instead of
	// reserving it for ReserveWindows windows or QuorumTerm
	// (Engine.Refused). Set this where firewalls between the members
	// reject packets (iptables REJECT, a TCP reset) instead of dropping
	// them: a member cut off that way would be taken for stopped while it
	// still serves its clients, and the cluster would over-admit by its
	// share.
	IgnoreRefusals bool

	// MaxMessageBytes bounds a sync message in both directions. Default
	// 16 MiB (about 250,000 reports).
	MaxMessageBytes int

	// Table, Ring, MaxBatch, MaxPeriod and OwnerWindows configure the
	// engine; see EngineConfig. Table defaults to counters.DefaultConfig
	// (100,000 keys), Ring to ring.DefaultConfig.
	Table        counters.Config
	Ring         ring.Config
	MaxBatch     int
	MaxPeriod    time.Duration
	OwnerWindows int

	// Partition (lease policy) is how a member that stops answering is told
	// from one serving behind a partition; nothing local tells them apart.
	// Default PartitionReserve: a lost member is reserved for
	// ReserveWindows windows and every member keeps serving its static
	// share, however long it is cut off; a crash that takes the host down
	// costs the survivors that many windows of the dead member's share,
	// and a partition longer than that over-admits (each side takes the
	// other for gone). Under both rules a member whose calls are refused
	// (its process stopped on a host that is up) is known to have stopped,
	// and costs only the window it stopped in (IgnoreRefusals).
	// PartitionMajority: a member that cannot reach a majority of the
	// members it remembers keeps what it holds for QuorumTerm, then admits
	// at most its safe share (SafeShare) in the windows that begin after
	// that, while the owners on the majority side take back the
	// unreachable members' budget after the same term. No partition,
	// however long, over-admits, and a crash costs the survivors about
	// QuorumTerm; the price is that the clients of a member cut off from
	// most of the cluster for longer than QuorumTerm get only its safe
	// share (none by default). A graceful leave is released at once under
	// both.
	Partition Partition
	// QuorumTerm (majority rule) is how long a member that lost its
	// majority keeps its lease and static share, and how long the majority
	// waits before taking its budget back. Longer lets a member cut off for
	// a while keep serving; shorter gives the survivors of a crash the dead
	// member's share sooner. Default 30 s: at the seed's 10 s windows, what
	// the reserve rule's 3 windows gave.
	QuorumTerm time.Duration
	// SafeShare (majority rule) is the fraction, in [0, 1], of its static
	// share that a member cut off from the majority may admit per window
	// after QuorumTerm (Doorman's safe capacity). The majority keeps it in
	// reserve for every member it cannot reach, for as long as it remembers
	// them (QuorumMemory), so it is what a crash costs the survivors after
	// the term. Default 0: fail closed on the minority side.
	SafeShare float64
	// QuorumMemory (majority rule) is how long a member that disappeared
	// without a graceful leave still counts among the members a majority is
	// judged of. Longer keeps a long partition's minority from taking itself
	// for the whole cluster; shorter lets the survivors of a crash of half
	// the cluster or more serve again sooner. New members count at once,
	// so replacing crashed instances restores a majority. Default 5 minutes.
	QuorumMemory time.Duration
	// ReserveWindows (reserve rule) is for how many windows a member that
	// disappeared without announcing a leave is still reserved for, since it
	// may be serving behind a partition. Longer keeps both sides of a longer
	// partition within the limit; shorter wastes less of the limit after a
	// crash (for up to this many windows, the survivors do not use the
	// crashed member's static share). Default 3.
	ReserveWindows int
	// ReserveMin (reserve rule) is the least time such a member is reserved
	// for, however short the tier: three windows of a 1 s tier are shorter
	// than memberlist's LAN profile takes to notice a partition (5.5 to
	// 6.5 s, see README). Default 10 s.
	ReserveMin time.Duration

	// Store, if set, sums counts centrally instead of at peer owners. See
	// Store.
	Store Store
	// FailClosed, with a Store: deny every request while the store cannot
	// be reached. Default false: fail open, each instance falling back to
	// its static share.
	FailClosed bool

	// Registry receives the node's metrics: a *prometheus.Registry, or any
	// prometheus.Registerer, such as one from
	// prometheus.WrapRegistererWithPrefix or WrapRegistererWith. Default
	// nil: a new registry per node (never the global one), with the Go
	// runtime and process collectors (go_*, process_*) added, as a service
	// serving it at /metrics wants. A registry passed in gets only the
	// node's peerlimit_* series (add the others with
	// RegisterRuntimeMetrics if it lacks them). One registry holds the
	// series of one node: New refuses a second node on it, and says to
	// give each node its own or wrap it with a "node" label.
	Registry prometheus.Registerer
	// Gatherer is what Node.MetricsHandler serves. Default: Registry
	// itself when it is a prometheus.Gatherer (a *prometheus.Registry is);
	// required otherwise — pass the registry a wrapped Registerer
	// registers into.
	Gatherer prometheus.Gatherer

	// Logger receives structured logs. Default nil means slog.Default().
	// The node warns (at most once a minute per cause) about what an
	// operator must fix: a name conflict, seeds that do not answer, peers
	// whose sync calls keep failing, a store that cannot be reached. Pass
	// slog.New(slog.DiscardHandler) to silence it.
	Logger *slog.Logger

	// CloseTimeout bounds Close: the final flush, the hand-off of every
	// window to its next owner, the gossip leave and the gRPC shutdown.
	// Close ignores the cancellation of the context it is given, so a
	// context that is already cancelled at shutdown (the one from
	// signal.NotifyContext) still lets the counts reach their owners; a
	// deadline on it that is earlier than CloseTimeout, and not yet past,
	// shortens the bound. Default 5 s (DefaultCloseTimeout): a flush takes
	// one CallTimeout at most, the leave a few gossip intervals. Longer
	// waits out slower owners; shorter exits sooner, and counts that did
	// not reach their owner are lost (at most one sync interval's worth).
	CloseTimeout time.Duration

	// Clock returns the current time. Default time.Now.
	Clock func() time.Time
}

// DefaultConfig returns a Config with every default filled in except Name:
// gossip on port 7946 and gRPC on port 7947, both on every interface and
// published at the host's private address, so that instances on different
// hosts form one cluster once Gossip.Seeds names one of them.
func DefaultConfig() Config {
	g := gossip.DefaultConfig()
	g.BindAddr = "" // Addr
	return Config{
		Policy:          PolicyLease,
		Partition:       PartitionReserve,
		QuorumTerm:      30 * time.Second,
		QuorumMemory:    5 * time.Minute,
		SyncInterval:    200 * time.Millisecond,
		Gossip:          g,
		GRPCAddr:        ":" + strconv.Itoa(DefaultGRPCPort),
		MaxMessageBytes: 16 << 20,
		Table:           counters.DefaultConfig(),
		Ring:            ring.DefaultConfig(),
		CloseTimeout:    DefaultCloseTimeout,
	}
}

// LocalConfig is DefaultConfig on 127.0.0.1 with OS-chosen ports and the
// fast local gossip profile (a crash noticed in about a second), for tests
// and the demo: several nodes run on one host, and no other host can join
// them.
func LocalConfig(name string) Config {
	c := DefaultConfig()
	c.Name = name
	c.Addr = "127.0.0.1"
	c.Gossip.BindPort = 0
	c.GRPCAddr = ":0"
	c.Gossip.Profile = gossip.ProfileLocal
	return c
}

// Validate reports the first field out of range.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return fmt.Errorf("node: Config.Name must be set")
	case c.SyncInterval < time.Millisecond:
		return fmt.Errorf("node: Config.SyncInterval must be >= 1ms, got %v", c.SyncInterval)
	case c.CallTimeout < 0:
		return fmt.Errorf("node: Config.CallTimeout must be >= 0, got %v", c.CallTimeout)
	case c.MaxMessageBytes < 0:
		return fmt.Errorf("node: Config.MaxMessageBytes must be >= 0, got %d", c.MaxMessageBytes)
	case c.CloseTimeout < 0:
		return fmt.Errorf("node: Config.CloseTimeout must be >= 0, got %v", c.CloseTimeout)
	}
	if c.Addr != "" {
		ip := net.ParseIP(c.Addr)
		switch {
		case ip == nil:
			return fmt.Errorf("node: Config.Addr must be an IP address, got %q", c.Addr)
		case ip.IsUnspecified():
			return fmt.Errorf("node: Config.Addr %s is not an address peers can reach: leave it empty to listen on every interface and publish the host's private address", c.Addr)
		}
	}
	if c.GRPCAddr != "" && c.GRPCListener == nil {
		if _, port, err := net.SplitHostPort(c.GRPCAddr); err != nil {
			return fmt.Errorf("node: Config.GRPCAddr %q: want host:port (\":7947\" listens on Addr): %v", c.GRPCAddr, err)
		} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return fmt.Errorf("node: Config.GRPCAddr %q: bad port %q", c.GRPCAddr, port)
		}
	}
	if c.GRPCAdvertiseAddr != "" {
		_, port, err := net.SplitHostPort(c.GRPCAdvertiseAddr)
		if p, perr := strconv.Atoi(port); err != nil || perr != nil || p < 1 || p > 65535 {
			return fmt.Errorf("node: Config.GRPCAdvertiseAddr %q: want host:port with a port in 1-65535", c.GRPCAdvertiseAddr)
		}
	}
	if reg := registerer(c.Registry); reg == nil && c.Gatherer != nil {
		return fmt.Errorf("node: Config.Gatherer is set but Config.Registry is not: set Registry to the Registerer whose series Gatherer serves")
	} else if _, ok := reg.(prometheus.Gatherer); reg != nil && c.Gatherer == nil && !ok {
		return fmt.Errorf("node: Config.Registry (%T) is not a prometheus.Gatherer: set Config.Gatherer to the registry it registers into, so that MetricsHandler can serve it", reg)
	}
	if _, err := ParsePolicy(string(c.Policy)); err != nil {
		return fmt.Errorf("node: Config.Policy: %w", err)
	}
	if _, err := ParsePartition(string(c.Partition)); err != nil {
		return fmt.Errorf("node: Config.Partition: %w", err)
	}
	switch {
	case !(c.SafeShare >= 0 && c.SafeShare <= 1):
		return fmt.Errorf("node: Config.SafeShare must be in [0, 1], got %v", c.SafeShare)
	case c.QuorumTerm < 0:
		return fmt.Errorf("node: Config.QuorumTerm must be >= 0, got %v", c.QuorumTerm)
	case c.QuorumMemory < 0:
		return fmt.Errorf("node: Config.QuorumMemory must be >= 0, got %v", c.QuorumMemory)
	}
	return nil
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Policy == "" {
		c.Policy = d.Policy
	}
	if c.SyncInterval == 0 {
		c.SyncInterval = d.SyncInterval
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = max(2*c.SyncInterval, 500*time.Millisecond)
	}
	if c.PendingWait == 0 {
		c.PendingWait = 3 * c.SyncInterval
	}
	if c.GRPCAddr == "" {
		c.GRPCAddr = d.GRPCAddr
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = d.CloseTimeout
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.Table.MaxEntries == 0 {
		c.Table = d.Table
	}
	if c.Ring.PartitionCount == 0 {
		c.Ring = d.Ring
	}
	c.Registry = registerer(c.Registry)
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Gatherer == nil {
		c.Gatherer, _ = c.Registry.(prometheus.Gatherer)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c
}

// registerer returns r, or nil if r is nil or a nil *prometheus.Registry.
func registerer(r prometheus.Registerer) prometheus.Registerer {
	if reg, ok := r.(*prometheus.Registry); ok && reg == nil {
		return nil
	}
	return r
}

// listenAddr is where the gRPC server listens: GRPCAddr, its empty host
// replaced by Addr (or left empty, every interface, when Addr is).
func (c Config) listenAddr() string {
	host, port, err := net.SplitHostPort(c.GRPCAddr)
	if err != nil || host != "" {
		return c.GRPCAddr
	}
	return net.JoinHostPort(c.Addr, port)
}

// gossipConfig is Config.Gossip with what the node derives filled in: the
// name, the bind and advertise addresses from Addr, the published gRPC
// address and the logger.
func (c Config) gossipConfig(grpcAddr string) gossip.Config {
	gc := c.Gossip
	gc.Name = c.Name
	gc.GRPCAddr = grpcAddr
	gc.Proto = ProtoVersion
	if gc.Transport == nil {
		if gc.BindAddr == "" {
			gc.BindAddr = c.Addr // still "" for every interface: gossip's default
		}
		if gc.AdvertiseAddr == "" && c.Addr != "" {
			gc.AdvertiseAddr = c.Addr
		}
	}
	if gc.Logger == nil {
		gc.Logger = c.Logger
	}
	return gc
}
