package gossip

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// ErrInvalidConfig is wrapped by every error that [Config.Validate] returns.
var ErrInvalidConfig = errors.New("gossip: invalid config")

// Profile selects the memberlist timing preset.
type Profile int

const (
	// ProfileLAN is memberlist.DefaultLANConfig: probe every 1 s, suspicion
	// 4 x log(N) probe intervals, full state sync every 30 s. A crash is
	// noticed in a few seconds; little traffic; tolerant of slow hosts.
	// Use it in production.
	ProfileLAN Profile = iota
	// ProfileLocal is a fast preset for tests and the local demo: probe every
	// 200 ms with a 100 ms timeout, suspicion 2 x log(N) probe intervals,
	// gossip every 50 ms, full state sync every 5 s, 1 s TCP timeout, and a
	// dead node's name may be reclaimed by a new address after 1 s (a
	// restarted process on a new port). A crash is noticed in about one
	// second on 127.0.0.1, at the price of ~10x the LAN traffic and of false
	// suspicions on a host starved of CPU. Do not use it across a real
	// network.
	ProfileLocal
)

func (p Profile) String() string {
	switch p {
	case ProfileLAN:
		return "lan"
	case ProfileLocal:
		return "local"
	default:
		return "Profile(" + strconv.Itoa(int(p)) + ")"
	}
}

// Defaults of the rejoin loop.
const (
	// DefaultRejoinIntervalLAN is the rejoin period under ProfileLAN.
	DefaultRejoinIntervalLAN = 2 * time.Second
	// DefaultRejoinIntervalLocal is the rejoin period under ProfileLocal.
	DefaultRejoinIntervalLocal = time.Second
	// DefaultRejoinForget is how long a failed member's address is retried.
	DefaultRejoinForget = 30 * time.Minute
	// DefaultRejoinMax is how many failed members' addresses are remembered.
	DefaultRejoinMax = 64
)

// DefaultPort is the gossip port of [DefaultConfig], memberlist's own
// default (UDP and TCP).
const DefaultPort = 7946

// maxGRPCAddrLen bounds Config.GRPCAddr so that the encoded metadata stays
// far below memberlist's 512-byte limit.
const maxGRPCAddrLen = 255

