// Package gossip keeps the membership of a peerlimit cluster with
// hashicorp/memberlist: which nodes are alive, and the gRPC address and
// protocol version each one publishes.
//
// # Use
//
//	cfg := gossip.DefaultConfig() // every interface, port 7946
//	cfg.Name = "node-1"
//	cfg.GRPCAddr = ":7070"        // published with the gossip address: 10.0.0.1:7070
//	cfg.Seeds = []string{"10.0.0.2:7946"}
//	cfg.OnMembers = func(ms []gossip.Member) { ring.Set(ms) }
//	g, err := gossip.New(cfg) // validates; starts nothing
//	err = g.Start(ctx)        // listens, joins, starts the loops
//	defer g.Shutdown()
//	defer g.Leave(time.Second)
//
// # Membership snapshots and their concurrency contract
//
// Config.OnMembers receives the whole alive membership, sorted by name and
// including the local node, every time it changes: a member joins, fails,
// leaves, or changes its metadata. A snapshot equal to the previous one is
// not delivered. The callback is called:
//
//   - serially, from a single goroutine owned by the Gossip, never
//     concurrently with itself;
//   - never while memberlist holds its locks, so it may call Members,
//     LocalMember, Port and the other read methods (memberlist invokes its
//     event delegates under its node lock; our delegates only copy the node
//     into a map guarded by a leaf mutex and signal a one-slot channel, and
//     the dispatcher goroutine builds the snapshot);
//   - with a slice the callee owns;
//   - coalesced: changes that happen while it runs are folded into one
//     later call carrying the latest state, so a slow callback never blocks
//     memberlist but may skip intermediate states;
//   - never after Shutdown has returned. The callback must not call
//     Shutdown (it would wait for itself).
//
// The first snapshot (the local node, plus the seeds joined by Start) is
// delivered soon after Start.
//
// # Metadata
//
// Each node publishes its gRPC address and protocol version in memberlist's
// node metadata (at most 512 bytes) in a small versioned binary record. A
// peer whose metadata cannot be decoded is refused as a peer (memberlist's
// AliveDelegate) and a warning is logged once per node and value.
//
// # Mistakes it reports
//
// Start refuses what would make a cluster that only looks healthy: a
// loopback Config.GRPCAddr published beside a routable gossip address
// ([ErrUnreachableGRPCAddr]), a join that meets another live node with this
// node's name ([ErrNameConflict]), and, with Config.JoinTimeout, seeds of
// which none answers ([ErrNoSeed]). What can only show later — a name
// conflict after the node started, a node left alone because its seeds do
// not answer — is logged at Warn (once a minute), passed to
// Config.OnConflict, and reported by [Gossip.Health], which a service can
// wire to its health probe.
//
// # Partitions
//
// memberlist detects failures but never merges two sides of a healed
// partition by itself: each side has declared the other dead and stopped
// talking to it. A rejoin loop runs every Config.RejoinInterval and joins
// the seeds and the remembered addresses of members that failed or left
// (bounded by Config.RejoinMax and Config.RejoinForget), skipping addresses
// that are alive members, so the cluster becomes one again without an
// operator.
//
// # Security
//
// Config.SecretKeys turns on memberlist's AES-GCM encryption with
// GossipVerifyIncoming and GossipVerifyOutgoing, so a node without a key
// cannot join or inject state. Keys rotate without downtime: InstallKey on
// every node, then UseKey, then RemoveKey of the old key. Config.Label keeps
// clusters that share a network apart.
package gossip
