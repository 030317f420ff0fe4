// Package counters is peerlimit's decision core: per-window counters, the
// table that holds them, and the admission rule that turns them into an
// allow-or-deny decision.
//
// It does no I/O. Nothing here touches the network, logs or exports metrics;
// time is always an argument. That is what lets the node wrap it with sync
// and metrics, and lets the simulator run the very same code on virtual time.
//
// A decision charges every tier of a request together or none of them:
//
//	d, err := table.Take(now, limits, 1)
//
// Each [Limit] is one tier of one SLA for one tenant. Counts are plain
// per-window sums (the fixed window of the Salesforce filter, and the
// previous-plus-current pair of Kong's sliding window), so an owner can add
// up the counts of many instances.
package counters
