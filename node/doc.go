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
// a retried or duplicated batch never counts twice. With [Config.Store] set
// (Redis, package redisstore) the counts are summed in the store instead of
// at peer owners.
//
// Lifecycle:
//
//   - [New] validates a [Config] (start from [DefaultConfig], or
//     [LocalConfig] for tests and demos) and builds the node. It opens no
//     socket and starts no goroutine.
//   - [Node.Start] listens for peers, joins the cluster through
//     Config.Gossip.Seeds and starts the sync loop.
//   - [Node.Close] flushes the node's unreported counts to their owners,
//     hands every window to the owner it will have without this node, leaves
//     the cluster gracefully and stops everything. ([Node.Kill] stops it as
//     a crash would, for tests and fault injection.)
//
// A Node's methods are safe for concurrent use. Nothing in the package is
// global: no registry, logger or clock, so many nodes run in one process.
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
// (with [Config.Gatherer] set to reg). The series are named peerlimit_*: decisions by result, sampled
// decision latency, sync calls by result and their latency, batch sizes,
// sync bytes, keys cached, windows owned, members, evictions, expirations,
// rejected inbound batches and store health. Logs go to [Config.Logger], a
// *slog.Logger (default: discarded); the node's own lines carry its name
// (node=NAME).
//
// Peer traffic can be encrypted: gossip with Config.Gossip's keys and
// cluster label, gRPC with [Config.ServerTLS] and [Config.ClientTLS]. Every
// inbound batch is size-limited and validated; a bad one is refused
// ([ErrBadBatch]) and counted.
//
// Example (in example_test.go) embeds a node, decides four requests against
// a limit of three, and closes it.
package node
