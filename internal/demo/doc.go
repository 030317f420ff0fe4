// Package demo is the machinery of cmd/demo-cluster: a supervisor that runs
// peerlimit nodes as separate OS processes on 127.0.0.1, the node process
// itself (the seeds' sample product API behind httpfilter, with admin and
// fault-injection endpoints), a load generator that keeps the ground truth
// of what was offered and admitted per tenant and window, a latency
// histogram, the terminal view, the web dashboard and the JSON report.
//
// The types that carry data (NodeState, Snapshot and its parts, Report,
// Window, Stream, FaultResult, ...) are plain values: their zero value is
// empty, they hold no lock, and they may be copied and read concurrently but
// not written concurrently. The types that do something (Histogram,
// EventLog, Truth, Generator, Supervisor, Monitor) say in their own
// documentation how to create them and what is safe for concurrent use.
//
// Everything listens on loopback only. Nothing here is meant for
// production: it exists so that a newcomer can see a cluster enforce
// per-tenant limits, and break it (kill, restart, partition) to watch it
// recover.
package demo