// Config configures a [Gossip] node. Start from [DefaultConfig]; the zero
// value of every field except Name and GRPCAddr is usable and means the
// default stated on the field.
//
// A Config is a plain value; New copies what it needs, so the caller may
// reuse it afterwards.
type Config struct {
	// Name is this node's unique name in the cluster. Required. Two live
	// processes with the same name conflict: memberlist keeps the first and
	// ignores the other. A conflict seen while Start joins fails Start with
	// [ErrNameConflict]; one seen later is logged, reported to OnConflict
	// and by [Gossip.Health].
	Name string

	// BindAddr is the IP address the gossip listeners (UDP and TCP, same
	// port) bind to. Default "0.0.0.0" (every interface), as memberlist's
	// own default; the address advertised is then the host's private
	// address unless AdvertiseAddr says otherwise. "127.0.0.1" keeps a
	// node on its host (tests, a local demo): no other host can join it.
	// Ignored when Transport is set.
	BindAddr string

	// BindPort is the gossip port. [DefaultConfig] sets [DefaultPort]
	// (7946), a fixed port that firewall rules and seed lists can name; 0
	// (the zero value) lets the OS choose a free port, for tests and for
	// several nodes on one host; read the real one with [Gossip.Port] after
	// Start. Ignored when Transport is set.
	BindPort int

	// AdvertiseAddr is the IP address other nodes use to reach this one.
	// Default "" means the address the transport is bound to, or, bound to
	// 0.0.0.0, the host's private address (memberlist's rule: the first
	// RFC 6890 private address on an interface with a default route;
	// Start fails with [ErrNoAdvertiseAddr] if there is none); set it on a
	// host with several private networks or behind NAT.
	AdvertiseAddr string

	// AdvertisePort is the port other nodes use to reach this one, used
	// only together with AdvertiseAddr. Default 0 means the bound port
	// (required with AdvertiseAddr when Transport is set, since the bound
	// port is then unknown).
	AdvertisePort int

	// Seeds are "host:port" gossip addresses of existing members to join at
	// Start and to retry forever in the rejoin loop while they are not
	// alive members. A node's own address may be listed (it is skipped),
	// so every node can share one list. Default none: this node starts a
	// new cluster, and others join it. A seed that cannot be reached does
	// not fail Start unless JoinTimeout is set, but a node left alone while
	// its seeds do not answer logs a warning (once a minute) and reports
	// [ErrNoSeed] through [Gossip.Health].
	Seeds []string

	// DNSConfigPath is the resolv.conf whose first nameserver memberlist
	// asks, over TCP, for every address of a seed given by name (a
	// Kubernetes headless Service lists each ready pod), before it falls
	// back to Go's resolver. Names are resolved again at every join
	// attempt, the rejoin loop's included, so members that appear behind a
	// name later are found. Default "/etc/resolv.conf".
	DNSConfigPath string

	// JoinTimeout, if positive, makes Start wait until a seed answers,
	// retrying them every second, and fail with [ErrNoSeed] if none has
	// within this time (an unreachable seed may add one TCP timeout, 1 s
	// local or 10 s LAN, to the wait). Default 0: Start makes one attempt
	// and returns; the node runs alone until the rejoin loop reaches a
	// seed. Set it on nodes that join an existing cluster, where running
	// alone means enforcing every limit by itself; leave it 0 on nodes that
	// may be the first of a cluster (a StatefulSet's first pod, a cluster
	// restarting all at once), which would otherwise never start. Requires
	// Seeds.
	JoinTimeout time.Duration

	// GRPCAddr is the "host:port" address of this node's gRPC server,
	// published to peers in the node metadata. Required; at most 255
	// bytes. An empty or unspecified host (":7947", "0.0.0.0:7947",
	// "[::]:7947") publishes the gossip advertise address with that port.
	// Start refuses a loopback host (127.0.0.0/8, ::1, "localhost") while
	// the gossip address is not loopback ([ErrUnreachableGRPCAddr]): peers
	// on other hosts would join the cluster and then fail every sync call.
	GRPCAddr string

	// Proto is the version of the peer-to-peer (gRPC) protocol this node
	// speaks, published in the metadata so that peers can refuse or adapt
	// to an incompatible version. Default 0; the node package sets its own.
	Proto uint8

	// Profile chooses the memberlist timing preset. Default ProfileLAN.
	Profile Profile

	// SecretKeys enables gossip encryption (AES-GCM) and authentication.
	// Each key is 16, 24 or 32 bytes (AES-128/192/256). The first key is
	// the primary: it encrypts everything sent. Every key decrypts, which is
	// what a rotation needs (see [Gossip.InstallKey]). Default none: gossip
	// travels in clear and anyone who can reach the port can join. Encryption
	// can not be turned on later on a running node.
	SecretKeys [][]byte

	// Label is the memberlist cluster label, sent in clear with every packet
	// and stream; a node rejects traffic carrying another label. It keeps
	// two clusters sharing a network apart; it is not a secret (use
	// SecretKeys for that). At most 255 bytes. Default "" (no label).
	Label string

	// RejoinInterval is the period of the rejoin loop, which joins the seeds
	// and the addresses of failed members that are not alive members, so
	// that a healed partition becomes one cluster again. Default 0 means 1 s
	// under ProfileLocal and 2 s under ProfileLAN. Shorter heals faster but
	// dials unreachable addresses more often: while the two halves stay
	// apart, each side reserves the other's share of every limit (see
	// node's lease policy), so a heal is worth noticing within seconds. An
	// attempt lasts as long as its slowest dial, up to a TCP timeout (10 s
	// under ProfileLAN) while packets to an address are dropped, and the
	// next one starts after it (TCP resends an unanswered SYN within that
	// timeout, so a dial in flight when such a partition heals can still
	// get through).
	RejoinInterval time.Duration

	// RejoinForget is how long the address of a member that failed or left
	// is retried by the rejoin loop. Default 0 means 30 minutes. A partition
	// that lasts longer heals only through the seeds. memberlist reports a
	// crash and a graceful leave alike, so the addresses of members that
	// left on purpose are retried too, until forgotten; against a closed
	// port that costs one refused dial per interval.
	RejoinForget time.Duration

	// RejoinMax bounds how many failed members' addresses are remembered;
	// the oldest is forgotten first. Default 0 means 64. Bounds memory and
	// the length of one rejoin attempt: targets are tried 8 at a time, and
	// each unreachable one costs up to one TCP timeout (1 s local, 10 s
	// LAN).
	RejoinMax int

	// Logger receives structured logs (memberlist's own lines are bridged at
	// their level). Default nil means slog.Default(); pass
	// slog.New(slog.DiscardHandler) to silence the node.
	Logger *slog.Logger

	// Transport replaces memberlist's own UDP+TCP transport; BindAddr and
	// BindPort are then ignored. Tests pass a faultnet-wrapped
	// *memberlist.NetTransport. Default nil. The Gossip shuts it down.
	Transport memberlist.Transport

	// OnMembers, if set, receives the whole alive membership (sorted by
	// name, self included) each time it changes: a join, a failure, a
	// leave, or a metadata change. Calls are serial, from one goroutine,
	// never while memberlist holds a lock, so the callback may call any
	// read method of the Gossip (but not Shutdown). The slice is the
	// callee's. A slow callback delays later snapshots, which are coalesced:
	// it may skip intermediate states but always ends with the latest.
	OnMembers func([]Member)

	// OnConflict, if set, is called each time memberlist sees one name
	// claimed by two nodes at different addresses: this node's own name
	// (Conflict.Self) or another member's. It is called from the same
	// goroutine as OnMembers, with the same contract. A conflict is also
	// logged (at Warn, once a minute per name and address), and a conflict
	// over this node's own name is reported by [Gossip.Health]. Default nil.
	OnConflict func(Conflict)

	// tuneMemberlist, set only by this package's tests, adjusts the
	// memberlist configuration after the profile is applied.
	tuneMemberlist func(*memberlist.Config)
}

