// Package node is what a service embeds to take part in a peerlimit
// cluster: a [Node] decides every request from local memory and, in the
// background, keeps the cluster's counts in step with the other instances.
//
// # Node
//
// A Node is one instance of the cluster. Its decisions — [Node.Take],
// [Node.Allow], and [Node.Wait] for a caller that paces itself — make no
// network call: they read and charge the node's own counters (package
// counters), every tier of a request together or none of them. In the
// background the node gossips membership (package gossip, on
// hashicorp/memberlist), maps every limit key to its owner on a
// consistent-hash ring (package ring), and every [Config.SyncInterval] sends
// each owner one gRPC batch with the counts of every window that changed,
// caching the totals the owner returns. Counts are cumulative per origin, so
// a retried or duplicated batch never counts twice. Between peers a batch is
// packed: a key's strings cross the wire once per session, as an entry of a
// dictionary the sender keeps per owner, and each window after that is a few
// varints (node/wire.go). With [Config.Store] set
// (Redis, package redisstore) the counts are summed in the store instead of
// at peer owners.
//
// Lifecycle:
//
//   - [New] validates a [Config] (start from [DefaultConfig], or
//     [LocalConfig] for tests and demos) and builds the node. It opens no
//     socket and starts no goroutine. It registers the node's metrics.
//   - [Node.Start] listens for peers, joins the cluster through
//     Config.Gossip.Seeds and starts the sync loop. Its context bounds
//     Start alone (the initial join); cancelling it later does not stop
//     the node.
//   - [Node.Close] flushes the node's unreported counts to their owners,
//     hands every window to the owner it will have without this node, leaves
//     the cluster gracefully and stops everything, within
//     [Config.CloseTimeout] (5 s) even when the context it is given is
//     already cancelled. ([Node.Kill] stops it as a crash would, for tests
//     and fault injection.)
//
// Decisions are made between Start and Close only: before, [Node.Take]
// returns [ErrNotStarted]; after, or after a failed Start, [ErrClosed].
//
// A Node's methods are safe for concurrent use. Nothing in the package is
// global: no registry, logger or clock, so many nodes run in one process.
//
// # Addresses
//
// Peers reach a node at two addresses: gossip (memberlist, UDP and TCP,
// port 7946 by default) and gRPC (the sync calls, port 7947). Both listen
// on [Config.Addr] and are published at it; left empty, as in
// DefaultConfig, both listen on every interface and are published at the
// host's private address, so that instances on different hosts form one
// cluster with nothing set but Config.Gossip.Seeds. Config.Gossip.BindAddr,
// Config.Gossip.AdvertiseAddr, [Config.GRPCAddr] and
// [Config.GRPCAdvertiseAddr] remain for special cases (NAT, port
// mappings). [Node.Members] shows what every member publishes.
//
// # Mistakes it refuses or reports
//
// What would make a cluster that only looks healthy is refused with an
// error that says what to change: by New, a field out of range (naming
// it) or a metrics registry that already holds another node's series; by
// Start, another live node with the same name met while joining
// ([ErrNameConflict]), a loopback gRPC address published beside a
// routable gossip address ([ErrUnreachableGRPCAddr]), and, with
// Config.Gossip.JoinTimeout, seeds of which none answers ([ErrNoSeed]).
// What can only show later — a name taken once the node runs, a node
// alone because its seeds do not answer, a peer whose sync calls keep
// failing, a store that cannot be reached — is logged at Warn (once a
// minute per cause), counted in the peerlimit_health_problem gauge, and
// reported by [Node.Health] and by the standard gRPC health service on the
// peer port (NOT_SERVING), for a probe to read.
//
// # Engine
//
// The sync logic itself is the [Engine], a pure state machine: it does no
// I/O, starts no goroutine and takes the time as an argument. A membership
// view goes in through [Engine.SetMembers]; [Engine.Take] decides;
// [Engine.Prepare] returns the batches to send this interval, one per
// owner; [Engine.Apply] and [Engine.Fail] record an owner's answer or a
// failed call; [Engine.Handle] answers a batch from another member;
// [Engine.Handoff] builds the batches of a graceful leave; [Engine.Sweep]
// drops expired windows. A Node drives it with gossip, gRPC and tickers; the
// partition simulator (package sim) drives the very same code on virtual
// time, over a simulated network.
//
// # Policies
//
// [Config.Policy] is how an instance admits between syncs. Every node of a
// cluster should use the same one.
//
//   - [PolicyLease], the default: the owner of a key hands each instance a
//     lease, a share of the remaining budget in proportion to its demand,
//     and keeps a reserve for the members it cannot hear from; an instance
//     admits locally within its lease. An instance that cannot reach the
//     owner keeps its lease or falls back to its static share (limit / N),
//     so both sides of a partition stay within the limit together.
//   - [PolicyOptimistic], the seed's rule: admit while the last global total
//     plus the instance's own unreported count fits. With N instances a
//     window can overshoot by up to (N-1) × one interval's traffic.
//   - [PolicyStatic]: every instance gets limit / N. Never overshoots;
//     wastes budget when traffic is uneven.
//
// # Metrics and logs
//
// Metrics go to [Config.Registry], any prometheus.Registerer; by default a
// new registry per node (never the global one) that also holds the Go
// runtime and process series (go_*, process_*). Serve it with
// [Node.MetricsHandler], or pass [Node.Registerer] to httpfilter so that
// its series sit beside the node's. One registry holds one node's series:
// New refuses a second node on it, and says to wrap it per node with
// prometheus.WrapRegistererWith(prometheus.Labels{"node": name}, reg)
// (with [Config.Gatherer] set to reg). The series are named peerlimit_*:
// decisions by result, sampled decision latency, sync calls by result and
// their latency, batch sizes, sync bytes, keys cached, windows owned,
// members, evictions, expirations, rejected inbound batches, store health,
// health problems and name conflicts. Logs go to [Config.Logger], a
// *slog.Logger (default: slog.Default()); the node's own lines carry its
// name (node=NAME).
//
// Peer traffic can be encrypted: gossip with Config.Gossip's keys and
// cluster label, gRPC with [Config.ServerTLS] and [Config.ClientTLS]. Every
// inbound batch is size-limited and validated; a bad one is refused
// ([ErrBadBatch]) and counted.
//
// Example (in example_test.go) embeds a node, decides four requests against
// a limit of three, and closes it; Example_multiHost is the configuration
// of a cluster across hosts.
package node