// DefaultConfig returns a Config with every default spelled out: gossip on
// every interface, port 7946, advertising the host's private address. Name
// and GRPCAddr still need to be set.
func DefaultConfig() Config {
	return Config{
		BindAddr:     "0.0.0.0",
		BindPort:     DefaultPort,
		Profile:      ProfileLAN,
		RejoinForget: DefaultRejoinForget,
		RejoinMax:    DefaultRejoinMax,
	}
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("gossip: Config.%s: %s: %w", field, fmt.Sprintf(format, args...), ErrInvalidConfig)
}

// Validate reports the first invalid field, by name.
func (c Config) Validate() error {
	if c.Name == "" {
		return invalid("Name", "must not be empty")
	}
	if c.Transport == nil && c.BindAddr != "" && net.ParseIP(c.BindAddr) == nil {
		return invalid("BindAddr", "%q is not an IP address", c.BindAddr)
	}
	if c.BindPort < 0 || c.BindPort > 65535 {
		return invalid("BindPort", "%d is out of range 0-65535", c.BindPort)
	}
	if c.AdvertiseAddr != "" && net.ParseIP(c.AdvertiseAddr) == nil {
		return invalid("AdvertiseAddr", "%q is not an IP address", c.AdvertiseAddr)
	}
	if c.AdvertisePort < 0 || c.AdvertisePort > 65535 {
		return invalid("AdvertisePort", "%d is out of range 0-65535", c.AdvertisePort)
	}
	if c.Transport != nil && c.AdvertiseAddr != "" && c.AdvertisePort == 0 {
		return invalid("AdvertisePort", "must be set with AdvertiseAddr when Transport is set")
	}
	for i, s := range c.Seeds {
		if err := checkHostPort(s); err != nil {
			return invalid(fmt.Sprintf("Seeds[%d]", i), "%v", err)
		}
	}
	if c.JoinTimeout < 0 {
		return invalid("JoinTimeout", "%v is negative", c.JoinTimeout)
	}
	if c.JoinTimeout > 0 && len(c.Seeds) == 0 {
		return invalid("JoinTimeout", "set without Seeds: there is nothing to wait for")
	}
	if c.GRPCAddr == "" {
		return invalid("GRPCAddr", "must not be empty")
	}
	if len(c.GRPCAddr) > maxGRPCAddrLen {
		return invalid("GRPCAddr", "%d bytes, more than %d", len(c.GRPCAddr), maxGRPCAddrLen)
	}
	if err := checkGRPCAddr(c.GRPCAddr); err != nil {
		return invalid("GRPCAddr", "%v", err)
	}
	if c.Profile != ProfileLAN && c.Profile != ProfileLocal {
		return invalid("Profile", "unknown profile %d", int(c.Profile))
	}
	for i, k := range c.SecretKeys {
		if err := memberlist.ValidateKey(k); err != nil {
			return invalid(fmt.Sprintf("SecretKeys[%d]", i), "%d bytes, want 16, 24 or 32", len(k))
		}
	}
	if len(c.Label) > memberlist.LabelMaxSize {
		return invalid("Label", "%d bytes, more than %d", len(c.Label), memberlist.LabelMaxSize)
	}
	if c.RejoinInterval < 0 {
		return invalid("RejoinInterval", "%v is negative", c.RejoinInterval)
	}
	if c.RejoinForget < 0 {
		return invalid("RejoinForget", "%v is negative", c.RejoinForget)
	}
	if c.RejoinMax < 0 {
		return invalid("RejoinMax", "%d is negative", c.RejoinMax)
	}
	return nil
}

// checkHostPort accepts "host:port" with a non-empty host and a numeric port
// in 1-65535.
func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	if host == "" {
		return fmt.Errorf("%q: empty host", s)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: bad port %q", s, port)
	}
	return nil
}

// checkGRPCAddr is checkHostPort that also accepts an empty host (the
// gossip advertise address is published in its place).
func checkGRPCAddr(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	if host == "" {
		return checkHostPort(net.JoinHostPort("0.0.0.0", port))
	}
	return checkHostPort(s)
}

// withDefaults fills the zero fields that have a default.
func (c Config) withDefaults() Config {
	if c.BindAddr == "" {
		c.BindAddr = "0.0.0.0"
	}
	if c.RejoinInterval == 0 {
		c.RejoinInterval = DefaultRejoinIntervalLAN
		if c.Profile == ProfileLocal {
			c.RejoinInterval = DefaultRejoinIntervalLocal
		}
	}
	if c.RejoinForget == 0 {
		c.RejoinForget = DefaultRejoinForget
	}
	if c.RejoinMax == 0 {
		c.RejoinMax = DefaultRejoinMax
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Seeds = append([]string(nil), c.Seeds...)
	keys := make([][]byte, len(c.SecretKeys))
	for i, k := range c.SecretKeys {
		keys[i] = append([]byte(nil), k...)
	}
	c.SecretKeys = keys
	return c
}

// profileConfig returns the memberlist preset for p.
func profileConfig(p Profile) *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	if p == ProfileLocal {
		mc.ProbeInterval = 200 * time.Millisecond
		mc.ProbeTimeout = 100 * time.Millisecond
		mc.SuspicionMult = 2
		mc.GossipInterval = 50 * time.Millisecond
		mc.PushPullInterval = 5 * time.Second
		mc.TCPTimeout = time.Second
		mc.RetransmitMult = 3
		mc.GossipToTheDeadTime = 5 * time.Second
		mc.DeadNodeReclaimTime = time.Second
	}
	return mc
}
